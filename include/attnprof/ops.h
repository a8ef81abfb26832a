// attnprof/ops.h: primitive ops, named after the PyTorch operators they stand for.
//
//   Tensor s = ops::matmul(q, k.transpose());          // [B,H,Nq,D] x [B,H,D,Nk] -> [B,H,Nq,Nk]
//   s = ops::mul(s, scale);                             // out of place: allocates
//   s = ops::masked_fill(s, mask, -INFINITY);           // out of place: clone (copy_) + masked_fill_
//   Tensor p = ops::softmax(s);                         // over the last dim
//   Tensor o = ops::matmul(p, v);
//   ops::mul_(s, scale); ops::masked_fill_(s, mask, -INFINITY); ops::softmax_(s);   // in place
//
// Every op opens a profiler zone carrying its input shapes and its cost model (FLOPs, bytes read and
// written), so tables, traces and the roofline read the same numbers the tests check. The `*_cost`
// functions are those models; they are exact for the bytes each op must move at least once.
//
// Conventions: all tensors are 4-D. bf16 ops compute in fp32 and round once on store. Masks are Bool
// with true = "fill this element" (masked_fill semantics) and broadcast over any dim of size 1. matmul broadcasts
// over heads when a has a multiple of b's heads (grouped-query attention) without copying b.
// softmax of a row whose entries are all -inf gives zeros (not NaN), matching PyTorch's flash kernels.
// A NaN anywhere in a softmax row makes the whole row NaN, as in PyTorch. reference_attention and the command line
// refuse non-finite inputs rather than validate against them.
#pragma once

#include <string_view>

#include "attnprof/cost.h"
#include "attnprof/tensor.h"

namespace attnprof::ops {

// [B,Ha,M,K] x [B,Hb,K,N] -> [B,Ha,M,N]; Ha % Hb == 0. fp32: OpenBLAS sgemm; bf16: oneDNN (bf16 in, fp32
// accumulate, bf16 out), as PyTorch's CPU matmul does; below AVX-512, where oneDNN 2.6 has no bf16 matmul,
// bf16 widened to fp32 for sgemm and the result rounded once.
Tensor matmul(const Tensor& a, const Tensor& b);
// matmul's cost as it runs here: every FLOP inside OpenBLAS or oneDNN (OpCost::library_flops), a bf16
// product's on bf16 dot-product units only on oneDNN's path; widened for sgemm it runs on the fp32 FMA units.
OpCost matmul_cost(const Shape4& a, const Shape4& b, DType dtype);
// A GEMM library's cost of the same product wherever it runs, bf16 on bf16 dot-product units: matmul_cost on
// oneDNN's path, and the GPU's cuBLAS GEMMs (whose callers pass fp16 as bf16: the tensor cores' one rate).
OpCost gemm_cost(const Shape4& a, const Shape4& b, DType dtype);
// What a bf16 matmul runs on here (best_isa() now): oneDNN's bf16 matmul, or the fp32 widening. The key is
// what compare.json records (machine.bf16_matmul); report::describe_bf16_matmul turns it into words.
bool bf16_matmul_uses_onednn();
std::string_view bf16_matmul_key();  // "onednn" | "fp32-widened-sgemm"
// Whether matmul in `dtype` multiplies with OpenBLAS's sgemm (fp32, fp16, bf16 without oneDNN's), whose sizes
// and leading dimensions are 32-bit ints: matmul refuses an M, K or N past kSgemmMaxDim there (a size cut to
// int would leave the result unwritten).
bool matmul_uses_sgemm(DType dtype);
inline constexpr int64_t kSgemmMaxDim = 2147483647;
// Bytes of fp32 scratch matmul(a, b) allocates here (the widened path: fp16 always, bf16 without oneDNN's);
// 0 where it needs none (fp32, oneDNN's bf16). Live only during the call, beside a, b and the result.
double matmul_scratch_bytes(const Shape4& a, const Shape4& b, DType dtype);
// Loads now what matmul in `dtype` multiplies with (OpenBLAS for fp32, fp16 and widened bf16; oneDNN's bf16
// check otherwise), so that a run's first timed matmul does not pay for it: the variants' prepare() call it.
// OpenBLAS is loaded on first use, not linked (docs/dependencies.md). Throws Error when it cannot load, or when
// the address-space limit (ulimit -v) leaves too little room for the buffers it maps at the thread count set.
void prepare_matmul(DType dtype);

Tensor transpose(const Tensor& a);  // view of the last two dims, recorded as a zero-cost op

Tensor mul(const Tensor& a, double s);
Tensor& mul_(Tensor& a, double s);
OpCost mul_cost(const Shape4& a, DType dtype);

Tensor masked_fill(const Tensor& a, const Tensor& mask, float value);
Tensor& masked_fill_(Tensor& a, const Tensor& mask, float value);
OpCost masked_fill_cost(const Shape4& a, DType dtype, const Shape4& mask);

// a + m where m broadcasts (an additive attention mask; fp32 or a's dtype).
Tensor add(const Tensor& a, const Tensor& m);
Tensor& add_(Tensor& a, const Tensor& m);
OpCost add_cost(const Shape4& a, DType dtype, const Shape4& m, DType mdtype);

Tensor softmax(const Tensor& a);  // over the last dim
Tensor& softmax_(Tensor& a);
OpCost softmax_cost(const Shape4& a, DType dtype);

Tensor clone(const Tensor& a);                 // recorded as copy_
Tensor to(const Tensor& a, DType dtype);       // recorded as to, whatever the dtypes
OpCost copy_cost(const Shape4& a, DType from, DType to);

// triu(ones(Nq, Nk, bool), diagonal) as a [1,1,Nq,Nk] Bool tensor: true strictly above the diagonal shifted
// by `diagonal` (diagonal=1 is the causal mask of the blog, top-left aligned).
Tensor triu_mask(int64_t nq, int64_t nk, int64_t diagonal = 1);
OpCost triu_mask_cost(int64_t nq, int64_t nk);  // writes Nq·Nk bytes
Tensor logical_not(const Tensor& mask);
OpCost logical_not_cost(const Shape4& mask);    // reads and writes the mask, one byte per element
// torch.where(cond, if_true, if_false) with scalar branches: a contiguous tensor of cond's shape in `dtype`
// (fp32, bf16 or fp16). How SDPA's math backend turns a bool mask into an additive one
// (convert_boolean_attn_mask: -inf where masked, 0 where kept).
Tensor where(const Tensor& cond, float if_true, float if_false, DType dtype);
OpCost where_cost(const Shape4& cond, DType dtype);  // reads a byte and writes an element per element

// Throws unless `mask` (shape [Bm,Hm,Nq,Nk], Bm in {1,B}, Hm in {1,H}) broadcasts to `target`.
void check_broadcast(const Shape4& mask, const Shape4& target, const char* what);

// OpenMP and BLAS threads; n >= 1. Throws Error, changing nothing, when OpenBLAS is loaded and the address-space
// limit leaves no room for the buffers it would add for more threads.
// OpenMP's dynamic adjustment (OMP_DYNAMIC) is turned off: a team has exactly n threads, the count every
// peak and "% of peak" is reported against.
void set_num_threads(int n);
int num_threads();
// The CPUs OpenMP counts for this process (omp_get_num_procs: its affinity when it started, before OMP_PROC_BIND
// binds the first thread to one of them) and the most threads its teams may have (OMP_THREAD_LIMIT).
int available_cpus();
int thread_limit();

}  // namespace attnprof::ops
