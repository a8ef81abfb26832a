// What nvcc and ptxas make of the CUDA backend's source, checked without a GPU (the build compiles the
// kernels to PTX for this test: tests/CMakeLists.txt).
//   - The inline PTX of src/cuda/flash_ptx.cuh binds its operands as the SIMT emulator (simt_emulator.h)
//     reads them. The emulator gives mma_bf16(c, a, b0, b1) the semantics of mma.sync with a[i] as the
//     instruction's A register i, and so on; that holds only if the asm strings' operand numbers match
//     their constraint lists. Probe kernels (cuda_codegen_probe.cu) call each primitive on kernel
//     parameters and store its results; a symbolic evaluation of their PTX names which parameter reaches
//     which operand and which result reaches which output word.
//   - ptxas assembles every kernel for sm_80 and sm_90a without spills or a stack frame, within its launch
//     bounds, and every flash tile configuration of fragment.h is among them.
#include <gtest/gtest.h>

#include <cxxabi.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "attnprof/dtype.h"
#include "cuda/fragment.h"
#include "io/file.h"
#include "simt_emulator.h"  // its pack_bf16 / exp2_ftz, compared with what the PTX does

namespace {

namespace fs = std::filesystem;

#if defined(ATTNPROF_PTX) && defined(ATTNPROF_PTXAS)
constexpr bool kHavePtx = true;
#else
constexpr bool kHavePtx = false;
#define ATTNPROF_PTX ""
#define ATTNPROF_PTXAS ""
#endif

#define SKIP_WITHOUT_PTX() \
  if (!kHavePtx) GTEST_SKIP() << "built without CUDA (ATTNPROF_CUDA=OFF or no nvcc): no PTX to check"

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  const auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// The PTX files of each architecture the build compiled for: ATTNPROF_PTX is "sm_80=a.ptx|b.ptx>sm_90a=...".
std::vector<std::pair<std::string, std::vector<std::string>>> ptx_by_gpu() {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& arch : split(ATTNPROF_PTX, '>')) {
    const size_t eq = arch.find('=');
    if (eq == std::string::npos) continue;
    std::vector<std::string> files;
    for (const auto& p : split(arch.substr(eq + 1), '|'))
      if (!p.empty()) files.push_back(p);
    out.push_back({arch.substr(0, eq), files});
  }
  return out;
}

// ---- A PTX reader: the instructions of every .entry, operands split at top-level commas --------------------

struct Instr {
  std::string op;                 // e.g. "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
  std::vector<std::string> args;  // "%r1", "16", "[%rd2+4]", "{%f1,%f2}"
};

std::vector<std::string> split_operands(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty()) out.push_back(trim(cur));
  return out;
}

std::map<std::string, std::vector<Instr>> parse_entries(const std::string& ptx_text) {
  std::string ptx;  // without comments and the line directives of -lineinfo (.loc, .file: no ';')
  for (const auto& line : split(ptx_text, '\n')) {
    const std::string t = trim(line.substr(0, line.find("//")));
    if (!starts_with(t, ".loc") && !starts_with(t, ".file")) ptx += t + "\n";
  }
  std::map<std::string, std::vector<Instr>> entries;
  for (size_t at = ptx.find(".entry "); at != std::string::npos; at = ptx.find(".entry ", at + 1)) {
    const size_t name0 = at + 7, paren = ptx.find('(', name0);
    const std::string name = trim(ptx.substr(name0, paren - name0));
    const size_t open = ptx.find('{', ptx.find(')', paren));
    size_t close = open;
    for (int depth = 0; close < ptx.size(); ++close) {
      depth += ptx[close] == '{' ? 1 : ptx[close] == '}' ? -1 : 0;
      if (depth == 0) break;
    }
    std::vector<Instr>& body = entries[name];
    for (std::string st : split(ptx.substr(open + 1, close - open - 1), ';')) {
      st = trim(st);
      while (!st.empty() && (st[0] == '{' || st[0] == '}')) st = trim(st.substr(1));  // scoped blocks
      if (!st.empty() && st[0] == '$') st = trim(st.substr(st.find(':') + 1));      // a label
      if (st.empty() || st[0] == '.') continue;                                        // declarations
      const size_t sp = st.find_first_of(" \t\n");
      Instr in{st.substr(0, sp), sp == std::string::npos ? std::vector<std::string>{} : split_operands(st.substr(sp))};
      body.push_back(in);
    }
  }
  return entries;
}

