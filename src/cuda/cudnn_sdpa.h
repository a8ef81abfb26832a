// Internal: scaled-dot-product attention forward through cuDNN 9's fused attention engine, composed with the
// backend (C) graph API the way cudnn-frontend's SDPA node lowers it (its C++ header is not needed):
//
//   Q  [b,hq,sq,d]  ─┐
//                    ├─ MATMUL ─► S [b,hq,sq,skv] fp32 ─ MUL attn_scale ─► (causal) BINARY_SELECT(S, -inf, row >= col)
//   Kᵀ [b,hkv,d,skv] ┘   (K's own memory: dims 2 and 3 swapped with their strides)              │
//                                                                                               ▼
//        REDUCTION MAX ─► M [b,hq,sq,1];  SUB M;  EXP;  REDUCTION ADD ─► Z;  DIV Z ─► P [b,hq,sq,skv] io (virtual)
//        LOG Z, ADD M ─► lse [b,hq,sq,1] fp32 (an output, or virtual: the engines need the node either way)
//   P × V [b,hkv,skv,d] ─ MATMUL ─► O [b,hq,sq,d]
//
// Three layers, so what needs no GPU is tested without one (tests/test_cudnn_graph.cpp):
//   describe_sdpa()  pure: every tensor (uid, dims, strides, type, virtual / by-value) and node of the graph.
//   BackendGraph     one finalized backend descriptor per tensor and node, then the operation graph; needs
//                    libcudnn but no device.
//   SdpaPlan         heuristics (mode A, then B and FALLBACK), the first engine config whose execution plan
//                    finalizes, its workspace size, and execution through a variant pack; needs a device.
//
// libcudnn.so.9 is loaded at run time (dlopen), not linked: a binary built with cuDNN starts on a machine
// without it, and sdpa-cudnn then reports why it cannot run. ATTNPROF_CUDNN_LIBRARY names the file to load;
// otherwise the one CMake found, then the loader's search path (LD_LIBRARY_PATH, ld.so.cache).
//
//   if (auto why = cudnn::sdpa_unsupported(p)) skip(*why);   // shape, library, device, or no engine
//   auto runner = cudnn::make_sdpa_runner(p, opt);             // the plan is built once per problem
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnprof/attention.h"
#include "attnprof/cuda.h"

namespace attnprof::cuda::cudnn {

// ---- the library ----------------------------------------------------------------------------------------
std::optional<std::string> library_unavailable();  // nullopt once libcudnn.so.9 is loaded with every entry point
std::string library_file();                         // the file that was loaded ("" when none)
int64_t library_version();                          // cudnnGetVersion(), e.g. 91900; 0 when not loaded

// ---- layer 1: the graph as data -------------------------------------------------------------------------
enum class Dt { F32, BF16, F16, I32, Bool };
std::string_view dt_name(Dt t);

enum class NodeKind { Matmul, Pointwise, Reduction };
enum class Pw { Mul, Add, Sub, Div, Exp, Log, GenIndex, CmpGe, BinarySelect };
enum class Red { Max, Add };

// Unique ids of the tensors that are bound at execution (the variant pack); virtual tensors count from 100.
inline constexpr int64_t kUidQ = 1, kUidK = 2, kUidV = 3, kUidO = 4, kUidStats = 5, kUidScale = 6, kUidNegInf = 7;
inline constexpr int64_t kFirstVirtualUid = 100;
inline constexpr int64_t kAlignment = 16;  // bytes, every tensor (the device allocator rounds to 512)

struct TensorDesc {
  int64_t uid = 0;
  std::string name;
  std::array<int64_t, 4> dims{}, strides{};
  Dt dtype = Dt::F32;
  bool is_virtual = false;  // produced and consumed inside the fused kernel
  bool by_value = false;    // a host scalar passed at execution ([1,1,1,1])
};

// A matmul reads x (A) and b (B) into y (C); a pointwise reads x, b (binary modes) and t (BINARY_SELECT's
// condition: y = t ? x : b) into y; a reduction reads x into y. 0 = no tensor.
struct NodeDesc {
  std::string name;
  NodeKind kind = NodeKind::Pointwise;
  Pw pw = Pw::Mul;
  Red red = Red::Max;
  Dt compute = Dt::F32;  // matmul / reduction compute type, pointwise math precision
  int64_t axis = -1;     // GEN_INDEX: the dimension whose index is generated
  int64_t x = 0, b = 0, t = 0, y = 0;
};

// Choices in the lowering that the engine's pattern matcher may care about; SdpaPlan tries them in order.
struct SdpaLowering {
  bool stats = true;            // lse (LOG Z + M) bound as output kUidStats; false: a virtual tensor
  Dt index_compute = Dt::I32;   // math precision of the two GEN_INDEX nodes of the causal mask
  std::string str() const;      // "lse output, int32 index"
};
// The lowerings SdpaPlan tries, in order.
std::vector<SdpaLowering> sdpa_lowerings();

struct SdpaGraphDesc {
  std::vector<TensorDesc> tensors;  // non-virtual first, then virtual in the order the nodes produce them
  std::vector<NodeDesc> nodes;      // in topological order
  const TensorDesc& tensor(int64_t uid) const;          // throws Error when absent
  const TensorDesc* find(std::string_view name) const;  // nullptr when absent
};

// Shape-level support (no library or device needed): bf16/fp16, no mask or is_causal, D <= 128 and a
// multiple of 8, Hq % Hkv == 0. nullopt when the graph can be described.
std::optional<std::string> sdpa_shape_unsupported(const AttnProblem& p);
// The graph for problem p (which must pass sdpa_shape_unsupported). Q, K, V, O contiguous [B, H, N, D].
SdpaGraphDesc describe_sdpa(const AttnProblem& p, const SdpaLowering& l = {});

// ---- layer 2: backend descriptors (libcudnn, no device) -------------------------------------------------
class Descriptor;  // a cudnnBackendDescriptor_t owned by RAII (defined in cudnn_sdpa.cpp)

class BackendGraph {
 public:
  // Creates and finalizes one descriptor per tensor, per node (and its pointwise / matmul / reduction
  // descriptor), then the operation graph bound to `handle` (a cudnnHandle_t; nullptr builds it without
  // one). Throws Error naming the descriptor and cuDNN's status and message at the first that fails.
  BackendGraph(const SdpaGraphDesc& g, void* handle);
  ~BackendGraph();
  BackendGraph(const BackendGraph&) = delete;
  BackendGraph& operator=(const BackendGraph&) = delete;

