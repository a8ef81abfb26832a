#!/usr/bin/env bash
# ThreadSanitizer check of attnprof's threaded code (docs/testing.md, "ThreadSanitizer"): a clang build
# under -fsanitize=thread runs the test suite and every command end to end with two threads, with LLVM's
# OpenMP runtime reporting its barriers, locks and task edges to TSan through libarcher (an OMPT tool).
# Without archer, TSan cannot see OpenMP's synchronisation and reports every parallel region; with gcc's
# uninstrumented libgomp it cannot at all. Not part of scripts/test.sh: the build and the run take about
# ten minutes on two cores. Exits non-zero on any report (TSan's exit code 66) or failed test.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
BUILD=${BUILD:-build-tsan}
phase() { printf '== [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$1"; }

phase "clang ThreadSanitizer build ($BUILD)"
# -O1: TSan's own advice (a Debug build at -O0 runs several times slower under it); -g1 for file:line.
cmake -S . -B "$BUILD" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" -DATTNPROF_SANITIZE=thread -DATTNPROF_BUILD_BENCH=OFF \
  -DATTNPROF_CUDA=OFF >/dev/null
cmake --build "$BUILD" -j"$JOBS"

# libarcher ships beside the libomp the binaries load (Debian: libomp-14-dev, pulled in by libomp-dev).
LIBOMP=$(ldd "$BUILD/tools/attnprof" | awk '/libomp\.so/ { print $3; exit }')
ARCHER="$(dirname "${LIBOMP:-/nonexistent}")/libarcher.so"
if [[ ! -f "$ARCHER" ]]; then
  echo "tsan.sh: libarcher.so not found beside '${LIBOMP:-libomp}' (install libomp-dev): without it every OpenMP region is a false report" >&2
  exit 2
fi
export OMP_TOOL_LIBRARIES="$ARCHER"
# ignore_noninstrumented_modules: OpenBLAS and oneDNN are not built with TSan; their own memory accesses are
# not checked, the calls into them are. exitcode 66 (TSan's default) fails any command that reported.
export TSAN_OPTIONS="ignore_noninstrumented_modules=1 halt_on_error=0 ${TSAN_OPTIONS:-}"
export OMP_NUM_THREADS=2

phase "test suite under ThreadSanitizer + archer ($ARCHER)"
ctest --test-dir "$BUILD" --output-on-failure -j"$JOBS"

phase "every command end to end, two threads"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
BIN="$BUILD/tools/attnprof"
export XDG_CACHE_HOME="$OUT/cache"  # the instrumented binary's peaks stay out of the user's cache
run() { echo "+ ${ATTNPROF_ISA:+ATTNPROF_ISA=$ATTNPROF_ISA }attnprof $*"; "$BIN" "$@" --out "$OUT/run" >"$OUT/log" 2>&1 || { cat "$OUT/log"; exit 1; }; }
# TSan checks 1- to 16-byte accesses only: the AVX2 / AVX-512 kernels' 32- and 64-byte vector loads and
# stores are invisible to it. The scalar build of the same kernel bodies (same loops, same threads, same
# scratch) makes every element access visible, so each variant runs under both.
for isa in scalar best; do
  for v in naive inplace sdpa flash; do
    ATTNPROF_ISA=${isa/best/} run profile "$v" --shape 2,4,256,64 --threads 2
    ATTNPROF_ISA=${isa/best/} run profile "$v" --shape 2,4,200,64 --kv-heads 2 --dtype fp32 --threads 2
  done
done
run profile flash --shape 2,4,256,64 --threads 2 --counters
run compare --shape 2,4,256,64 --threads 2
run sweep --shape 1,2,64,32 --seq 64..512 --threads 2
run roofline --threads 2
run report
echo "+ attnprof diff naive.summary.json inplace.summary.json"
"$BIN" diff "$OUT/run/naive.summary.json" "$OUT/run/inplace.summary.json" >"$OUT/log" 2>&1 || { cat "$OUT/log"; exit 1; }
phase "done: no ThreadSanitizer report"
