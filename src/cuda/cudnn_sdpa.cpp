// sdpa-cudnn: the causal / unmasked SDPA forward graph of cudnn_sdpa.h through cuDNN 9's backend API, the
// library loaded with dlopen, the plan built once per problem and cached, executed on the backend's stream.
#include "cuda/cudnn_sdpa.h"

#include <cudnn_graph.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>

#include "attnprof/profiler.h"
#include "core/dynamic_library.h"
#include "cuda/backend.h"

namespace attnprof::cuda::cudnn {

// ---- the library ----------------------------------------------------------------------------------------
namespace {

struct Api {
  std::string file, error;
  int64_t version = 0;
  decltype(&::cudnnGetVersion) GetVersion = nullptr;
  decltype(&::cudnnGetErrorString) GetErrorString = nullptr;
  decltype(&::cudnnGetLastErrorString) GetLastErrorString = nullptr;
  decltype(&::cudnnCreate) Create = nullptr;
  decltype(&::cudnnSetStream) SetStream = nullptr;
  decltype(&::cudnnBackendCreateDescriptor) CreateDescriptor = nullptr;
  decltype(&::cudnnBackendDestroyDescriptor) DestroyDescriptor = nullptr;
  decltype(&::cudnnBackendSetAttribute) SetAttribute = nullptr;
  decltype(&::cudnnBackendGetAttribute) GetAttribute = nullptr;
  decltype(&::cudnnBackendFinalize) Finalize = nullptr;
  decltype(&::cudnnBackendExecute) Execute = nullptr;
};

// Candidate files, in order: ATTNPROF_CUDNN_LIBRARY, the library CMake found, the loader's search path.
std::vector<std::string> candidates() {
  std::vector<std::string> c;
  if (const char* env = std::getenv("ATTNPROF_CUDNN_LIBRARY"); env && *env) c.emplace_back(env);
#ifdef ATTNPROF_CUDNN_LIBRARY_FILE
  c.emplace_back(ATTNPROF_CUDNN_LIBRARY_FILE);
#endif
  c.emplace_back("libcudnn.so.9");
  return c;
}

Api load() {
  Api a;
  attnprof::detail::DynamicLibrary lib(candidates(), "libcudnn.so.9", "ATTNPROF_CUDNN_LIBRARY");
  if (!lib.handle) {
    a.error = lib.error;
    return a;
  }
  a.file = lib.file;
  auto sym = [&](auto& fn, const char* name) { lib.symbol(fn, name); };
  sym(a.GetVersion, "cudnnGetVersion");
  sym(a.GetErrorString, "cudnnGetErrorString");
  sym(a.GetLastErrorString, "cudnnGetLastErrorString");
  sym(a.Create, "cudnnCreate");
  sym(a.SetStream, "cudnnSetStream");
  sym(a.CreateDescriptor, "cudnnBackendCreateDescriptor");
  sym(a.DestroyDescriptor, "cudnnBackendDestroyDescriptor");
  sym(a.SetAttribute, "cudnnBackendSetAttribute");
  sym(a.GetAttribute, "cudnnBackendGetAttribute");
  sym(a.Finalize, "cudnnBackendFinalize");
  sym(a.Execute, "cudnnBackendExecute");
  if (!lib.missing.empty()) {
    a.error = fmt::format("{} lacks {}", a.file, lib.missing);
    return a;
  }
  a.version = int64_t(a.GetVersion());
  if (a.version / 10000 != CUDNN_MAJOR)
    a.error = fmt::format("{} is cuDNN {}, attnprof was built against cuDNN {} headers", a.file, a.version,
                          CUDNN_VERSION);
  return a;  // the library stays loaded for the life of the process
}

const Api& api() {
  static const Api a = load();
  return a;
}

const Api& loaded_api() {
  const Api& a = api();
  if (!a.error.empty()) ATTNPROF_FAIL("cuDNN unavailable: {}", a.error);
  return a;
}

// "CUDNN_STATUS_BAD_PARAM (2000): <cuDNN's last message>"
std::string status_text(cudnnStatus_t s) {
  const Api& a = api();
  std::string t = fmt::format("{} ({})", a.GetErrorString ? a.GetErrorString(s) : "cuDNN status", int(s));
  if (a.GetLastErrorString) {
    char msg[1024] = {0};
    a.GetLastErrorString(msg, sizeof msg);
    if (msg[0]) t += fmt::format(": {}", msg);
  }
  return t;
}

}  // namespace

#define ATTNPROF_CUDNN_CHECK(expr, what)                                                             \
  do {                                                                                               \
    const cudnnStatus_t attnprof_cs_ = (expr);                                                       \
    if (attnprof_cs_ != CUDNN_STATUS_SUCCESS)                                                        \
      ATTNPROF_FAIL("cuDNN: {} failed: {} [{}]", what, status_text(attnprof_cs_), #expr);           \
  } while (0)

std::optional<std::string> library_unavailable() {
  if (!api().error.empty()) return api().error;
  return std::nullopt;
}
std::string library_file() { return api().error.empty() ? api().file : std::string(); }
int64_t library_version() { return api().error.empty() ? api().version : 0; }

// ---- descriptors ----------------------------------------------------------------------------------------
class Descriptor {
 public:
  Descriptor(cudnnBackendDescriptorType_t type, std::string what) : what_(std::move(what)) {
    ATTNPROF_CUDNN_CHECK(loaded_api().CreateDescriptor(type, &d_), "creating the descriptor of " + what_);
  }
  ~Descriptor() {
    if (d_) (void)api().DestroyDescriptor(d_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  const std::string& what() const { return what_; }

  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n, const void* values) {
    ATTNPROF_CUDNN_CHECK(api().SetAttribute(d_, name, type, n, values),
                         fmt::format("setting attribute {} of {}", int(name), what_));
  }
  void set_i64(cudnnBackendAttributeName_t name, int64_t v) { set(name, CUDNN_TYPE_INT64, 1, &v); }
  void set_i64s(cudnnBackendAttributeName_t name, const std::array<int64_t, 4>& v) {
    set(name, CUDNN_TYPE_INT64, int64_t(v.size()), v.data());
  }
  void set_bool(cudnnBackendAttributeName_t name, bool v) { set(name, CUDNN_TYPE_BOOLEAN, 1, &v); }
  void set_dtype(cudnnBackendAttributeName_t name, cudnnDataType_t v) { set(name, CUDNN_TYPE_DATA_TYPE, 1, &v); }
  void set_desc(cudnnBackendAttributeName_t name, const Descriptor& d) {
    cudnnBackendDescriptor_t raw = d.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  void finalize() { ATTNPROF_CUDNN_CHECK(api().Finalize(d_), "finalizing " + what_); }
  cudnnStatus_t try_finalize() { return api().Finalize(d_); }
  int64_t get_i64(cudnnBackendAttributeName_t name) const {
    int64_t v = -1, n = 0;
    ATTNPROF_CUDNN_CHECK(api().GetAttribute(d_, name, CUDNN_TYPE_INT64, 1, &n, &v),
                         fmt::format("reading attribute {} of {}", int(name), what_));
    return v;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string what_;
};

// ---- layer 1: the graph as data -------------------------------------------------------------------------
std::string_view dt_name(Dt t) {
  switch (t) {
    case Dt::F32: return "fp32";
    case Dt::BF16: return "bf16";
    case Dt::F16: return "fp16";
    case Dt::I32: return "int32";
    case Dt::Bool: return "bool";
  }
  return "?";
}

namespace {

cudnnDataType_t to_cudnn(Dt t) {
  switch (t) {
    case Dt::F32: return CUDNN_DATA_FLOAT;
    case Dt::BF16: return CUDNN_DATA_BFLOAT16;
    case Dt::F16: return CUDNN_DATA_HALF;
    case Dt::I32: return CUDNN_DATA_INT32;
    case Dt::Bool: return CUDNN_DATA_BOOLEAN;
  }
  return CUDNN_DATA_FLOAT;
}

cudnnPointwiseMode_t to_cudnn(Pw m) {
  switch (m) {
    case Pw::Mul: return CUDNN_POINTWISE_MUL;
    case Pw::Add: return CUDNN_POINTWISE_ADD;
    case Pw::Sub: return CUDNN_POINTWISE_SUB;
    case Pw::Div: return CUDNN_POINTWISE_DIV;
    case Pw::Exp: return CUDNN_POINTWISE_EXP;
    case Pw::Log: return CUDNN_POINTWISE_LOG;
    case Pw::GenIndex: return CUDNN_POINTWISE_GEN_INDEX;
    case Pw::CmpGe: return CUDNN_POINTWISE_CMP_GE;
    case Pw::BinarySelect: return CUDNN_POINTWISE_BINARY_SELECT;
  }
  return CUDNN_POINTWISE_IDENTITY;
}

std::array<int64_t, 4> contiguous(const std::array<int64_t, 4>& d) {
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

}  // namespace

std::string SdpaLowering::str() const {
  return fmt::format("{}, {} index", stats ? "lse output" : "virtual lse", dt_name(index_compute));
}

// The lse as an output first (useful, and validated against the reference); the index precision
// cudnn-frontend's padding and ALiBi masks use (int32) first, then the float compute its diagonal-band mask
// inherits from the graph.
std::vector<SdpaLowering> sdpa_lowerings() {
  return {{true, Dt::I32}, {true, Dt::F32}, {false, Dt::I32}, {false, Dt::F32}};
}

const TensorDesc& SdpaGraphDesc::tensor(int64_t uid) const {
  for (const TensorDesc& t : tensors)
    if (t.uid == uid) return t;
  ATTNPROF_FAIL("the SDPA graph has no tensor with uid {}", uid);
}

const TensorDesc* SdpaGraphDesc::find(std::string_view name) const {
  for (const TensorDesc& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::optional<std::string> sdpa_shape_unsupported(const AttnProblem& p) {
  if (!is_half(p.dtype))
    return fmt::format("cuDNN's fused attention takes bf16 or fp16 q/k/v (got {}; sdpa-math covers fp32)",
                       dtype_name(p.dtype));
  if (p.mask != MaskKind::None && p.mask != MaskKind::Causal)
    return fmt::format("an explicit {} attn_mask is not lowered to the cuDNN graph (is_causal and no mask are)",
                       mask_kind_name(p.mask));
  if (p.D > 128 || p.D % 8 != 0)
    return fmt::format("cuDNN's fused attention needs head dim <= 128 and a multiple of 8 (got {})", p.D);
  if (p.Hkv <= 0 || p.Hq % p.Hkv != 0)
    return fmt::format("query heads ({}) must be a multiple of key/value heads ({})", p.Hq, p.Hkv);
  if (p.Nq >= (int64_t(1) << 31) || p.Nk >= (int64_t(1) << 31))
    return std::string("sequence lengths of 2^31 or more exceed the int32 indices of the causal mask");
  return std::nullopt;
}

SdpaGraphDesc describe_sdpa(const AttnProblem& p, const SdpaLowering& l) {
  if (auto why = sdpa_shape_unsupported(p)) ATTNPROF_FAIL("no cuDNN SDPA graph for {}: {}", p.str(), *why);
  const int64_t b = p.B, hq = p.Hq, hk = p.Hkv, sq = p.Nq, sk = p.Nk, d = p.D;
  const bool causal = p.mask == MaskKind::Causal;
  SdpaGraphDesc g;
  auto add = [&](int64_t uid, std::string name, std::array<int64_t, 4> dims, std::array<int64_t, 4> strides, Dt t,
                 bool is_virtual = false, bool by_value = false) {
    g.tensors.push_back(TensorDesc{uid, std::move(name), dims, strides, t, is_virtual, by_value});
    return uid;
  };
  // Bound at execution. K is [b, hkv, sk, d] in memory; the graph reads it as Kᵀ [b, hkv, d, sk].
  const Dt io = p.dtype == DType::F16 ? Dt::F16 : Dt::BF16;  // Q, K, V, O and the probabilities P
  const int64_t q = add(kUidQ, "Q", {b, hq, sq, d}, contiguous({b, hq, sq, d}), io);
  const int64_t k = add(kUidK, "K^T", {b, hk, d, sk}, {hk * sk * d, sk * d, 1, d}, io);
  const int64_t v = add(kUidV, "V", {b, hk, sk, d}, contiguous({b, hk, sk, d}), io);
  const int64_t o = add(kUidO, "O", {b, hq, sq, d}, contiguous({b, hq, sq, d}), io);
  const std::array<int64_t, 4> full{b, hq, sq, sk}, per_row{b, hq, sq, 1}, scalar{1, 1, 1, 1};
  if (l.stats) add(kUidStats, "lse", per_row, contiguous(per_row), Dt::F32);
  const int64_t scale = add(kUidScale, "attn_scale", scalar, scalar, Dt::F32, false, true);
  const int64_t neg_inf = causal ? add(kUidNegInf, "-inf", scalar, scalar, Dt::F32, false, true) : 0;

  int64_t next = kFirstVirtualUid;
  auto virt = [&](std::string name, const std::array<int64_t, 4>& dims, Dt t) {
    return add(next++, std::move(name), dims, contiguous(dims), t, true);
  };
  auto pointwise = [&](std::string name, Pw mode, int64_t x, int64_t bb, int64_t y, Dt compute = Dt::F32) {
    NodeDesc n;
    n.name = std::move(name);
    n.kind = NodeKind::Pointwise;
    n.pw = mode;
    n.compute = compute;
    n.x = x;
    n.b = bb;
    n.y = y;
    g.nodes.push_back(n);
    return y;
  };
  auto matmul = [&](std::string name, int64_t a, int64_t bb, int64_t c) {
    NodeDesc n;
    n.name = std::move(name);
    n.kind = NodeKind::Matmul;
    n.x = a;
    n.b = bb;
    n.y = c;
    g.nodes.push_back(n);
  };
  auto reduction = [&](std::string name, Red mode, int64_t x, int64_t y) {
    NodeDesc n;
    n.name = std::move(name);
    n.kind = NodeKind::Reduction;
    n.red = mode;
    n.x = x;
    n.y = y;
    g.nodes.push_back(n);
    return y;
  };

  const int64_t s = virt("S", full, Dt::F32);
  matmul("bmm1", q, k, s);
  int64_t last = pointwise("attn_scale", Pw::Mul, s, scale, virt("S*scale", full, Dt::F32));
  if (causal) {
    // Top-left causal (query i sees keys j <= i): keep where row >= col, else -inf.
    const int64_t row = virt("row", full, Dt::I32), col = virt("col", full, Dt::I32);
    pointwise("gen_row_index", Pw::GenIndex, last, 0, row, l.index_compute);
    g.nodes.back().axis = 2;
    pointwise("gen_col_index", Pw::GenIndex, last, 0, col, l.index_compute);
    g.nodes.back().axis = 3;
    const int64_t keep = pointwise("row>=col", Pw::CmpGe, row, col, virt("row>=col", full, Dt::Bool), Dt::Bool);
    last = pointwise("causal_select", Pw::BinarySelect, last, neg_inf, virt("S masked", full, Dt::F32));
    g.nodes.back().t = keep;
  }
  const int64_t m = reduction("max", Red::Max, last, virt("M", per_row, Dt::F32));
  const int64_t sub = pointwise("sub", Pw::Sub, last, m, virt("S-M", full, Dt::F32));
  const int64_t e = pointwise("exp", Pw::Exp, sub, 0, virt("exp(S-M)", full, Dt::F32));
  const int64_t z = reduction("sum", Red::Add, e, virt("Z", per_row, Dt::F32));
  // lse = M + log Z. The fused engines match the softmax only with this tail present: without a bound lse
  // output it goes to a virtual tensor (cudnn-frontend does the same for inference).
  const int64_t log_z = pointwise("log", Pw::Log, z, 0, virt("log Z", per_row, Dt::F32));
  pointwise("lse", Pw::Add, m, log_z, l.stats ? kUidStats : virt("lse", per_row, Dt::F32));
  // P in the I/O type: the fused engine feeds it to the second tensor-core GEMM.
  const int64_t pr = pointwise("div", Pw::Div, e, z, virt("P", full, io));
  matmul("bmm2", pr, v, o);
  return g;
}

// ---- layer 2: backend descriptors -----------------------------------------------------------------------
BackendGraph::BackendGraph(const SdpaGraphDesc& g, void* handle) {
  std::map<int64_t, const Descriptor*> by_uid;
  auto own = [&](cudnnBackendDescriptorType_t type, std::string what) -> Descriptor& {
    owned_.push_back(std::make_unique<Descriptor>(type, std::move(what)));
    return *owned_.back();
  };
  for (const TensorDesc& t : g.tensors) {
    Descriptor& d = own(CUDNN_BACKEND_TENSOR_DESCRIPTOR, fmt::format("tensor '{}' (uid {})", t.name, t.uid));
    d.set_dtype(CUDNN_ATTR_TENSOR_DATA_TYPE, to_cudnn(t.dtype));
    d.set_i64s(CUDNN_ATTR_TENSOR_DIMENSIONS, t.dims);
    d.set_i64s(CUDNN_ATTR_TENSOR_STRIDES, t.strides);
    d.set_i64(CUDNN_ATTR_TENSOR_UNIQUE_ID, t.uid);
    d.set_i64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, kAlignment);
    d.set_bool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, t.is_virtual);
    if (t.by_value) d.set_bool(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true);
    d.finalize();
    by_uid[t.uid] = &d;
    ++tensors_;
  }
  auto tensor = [&](int64_t uid, const std::string& node) -> const Descriptor& {
    auto it = by_uid.find(uid);
    ATTNPROF_CHECK(it != by_uid.end(), "node '{}' names tensor uid {} that the graph lacks", node, uid);
    return *it->second;
  };
  std::vector<cudnnBackendDescriptor_t> ops;
  for (const NodeDesc& n : g.nodes) {
    const std::string what = fmt::format("node '{}'", n.name);
    if (n.kind == NodeKind::Matmul) {
      Descriptor& mm = own(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul descriptor of " + what);
      mm.set_dtype(CUDNN_ATTR_MATMUL_COMP_TYPE, to_cudnn(n.compute));
      mm.finalize();
      Descriptor& op = own(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
      op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, tensor(n.x, n.name));
      op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, tensor(n.b, n.name));
      op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, tensor(n.y, n.name));
      op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
      op.finalize();
      ops.push_back(op.get());
    } else if (n.kind == NodeKind::Reduction) {
      Descriptor& rd = own(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction descriptor of " + what);
      const cudnnReduceTensorOp_t mode = n.red == Red::Max ? CUDNN_REDUCE_TENSOR_MAX : CUDNN_REDUCE_TENSOR_ADD;
      rd.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
      rd.set_dtype(CUDNN_ATTR_REDUCTION_COMP_TYPE, to_cudnn(n.compute));
      rd.finalize();
      Descriptor& op = own(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
      op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, tensor(n.x, n.name));
      op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, tensor(n.y, n.name));
      op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd);
      op.finalize();
      ops.push_back(op.get());
    } else {
      Descriptor& pw = own(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise descriptor of " + what);
      const cudnnPointwiseMode_t mode = to_cudnn(n.pw);
      pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
      pw.set_dtype(CUDNN_ATTR_POINTWISE_MATH_PREC, to_cudnn(n.compute));
      if (n.pw == Pw::GenIndex) pw.set_i64(CUDNN_ATTR_POINTWISE_AXIS, n.axis);
      pw.finalize();
      Descriptor& op = own(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
      op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
      op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, tensor(n.x, n.name));
      if (n.b) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, tensor(n.b, n.name));
      if (n.t) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, tensor(n.t, n.name));
      op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, tensor(n.y, n.name));
      op.finalize();
      ops.push_back(op.get());
    }
    ++nodes_;
  }
  Descriptor& graph = own(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "the operation graph");
  if (handle) {
    cudnnHandle_t h = static_cast<cudnnHandle_t>(handle);
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  }
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops.size()), ops.data());
  graph.finalize();
  graph_ = graph.get();
}