// ---- Symbolic evaluation: every register holds an expression over the kernel's parameters ------------------
// ld.param gives "paramK"; mov, cvta and integer-width cvt keep the value's name (an address keeps its name
// across address spaces); an instruction with a braced destination list names its results "mma[i]",
// "ldmatrix[i]" (first word of the opcode); any other instruction "op(arg,...)". Stores are recorded by
// (address expression, byte offset); instructions without a destination are kept with evaluated operands.

struct Executed {
  std::string op;
  std::vector<std::vector<std::string>> args;  // evaluated; a braced group is a list
};

struct Evaluation {
  std::map<std::pair<std::string, int>, std::string> stores;
  std::vector<Executed> executed;

  std::string stored(const std::string& base, int offset) const {
    auto it = stores.find({base, offset});
    return it == stores.end() ? fmt::format("<nothing stored at {}+{}>", base, offset) : it->second;
  }
  const Executed* find(const std::string& op_prefix) const {
    for (const auto& e : executed)
      if (starts_with(e.op, op_prefix)) return &e;
    return nullptr;
  }
};

Evaluation evaluate(const std::vector<Instr>& body) {
  Evaluation ev;
  std::map<std::string, std::string> val;
  auto reg = [&](const std::string& r) {
    auto it = val.find(r);
    return it != val.end() ? it->second : "<undefined " + r + ">";
  };
  // "[%rd2+4]": (what %rd2 holds, 4)
  auto address = [&](const std::string& a) {
    const std::string in = a.substr(1, a.size() - 2);
    const size_t plus = in.find('+');
    const std::string base = in.substr(0, plus);
    return std::pair{base[0] == '%' ? reg(base) : base, plus == std::string::npos ? 0 : std::stoi(in.substr(plus + 1))};
  };
  auto of = [&](const std::string& a) -> std::string {
    if (a.empty()) return a;
    if (a[0] == '%') return reg(a);
    if (a[0] == '[') {
      const auto [base, off] = address(a);
      return "[" + base + (off ? fmt::format("+{}", off) : "") + "]";
    }
    return a;  // an immediate
  };
  auto group = [](const std::string& a) {
    std::vector<std::string> regs;
    if (!a.empty() && a[0] == '{')
      for (const auto& r : split(a.substr(1, a.size() - 2), ',')) regs.push_back(trim(r));
    else
      regs.push_back(a);
    return regs;
  };
  for (const Instr& in : body) {
    Executed ex{in.op, {}};
    for (const auto& a : in.args) {
      std::vector<std::string> g;
      for (const auto& r : group(a)) g.push_back(of(r));
      ex.args.push_back(g);
    }
    const bool stores = starts_with(in.op, "st.");
    const bool no_dest = stores || starts_with(in.op, "cp.async") || starts_with(in.op, "bar") ||
                         in.op == "ret" || starts_with(in.op, "bra") || in.args.empty();
    if (stores) {
      const auto [base, off] = address(in.args[0]);
      // a vector store's elements at consecutive 32-bit words (the probes store nothing wider)
      for (size_t i = 0; i < ex.args[1].size(); ++i) ev.stores[{base, off + 4 * int(i)}] = ex.args[1][i];
    } else if (!no_dest) {
      const std::vector<std::string> dst = group(in.args[0]);
      if (starts_with(in.op, "ld.param")) {
        const std::string& src = in.args[1];
        val[dst[0]] = "param" + src.substr(src.rfind('_') + 1, src.size() - src.rfind('_') - 2);
      } else if (starts_with(in.op, "mov.") || starts_with(in.op, "cvta.") || in.op == "cvt.u32.u64" ||
                 in.op == "cvt.u64.u32") {
        val[dst[0]] = ex.args[1][0];
      } else if (in.args[0][0] == '{') {
        const std::string name = in.op.substr(0, in.op.find('.'));
        for (size_t i = 0; i < dst.size(); ++i) val[dst[i]] = fmt::format("{}[{}]", name, i);
      } else {
        std::string e = in.op + "(";
        for (size_t i = 1; i < ex.args.size(); ++i) e += (i > 1 ? "," : "") + ex.args[i][0];
        val[dst[0]] = e + ")";
      }
    }
    ev.executed.push_back(ex);
  }
  return ev;
}

