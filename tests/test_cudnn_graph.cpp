// The sdpa-cudnn graph without a GPU: the tensors and nodes describe_sdpa() lays out (dims, strides, uids,
// types, topology); where libcudnn loads, every backend descriptor and the operation graph finalized by cuDNN
// itself on the host; and, through device-properties descriptors of an A100 and an H100 (cuDNN >= 9.8), the
// fused attention engines' own support checks and code generation for the graph. Only loading the generated
// kernel and running it need a device: tests/test_cuda.cpp checks the numbers there.
#include <gtest/gtest.h>

#if defined(ATTNPROF_HAVE_CUDNN)

#include <dlfcn.h>

#include <map>
#include <set>

#include <fmt/format.h>

#include "attnprof/error.h"
#include "cuda/cudnn_sdpa.h"

using namespace attnprof;
using namespace attnprof::cuda::cudnn;

namespace {

AttnProblem problem(int64_t b, int64_t hq, int64_t hkv, int64_t nq, int64_t nk, int64_t d, MaskKind m) {
  AttnProblem p;
  p.B = b;
  p.Hq = hq;
  p.Hkv = hkv;
  p.Nq = nq;
  p.Nk = nk;
  p.D = d;
  p.dtype = DType::BF16;
  p.mask = m;
  return p;
}

AttnProblem blog() { return problem(8, 16, 16, 1024, 1024, 64, MaskKind::Causal); }
AttnProblem ragged_gqa() { return problem(2, 8, 2, 100, 37, 128, MaskKind::None); }
AttnProblem blog_fp16() {
  AttnProblem p = blog();
  p.dtype = DType::F16;
  return p;
}

using A4 = std::array<int64_t, 4>;

const NodeDesc& node(const SdpaGraphDesc& g, std::string_view name) {
  for (const NodeDesc& n : g.nodes)
    if (n.name == name) return n;
  ADD_FAILURE() << "no node " << name;
  static const NodeDesc none;
  return none;
}

std::vector<std::string> node_names(const SdpaGraphDesc& g) {
  std::vector<std::string> r;
  for (const NodeDesc& n : g.nodes) r.push_back(n.name);
  return r;
}

// Every uid unique; the bound tensors below kFirstVirtualUid and real, the rest virtual; each virtual tensor
// produced by exactly one node before any node reads it, and read at least once; bound outputs (O, lse)
// produced once, bound inputs never.
void check_topology(const SdpaGraphDesc& g) {
  std::set<int64_t> uids;
  for (const TensorDesc& t : g.tensors) {
    EXPECT_TRUE(uids.insert(t.uid).second) << "duplicate uid " << t.uid;
    EXPECT_EQ(t.is_virtual, t.uid >= kFirstVirtualUid) << t.name;
    EXPECT_FALSE(t.is_virtual && t.by_value) << t.name;
    // Head dim contiguous in every bound tensor (Kᵀ's head dim is its dim 2); row-major everywhere else.
    EXPECT_EQ(t.uid == kUidK ? t.strides[2] : t.strides[3], 1) << t.name;
  }
  std::set<int64_t> ready, produced;
  std::map<int64_t, int> reads;
  for (const TensorDesc& t : g.tensors)
    if (!t.is_virtual && t.uid != kUidO && t.uid != kUidStats) ready.insert(t.uid);
  for (const NodeDesc& n : g.nodes) {
    for (int64_t in : {n.x, n.b, n.t}) {
      if (!in) continue;
      EXPECT_TRUE(ready.count(in)) << n.name << " reads uid " << in << " before it exists";
      ++reads[in];
    }
    ASSERT_NE(n.y, 0) << n.name;
    EXPECT_TRUE(produced.insert(n.y).second) << "uid " << n.y << " produced twice";
    EXPECT_FALSE(n.y == kUidQ || n.y == kUidK || n.y == kUidV || n.y == kUidScale || n.y == kUidNegInf) << n.name;
    ready.insert(n.y);
  }
  for (const TensorDesc& t : g.tensors) {
    if (t.is_virtual) {
      EXPECT_TRUE(produced.count(t.uid)) << t.name << " is never produced";
      if (t.name != "lse") EXPECT_GT(reads[t.uid], 0) << t.name << " is never read";  // a virtual lse is a sink
    }
  }
  EXPECT_TRUE(produced.count(kUidO));
}

// A [.., M, K] × B [.., K, N] = C [.., M, N], batch dims equal or B's heads a divisor of A's (GQA).
void check_matmul(const SdpaGraphDesc& g, const NodeDesc& n) {
  const TensorDesc &a = g.tensor(n.x), &b = g.tensor(n.b), &c = g.tensor(n.y);
  EXPECT_EQ(a.dims[3], b.dims[2]) << n.name << ": inner dims";
  EXPECT_EQ(c.dims[2], a.dims[2]) << n.name << ": M";
  EXPECT_EQ(c.dims[3], b.dims[3]) << n.name << ": N";
  EXPECT_EQ(a.dims[0], b.dims[0]) << n.name;
  EXPECT_EQ(c.dims[0], a.dims[0]) << n.name;
  EXPECT_EQ(c.dims[1], a.dims[1]) << n.name;
  EXPECT_EQ(a.dims[1] % b.dims[1], 0) << n.name << ": heads";
  EXPECT_EQ(n.compute, Dt::F32) << n.name << ": fp32 accumulation";
}

}  // namespace

