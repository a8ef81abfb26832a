#!/usr/bin/env bash
# Builds the CUDA binaries here and packs them with the shared libraries they need that a GPU machine's CUDA
# image may lack (OpenBLAS, oneDNN, fmt, gfortran/quadmath, gomp, OpenCL loader), so scripts/gpu-check.sh can
# run there without a build: the machine needs only the NVIDIA driver and CUDA 13's runtime, cuBLAS, CUPTI
# (and cuDNN 9 for sdpa-cudnn), from its toolkit or from PyTorch's nvidia-* wheels.
#
#   scripts/gpu-bundle.sh                  # -> gpu-bundle/ (git-ignored, about 20 MB)
#   # on the GPU machine, with gpu-bundle carried beside the working tree:
#   BUNDLE=gpu-bundle scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-cuda}
DEST=${DEST:-gpu-bundle}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DATTNPROF_CUDA=ON -DATTNPROF_BUILD_BENCH=OFF > /dev/null
cmake --build "$BUILD" -j"$JOBS" --target test_cuda attnprof_gpu_timing attnprof_cli
bins=("$BUILD/tests/test_cuda" "$BUILD/src/cuda/attnprof-gpu-timing" "$BUILD/tools/attnprof")
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp/build-cuda/tests" "$DEST.tmp/build-cuda/src/cuda" "$DEST.tmp/build-cuda/tools" "$DEST.tmp/lib"
cp "${bins[0]}" "$DEST.tmp/build-cuda/tests/"
cp "${bins[1]}" "$DEST.tmp/build-cuda/src/cuda/"
cp "${bins[2]}" "$DEST.tmp/build-cuda/tools/"
# Every resolved dependency except glibc's own libraries, the C++ runtime and the CUDA/NVIDIA libraries
# (those must come from the GPU machine, matching its driver).
skip='^(libc|libm|libdl|libpthread|librt|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcupti|libcudnn.*|libnvToolsExt|libnvrtc.*|libnvJitLink)\.so'
for b in "${bins[@]}"; do
  ldd "$b" | awk '/=>/ && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  base=$(basename "$lib")
  [[ "$base" =~ $skip ]] && continue
  cp -L "$lib" "$DEST.tmp/lib/$base"
done
ls "$DEST.tmp/lib" > "$DEST.tmp/libs.txt"
tar -cJf "$DEST.tmp/libs.tar.xz" -C "$DEST.tmp/lib" .
rm -rf "$DEST.tmp/lib"
git rev-parse HEAD > "$DEST.tmp/commit" 2>/dev/null || true
scripts/source-sum.sh > "$DEST.tmp/source-sum"  # gpu-check.sh compares it with the tree it runs in
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
echo "wrote $DEST ($(du -sh "$DEST" | cut -f1)): $(tr '\n' ' ' < "$DEST/libs.txt")"