const std::string& probe_ptx() {
  static const std::string text = [] {
    for (const auto& [gpu, files] : ptx_by_gpu())  // the probes are the same source for every architecture
      for (const auto& p : files)
        if (fs::path(p).filename().string().find("cuda_codegen_probe") != std::string::npos)
          return attnprof::io::read_file(p);
    return std::string();
  }();
  return text;
}

Evaluation probe(const std::string& name) {
  const auto entries = parse_entries(probe_ptx());
  auto it = entries.find(name);
  if (it == entries.end()) ADD_FAILURE() << "no .entry " << name << " in the probe PTX";
  return it == entries.end() ? Evaluation{} : evaluate(it->second);
}

using Strings = std::vector<std::string>;

TEST(CudaCodegen, PtxReaderEvaluatesAHandWrittenKernel) {
  // The reader on a kernel written here, so that its rules are pinned independently of nvcc's output.
  const std::string ptx = R"(
.visible .entry k(
	.param .u64 k_param_0, .param .f32 k_param_1, .param .u32 k_param_2
)
{
	.reg .f32 	%f<4>; // declarations are skipped
	ld.param.u64 	%rd1, [k_param_0];
	ld.param.f32 	%f1, [k_param_1];
	ld.param.u32 	%r1, [k_param_2];
	cvta.to.global.u64 	%rd2, %rd1;
	{ .reg .b64 %tmp;
	  mul.f32 	%f2, %f1, %f1; }
	$L__BB0_1:
	ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r2,%r3}, [%r1];
	st.global.v2.u32 	[%rd2+8], {%r2, %r3};
	st.global.f32 	[%rd2], %f2;
	cp.async.wait_group 0;
	ret;
}
)";
  const auto entries = parse_entries(ptx);
  ASSERT_EQ(entries.size(), 1u);
  const Evaluation ev = evaluate(entries.at("k"));
  EXPECT_EQ(ev.stored("param0", 0), "mul.f32(param1,param1)");
  EXPECT_EQ(ev.stored("param0", 8), "ldmatrix[0]");
  EXPECT_EQ(ev.stored("param0", 12), "ldmatrix[1]");
  EXPECT_EQ(ev.stored("param0", 4), "<nothing stored at param0+4>");
  const Executed* ld = ev.find("ldmatrix");
  ASSERT_NE(ld, nullptr);
  EXPECT_EQ(ld->args[1], Strings{"[param2]"});
  const Executed* w = ev.find("cp.async.wait_group");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->args, std::vector<Strings>{{"0"}});
}

TEST(CudaCodegen, MmaBindsAToAOperandBToBAndCToTheAccumulators) {
  SKIP_WITHOUT_PTX();
  // The instructions the emulator implements: row-major A, column-major B, fp32 accumulators, bf16 or fp16
  // inputs (mma_bf16, mma_f16).
  using Probe = std::pair<std::string, std::string>;
  for (const auto& [name, op] : {Probe{"probe_mma", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"},
                                 Probe{"probe_mma_f16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"}}) {
  SCOPED_TRACE(name);
  const Evaluation ev = probe(name);
  const Executed* m = ev.find("mma");
  ASSERT_NE(m, nullptr) << "no mma instruction in " << name;
  EXPECT_EQ(m->op, op);
  ASSERT_EQ(m->args.size(), 4u);  // D, A, B, C
  EXPECT_EQ(m->args[1], (Strings{"param0", "param1", "param2", "param3"}));  // a[0..3]
  EXPECT_EQ(m->args[2], (Strings{"param4", "param5"}));                      // b0, b1
  EXPECT_EQ(m->args[3], (Strings{"param6", "param7", "param8", "param9"}));  // c[0..3] accumulated into
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ev.stored("param10", 4 * i), fmt::format("mma[{}]", i)) << "c[" << i << "]";
  }
}

TEST(CudaCodegen, LdmatrixGivesRegisterIInROfEitherForm) {
  SKIP_WITHOUT_PTX();
  using Probe = std::pair<std::string, std::string>;  // kernel, the instruction it must issue
  for (const auto& [name, op] : {Probe{"probe_ldmatrix", "ldmatrix.sync.aligned.m8n8.x4.shared.b16"},
                                 Probe{"probe_ldmatrix_trans", "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"}}) {
    SCOPED_TRACE(name);
    const Evaluation ev = probe(name);
    const Executed* l = ev.find("ldmatrix");
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->op, op);
    ASSERT_EQ(l->args.size(), 2u);
    EXPECT_EQ(l->args[1], Strings{"[param0]"});  // the lane's row address: the smem pointer it was given
    for (int i = 0; i < 4; ++i) EXPECT_EQ(ev.stored("param1", 4 * i), fmt::format("ldmatrix[{}]", i));
  }
}