// ---- layer 1: the graph as data (no library) ----------------------------------------------------------
TEST(CudnnGraph, BlogShapeCausalTensors) {
  const SdpaGraphDesc g = describe_sdpa(blog());
  const TensorDesc& q = g.tensor(kUidQ);
  EXPECT_EQ(q.dims, (A4{8, 16, 1024, 64}));
  EXPECT_EQ(q.strides, (A4{16 * 1024 * 64, 1024 * 64, 64, 1}));
  EXPECT_EQ(q.dtype, Dt::BF16);
  // K stays [8,16,1024,64] contiguous in memory; the graph reads Kᵀ [8,16,64,1024] through swapped strides:
  // element (b,h,d,s) of Kᵀ is at b·H·N·D + h·N·D + s·D + d, where K (b,h,s,d) is.
  const TensorDesc& k = g.tensor(kUidK);
  EXPECT_EQ(k.dims, (A4{8, 16, 64, 1024}));
  EXPECT_EQ(k.strides, (A4{16 * 1024 * 64, 1024 * 64, 1, 64}));
  EXPECT_EQ(g.tensor(kUidV).dims, (A4{8, 16, 1024, 64}));
  EXPECT_EQ(g.tensor(kUidV).strides, q.strides);
  EXPECT_EQ(g.tensor(kUidO).dims, q.dims);
  EXPECT_EQ(g.tensor(kUidO).strides, q.strides);
  for (int64_t uid : {kUidQ, kUidK, kUidV, kUidO}) {
    EXPECT_FALSE(g.tensor(uid).is_virtual);
    EXPECT_FALSE(g.tensor(uid).by_value);
    EXPECT_EQ(g.tensor(uid).dtype, Dt::BF16);
  }
  const TensorDesc& lse = g.tensor(kUidStats);
  EXPECT_EQ(lse.dims, (A4{8, 16, 1024, 1}));
  EXPECT_EQ(lse.strides, (A4{16 * 1024, 1024, 1, 1}));
  EXPECT_EQ(lse.dtype, Dt::F32);
  EXPECT_FALSE(lse.is_virtual);
  for (int64_t uid : {kUidScale, kUidNegInf}) {
    const TensorDesc& s = g.tensor(uid);
    EXPECT_TRUE(s.by_value) << s.name;
    EXPECT_FALSE(s.is_virtual) << s.name;
    EXPECT_EQ(s.dims, (A4{1, 1, 1, 1}));
    EXPECT_EQ(s.strides, (A4{1, 1, 1, 1}));
    EXPECT_EQ(s.dtype, Dt::F32);
  }
  // The scores and everything of their shape: virtual, [8,16,1024,1024], row-major.
  const TensorDesc* s = g.find("S");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->is_virtual);
  EXPECT_EQ(s->dims, (A4{8, 16, 1024, 1024}));
  EXPECT_EQ(s->strides, (A4{16LL * 1024 * 1024, 1024 * 1024, 1024, 1}));
  EXPECT_EQ(s->dtype, Dt::F32);
  ASSERT_NE(g.find("P"), nullptr);
  EXPECT_EQ(g.find("P")->dtype, Dt::BF16) << "P feeds the second GEMM in the I/O type";
  EXPECT_EQ(g.find("M")->dims, (A4{8, 16, 1024, 1}));
  EXPECT_EQ(g.find("Z")->strides, (A4{16 * 1024, 1024, 1, 1}));
  EXPECT_EQ(g.find("row")->dtype, Dt::I32);
  EXPECT_EQ(g.find("col")->dtype, Dt::I32);
  EXPECT_EQ(g.find("row>=col")->dtype, Dt::Bool);
  EXPECT_EQ(g.find("row")->dims, s->dims);
  check_topology(g);
}