BackendGraph::~BackendGraph() {
  // The graph refers to the nodes and the nodes to the tensors: destroy in reverse order of creation.
  while (!owned_.empty()) owned_.pop_back();
}

void* BackendGraph::op_graph() const { return graph_; }

int64_t BackendGraph::engine_global_count() const {
  int64_t v = -1, n = 0;
  if (api().GetAttribute(graph_, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &n, &v) !=
      CUDNN_STATUS_SUCCESS)
    return -1;
  return v;
}

// ---- layer 3: plan and execution ------------------------------------------------------------------------
namespace {

// One handle, bound to the backend's stream, created on first use and kept for the process (like cuBLAS's).
cudnnHandle_t handle() {
  static const cudnnHandle_t h = [] {
    const Api& a = loaded_api();
    cudnnHandle_t hh = nullptr;
    ATTNPROF_CUDNN_CHECK(a.Create(&hh), "cudnnCreate");
    ATTNPROF_CUDNN_CHECK(a.SetStream(hh, detail::stream()), "binding the handle to the backend's stream");
    return hh;
  }();
  return h;
}

std::string_view heur_name(cudnnBackendHeurMode_t m) {
  switch (m) {
    case CUDNN_HEUR_MODE_A: return "A";
    case CUDNN_HEUR_MODE_B: return "B";
    case CUDNN_HEUR_MODE_FALLBACK: return "FALLBACK";
    default: return "?";
  }
}

int64_t engine_index(const Descriptor& cfg) {
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "an engine");
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t n = 0;
  if (api().GetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &raw) !=
      CUDNN_STATUS_SUCCESS)
    return -1;
  int64_t idx = -1;
  if (api().GetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &idx) !=
      CUDNN_STATUS_SUCCESS)
    return -1;
  return idx;
}

