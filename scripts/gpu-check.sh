#!/usr/bin/env bash
# The GPU check of issue 7, as one script for a machine with an NVIDIA GPU (a few minutes):
#   1. build the CUDA backend (sm_80 + sm_90a) with its tests and the timing tool,
#   2. run tests/test_cuda: every CUDA variant against the fp64 reference, the allocator, the blog's
#      kernel counts through CUPTI (6 naive / 5 in-place / 1 flash),
#   3. attnprof-gpu-timing at the blog's shape [8,16,1024,64] bf16 causal: ms, TFLOP/s, % of bf16 peak,
#      activities per forward, validation; then the same in fp16 (default flash configuration only),
#   4. `attnprof compare --device cuda` at that shape, then `attnprof profile naive|flash --device cuda`,
#   5. PyTorch's F.scaled_dot_product_attention (flash, cuDNN, efficient, math backends) on the same shape
#      as the peer, when python3 with a CUDA build of torch is there,
#   6. a summary: our flash against PyTorch's flash (target: within 1.5x),
#   7. `attnprof sweep --device cuda`: naive and flash from N = 512 to 4096, then `attnprof roofline --device
#      cuda` (both into compare/, for the report).
# Everything lands in $OUT (default attnprof-out/gpu-check; a device runner sets $OUT) for docs/gpu.md. Exit status: 0 when the tests pass.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-attnprof-out/gpu-check}
JOBS=${JOBS:-$(nproc)}
BUILD=${BUILD:-build-cuda}
SHAPE=8,16,1024,64
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/steps.log"; }
status=0

log "machine"
{ date -u; uname -a; nvidia-smi 2>&1 || echo "nvidia-smi: not found"; /usr/local/cuda/bin/nvcc --version 2>&1 | tail -2; } \
  > "$OUT/machine.txt"
head -20 "$OUT/machine.txt"

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
  echo "using the bundle in $BUNDLE (built from $(cat "$BUNDLE/commit" 2>/dev/null || echo '?'))" | tee -a "$OUT/steps.log"
fi
if [[ "${PREBUILT:-0}" == 1 && -x "$BUILD/tests/test_cuda" ]]; then
  # CUDA's own libraries: the toolkit's, then those of PyTorch's nvidia-* wheels (cuDNN is loaded at run time,
  # and loads its sub-libraries by name, so its directory must be on the path too).
  wheels=$(python3 -c 'import glob, os, sys; print(":".join(sorted({d for p in sys.path for d in glob.glob(os.path.join(p, "nvidia", "*", "lib"))})))' 2>/dev/null || true)
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:/usr/local/cuda/lib${wheels:+:$wheels}"
  ldd "$BUILD/tests/test_cuda" "$BUILD/tools/attnprof" > "$OUT/ldd.txt" 2>&1
  if grep -q "not found" "$OUT/ldd.txt"; then
    echo "missing shared libraries:"; grep "not found" "$OUT/ldd.txt" | sort -u
  fi
  echo "using prebuilt binaries in $BUILD" | tee -a "$OUT/steps.log"
elif ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DATTNPROF_CUDA=ON -DATTNPROF_BUILD_BENCH=OFF &&
       cmake --build "$BUILD" -j"$JOBS" --target test_cuda attnprof_gpu_timing; } > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"; echo "build failed (log: $OUT/build.log)"; exit 1
fi
# The CLI is built when it is there; its absence must not stop the GPU numbers.
[[ "${PREBUILT:-0}" == 1 ]] || cmake --build "$BUILD" -j"$JOBS" --target attnprof_cli >> "$OUT/build.log" 2>&1 ||
  echo "(attnprof CLI not built)" | tee -a "$OUT/steps.log"
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.log"

log "tests/test_cuda"
if ! timeout 240 "$BUILD/tests/test_cuda" --gtest_color=no > "$OUT/test_cuda.txt" 2>&1; then status=1; fi
tail -25 "$OUT/test_cuda.txt"

log "attnprof-gpu-timing --shape $SHAPE (bf16, causal)"
timeout 180 "$BUILD/src/cuda/attnprof-gpu-timing" --shape "$SHAPE" --iters 50 --json "$OUT/timing.json" \
  2>&1 | tee "$OUT/timing.txt" || status=1