TEST(CudnnGraph, BlogShapeCausalNodes) {
  const SdpaGraphDesc g = describe_sdpa(blog());
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"bmm1", "attn_scale", "gen_row_index", "gen_col_index",
                                                     "row>=col", "causal_select", "max", "sub", "exp", "sum", "log",
                                                     "lse", "div", "bmm2"}));
  const NodeDesc& bmm1 = node(g, "bmm1");
  EXPECT_EQ(bmm1.kind, NodeKind::Matmul);
  EXPECT_EQ(bmm1.x, kUidQ);
  EXPECT_EQ(bmm1.b, kUidK);
  check_matmul(g, bmm1);
  const NodeDesc& scale = node(g, "attn_scale");
  EXPECT_EQ(scale.pw, Pw::Mul);
  EXPECT_EQ(scale.x, bmm1.y);
  EXPECT_EQ(scale.b, kUidScale);
  // The causal mask: row index (axis 2) >= column index (axis 3) keeps the score, else -inf.
  const NodeDesc &row = node(g, "gen_row_index"), &col = node(g, "gen_col_index");
  EXPECT_EQ(row.pw, Pw::GenIndex);
  EXPECT_EQ(row.axis, 2);
  EXPECT_EQ(col.axis, 3);
  EXPECT_EQ(row.x, scale.y);
  EXPECT_EQ(row.compute, Dt::I32);
  const NodeDesc& ge = node(g, "row>=col");
  EXPECT_EQ(ge.pw, Pw::CmpGe);
  EXPECT_EQ(ge.x, row.y);
  EXPECT_EQ(ge.b, col.y);
  EXPECT_EQ(ge.compute, Dt::Bool);
  const NodeDesc& sel = node(g, "causal_select");
  EXPECT_EQ(sel.pw, Pw::BinarySelect);
  EXPECT_EQ(sel.x, scale.y) << "y = t ? x : b keeps the score where t";
  EXPECT_EQ(sel.b, kUidNegInf);
  EXPECT_EQ(sel.t, ge.y);
  // Softmax over the last dim, and lse = M + log Z into the bound stats tensor.
  const NodeDesc &mx = node(g, "max"), &sum = node(g, "sum");
  EXPECT_EQ(mx.kind, NodeKind::Reduction);
  EXPECT_EQ(mx.red, Red::Max);
  EXPECT_EQ(mx.x, sel.y);
  EXPECT_EQ(sum.red, Red::Add);
  EXPECT_EQ(sum.x, node(g, "exp").y);
  EXPECT_EQ(node(g, "sub").b, mx.y);
  EXPECT_EQ(node(g, "lse").y, kUidStats);
  EXPECT_EQ(node(g, "lse").x, mx.y);
  EXPECT_EQ(node(g, "div").b, sum.y);
  const NodeDesc& bmm2 = node(g, "bmm2");
  EXPECT_EQ(bmm2.x, node(g, "div").y);
  EXPECT_EQ(bmm2.b, kUidV);
  EXPECT_EQ(bmm2.y, kUidO);
  check_matmul(g, bmm2);
}