std::string clipped(std::string s, size_t n = 240) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

// What plans are built for: the device behind a handle, or a GPU described by a device-properties descriptor.
struct Target {
  cudnnHandle_t handle = nullptr;
  const Descriptor* device = nullptr;
};

// Heuristics A, B and FALLBACK on the graph, then an execution plan per engine they return (each engine once),
// until one finalizes or max_plans were tried (0: heuristics only). Every step goes to the log, labelled;
// returns the finalized plan, if any.
std::unique_ptr<Descriptor> search(const BackendGraph& graph, const std::string& label, Target target, int max_plans,
                                   std::vector<EngineTry>& log) {
  std::vector<int64_t> seen;
  int plans = 0;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK}) {
    if (max_plans > 0 && plans >= max_plans) break;
    EngineTry base;
    base.lowering = label;
    base.heuristics = std::string(heur_name(mode));
    Descriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, fmt::format("heuristics mode {}", base.heuristics));
    cudnnBackendDescriptor_t g = graph.op_graph();
    heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
    heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (target.device) heur.set_desc(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, *target.device);
    if (const cudnnStatus_t st = heur.try_finalize(); st != CUDNN_STATUS_SUCCESS) {
      base.status = int(st);
      base.message = clipped("heuristics: " + status_text(st));
      log.push_back(base);
      continue;
    }
    int64_t count = 0;
    ATTNPROF_CUDNN_CHECK(api().GetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
                         "counting the heuristics' engine configs");
    std::vector<std::unique_ptr<Descriptor>> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      cfgs.push_back(std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "an engine config"));
      raw.push_back(cfgs.back()->get());
    }
    // The heuristics drop the configs whose engine rejects the graph while they are read.
    int64_t returned = 0;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    if (count > 0)
      st = api().GetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                              &returned, raw.data());
    base.configs = returned;
    if (max_plans == 0 && st == CUDNN_STATUS_SUCCESS) {  // heuristics only
      base.message = fmt::format("{} of {} proposed configs pass the engines' support checks", returned, count);
      log.push_back(base);
      continue;
    }
    if (st != CUDNN_STATUS_SUCCESS || returned == 0) {
      base.status = int(st != CUDNN_STATUS_SUCCESS ? st : CUDNN_STATUS_NOT_SUPPORTED);
      base.message = clipped(fmt::format("{} configs proposed, none passed the engines' support checks: {}", count,
                                         status_text(CUDNN_STATUS_NOT_SUPPORTED)),
                             400);
      log.push_back(base);
      continue;
    }
    for (int64_t i = 0; i < returned && plans < max_plans; ++i) {
      EngineTry t = base;
      t.engine = engine_index(*cfgs[size_t(i)]);
      if (t.engine >= 0 && std::find(seen.begin(), seen.end(), t.engine) != seen.end()) continue;
      seen.push_back(t.engine);
      ++plans;
      auto plan = std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                               fmt::format("the execution plan of engine {}", t.engine));
      if (target.handle) {
        cudnnHandle_t hh = target.handle;
        plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &hh);
      }
      if (target.device) plan->set_desc(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, *target.device);
      plan->set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *cfgs[size_t(i)]);
      st = plan->try_finalize();
      t.status = int(st);
      t.message = st == CUDNN_STATUS_SUCCESS ? fmt::format("config {} of {}", i + 1, returned) : clipped(status_text(st));
      log.push_back(t);
      if (st == CUDNN_STATUS_SUCCESS) return plan;
    }
  }
  return nullptr;
}

