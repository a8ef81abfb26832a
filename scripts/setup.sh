#!/usr/bin/env bash
# Installs what attnprof needs to build, test and report on Debian 12 (run as root, or with sudo present).
# Idempotent: packages already installed are skipped quickly.
set -euo pipefail
PKGS=(cmake g++ clang libomp-dev libclang-rt-14-dev pkg-config
      libopenblas-openmp-dev libdnnl-dev libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
      libgtest-dev libgmock-dev libbenchmark-dev)
if [[ "${ATTNPROF_WITH_BROWSER:-1}" == 1 ]]; then PKGS+=(chromium nodejs npm); fi
missing=()
for p in "${PKGS[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: Debian packages present"
