#!/usr/bin/env bash
# The GPU check of issue 7, as one script for a machine with an NVIDIA GPU (a few minutes):
#   1. build the CUDA backend (sm_80 + sm_90a) with its tests and the timing tool,
#   2. run tests/test_cuda: every CUDA variant against the fp64 reference, the allocator, the blog's
#      kernel counts through CUPTI (6 naive / 5 in-place / 1 flash),
#   3. attnprof-gpu-timing at the blog's shape [8,16,1024,64] bf16 causal: ms, TFLOP/s, % of bf16 peak,
#      activities per forward, validation, every flash tile configuration,
#   4. PyTorch's F.scaled_dot_product_attention (flash, cuDNN, efficient, math backends) on the same shape
#      as the peer, when python3 with a CUDA build of torch is there,
#   5. `attnprof compare --device cuda` at that shape,
#   6. a summary: our flash against PyTorch's flash (target: within 1.5x),
#   7. extras: the timing in fp16 (default flash configuration), `attnprof profile naive|flash --device cuda`,
#      `attnprof sweep --device cuda` (naive and flash from N = 512 to 4096) and `attnprof roofline --device
#      cuda` (both into compare/, for the report).
# Everything is written to a scratch directory ($RESULTS, default a fresh /tmp/gpu-check.*) and, whatever
# happens, packed at exit into $OUT (default attnprof-out/gpu-check; a device runner sets $OUT) as
# gpu-check.tgz plus the seven text files that carry the issue's figures (steps.log, machine.txt,
# test_cuda.txt, timing.txt, torch.txt, compare.txt, summary.txt): eight files, what a device runner brings
# back. The whole script keeps to BUDGET_S seconds (default 450): each step's cap is cut to the time left, so
# the issue's steps (tests, timing, peer, compare, summary) run first and the extras (fp16, profiles, sweep,
# roofline) take what remains. Exit status: 0 when the tests pass.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-attnprof-out/gpu-check}
JOBS=${JOBS:-$(nproc)}
BUILD=${BUILD:-build-cuda}
BUDGET_S=${BUDGET_S:-450}
SHAPE=8,16,1024,64
mkdir -p "$OUT"
R=${RESULTS:-$(mktemp -d /tmp/gpu-check.XXXXXX)}
mkdir -p "$R"
ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
log() { echo "== $* [$SECONDS s]" | tee -a "$R/steps.log"; }
status=0

pack() {
  tar -czf "$OUT/gpu-check.tgz.tmp" -C "$R" . && mv "$OUT/gpu-check.tgz.tmp" "$OUT/gpu-check.tgz"
  if [[ $(stat -c %s "$OUT/gpu-check.tgz" 2>/dev/null || echo 0) -gt 15000000 ]]; then  # a runner's 16 MiB per file
    tar -czf "$OUT/gpu-check.tgz.tmp" --exclude='*.trace.json' -C "$R" . && mv "$OUT/gpu-check.tgz.tmp" "$OUT/gpu-check.tgz"
    echo "(gpu-check.tgz: traces left out, over 15 MB with them; they stay in $R)" | tee -a "$OUT/steps.log"
  fi
  for f in steps.log machine.txt test_cuda.txt timing.txt torch.txt compare.txt summary.txt; do
    [[ -f "$R/$f" ]] && cp "$R/$f" "$OUT/"
  done
  echo "outputs: $R, packed into $OUT/gpu-check.tgz"
}
trap pack EXIT