TEST(CudaCodegen, CpAsyncCopies16BytesOrZeroFillsByItsPredicateAndWaitsForTheTemplateCount) {
  SKIP_WITHOUT_PTX();
  const Evaluation ev = probe("probe_cp_async");
  std::vector<const Executed*> async;
  for (const auto& e : ev.executed)
    if (starts_with(e.op, "cp.async")) async.push_back(&e);
  ASSERT_EQ(async.size(), 3u);
  EXPECT_EQ(async[0]->op, "cp.async.cg.shared.global");
  // [dst], [src], cp-size, src-size: the predicate (row < rows) selects 16 bytes read, else 0 (zero fill).
  EXPECT_EQ(async[0]->args, (std::vector<Strings>{{"[param0]"}, {"[param1]"}, {"16"},
                                                  {"selp.b32(16,0,setp.lt.s32(param2,param3))"}}));
  EXPECT_EQ(async[1]->op, "cp.async.commit_group");
  EXPECT_EQ(async[2]->op, "cp.async.wait_group");
  EXPECT_EQ(async[2]->args, std::vector<Strings>{{"1"}});
}

TEST(CudaCodegen, PackPutsLoInTheLowHalfAsTheEmulatorDoes) {
  SKIP_WITHOUT_PTX();
  // cvt.rn.bf16x2.f32 d, a, b puts a in the upper half of d and b in the lower (PTX ISA, cvt).
  EXPECT_EQ(probe("probe_pack").stored("param2", 0), "cvt.rn.bf16x2.f32(param1,param0)");
  // ... and the emulator's pack_bf16(lo, hi) puts lo in the low half: the same layout.
  const uint32_t packed = attnprof::cuda::kernels::pack_bf16(1.0f, 2.0f);
  EXPECT_EQ(packed & 0xFFFFu, 0x3F80u);  // 1.0 in bf16
  EXPECT_EQ(packed >> 16, 0x4000u);      // 2.0 in bf16
  // pack_f16 (__floats2half2_rn): cvt.rn.f16x2.f32 with the same operand order, and the emulator's likewise.
  EXPECT_EQ(probe("probe_pack_f16").stored("param2", 0), "cvt.rn.f16x2.f32(param1,param0)");
  const uint32_t packed16 = attnprof::cuda::kernels::pack_f16(1.0f, 2.0f);
  EXPECT_EQ(packed16 & 0xFFFFu, 0x3C00u);  // 1.0 in fp16
  EXPECT_EQ(packed16 >> 16, 0x4000u);      // 2.0 in fp16
}

TEST(CudaCodegen, Exp2AndThe32BitLoadsAndStoresTouchWhatTheyAreGiven) {
  SKIP_WITHOUT_PTX();
  EXPECT_EQ(probe("probe_exp2").stored("param1", 0), "ex2.approx.ftz.f32(param0)");
  // The emulator's ex2.approx.ftz: 2^x, subnormal inputs and results flushed to zero.
  EXPECT_EQ(attnprof::cuda::kernels::exp2_ftz(3.0f), 8.0f);
  EXPECT_EQ(attnprof::cuda::kernels::exp2_ftz(-130.0f), 0.0f);  // 2^-130 is subnormal in fp32
  EXPECT_EQ(attnprof::cuda::kernels::exp2_ftz(1e-40f), 1.0f);   // a subnormal input counts as 0
  const Evaluation ev = probe("probe_ld_st32");
  EXPECT_EQ(ev.stored("param1", 0), "ld.global.u32([param0])");
  EXPECT_EQ(ev.stored("param3", 0), "param2");
}

// ---- ptxas: registers, spills, stack -----------------------------------------------------------------------

struct KernelResources {
  std::string name;  // demangled
  int registers = -1, stack = -1, spill_stores = -1, spill_loads = -1;
};

std::string demangle(const std::string& m) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(m.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : m;
}

