#!/usr/bin/env bash
# A checksum of the sources the CUDA bundle is built from (no git needed): gpu-bundle.sh records it,
# gpu-check.sh compares it with the tree it runs in, so a stale bundle says so before it is believed.
set -euo pipefail
cd "$(dirname "$0")/.."
find CMakeLists.txt cmake src include tests tools -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o \
  -name '*.cuh' -o -name '*.cmake' -o -name CMakeLists.txt \) | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
