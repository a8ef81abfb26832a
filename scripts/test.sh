#!/usr/bin/env bash
# Builds attnprof and runs every test: the release suite, the same suite under AddressSanitizer +
# UndefinedBehaviorSanitizer, a bounded fuzz run of the .npy reader, one tiny benchmark iteration and,
# when Chromium is present, the browser test of the HTML report.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

echo "== release build and tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$JOBS"
ctest --test-dir build --output-on-failure -j"$JOBS"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DATTNPROF_SANITIZE=address,undefined \
  -DATTNPROF_BUILD_BENCH=OFF -DATTNPROF_CUDA=OFF >/dev/null
cmake --build build-asan -j"$JOBS"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$JOBS" -LE slow