// Runs ptxas -v on one PTX file; every entry function's resources, and the lines that were warnings.
std::vector<KernelResources> assemble(const std::string& ptx, const std::string& gpu, std::string& warnings) {
  const fs::path log = fs::temp_directory_path() / fmt::format("attnprof-ptxas-{}-{}.log", gpu, ::getpid());
  const std::string cmd = fmt::format("'{}' -v --gpu-name {} '{}' -o /dev/null >'{}' 2>&1", ATTNPROF_PTXAS, gpu, ptx,
                                      log.string());
  const int rc = std::system(cmd.c_str());
  const std::string out = attnprof::io::read_file(log.string());
  fs::remove(log);
  EXPECT_EQ(rc, 0) << cmd << "\n" << out;
  std::vector<KernelResources> ks;
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex regs(R"(Used (\d+) registers)");
  std::smatch m;
  for (const auto& line : split(out, '\n')) {
    if (line.find("warning") != std::string::npos) warnings += line + "\n";
    if (std::regex_search(line, m, entry)) ks.push_back({demangle(m[1]), -1, -1, -1, -1});
    if (ks.empty()) continue;
    if (std::regex_search(line, m, frame)) {
      ks.back().stack = std::stoi(m[1]);
      ks.back().spill_stores = std::stoi(m[2]);
      ks.back().spill_loads = std::stoi(m[3]);
    }
    if (std::regex_search(line, m, regs)) ks.back().registers = std::stoi(m[1]);
  }
  return ks;
}

TEST(CudaCodegen, EveryKernelAssemblesWithoutSpillsWithinItsLaunchBounds) {
  SKIP_WITHOUT_PTX();
  namespace frag = attnprof::cuda::frag;
  // Every flash instantiation flash.cu makes: (element type, D, warps, m_tiles, block_n, min_blocks).
  using Instance = std::tuple<std::string, int, int, int, int, int>;
  std::set<Instance> expected;
  for (const char* elem : {"ElemBf16", "ElemF16"})
    for (const auto& c : frag::kFlashConfigs)
      for (int d : {64, 128})
        if (c.supports(d)) expected.insert({elem, d, c.warps, c.m_tiles, c.block_n, c.min_blocks(d)});
  static const std::regex flash_args(
      R"(flash_fwd_kernel<[^<>]*?(ElemBf16|ElemF16), (\d+), (\d+), (\d+), (\d+), (\d+)>)");

  const auto archs = ptx_by_gpu();
  ASSERT_FALSE(archs.empty()) << ATTNPROF_PTX;
  for (const auto& [gpu, files] : archs) {
    SCOPED_TRACE(gpu);
    std::set<Instance> seen;
    int kernels = 0;
    ASSERT_FALSE(files.empty());
    for (const auto& ptx : files) {
      std::string warnings;
      for (const KernelResources& k : assemble(ptx, gpu, warnings)) {
        ++kernels;
        SCOPED_TRACE(k.name);
        ASSERT_GE(k.registers, 0) << "ptxas printed no register count";
        EXPECT_EQ(k.stack, 0);
        EXPECT_EQ(k.spill_stores, 0);
        EXPECT_EQ(k.spill_loads, 0);
        EXPECT_LE(k.registers, 255);
        std::smatch m;
        if (std::regex_search(k.name, m, flash_args)) {
          const int d = std::stoi(m[2]), warps = std::stoi(m[3]), min_blocks = std::stoi(m[6]);
          seen.insert({m[1], d, warps, std::stoi(m[4]), std::stoi(m[5]), min_blocks});
          // __launch_bounds__(threads, min_blocks): min_blocks blocks' registers must fit one SM's 64K.
          EXPECT_LE(k.registers * warps * 32 * std::max(min_blocks, 1), 65536);
          std::printf("%-7s flash %-8s D=%-3d warps=%d m_tiles=%s block_n=%s min_blocks=%d: %3d registers\n",
                      gpu.c_str(), m[1].str().c_str(), d, warps, m[4].str().c_str(), m[5].str().c_str(), min_blocks,
                      k.registers);
        }
      }
      EXPECT_EQ(warnings, "") << ptx;
    }
    EXPECT_EQ(seen, expected) << "the flash instantiations ptxas saw are not fragment.h's kFlashConfigs";
    EXPECT_GT(kernels, int(expected.size()));  // the unfused kernels too
  }
}

}  // namespace
