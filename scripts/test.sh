#!/usr/bin/env bash
# Builds attnprof and runs every test: the release suite (gcc), one tiny iteration of each benchmark
# (benchmarks are not tests: this only proves they still run), the browser test of the HTML report in
# headless Chromium, the same suite under AddressSanitizer + UndefinedBehaviorSanitizer (clang), and bounded
# libFuzzer runs of the .npy reader and of the JSON readers on that sanitizer build.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
# Each phase starts with its elapsed time so far, so a slow CI run shows where the minutes went.
phase() { printf '== [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$1"; }

phase "release build and tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$JOBS"
ctest --test-dir build --output-on-failure -j"$JOBS"

phase "one tiny iteration of each benchmark"
build/bench/bench_attention --benchmark_filter=smoke --benchmark_min_time=0 | tail -n 3
build/bench/bench_profiler --benchmark_filter='BM_Zone_Enabled$|BM_Zone_CompiledOut|BM_TraceExport_Text' \
  --benchmark_min_time=0 | tail -n 3
build/bench/bench_memory --benchmark_filter='reused/256|held/256' --benchmark_min_time=0 | tail -n 2

phase "browser test of the HTML report"
ATTNPROF_REQUIRE_BROWSER=${ATTNPROF_REQUIRE_BROWSER:-${CI:+1}} tests/browser/run.sh build

phase "clang: AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
# One clang build serves the sanitizer suite and the fuzzers (their library is the tested one, with
# libFuzzer's coverage instrumentation). -g1: line tables only, which is all a sanitizer's stack trace prints
# (file:line); full -g debug info costs a fifth more compile time.
cmake -S . -B build-asan -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DATTNPROF_SANITIZE=address,undefined -DATTNPROF_BUILD_FUZZ=ON \
  -DATTNPROF_BUILD_BENCH=OFF -DATTNPROF_CUDA=OFF >/dev/null
cmake --build build-asan -j"$JOBS"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$JOBS"

phase "libFuzzer runs: the .npy reader, the JSON readers of diff and report (${FUZZ_SECONDS}s each)"
mkdir -p build-asan/corpus build-asan/corpus-json
build-asan/fuzz/fuzz_npy -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -print_final_stats=0 \
  build-asan/corpus fuzz/corpus/npy 2>&1 | tail -n 2
build-asan/fuzz/fuzz_json -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -print_final_stats=0 \
  -dict=fuzz/json.dict build-asan/corpus-json fuzz/corpus/json 2>&1 | tail -n 2
phase "done"