log "attnprof-gpu-timing --shape $SHAPE --dtype fp16 (the kernels' other type; default flash configuration)"
timeout 90 "$BUILD/src/cuda/attnprof-gpu-timing" --shape "$SHAPE" --dtype fp16 --iters 20 --no-configs \
  --json "$OUT/timing_fp16.json" 2>&1 | tee "$OUT/timing_fp16.txt" || status=1

log "attnprof compare --device cuda"
CLI="$BUILD/tools/attnprof"
if [[ -x "$CLI" ]]; then
  timeout 180 "$CLI" compare --device cuda --shape "$SHAPE" --dtype bf16 --causal --out "$OUT/compare" \
    > "$OUT/compare.txt" 2>&1 || echo "(compare --device cuda failed or is not integrated yet: see compare.txt)" | tee -a "$OUT/steps.log"
  cat "$OUT/compare.txt" | head -60
else
  echo "(no attnprof CLI binary)" | tee "$OUT/compare.txt"
fi

log "attnprof profile naive|flash --device cuda (the blog's tables, sorted by CUDA total)"
if [[ -x "$CLI" ]]; then
  for v in naive flash; do
    timeout 90 "$CLI" profile "$v" --device cuda --shape "$SHAPE" --dtype bf16 --causal --out "$OUT/profile" \
      > "$OUT/profile-$v.txt" 2>&1 || echo "(profile $v --device cuda failed: see profile-$v.txt)" | tee -a "$OUT/steps.log"
  done
  head -30 "$OUT/profile-naive.txt"
fi

log "PyTorch peer: F.scaled_dot_product_attention at $SHAPE bf16 causal"
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  timeout 150 python3 - "$SHAPE" "$OUT/torch.json" <<'PY' 2>&1 | tee "$OUT/torch.txt"
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
else
  echo "(no python3 with a CUDA build of torch: the peer is not measured)" | tee "$OUT/torch.txt"
fi

log "summary"
python3 - "$OUT" <<'PY' 2>&1 | tee "$OUT/summary.txt"
import json, os, sys
out = sys.argv[1]
t = json.load(open(os.path.join(out, "timing.json"))) if os.path.exists(os.path.join(out, "timing.json")) else None
p = json.load(open(os.path.join(out, "torch.json"))) if os.path.exists(os.path.join(out, "torch.json")) else None
if t:
    print(f"{t['device']}: {t['problem']}, bf16 peak {t['bf16_peak_tflops']:.0f} TFLOP/s")
    for v in t["variants"]:
        if "median_ms" in v:
            print(f"  attnprof {v['name']:10s} {v['median_ms']:8.3f} ms {v['tflops']:7.1f} TFLOP/s "
                  f"{v['pct_bf16_peak']:5.1f}% of peak, valid={v.get('valid')}, {v['activities_per_forward']} activities")
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
t16 = json.load(open(os.path.join(out, "timing_fp16.json"))) if os.path.exists(os.path.join(out, "timing_fp16.json")) else None
ours16 = next((v for v in (t16 or {}).get("variants", []) if v["name"] == "flash" and "median_ms" in v), None)
theirs16 = ((p or {}).get("backends_fp16", {}).get("flash") or {}).get("median_ms")
if ours16 and theirs16:
    print(f"fp16 flash vs PyTorch fp16 flash: {ours16['median_ms']:.3f} ms vs {theirs16:.3f} ms = "
          f"{ours16['median_ms'] / theirs16:.2f}x, valid={ours16.get('valid')}")
PY
log "attnprof sweep --device cuda (time and device memory against N, fitted exponents)"
# Last, and on its own clock: the issue's numbers above must not wait for it.
if [[ -x "$CLI" ]]; then
  timeout 90 "$CLI" sweep --device cuda --shape "$SHAPE" --seq 512..4096 --variants naive,flash --warmup 1 \
    --out "$OUT/compare" > "$OUT/sweep.txt" 2>&1 || echo "(sweep --device cuda failed: see sweep.txt)" | tee -a "$OUT/steps.log"
  tail -8 "$OUT/sweep.txt"
fi

log "attnprof roofline --device cuda (every kernel against the GPU's ceilings)"
if [[ -x "$CLI" ]]; then
  timeout 60 "$CLI" roofline --device cuda --shape "$SHAPE" --out "$OUT/compare" > "$OUT/roofline.txt" 2>&1 ||
    echo "(roofline --device cuda failed: see roofline.txt)" | tee -a "$OUT/steps.log"
  tail -12 "$OUT/roofline.txt"
fi

log "done: outputs in $OUT (status $status)"
exit $status