  void* op_graph() const;       // the finalized CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR
  int finalized_tensors() const { return tensors_; }
  int finalized_nodes() const { return nodes_; }  // operation descriptors in the graph
  int64_t engine_global_count() const;            // CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT (-1 if unknown)

 private:
  std::vector<std::unique_ptr<Descriptor>> owned_;
  void* graph_ = nullptr;
  int tensors_ = 0, nodes_ = 0;
};

// ---- layer 3: plan and execution (device) ---------------------------------------------------------------
// One execution-plan attempt: which lowering, heuristics mode and engine, and how its finalize ended.
struct EngineTry {
  std::string lowering;    // SdpaLowering::str()
  std::string heuristics;  // "A", "B", "FALLBACK"
  int64_t engine = -1;     // global engine index; -1: the heuristics step itself failed or proposed nothing
  int64_t configs = 0;     // configs the heuristics returned (after dropping those whose engine rejects the graph)
  int status = 0;          // cudnnStatus_t of the step, 0 = success
  std::string message;     // cuDNN's status and message
  bool finalized() const { return engine >= 0 && status == 0; }
  // Past every support check of the engine: finalized, or failed only in the execution category (5xxx), e.g.
  // loading the generated kernel without a driver.
  bool supported() const { return engine >= 0 && (status == 0 || status / 1000 == 5); }
};
class SdpaPlan {
 public:
  // Tries each lowering of sdpa_lowerings() with heuristics modes A, B, FALLBACK and each engine they return
  // until an execution plan finalizes on the backend's device. Never throws for "no engine": returns nullptr
  // and sets *why to "cuDNN found no engine for <problem> (tried N configs: ...)". Throws Error on others.
  static std::shared_ptr<const SdpaPlan> build(const AttnProblem& p, std::string* why);
  ~SdpaPlan();

  const AttnProblem& problem() const { return p_; }
  const SdpaLowering& lowering() const { return lowering_; }
  int64_t workspace_bytes() const { return workspace_; }
  std::string describe() const;  // "engine 1 (heuristics A, config 1 of 4; 1 plan(s) tried), lse output, ..."

  // Enqueues the forward on the backend's stream. q, k, v, o: contiguous device buffers of the problem's
  // shapes; lse: [B, Hq, Nq, 1] fp32 when lowering().stats, else ignored; workspace: workspace_bytes().
  void execute(const void* q, const void* k, const void* v, void* o, float* lse, void* workspace) const;

 private:
  SdpaPlan() = default;
  AttnProblem p_;
  SdpaLowering lowering_;
  std::unique_ptr<BackendGraph> graph_;
  std::unique_ptr<Descriptor> plan_;
  int64_t workspace_ = 0;
  std::string engine_;
  // The by-value scalars the variant pack points at, aligned as every tensor of the graph is declared
  // (CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16), by-value ones included.
  alignas(16) float scale_ = 1.0f;
  alignas(16) float neg_inf_ = 0.0f;
};

// ---- deviceless checks (cuDNN >= 9.8) -------------------------------------------------------------------
// A GPU described by its properties (a CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR from JSON): heuristics, the
// engines' support checks and their code generation run for it without the device; only loading the
// generated kernel needs a driver.
struct GpuSpec {
  std::string name;
  int cc = 0;  // compute capability ×10: 80, 90
  int sms = 0;
  int64_t memory_bytes = 0;
  int smem_optin = 0;  // shared memory per block with opt-in, bytes
  int64_t l2_bytes = 0;
  int sm_clock_khz = 0, mem_clock_khz = 0;
  std::string json() const;  // CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION
};
GpuSpec gpu_a100();  // A100-SXM4-80GB, sm_80
GpuSpec gpu_h100();  // H100 SXM 80GB, sm_90 (the H200 has the same SM)

// Heuristics (A, B, FALLBACK) and up to max_plans execution plans (0: heuristics only, one entry per mode
// with the number of configs that pass the engines' support checks) for graph g on `gpu`, without a device.
// Each entry is labelled `label`. Throws Error when the graph or the device properties do not finalize.
std::vector<EngineTry> try_engines_deviceless(const SdpaGraphDesc& g, const GpuSpec& gpu, int max_plans,
                                              const std::string& label);

// ---- the sdpa-cudnn variant -----------------------------------------------------------------------------
// nullopt when sdpa-cudnn runs p: the shape is supported, libcudnn loads, a handle is created on the device
// and an engine finalizes a plan (built once per problem and cached). Else the reason.
std::optional<std::string> sdpa_unsupported(const AttnProblem& p);
// The cached plan's describe() for p, or why there is none (for logs and the GPU check).
std::string sdpa_plan_description(const AttnProblem& p);
// The runner: the cached plan and its workspace (from the tracked device allocator). Throws Error with
// sdpa_unsupported's reason when it cannot run.
std::unique_ptr<DeviceRunner> make_sdpa_runner(const AttnProblem& p, const AttnOptions& o);

}  // namespace attnprof::cuda::cudnn