std::string format_tries(const std::vector<EngineTry>& log) {
  std::string s;
  for (const EngineTry& t : log) {
    s += s.empty() ? "" : "; ";
    s += t.engine >= 0 ? fmt::format("[{}] heuristics {} engine {}: {}", t.lowering, t.heuristics, t.engine, t.message)
                       : fmt::format("[{}] heuristics {}: {}", t.lowering, t.heuristics, t.message);
  }
  return s;
}

}  // namespace

// ---- deviceless checks ----------------------------------------------------------------------------------
std::string GpuSpec::json() const {
  return fmt::format(
      R"({{"driverVer":13000,"deviceVer":{},"cudaDeviceId":0,"totalGlobalMem":{},"maxGridSize":[2147483647,65535,65535],)"
      R"("maxBlockSize":[1024,1024,64],"regsPerBlock":65536,"multiProcessorCount":{},"warpSize":32,)"
      R"("maxSharedMemoryPerBlock":49152,"maxSharedMemoryPerBlockOptin":{},"reservedSharedMemoryPerBlock":1024,)"
      R"("maxRegistersPerSM":65536,"maxCtasPerSM":32,"maxThreadsPerBlock":1024,"maxThreadsPerSM":2048,)"
      R"("pciDeviceId":0,"isTccDriver":0,"supportCoopLaunch":1,"smClockRateKHz":{},"memClockRateKHz":{},)"
      R"("l2CacheSize":{},"deviceName":"{}"}})",
      cc * 10, memory_bytes, sms, smem_optin, sm_clock_khz, mem_clock_khz, l2_bytes, name);
}