TEST(CudnnGraph, UnmaskedRaggedGqaHasNoMaskNodes) {
  const AttnProblem p = ragged_gqa();
  const SdpaGraphDesc g = describe_sdpa(p);
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"bmm1", "attn_scale", "max", "sub", "exp", "sum", "log", "lse",
                                                     "div", "bmm2"}));
  EXPECT_THROW(g.tensor(kUidNegInf), Error);
  EXPECT_EQ(g.tensor(kUidQ).dims, (A4{2, 8, 100, 128}));
  EXPECT_EQ(g.tensor(kUidK).dims, (A4{2, 2, 128, 37}));
  EXPECT_EQ(g.tensor(kUidK).strides, (A4{2 * 37 * 128, 37 * 128, 1, 128}));
  EXPECT_EQ(g.tensor(kUidV).dims, (A4{2, 2, 37, 128}));
  EXPECT_EQ(g.find("S")->dims, (A4{2, 8, 100, 37}));
  EXPECT_EQ(g.find("S")->strides, (A4{8 * 100 * 37, 100 * 37, 37, 1}));
  check_matmul(g, node(g, "bmm1"));
  check_matmul(g, node(g, "bmm2"));
  check_topology(g);
}

TEST(CudnnGraph, WithoutAnLseOutputTheTailStaysVirtual) {
  const SdpaGraphDesc g = describe_sdpa(blog(), SdpaLowering{false, Dt::F32});
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"bmm1", "attn_scale", "gen_row_index", "gen_col_index",
                                                     "row>=col", "causal_select", "max", "sub", "exp", "sum", "log",
                                                     "lse", "div", "bmm2"}));
  EXPECT_THROW(g.tensor(kUidStats), Error);
  ASSERT_NE(g.find("lse"), nullptr);
  EXPECT_TRUE(g.find("lse")->is_virtual);
  EXPECT_EQ(node(g, "lse").y, g.find("lse")->uid);
  EXPECT_EQ(node(g, "gen_row_index").compute, Dt::F32);
  check_topology(g);
}

TEST(CudnnGraph, ShapeSupport) {
  EXPECT_FALSE(sdpa_shape_unsupported(blog()).has_value());
  EXPECT_FALSE(sdpa_shape_unsupported(ragged_gqa()).has_value());
  EXPECT_FALSE(sdpa_shape_unsupported(problem(1, 4, 1, 1, 1, 8, MaskKind::Causal)).has_value());
  AttnProblem f32 = blog();
  f32.dtype = DType::F32;
  EXPECT_NE(sdpa_shape_unsupported(f32).value_or("").find("bf16 or fp16"), std::string::npos);
  EXPECT_FALSE(sdpa_shape_unsupported(blog_fp16()).has_value());
  AttnProblem masked = blog();
  masked.mask = MaskKind::Bool;
  EXPECT_NE(sdpa_shape_unsupported(masked).value_or("").find("attn_mask"), std::string::npos);
  masked.mask = MaskKind::Additive;
  EXPECT_TRUE(sdpa_shape_unsupported(masked).has_value());
  for (int64_t d : {36, 136, 256}) {
    AttnProblem p = blog();
    p.D = d;
    EXPECT_NE(sdpa_shape_unsupported(p).value_or("").find("head dim"), std::string::npos) << d;
    EXPECT_THROW(describe_sdpa(p), Error) << d;
  }
  EXPECT_TRUE(sdpa_shape_unsupported(problem(1, 3, 2, 4, 4, 64, MaskKind::None)).has_value());
}

// fp16: the same graph with Q, K, V, O and P in fp16 (CUDNN_DATA_HALF), the scores and statistics in fp32.
TEST(CudnnGraph, Fp16GraphKeepsItsIoInFp16) {
  const SdpaGraphDesc g = describe_sdpa(blog_fp16());
  for (const char* name : {"Q", "K^T", "V", "O", "P"}) {
    ASSERT_NE(g.find(name), nullptr) << name;
    EXPECT_EQ(g.find(name)->dtype, Dt::F16) << name;
  }
  EXPECT_EQ(g.find("S")->dtype, Dt::F32);
  EXPECT_EQ(dt_name(Dt::F16), "fp16");
  EXPECT_EQ(g.nodes.size(), describe_sdpa(blog()).nodes.size());
}

TEST(CudnnGraph, LoweringsTryTheLseOutputFirst) {
  const std::vector<SdpaLowering> l = sdpa_lowerings();
  ASSERT_EQ(l.size(), 4u);
  EXPECT_TRUE(l[0].stats);
  EXPECT_EQ(l[0].index_compute, Dt::I32);
  EXPECT_FALSE(l.back().stats);
  EXPECT_EQ(l[0].str(), "lse output, int32 index");
}

