#!/usr/bin/env bash
# Builds the CUDA binaries here and packs them with the shared libraries they need that a GPU machine's CUDA
# image may lack (OpenBLAS, oneDNN, fmt, gfortran/quadmath, gomp, OpenCL loader) and the CUDA 13.0 runtime and
# CUPTI they were built against, so scripts/gpu-check.sh can run there without a build: the machine needs only
# the NVIDIA driver (580 or later, CUDA 13.0's) and cuBLAS (and cuDNN 9 for sdpa-cudnn), from its toolkit or
# from PyTorch's nvidia-* wheels.
#
#   scripts/gpu-bundle.sh                  # -> gpu-bundle/ (git-ignored, about 20 MB)
#   # on the GPU machine, with gpu-bundle carried beside the working tree:
#   BUNDLE=gpu-bundle scripts/gpu-check.sh
#
# The bundle records source-manifest.txt (scripts/gpu-check.sh --source-manifest: a sha256 for every source,
# header and CMake file the binaries are built from, and this script), taken before the build and checked
# again after it; gpu-check.sh refuses to run the bundle in a tree whose manifest differs. Run this after the
# last source edit before the device call.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-cuda}
DEST=${DEST:-gpu-bundle}
JOBS=${JOBS:-$(nproc)}
manifest=$(mktemp /tmp/gpu-bundle-manifest.XXXXXX)
trap 'rm -f "$manifest"' EXIT
scripts/gpu-check.sh --source-manifest > "$manifest"  # before the build: what the binaries are made from
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DATTNPROF_CUDA=ON -DATTNPROF_BUILD_BENCH=OFF > /dev/null
cmake --build "$BUILD" -j"$JOBS" --target test_cuda attnprof_gpu_timing attnprof_cli
if ! scripts/gpu-check.sh --source-manifest | cmp -s - "$manifest"; then
  echo "gpu-bundle.sh: sources changed during the build (the binaries may mix old and new code):" >&2
  scripts/gpu-check.sh --source-manifest | diff "$manifest" - | awk '/^[<>]/ { print "  " $3 }' | sort -u >&2 || true
  echo "run it again once the edits are done; $DEST was not written" >&2
  exit 1
fi
bins=("$BUILD/tests/test_cuda" "$BUILD/src/cuda/attnprof-gpu-timing" "$BUILD/tools/attnprof")
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp/build-cuda/tests" "$DEST.tmp/build-cuda/src/cuda" "$DEST.tmp/build-cuda/tools" "$DEST.tmp/lib"
cp "${bins[0]}" "$DEST.tmp/build-cuda/tests/"
cp "${bins[1]}" "$DEST.tmp/build-cuda/src/cuda/"
cp "${bins[2]}" "$DEST.tmp/build-cuda/tools/"
# Every resolved dependency except glibc's own libraries, the C++ runtime, the driver's libcuda and the large
# CUDA libraries (cuBLAS, cuDNN, NVRTC: hundreds of MB, from the machine's toolkit or wheels). The CUDA runtime
# and CUPTI (5 MB) are packed: every binary needs both to start at all, and CUPTI's records are read through
# the struct versions of the header they were built against (CUDA 13.0's), which a newer libcupti found first
# on the machine need not hand back.
skip='^(libc|libm|libdl|libpthread|librt|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt|libcudnn.*|libnvToolsExt|libnvrtc.*|libnvJitLink)\.so'
# OpenBLAS is not among them: the binaries load it with dlopen when a run needs it (src/ops/blas_loader.cpp),
# by its soname through LD_LIBRARY_PATH, so it is packed by that name, with what it links (gfortran, quadmath).
# awk reads to the end: an early exit could kill ldconfig with SIGPIPE, which pipefail makes fatal.
openblas=$(ldconfig -p | awk '$1 == "libopenblas.so.0" && !found { print $NF; found = 1 }')
if [[ -z "$openblas" ]]; then
  echo "gpu-bundle.sh: libopenblas.so.0 is not known to the loader here (scripts/setup.sh installs it)" >&2
  exit 1
fi
for b in "${bins[@]}" "$openblas"; do
  ldd "$b" | awk '/=>/ && $3 ~ /^\// {print $3}'
done | { cat; echo "$openblas"; } | sort -u | while read -r lib; do
  base=$(basename "$lib")
  [[ "$base" =~ $skip ]] && continue
  cp -L "$lib" "$DEST.tmp/lib/$base"
done
ls "$DEST.tmp/lib" > "$DEST.tmp/libs.txt"
tar -cJf "$DEST.tmp/libs.tar.xz" -C "$DEST.tmp/lib" .
rm -rf "$DEST.tmp/lib"
cp "$manifest" "$DEST.tmp/source-manifest.txt"  # gpu-check.sh compares it with the tree it runs in
git rev-parse HEAD > "$DEST.tmp/commit" 2>/dev/null || echo "?" > "$DEST.tmp/commit"
date -u +%Y-%m-%dT%H:%M:%SZ > "$DEST.tmp/built-at"
# How the binaries were configured (sdpa-cudnn needs ATTNPROF_HAVE_CUDNN; the architectures decide sm_90a).
{
  grep -E '^(ATTNPROF_CUDA_ARCHITECTURES|CMAKE_BUILD_TYPE|CMAKE_CUDA_COMPILER|CUDNN_LIBRARY|CUDNN_INCLUDE_DIR):' \
    "$BUILD/CMakeCache.txt" || true
  grep -q 'ATTNPROF_HAVE_CUDNN=1' "$BUILD/src/CMakeFiles/attnprof.dir/flags.make" 2>/dev/null &&
    echo "ATTNPROF_HAVE_CUDNN=1" || echo "ATTNPROF_HAVE_CUDNN: not seen in the compile flags"
  { nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null; } | tail -1 || true
} > "$DEST.tmp/build-info.txt"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
echo "wrote $DEST ($(du -sh "$DEST" | cut -f1), $(wc -l < "$DEST/source-manifest.txt") source files): $(tr '\n' ' ' < "$DEST/libs.txt")"