GpuSpec gpu_a100() {
  return GpuSpec{"NVIDIA A100-SXM4-80GB", 80, 108, 85196873728, 166912, 41943040, 1410000, 1593000};
}
GpuSpec gpu_h100() {
  return GpuSpec{"NVIDIA H100 80GB HBM3", 90, 132, 85520809984, 232448, 52428800, 1980000, 2619000};
}

std::vector<EngineTry> try_engines_deviceless(const SdpaGraphDesc& g, const GpuSpec& gpu, int max_plans,
                                              const std::string& label) {
  const std::string js = gpu.json();
  Descriptor device(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, "the device properties of " + gpu.name);
  device.set(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, int64_t(js.size()), js.data());
  device.finalize();
  BackendGraph graph(g, nullptr);
  std::vector<EngineTry> log;
  search(graph, label, Target{nullptr, &device}, max_plans, log);
  return log;
}

// ---- the plan -------------------------------------------------------------------------------------------
SdpaPlan::~SdpaPlan() = default;

std::shared_ptr<const SdpaPlan> SdpaPlan::build(const AttnProblem& p, std::string* why) {
  if (auto bad = sdpa_shape_unsupported(p)) {
    if (why) *why = *bad;
    return nullptr;
  }
  const cudnnHandle_t h = handle();
  std::vector<EngineTry> log;
  for (const SdpaLowering& l : sdpa_lowerings()) {
    if (p.mask != MaskKind::Causal && l.index_compute != Dt::I32) continue;  // no index nodes: same graph
    std::unique_ptr<BackendGraph> graph;
    try {
      graph = std::make_unique<BackendGraph>(describe_sdpa(p, l), h);
    } catch (const Error& e) {
      log.push_back(EngineTry{l.str(), "-", -1, 0, -1, clipped(std::string("graph: ") + e.what())});
      continue;
    }
    const size_t first = log.size();
    // A few engines per lowering: each finalize compiles a kernel (about a second), and when every one fails
    // alike (a library missing on the machine), trying all of them in every lowering for every problem would
    // spend minutes saying the same thing.
    constexpr int kPlansPerLowering = 4;
    std::unique_ptr<Descriptor> plan = search(*graph, l.str(), Target{h, nullptr}, kPlansPerLowering, log);
    if (!plan) continue;
    const EngineTry& chosen = log.back();
    std::shared_ptr<SdpaPlan> r(new SdpaPlan);
    r->p_ = p;
    r->lowering_ = l;
    r->graph_ = std::move(graph);
    r->plan_ = std::move(plan);
    r->workspace_ = r->plan_->get_i64(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE);
    r->engine_ = fmt::format("engine {} (heuristics {}, {}; {} plan(s) tried)", chosen.engine, chosen.heuristics,
                             chosen.message, log.size() - first);
    r->scale_ = float(p.effective_scale());
    // The causal fill: the most negative finite float, as cudnn-frontend passes to these engines. With -inf a
    // row whose first tile is all masked would compute exp(-inf - (-inf)) = NaN in an engine that does not
    // guard it; a finite fill gives weights the next tile's rescale zeroes (and exp underflows to 0 anyway).
    r->neg_inf_ = std::numeric_limits<float>::lowest();
    return r;
  }
  if (why) {
    int plans = 0;
    for (const EngineTry& t : log) plans += t.engine >= 0;
    *why = fmt::format("cuDNN {} found no engine for {} (tried {} configs: {})", api().version, p.str(), plans,
                       log.empty() ? "none proposed" : format_tries(log));
  }
  return nullptr;
}

