// libtorch peer (see torch_peer.h). Compiled only when find_package(Torch) succeeds.
#include "torch_peer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <cstring>
#include <stdexcept>
#include <vector>

namespace attnprof::bench {
namespace {

at::Tensor wrap(const Tensor& t) {
  const auto dt = t.dtype() == DType::F32 ? at::kFloat : at::kBFloat16;
  std::vector<int64_t> sizes(t.shape().begin(), t.shape().end()), strides(t.strides().begin(), t.strides().end());
  return at::from_blob(t.raw(), sizes, strides, at::TensorOptions().dtype(dt));
}

}  // namespace

Tensor torch_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  at::Tensor o = std::get<0>(at::_scaled_dot_product_attention(wrap(q), wrap(k), wrap(v), {}, 0.0, false, causal));
  o = o.contiguous();
  Tensor out = Tensor::empty(q.shape(), q.dtype());
  std::memcpy(out.raw(), o.data_ptr(), out.nbytes());
  return out;
}

void torch_sdpa_run(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  at::Tensor o = std::get<0>(at::_scaled_dot_product_attention(wrap(q), wrap(k), wrap(v), {}, 0.0, false, causal));
  if (!o.defined()) throw std::runtime_error("torch SDPA returned nothing");
}

void torch_set_num_threads(int n) { at::set_num_threads(n); }

const char* torch_version() { return TORCH_VERSION; }

}  // namespace attnprof::bench