# cap SECONDS: the step's limit, cut to what is left of the budget (15 s kept for the summary and packing);
# prints nothing and fails when too little is left for the step to be worth starting.
cap() {
  local left=$(( BUDGET_S - SECONDS - 15 ))
  (( left >= 20 )) || { echo "(skipped: the ${BUDGET_S} s budget is spent)" | tee -a "$R/steps.log" >&2; return 1; }
  echo $(( $1 < left ? $1 : left ))
}
# Python (the peer, the summary) runs with the machine's own library path, not the bundle's.
py() { LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" python3 "$@"; }

log "machine"
{ date -u; uname -a; nvidia-smi 2>&1 || echo "nvidia-smi: not found"; /usr/local/cuda/bin/nvcc --version 2>&1 | tail -2;
  nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv 2>&1 || true; } \
  > "$R/machine.txt"
head -24 "$R/machine.txt"

log "build ($BUILD, CUDA on, sm_80;sm_90a)"
t0=$(date +%s)
# BUNDLE=DIR: binaries and their non-CUDA shared libraries packed by scripts/gpu-bundle.sh on a machine with
# the Debian packages of scripts/setup.sh, for a GPU machine whose image has only CUDA (no build there).
# PREBUILT=1: use binaries already in $BUILD.
if [[ -n "${BUNDLE:-}" ]]; then
  [[ -x "$BUNDLE/build-cuda/tests/test_cuda" ]] || { echo "BUNDLE=$BUNDLE holds no build-cuda/tests/test_cuda"; exit 1; }
  libs=$(mktemp -d /tmp/attnprof-libs.XXXXXX)
  tar -xJf "$BUNDLE/libs.tar.xz" -C "$libs"
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  BUILD="$BUNDLE/build-cuda"
  PREBUILT=1
  echo "using the bundle in $BUNDLE (built from $(cat "$BUNDLE/commit" 2>/dev/null || echo '?'))" | tee -a "$R/steps.log"
  # The source tree's checksum, as gpu-bundle.sh records it: a bundle built from other sources says so loudly.
  if [[ "$(cat "$BUNDLE/source-sum" 2>/dev/null)" != "$(scripts/source-sum.sh)" ]]; then
    echo "WARNING: the bundle was built from other sources than this tree (source-sum differs): rebuild it with" \
      "scripts/gpu-bundle.sh before the device call; these results are the bundle's code, not this tree's" |
      tee -a "$R/steps.log"
  fi
fi
if [[ "${PREBUILT:-0}" == 1 && -x "$BUILD/tests/test_cuda" ]]; then
  # CUDA's own libraries: the toolkit's (CUPTI in extras/ on runfile installs), then those of PyTorch's
  # nvidia-* wheels (cuDNN is loaded at run time, and loads its sub-libraries by name, so its directory must
  # be on the path too).
  wheels=$(py -c 'import glob, os, sys; print(":".join(sorted({d for p in sys.path for d in glob.glob(os.path.join(p, "nvidia", "*", "lib"))})))' 2>/dev/null || true)
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:/usr/local/cuda/lib${wheels:+:$wheels}"
  ldd "$BUILD/tests/test_cuda" "$BUILD/tools/attnprof" > "$R/ldd.txt" 2>&1
  if grep -q "not found" "$R/ldd.txt"; then
    echo "missing shared libraries:"; grep "not found" "$R/ldd.txt" | sort -u
  fi
  echo "using prebuilt binaries in $BUILD" | tee -a "$R/steps.log"
elif ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DATTNPROF_CUDA=ON -DATTNPROF_BUILD_BENCH=OFF &&
       cmake --build "$BUILD" -j"$JOBS" --target test_cuda attnprof_gpu_timing; } > "$R/build.log" 2>&1; then
  tail -40 "$R/build.log"; echo "build failed (log: $R/build.log)"; exit 1
fi
# The CLI is built when it is there; its absence must not stop the GPU numbers.
[[ "${PREBUILT:-0}" == 1 ]] || cmake --build "$BUILD" -j"$JOBS" --target attnprof_cli >> "$R/build.log" 2>&1 ||
  echo "(attnprof CLI not built)" | tee -a "$R/steps.log"
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$R/steps.log"
CLI="$BUILD/tools/attnprof"

log "tests/test_cuda"
if t=$(cap 200); then
  timeout "$t" "$BUILD/tests/test_cuda" --gtest_color=no > "$R/test_cuda.txt" 2>&1 || status=1
  tail -25 "$R/test_cuda.txt"
else
  status=1
fi

log "attnprof-gpu-timing --shape $SHAPE (bf16, causal)"
if t=$(cap 150); then
  timeout "$t" stdbuf -oL "$BUILD/src/cuda/attnprof-gpu-timing" --shape "$SHAPE" --iters 50 --json "$R/timing.json" \
    2>&1 | tee "$R/timing.txt" || status=1