std::string SdpaPlan::describe() const {
  return fmt::format("{}, {}, workspace {} B", engine_, lowering_.str(), workspace_);
}

void SdpaPlan::execute(const void* q, const void* k, const void* v, void* o, float* lse, void* workspace) const {
  std::vector<int64_t> uids{kUidQ, kUidK, kUidV, kUidO, kUidScale};
  std::vector<void*> ptrs{const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), o,
                          const_cast<float*>(&scale_)};
  if (p_.mask == MaskKind::Causal) {
    uids.push_back(kUidNegInf);
    ptrs.push_back(const_cast<float*>(&neg_inf_));
  }
  if (lowering_.stats) {
    ATTNPROF_CHECK(lse, "the cuDNN SDPA plan writes lse: pass its buffer");
    uids.push_back(kUidStats);
    ptrs.push_back(lse);
  }
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "the variant pack");
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()), ptrs.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  ATTNPROF_CUDNN_CHECK(api().Execute(handle(), plan_->get(), pack.get()), "executing the SDPA plan");
}

// ---- the sdpa-cudnn variant -----------------------------------------------------------------------------
namespace {

struct CacheEntry {
  std::shared_ptr<const SdpaPlan> plan;
  std::string why;
};

std::string cache_key(const AttnProblem& p) {
  return fmt::format("{} {} {} {} {} {} {} {} {}", p.B, p.Hq, p.Hkv, p.Nq, p.Nk, p.D, int(p.dtype), int(p.mask),
                     p.effective_scale());
}

// Plans by problem, built once. Never destroyed: descriptors must not outlive the CUDA context at exit.
CacheEntry cached_plan(const AttnProblem& p) {
  static std::mutex* m = new std::mutex;
  static auto* cache = new std::map<std::string, CacheEntry>;
  std::lock_guard<std::mutex> lock(*m);
  const std::string key = cache_key(p);
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  CacheEntry e;
  try {
    e.plan = SdpaPlan::build(p, &e.why);
  } catch (const Error& err) {
    e.why = err.what();
  }
  if (cache->size() >= 64) cache->clear();  // a sweep over many shapes: plans are cheap to rebuild
  cache->emplace(key, e);
  return e;
}

class SdpaCudnnRunner final : public DeviceRunner {
 public:
  SdpaCudnnRunner(const AttnProblem& p, std::shared_ptr<const SdpaPlan> plan) : p_(p), plan_(std::move(plan)) {
    ws_bytes_ = size_t(plan_->workspace_bytes());
    if (ws_bytes_ > 0) ws_ = device_alloc(ws_bytes_);
  }
  ~SdpaCudnnRunner() override { device_free(ws_, ws_bytes_); }

