// tests/ptx_tables.h: the PTX ISA's fragment tables, written out once for the tests, independently of
// src/cuda/fragment.h (which the kernel uses): "Matrix fragments for mma.m16n8k16 with floating point type"
// and "ldmatrix". test_cuda_layout.cpp checks fragment.h against them; simt_emulator.h executes mma.sync and
// ldmatrix by them.
#pragma once

#include "cuda/fragment.h"  // RowCol only

namespace attnprof::testing_ptx {

using cuda::frag::RowCol;

// groupID = lane / 4, threadID_in_group = lane % 4; element index i as the ISA numbers them.
inline RowCol ptx_a(int lane, int i) {  // a0..a7 of A (16×16, .row); register r holds a_{2r} (low half), a_{2r+1}
  const int g = lane / 4, t = lane % 4;
  const bool upper = i == 2 || i == 3 || i == 6 || i == 7;
  return {upper ? g + 8 : g, t * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
}
inline RowCol ptx_b(int lane, int i) {  // b0..b3 of B (16×8, .col): row = k, col = n
  const int g = lane / 4, t = lane % 4;
  return {t * 2 + (i & 1) + (i >= 2 ? 8 : 0), g};
}
inline RowCol ptx_c(int lane, int i) {  // c0..c3 of C/D (16×8, fp32)
  const int g = lane / 4, t = lane % 4;
  return {i < 2 ? g : g + 8, t * 2 + (i & 1)};
}
// ldmatrix.m8n8.x4: threads 8m..8m+7 give the row addresses of matrix m; destination register m of thread
// T holds row T/4, elements 2(T%4) and 2(T%4)+1 of matrix m (.trans: the matrix is read column-major, so
// those two are rows 2(T%4), 2(T%4)+1 of column T/4). Returns (row, column) inside the 8×8 matrix.
inline RowCol ptx_ldsm_dest(int lane, int half, bool trans) {
  return trans ? RowCol{2 * (lane % 4) + half, lane / 4} : RowCol{lane / 4, 2 * (lane % 4) + half};
}

}  // namespace attnprof::testing_ptx