fi

log "PyTorch peer: F.scaled_dot_product_attention at $SHAPE bf16 causal"
if ! py -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "(no python3 with a CUDA build of torch: the peer is not measured)" | tee "$R/torch.txt"
elif t=$(cap 120); then
  PYTHONUNBUFFERED=1 timeout "$t" env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" python3 - "$SHAPE" "$R/torch.json" \
    <<'PY' 2>&1 | tee "$R/torch.txt"
import json, sys, torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
B, H, N, D = map(int, sys.argv[1].split(","))
torch.manual_seed(0)
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
flops = 4 * B * H * N * N * D / 2  # causal: halved (FlashAttention's convention, as attnprof reports)
res = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(),
       "shape": [B, H, N, D], "flops": flops, "backends": {}}
def timed(be, q, k, v, iters):
    """Median and min ms of one causal SDPA forward on backend `be` (CUDA events, after 5 warm-up calls)."""
    with sdpa_kernel(be):
        for _ in range(5):
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.cuda.synchronize()
        ts = []
        for _ in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); F.scaled_dot_product_attention(q, k, v, is_causal=True); b.record()
            b.synchronize(); ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2], ts[0]
def measure(key, label, backends, q, k, v, iters):
    res[key] = {}
    for name, be in backends:
        try:
            med, lo = timed(be, q, k, v, iters)
            res[key][name] = {"median_ms": med, "min_ms": lo, "tflops": flops / (med * 1e-3) / 1e12}
            print(f"torch {name:9s}{label} {med:8.3f} ms  {flops / (med * 1e-3) / 1e12:7.1f} TFLOP/s")
        except Exception as e:  # a backend this GPU/build lacks
            res[key][name] = {"error": str(e).splitlines()[0]}
            print(f"torch {name:9s}{label} unavailable: {str(e).splitlines()[0]}")
measure("backends", "", [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                         ("efficient", SDPBackend.EFFICIENT_ATTENTION), ("math", SDPBackend.MATH)], q, k, v, 50)
# fp16: the flash and cuDNN backends again, for attnprof's fp16 kernels to be set beside.
q16, k16, v16 = (t.to(torch.float16) for t in (q, k, v))
measure("backends_fp16", " fp16", [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)],
        q16, k16, v16, 30)
json.dump(res, open(sys.argv[2], "w"), indent=2)
# The blog's view of the flash backend: torch.profiler's table, to set beside attnprof's device_table.
try:
    from torch.profiler import profile, record_function, ProfilerActivity, schedule
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     schedule=schedule(wait=1, warmup=1, active=3, repeat=1)) as prof:
            for _ in range(5):
                with record_function("flash_kernel_fwd"):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)
                prof.step()
    table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=15)
    open(sys.argv[2].replace(".json", "_profile.txt"), "w").write(table)
    print(table)
except Exception as e:
    print(f"torch.profiler table not produced: {e}")
PY
fi

log "attnprof compare --device cuda"
if [[ ! -x "$CLI" ]]; then
  echo "(no attnprof CLI binary)" | tee "$R/compare.txt"
elif t=$(cap 120); then
  timeout "$t" "$CLI" compare --device cuda --shape "$SHAPE" --dtype bf16 --causal --out "$R/compare" \
    > "$R/compare.txt" 2>&1 || echo "(compare --device cuda failed: see compare.txt)" | tee -a "$R/steps.log"
  head -60 "$R/compare.txt"
fi

log "summary"
py - "$R" <<'PY' 2>&1 | tee "$R/summary.txt"
import json, os, sys
out = sys.argv[1]
t = json.load(open(os.path.join(out, "timing.json"))) if os.path.exists(os.path.join(out, "timing.json")) else None
p = json.load(open(os.path.join(out, "torch.json"))) if os.path.exists(os.path.join(out, "torch.json")) else None
if t:
    print(f"{t['device']}: {t['problem']}, bf16 peak {t['bf16_peak_tflops']:.0f} TFLOP/s")
    for v in t["variants"]:
        if "median_ms" in v:
            print(f"  attnprof {v['name']:10s} {v['median_ms']:8.3f} ms {v['tflops']:7.1f} TFLOP/s "
                  f"{v['pct_bf16_peak']:5.1f}% of peak, valid={v.get('valid')}, {v.get('activities_per_forward', '?')} activities")
        else:
            print(f"  attnprof {v['name']:10s} {v.get('unsupported') or v.get('error')}")