// ---- layer 2: cuDNN finalizes every descriptor on the host ---------------------------------------------
#define REQUIRE_LIBCUDNN()                                                                              \
  do {                                                                                                  \
    if (auto why = library_unavailable()) GTEST_SKIP() << "libcudnn not loadable here: " << *why;       \
  } while (0)

TEST(CudnnBackend, LibraryLoads) {
  REQUIRE_LIBCUDNN();
  EXPECT_GE(library_version(), 90000);
  EXPECT_LT(library_version(), 100000);
  EXPECT_FALSE(library_file().empty());
}

TEST(CudnnBackend, FinalizesEveryDescriptorOfTheBlogGraph) {
  REQUIRE_LIBCUDNN();
  for (const SdpaLowering& l : sdpa_lowerings()) {
    SCOPED_TRACE(l.str());
    const SdpaGraphDesc g = describe_sdpa(blog(), l);
    std::unique_ptr<BackendGraph> bg;
    ASSERT_NO_THROW(bg = std::make_unique<BackendGraph>(g, nullptr));
    EXPECT_EQ(bg->finalized_tensors(), int(g.tensors.size()));
    EXPECT_EQ(bg->finalized_nodes(), int(g.nodes.size()));
    EXPECT_NE(bg->op_graph(), nullptr);
  }
}

TEST(CudnnBackend, FinalizesTheUnmaskedRaggedGqaGraph) {
  REQUIRE_LIBCUDNN();
  for (const AttnProblem& p : {ragged_gqa(), problem(1, 2, 2, 37, 100, 128, MaskKind::Causal),
                               problem(3, 4, 4, 1, 513, 8, MaskKind::None), blog_fp16()}) {
    SCOPED_TRACE(p.str());
    const SdpaGraphDesc g = describe_sdpa(p);
    std::unique_ptr<BackendGraph> bg;
    ASSERT_NO_THROW(bg = std::make_unique<BackendGraph>(g, nullptr));
    EXPECT_EQ(bg->finalized_nodes(), int(g.nodes.size()));
  }
}

TEST(CudnnBackend, RejectsInconsistentShapesNamingTheDescriptor) {
  REQUIRE_LIBCUDNN();
  // cuDNN checks the matmul's shapes itself: Kᵀ with the wrong inner dim must fail at bmm1, with cuDNN's
  // status in the message.
  SdpaGraphDesc g = describe_sdpa(ragged_gqa());
  for (TensorDesc& t : g.tensors)
    if (t.uid == kUidK) t.dims[2] += 8;
  try {
    BackendGraph bg(g, nullptr);
    FAIL() << "a matmul with inner dims 128 and 136 finalized";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("bmm1"), std::string::npos) << m;
    EXPECT_NE(m.find("CUDNN_STATUS_"), std::string::npos) << m;
  }
}