  DeviceOutput run_device(const DeviceTensor& q, const DeviceTensor& k, const DeviceTensor& v) override {
    NvtxRange nv("sdpa_fwd");
    ATTNPROF_ZONE_AS(z, "scaled_dot_product_attention", "cpu_op");
    ATTNPROF_ZONE_AS(zc, "_scaled_dot_product_cudnn_attention", "cpu_op");
    const Shape4 qs{p_.B, p_.Hq, p_.Nq, p_.D}, ks{p_.B, p_.Hkv, p_.Nk, p_.D};
    ATTNPROF_CHECK(q.shape() == qs && k.shape() == ks && v.shape() == ks,
                   "sdpa-cudnn was prepared for q {}, k/v {}; got q {}, k {}, v {}", shape_str(qs), shape_str(ks),
                   shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
    ATTNPROF_CHECK(q.dtype() == p_.dtype && k.dtype() == p_.dtype && v.dtype() == p_.dtype,
                   "sdpa-cudnn was prepared for {} q, k, v; got {}, {}, {}", dtype_name(p_.dtype), dtype_name(q.dtype()),
                   dtype_name(k.dtype()), dtype_name(v.dtype()));
    zc.add_shape(q.shape(), dtype_name(q.dtype()).data());
    zc.add_shape(k.shape(), dtype_name(k.dtype()).data());
    zc.add_shape(v.shape(), dtype_name(v.dtype()).data());
    zc.set_cost(detail::fused_cost(p_, detail::kCudnnBlockRows));
    DeviceOutput out;
    out.out = DeviceTensor::empty(qs, p_.dtype);
    if (plan_->lowering().stats) out.lse = DeviceTensor::empty({p_.B, p_.Hq, p_.Nq, 1}, DType::F32);
    plan_->execute(q.raw(), k.raw(), v.raw(), out.out.raw(), out.lse.defined() ? out.lse.data<float>() : nullptr,
                   ws_);
    detail::check_launch("the cuDNN SDPA forward");
    return out;
  }

 private:
  AttnProblem p_;
  std::shared_ptr<const SdpaPlan> plan_;
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0;
};

}  // namespace

std::optional<std::string> sdpa_unsupported(const AttnProblem& p) {
  if (auto why = sdpa_shape_unsupported(p)) return why;
  if (auto why = library_unavailable()) return why;
  const CacheEntry e = cached_plan(p);
  if (!e.plan) return e.why;
  return std::nullopt;
}

std::string sdpa_plan_description(const AttnProblem& p) {
  if (auto why = sdpa_unsupported(p)) return "no plan: " + *why;
  return cached_plan(p).plan->describe();
}

std::unique_ptr<DeviceRunner> make_sdpa_runner(const AttnProblem& p, const AttnOptions& o) {
  (void)o;  // is_causal and the scale are already in p
  if (auto why = sdpa_shape_unsupported(p)) ATTNPROF_FAIL("sdpa-cudnn cannot run {}: {}", p.str(), *why);
  if (auto why = library_unavailable()) ATTNPROF_FAIL("sdpa-cudnn cannot run: {}", *why);
  const CacheEntry e = cached_plan(p);
  if (!e.plan) ATTNPROF_FAIL("sdpa-cudnn cannot run: {}", e.why);
  return std::make_unique<SdpaCudnnRunner>(p, e.plan);
}

}  // namespace attnprof::cuda::cudnn