ours = next((v for v in (t or {}).get("variants", []) if v["name"] == "flash" and "median_ms" in v), None)
theirs = ((p or {}).get("backends", {}).get("flash") or {}).get("median_ms")
if ours and theirs:
    r = ours["median_ms"] / theirs
    print(f"flash vs PyTorch flash: {ours['median_ms']:.3f} ms vs {theirs:.3f} ms = {r:.2f}x "
          f"({'within' if r <= 1.5 else 'NOT within'} the 1.5x target)")
else:
    print("flash vs PyTorch flash: not measured (see timing.txt / torch.txt)")
PY

# The extras, in the time that is left.
log "attnprof-gpu-timing --shape $SHAPE --dtype fp16 (the kernels' other type; default flash configuration)"
if t=$(cap 90); then
  timeout "$t" stdbuf -oL "$BUILD/src/cuda/attnprof-gpu-timing" --shape "$SHAPE" --dtype fp16 --iters 20 --no-configs \
    --json "$R/timing_fp16.json" 2>&1 | tee "$R/timing_fp16.txt" || status=1
  # The fp16 line of the summary, now that there is an fp16 timing.
  py - "$R" <<'PY' 2>&1 | tee -a "$R/summary.txt"
import json, os, sys
out = sys.argv[1]
def load(name):
    path = os.path.join(out, name)
    return json.load(open(path)) if os.path.exists(path) else None
t16, p = load("timing_fp16.json"), load("torch.json")
ours16 = next((v for v in (t16 or {}).get("variants", []) if v["name"] == "flash" and "median_ms" in v), None)
theirs16 = ((p or {}).get("backends_fp16", {}).get("flash") or {}).get("median_ms")
if ours16 and theirs16:
    print(f"fp16 flash vs PyTorch fp16 flash: {ours16['median_ms']:.3f} ms vs {theirs16:.3f} ms = "
          f"{ours16['median_ms'] / theirs16:.2f}x, valid={ours16.get('valid')}")
else:
    print("fp16 flash vs PyTorch fp16 flash: not measured (see timing_fp16.txt / torch.txt)")
PY
fi

log "attnprof profile naive|flash --device cuda (the blog's tables, sorted by CUDA total)"
if [[ -x "$CLI" ]]; then
  for v in naive flash; do
    t=$(cap 60) || break
    timeout "$t" "$CLI" profile "$v" --device cuda --shape "$SHAPE" --dtype bf16 --causal --out "$R/profile" \
      > "$R/profile-$v.txt" 2>&1 || echo "(profile $v --device cuda failed: see profile-$v.txt)" | tee -a "$R/steps.log"
  done
  [[ -f "$R/profile-naive.txt" ]] && head -30 "$R/profile-naive.txt"
fi

log "attnprof sweep --device cuda (time and device memory against N, fitted exponents)"
if [[ -x "$CLI" ]] && t=$(cap 90); then
  timeout "$t" "$CLI" sweep --device cuda --shape "$SHAPE" --seq 512..4096 --variants naive,flash --warmup 1 \
    --out "$R/compare" > "$R/sweep.txt" 2>&1 || echo "(sweep --device cuda failed: see sweep.txt)" | tee -a "$R/steps.log"
  tail -8 "$R/sweep.txt"
fi

log "attnprof roofline --device cuda (every kernel against the GPU's ceilings)"
if [[ -x "$CLI" ]] && t=$(cap 60); then
  timeout "$t" "$CLI" roofline --device cuda --shape "$SHAPE" --out "$R/compare" > "$R/roofline.txt" 2>&1 ||
    echo "(roofline --device cuda failed: see roofline.txt)" | tee -a "$R/steps.log"
  tail -12 "$R/roofline.txt"
fi

log "done (status $status)"
exit $status