// ---- layer 3 without a device: the engines judge the graph for an A100 and an H100 -------------------
namespace {

// The runtime-compiled engines need the CUDA driver API loaded to run their checks and code generation. On a
// machine without a driver, the toolkit's stub libcuda (next to libcudnn) stands in: loaded first under its
// soname, it is what cuDNN's dlopen("libcuda.so.1") finds. Loading the generated kernel then fails, as it must.
std::optional<std::string> load_driver_api() {
  if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) return std::nullopt;
  std::vector<std::string> stubs;
  const std::string lib = library_file();
  if (auto slash = lib.rfind('/'); slash != std::string::npos) stubs.push_back(lib.substr(0, slash) + "/stubs/libcuda.so");
  for (const char* d : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib"})
    stubs.push_back(std::string(d) + "/stubs/libcuda.so");
  for (const std::string& s : stubs)
    if (dlopen(s.c_str(), RTLD_NOW | RTLD_GLOBAL)) return std::nullopt;
  return std::string("neither libcuda.so.1 nor the CUDA toolkit's stubs/libcuda.so could be loaded");
}

#define REQUIRE_DEVICELESS()                                                                             \
  do {                                                                                                   \
    REQUIRE_LIBCUDNN();                                                                                  \
    if (library_version() < 90800) GTEST_SKIP() << "device-properties descriptors need cuDNN >= 9.8";    \
    if (auto why = load_driver_api()) GTEST_SKIP() << *why;                                              \
  } while (0)

std::string dump(const std::vector<EngineTry>& log) {
  std::string s;
  for (const EngineTry& t : log)
    s += fmt::format("  [{}] heuristics {} engine {} configs {} status {}: {}\n", t.lowering, t.heuristics, t.engine,
                     t.configs, t.status, t.message);
  return s;
}

// The first engine the heuristics propose must pass its support checks and generate its kernel.
void expect_engine_accepts(const AttnProblem& p, const GpuSpec& gpu, const SdpaLowering& l = {}) {
  SCOPED_TRACE(fmt::format("{} on {} ({})", p.str(), gpu.name, l.str()));
  const std::vector<EngineTry> log = try_engines_deviceless(describe_sdpa(p, l), gpu, 1, l.str());
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.front().heuristics, "A") << dump(log);
  EXPECT_GE(log.front().configs, 1) << "heuristics A proposed no config that passes the support checks\n" << dump(log);
  int plans = 0;
  for (const EngineTry& t : log) plans += t.engine >= 0;
  EXPECT_EQ(plans, 1) << dump(log);
  EXPECT_TRUE(log.back().supported()) << dump(log);
}

}  // namespace

TEST(CudnnDeviceless, EnginesAcceptTheBlogCausalGraph) {
  REQUIRE_DEVICELESS();
  expect_engine_accepts(blog(), gpu_h100());
  expect_engine_accepts(blog(), gpu_a100());
}

TEST(CudnnDeviceless, EnginesAcceptTheBlogCausalGraphInFp16) {
  REQUIRE_DEVICELESS();
  expect_engine_accepts(blog_fp16(), gpu_h100());
  expect_engine_accepts(blog_fp16(), gpu_a100());
}

TEST(CudnnDeviceless, EnginesAcceptUnmaskedRaggedGqaAndRaggedCausal) {
  REQUIRE_DEVICELESS();
  expect_engine_accepts(ragged_gqa(), gpu_h100());
  expect_engine_accepts(ragged_gqa(), gpu_a100());
  expect_engine_accepts(problem(1, 2, 2, 37, 100, 128, MaskKind::Causal), gpu_h100());
}

TEST(CudnnDeviceless, EveryLoweringIsProposedForTheBlogGraph) {
  REQUIRE_DEVICELESS();
  for (const SdpaLowering& l : sdpa_lowerings()) {
    const std::vector<EngineTry> log = try_engines_deviceless(describe_sdpa(blog(), l), gpu_h100(), 0, l.str());
    ASSERT_EQ(log.size(), 3u) << dump(log);
    EXPECT_GE(log[0].configs, 1) << l.str() << "\n" << dump(log);
  }
}

TEST(CudnnDeviceless, WithoutTheLseTailNoFusedEngineMatches) {
  REQUIRE_DEVICELESS();
  // The control: the same graph less LOG Z and M + log Z is not an attention pattern the fused engines take
  // (what a naive "inference" lowering would build), so the checks above are not vacuous.
  SdpaGraphDesc g = describe_sdpa(blog(), SdpaLowering{false, Dt::I32});
  std::erase_if(g.nodes, [](const NodeDesc& n) { return n.name == "log" || n.name == "lse"; });
  std::erase_if(g.tensors, [](const TensorDesc& t) { return t.name == "log Z" || t.name == "lse"; });
  const std::vector<EngineTry> log = try_engines_deviceless(g, gpu_h100(), 0, "no lse");
  ASSERT_EQ(log.size(), 3u) << dump(log);
  EXPECT_EQ(log[0].configs, 0) << dump(log);
  EXPECT_EQ(log[1].configs, 0) << dump(log);
}

#else  // built without cuDNN

TEST(CudnnGraph, SkippedWithoutCudnn) {
  GTEST_SKIP() << "attnprof was built without cuDNN (no CUDA, ATTNPROF_CUDNN=OFF, or no cuDNN 9 found): the "
                  "sdpa-cudnn graph is not compiled";
}

#endif
