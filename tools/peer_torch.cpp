// compare --peer torch: PyTorch on the same inputs, in a python interpreter of the user's choosing (Debian's
// python3-torch 1.13, or a newer torch in a virtual environment), timed by its own clock and checked against
// the same fp64 reference as attnprof's variants: the blog's five-op script and torch's SDPA entry point.
//
// The child's stdin, stdout and stderr are anonymous in-memory files (memfd): the inputs go in as three .npy
// arrays, the outputs come back as a JSON line followed by one .npy array per row that ran. Nothing is written
// to disk, so neither an error nor a signal leaves a file behind, and the child never blocks on a pipe.
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>
#include <cmath>
#include <cstring>

#include "attnprof/allocator.h"
#include "attnprof/analysis.h"
#include "attnprof/npy.h"
#include "common.h"

extern char** environ;

namespace attnprof::cli {
namespace {

// The running peer's process group (its interpreter's pid), 0 when none runs: read by the signal handler.
std::atomic<pid_t> g_peer_group{0};

// argv: probe | run DTYPE CAUSAL THREADS WARMUP ITERS SCALE NAIVE WARMUP_MIN_S MAX_FORWARDS SDPA. Exit 3: numpy or torch cannot be imported.
constexpr const char* kScript = R"PY(
import json, os, stat, sys, threading, time
def exit_with_parent():  # attnprof killed outright (SIGKILL, the OOM killer) runs no handler: stop with it
    parent = os.getppid()
    def watch():
        # A pipe whose only writer is attnprof: nothing is written, and the read ends when attnprof is gone,
        # however the interpreter was started (a --python wrapper that did not exec it stays its parent).
        fd = os.environ.get("ATTNPROF_PEER_LIVE_FD", "")
        try:
            if fd.isdigit() and stat.S_ISFIFO(os.fstat(int(fd)).st_mode):
                while os.read(int(fd), 1):
                    pass
                os._exit(137)
        except OSError:
            pass
        while os.getppid() == parent:  # the pipe did not come through: attnprof as the parent
            time.sleep(0.2)
        os._exit(137)
    threading.Thread(target=watch, daemon=True).start()
def busy_seconds():  # CPU time every CPU spent not idle, as attnprof reads /proc/stat; None unreadable
    try:
        with open("/proc/stat") as f:
            v = f.readline().split()
        if v[0] != "cpu":
            return None
        user, nice, system, idle, iowait, irq, softirq, steal = (float(x) for x in v[1:9])
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    except Exception:
        return None
def main():
    exit_with_parent()
    try:
        import numpy as np
        import torch
    except Exception as e:
        sys.stderr.write("%s: %s\n" % (type(e).__name__, e))
        return 3
    if sys.argv[1] == "probe":
        print(json.dumps({"torch": torch.__version__, "numpy": np.__version__}))
        return 0
    dtype, causal, threads = sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
    warmup, iters, scale, run_naive = int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]), sys.argv[8] == "1"
    warmup_min_s = float(sys.argv[9])  # then more warm-up forwards until this long has passed, as attnprof's
    max_forwards = int(sys.argv[10])   # ... but never more than attnprof's own cap on them
    run_sdpa = sys.argv[11] == "1"
    torch.set_num_threads(threads)
    src = sys.stdin.buffer
    def tensor(a):  # bf16 travels as its 16-bit patterns ('<u2'), as attnprof writes it
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if dtype == "bf16" else torch.from_numpy(a)
    q, k, v = tensor(np.load(src)), tensor(np.load(src)), tensor(np.load(src))
    if k.shape[1] != q.shape[1]:  # grouped-query attention: each K/V head serves Hq / Hkv query heads
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    nq, nk, d = q.shape[2], k.shape[2], q.shape[3]
    mask = torch.ones(nq, nk, dtype=torch.bool).triu(1) if causal else None  # top-left, as is_causal
    default_scale = abs(scale * d ** 0.5 - 1.0) < 1e-12
    def naive():  # the blog's script: five ops, each allocating its result
        s = torch.matmul(q, k.transpose(-2, -1))
        s = s * scale
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        return torch.matmul(torch.softmax(s, dim=-1), v)
    F = torch.nn.functional
    if hasattr(F, "scaled_dot_product_attention"):
        sdpa_call = "torch.nn.functional.scaled_dot_product_attention"
        kw = {} if default_scale else {"scale": scale}
        def sdpa():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)
    else:  # torch 1.13: the private entry point, returning (output, weights)
        sdpa_call = "torch.nn.functional._scaled_dot_product_attention"
        def sdpa():
            if not default_scale:
                raise ValueError("this torch's SDPA has no scale argument")
            return F._scaled_dot_product_attention(q, k, v, None, 0.0, False, causal)[0]
    rows, outputs = [], []
    naive_call = "matmul, mul, masked_fill, softmax, matmul" if causal else "matmul, mul, softmax, matmul"
    for name, call, fn in (("torch-naive", naive_call, naive),
                           ("torch-sdpa", sdpa_call, sdpa)):
        row = {"name": name, "call": call}
        rows.append(row)
        if (name == "torch-naive" and not run_naive) or (name == "torch-sdpa" and not run_sdpa):
            row["skipped"] = True
            continue
        try:
            with torch.no_grad():
                # What ran beside the forwards, from the first warm-up, as attnprof measures its own.
                busy0, own0, wall0 = busy_seconds(), time.process_time(), time.perf_counter()
                warm, t_warm = 0, time.perf_counter()
                while warm < warmup or (warm < max_forwards and time.perf_counter() - t_warm < warmup_min_s):
                    fn()
                    warm += 1
                ms = []
                for _ in range(iters):
                    t0 = time.perf_counter()
                    out = fn()
                    ms.append((time.perf_counter() - t0) * 1e3)
                busy1, own1, wall1 = busy_seconds(), time.process_time(), time.perf_counter()
        except Exception as e:
            row["error"] = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
            continue
        row["forward_ms"] = ms
        if busy0 is not None and busy1 is not None:  # what ran beside the timed forwards
            row["beside"] = {"machine_busy_s": busy1 - busy0, "own_cpu_s": own1 - own0, "wall_s": wall1 - wall0}
        outputs.append(out.float().contiguous().numpy())
    sys.stdout.write(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "rows": rows}) + "\n")
    sys.stdout.flush()
    for a in outputs:
        np.save(sys.stdout.buffer, a)
    sys.stdout.buffer.flush()
    return 0
sys.exit(main())
)PY";

// An anonymous in-memory file, for one of the child's standard streams.
class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(::memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) ATTNPROF_FAIL("--peer torch: memfd_create failed: {}", std::strerror(errno));
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  int fd() const { return fd_; }
  void append(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ATTNPROF_FAIL("--peer torch: writing the inputs for the peer failed: {}", std::strerror(errno));
      data.remove_prefix(size_t(n));
    }
  }
  std::string contents() const {
    std::string out;
    char buf[1 << 16];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(fd_, buf, sizeof buf, at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) ATTNPROF_FAIL("--peer torch: reading the peer's output failed: {}", std::strerror(errno));
      if (n == 0) return out;
      out.append(buf, size_t(n));
      at += n;
    }
  }
  void rewind() const { ::lseek(fd_, 0, SEEK_SET); }

 private:
  int fd_;
};

struct Child {
  int status = 0;
  std::string out, err;
  bool exited(int code) const { return WIFEXITED(status) && WEXITSTATUS(status) == code; }
  // The child's last line on stderr (a traceback's last line says what went wrong), or how it ended.
  std::string why() const {
    std::string_view e(err);
    while (!e.empty() && (e.back() == '\n' || e.back() == ' ')) e.remove_suffix(1);
    const std::string last(e.substr(e.find_last_of('\n') == std::string_view::npos ? 0 : e.find_last_of('\n') + 1));
    const std::string how = WIFSIGNALED(status) ? fmt::format("killed by signal {} ({})", WTERMSIG(status),
                                                              strsignal(WTERMSIG(status)))
                                                : fmt::format("exit status {}", WEXITSTATUS(status));
    return last.empty() ? how : fmt::format("{} ({})", terminal_line(last), how);
  }
};

// Runs `python -c SCRIPT args...` with stdin from `in` (read from its start) and waits for it: at most
// `timeout_s` seconds when > 0, after which it is killed and an Error names the limit.
// `limit`: the limit timeout_s is, as the message of a run stopped at it names it ("" for --peer-timeout's).
// `slow_note`: a progress line for a run that has taken more than 5 s (with timeout_s > 0), so a wait is not silent.
Child run_python(const std::string& python, const std::vector<std::string>& args, const MemFile& in, int timeout_s,
                 const std::string& limit = "", const std::string& slow_note = "") {
  const MemFile out("attnprof-peer-out"), err("attnprof-peer-err");
  in.rewind();
  std::vector<std::string> argv = {python, "-c", kScript};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  // The interpreter's sign of attnprof's life: the read end of a pipe, as fd 3, whose write end only attnprof
  // holds (close-on-exec: no child gets it). When attnprof ends, however it ends, the read sees end-of-file.
  int live[2];
  if (::pipe2(live, O_CLOEXEC) != 0) ATTNPROF_FAIL("--peer torch: pipe2 failed: {}", std::strerror(errno));
  const struct Closer {
    int* fds;
    ~Closer() {
      ::close(fds[0]);
      ::close(fds[1]);
    }
  } close_live{live};
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (std::string_view(*e).rfind("ATTNPROF_PEER_LIVE_FD=", 0) != 0) env_strings.emplace_back(*e);
  env_strings.emplace_back("ATTNPROF_PEER_LIVE_FD=3");
  // OMP_MAX_ACTIVE_LEVELS=0 makes every OpenMP team of the peer's torch one thread while it still reports the
  // count: raised to 1 for it, as attnprof raises it for itself (ops::set_num_threads).
  for (std::string& e : env_strings)
    if (e.rfind("OMP_MAX_ACTIVE_LEVELS=", 0) == 0 && e.find_first_not_of("0 ", 22) == std::string::npos)
      e = "OMP_MAX_ACTIVE_LEVELS=1";
  std::vector<char*> cenv;
  for (std::string& e : env_strings) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in.fd(), 0);
  posix_spawn_file_actions_adddup2(&fa, out.fd(), 1);
  posix_spawn_file_actions_adddup2(&fa, err.fd(), 2);
  posix_spawn_file_actions_adddup2(&fa, live[0], 3);
  // In a process group of its own, so that a timeout or a signal that ends attnprof ends everything the
  // interpreter started too (torch's worker threads are threads; a --python wrapper script's children are not).
  // Signals wait while the interpreter starts and its group is recorded (one arriving in between would end
  // attnprof without the handler knowing of the group); the interpreter starts with the mask as it was.
  sigset_t all, before;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &before);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &before);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, python.c_str(), &fa, &attr, cargv.data(), cenv.data());
  if (rc == 0) g_peer_group.store(pid, std::memory_order_release);
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    ATTNPROF_FAIL("--peer torch: cannot start the python interpreter '{}': {} (pass --python with the path of one "
                  "that has torch)",
                  python, std::strerror(rc));
  Child c;
  // Ends the group (what the interpreter started goes with it) and reaps the interpreter. It is waited for
  // without being reaped first (WNOWAIT), so the group's id cannot pass to another process before the kill.
  const auto end_group = [&] {
    ::kill(-pid, SIGKILL);
    g_peer_group.store(0, std::memory_order_release);  // before the reaping frees the group's id for reuse
    while (::waitpid(pid, &c.status, 0) < 0 && errno == EINTR) {
    }
  };
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + std::chrono::seconds(timeout_s);
  bool noted = slow_note.empty();
  for (;;) {
    siginfo_t info{};
    const int w = ::waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT | (timeout_s > 0 ? WNOHANG : 0));
    if (w == 0 && info.si_pid == pid) break;
    if (w < 0 && errno != EINTR) {
      const int e = errno;
      end_group();
      ATTNPROF_FAIL("--peer torch: waiting for '{}' failed: {}", python, std::strerror(e));
    }
    if (w == 0 && std::chrono::steady_clock::now() >= deadline) {
      end_group();
      ATTNPROF_FAIL("--peer torch: '{}' did not finish within {} and was stopped", python,
                    limit.empty() ? fmt::format("--peer-timeout {} s", timeout_s) : limit);
    }
    if (w == 0 && !noted && std::chrono::steady_clock::now() - started >= std::chrono::seconds(5)) {
      progress(slow_note);
      noted = true;
    }
    if (w == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  end_group();  // the interpreter has exited; what it left running in its group (a wrapper's children) goes too
  c.out = out.contents();
  c.err = err.contents();
  return c;
}

// The probe's limit when --peer-timeout gives none: importing torch takes seconds, from a cold disk tens.
constexpr int kProbeLimitS = 300;

std::string no_torch_message(const std::string& python, const Child& c) {
  return fmt::format("--peer torch: '{}' cannot import numpy and torch: {}; install Debian's python3-torch "
                     "(apt-get install python3-torch) or pass --python with an interpreter that has them",
                     python, c.why());
}

// The JSON line the script prints first, or an Error naming what came instead.
nlohmann::json result_line(const std::string& python, const Child& c, size_t& end) {
  end = c.out.find('\n');
  try {
    if (end == std::string::npos) throw std::runtime_error("no line");
    nlohmann::json j = nlohmann::json::parse(c.out.substr(0, end));
    if (!j.is_object() || !j.contains("torch") || !j["torch"].is_string()) throw std::runtime_error("no torch version");
    ++end;
    return j;
  } catch (const std::exception&) {
    ATTNPROF_FAIL("--peer torch: '{}' printed no result ({})", python, c.why());
  }
}

// True when this torch composes SDPA on the CPU from the math path, which holds N×N scores: every torch before
// 2.1, which added a CPU flash kernel. A version it cannot read counts as one that does (checked, not assumed).
bool sdpa_holds_scores(const std::string& torch_version) {
  int major = 0, minor = 0;
  if (std::sscanf(torch_version.c_str(), "%d.%d", &major, &minor) != 2) return true;
  return major < 2 || (major == 2 && minor < 1);
}

}  // namespace

void kill_peer_on_signal() noexcept {
  if (const pid_t g = g_peer_group.load(std::memory_order_acquire); g > 0) ::kill(-g, SIGKILL);
}

void add_peer_options(CLI::App* sub, PeerOptions& po, const std::string& what, const std::string& on_timeout) {
  sub->add_option("--peer", po.peer,
                  "torch: also run PyTorch on the same inputs (the blog's five-op script and its SDPA), timed in its "
                  "own process and checked against the same fp64 reference, " + what +
                      " (CPU only; needs torch in --python)");
  po.python_opt = sub->add_option("--python", po.python, "the python interpreter for --peer torch (default python3 on PATH)");
  po.timeout_opt = add_integer_option(
      sub, "--peer-timeout", po.timeout,
      "seconds the peer's python may take (its probe, then each run), after which it is stopped and " + on_timeout +
          " (default 0: no limit; torch 1.13's naive takes seconds per forward at large shapes)",
      0, 86400);
}

void check_peer_options(const PeerOptions& po, bool gpu) {
  if (po.python_opt->count() > 0 && !po.on()) ATTNPROF_FAIL("--python applies with --peer torch only");
  if (po.timeout_opt->count() > 0 && !po.on()) ATTNPROF_FAIL("--peer-timeout applies with --peer torch only");
  if (po.on() && po.peer != "torch") ATTNPROF_FAIL("unknown --peer '{}': expected torch", po.peer);
  if (po.on() && gpu)
    ATTNPROF_FAIL("--peer torch runs on the CPU backend; on a GPU, scripts/gpu-check.sh runs PyTorch's peer");
}

std::string probe_peer(const PeerOptions& po) { return po.on() ? probe_torch_peer(po.python, po.timeout) : ""; }

std::string probe_torch_peer(const std::string& python, int timeout_s) {
  const MemFile in("attnprof-peer-in");
  // The probe only imports numpy and torch: without --peer-timeout it still has a limit, so an interpreter that
  // never returns (a wrapper waiting on input, a hung import) ends the run with a message instead of holding it.
  const int limit = timeout_s > 0 ? timeout_s : kProbeLimitS;
  const Child c = run_python(python, {"probe"}, in, limit,
                             timeout_s > 0 ? "" : fmt::format("its {} s limit for the probe (no --peer-timeout given)", limit),
                             fmt::format("attnprof: --peer torch: still importing numpy and torch in '{}' (stopped "
                                         "after {} s)",
                                         python, limit));
  if (c.exited(3)) ATTNPROF_FAIL("{}", no_torch_message(python, c));
  if (!c.exited(0)) ATTNPROF_FAIL("--peer torch: '{}' failed before running anything: {}", python, c.why());
  size_t end = 0;
  return terminal_line(result_line(python, c, end)["torch"].get<std::string>());
}

std::array<std::string, 2> peer_budget_skips(const AttnProblem& p, const std::string& torch_version) {
  // Its inputs, our copy of them for its stdin, the fp32 outputs coming back, and three N×N tensors: checked
  // against the same memory budget as attnprof's naive.
  const double nn = double(p.B) * double(p.Hq) * double(p.Nq) * double(p.Nk) * double(dtype_size(p.dtype));
  const double outputs = double(p.B) * double(p.Hq) * double(p.Nq) * double(p.D) * 4.0;
  const auto skip = [&](const std::string& what) -> std::string {
    try {
      check_memory_budget(2 * input_bytes(p) + 2 * outputs + 3 * nn, fmt::format("{} at {}", what, p.str()));
    } catch (const OutOfBudget& e) {
      return e.what();
    }
    return "";
  };
  return {skip("torch-naive (its inputs, its outputs and three N×N score tensors)"),
          sdpa_holds_scores(torch_version)
              ? skip(fmt::format("torch-sdpa (torch {} composes it on the CPU from the math path: its inputs, its "
                                 "outputs and three N×N score tensors, as the blog's script)",
                                 torch_version))
              : ""};
}

PeerRun run_torch_peer(const Inputs& in, const std::string& python, const std::string& torch_version, int threads,
                       int warmup, double warmup_min_s, int iters, const Tolerance& tol, const PeerCheck& check,
                       int timeout_s) {
  const AttnProblem& p = in.p;
  PeerRun run;
  run.python = python;
  run.torch_version = torch_version;
  run.threads = threads;
  const std::array<std::string, 2> skips = peer_budget_skips(p, torch_version);
  const std::string& naive_skip = skips[0];
  const std::string& sdpa_skip = skips[1];
  if (!naive_skip.empty() && !sdpa_skip.empty()) {  // nothing to run: no interpreter started
    for (size_t i = 0; i < kPeerRows.size(); ++i) {
      PeerRow row;
      row.name = kPeerRows[i];
      row.status = RunOutcome::Status::Skipped;
      row.note = skips[i];
      row.tol = tol;
      run.rows.push_back(std::move(row));
    }
    return run;
  }
  MemFile stdin_file("attnprof-peer-in");
  for (const Tensor* t : {&in.q, &in.k, &in.v}) stdin_file.append(npy::to_bytes(*t));
  const double scale = in.opt.scale.value_or(1.0 / std::sqrt(double(p.D)));
  const Child c = run_python(python,
                             {"run", std::string(dtype_name(p.dtype)), p.mask == MaskKind::Causal ? "1" : "0",
                              std::to_string(threads), std::to_string(warmup), std::to_string(iters),
                              fmt::format("{:.17g}", scale), naive_skip.empty() ? "1" : "0",
                              fmt::format("{:g}", warmup_min_s), std::to_string(kMaxWarmupForwards),
                              sdpa_skip.empty() ? "1" : "0"},
                             stdin_file, timeout_s);
  if (c.exited(3)) ATTNPROF_FAIL("{}", no_torch_message(python, c));
  if (!c.exited(0)) ATTNPROF_FAIL("--peer torch: '{}' failed: {}", python, c.why());
  size_t at = 0;
  const nlohmann::json j = result_line(python, c, at);
  run.torch_version = terminal_line(j["torch"].get<std::string>());
  // Its thread count is set from ours (torch.set_num_threads): another figure means it ran on other terms.
  if (!j.contains("threads") || !j["threads"].is_number_integer() || j["threads"].get<int64_t>() != threads)
    ATTNPROF_FAIL("--peer torch: '{}' reports {} threads, where it was asked for {}", python,
                  j.contains("threads") ? terminal_line(j["threads"].dump()) : "no", threads);
  run.threads = threads;
  if (!j.contains("rows") || !j["rows"].is_array()) ATTNPROF_FAIL("--peer torch: '{}' printed no rows", python);
  // Both rows, once each and in order (a skipped one says so): a row left out or printed twice would drop or
  // repeat a line of the comparison without a word.
  std::vector<std::string> names;  // as printed, byte for byte: a control character makes another name
  for (const nlohmann::json& r : j["rows"]) names.push_back(report::string_field(r, "name"));
  if (names != std::vector<std::string>(kPeerRows.begin(), kPeerRows.end())) {
    for (std::string& n : names) n = nlohmann::json(n).dump(-1, ' ', /*ensure_ascii=*/true);  // as JSON: every byte seen
    ATTNPROF_FAIL("--peer torch: '{}' printed the rows [{}], expected torch-naive and torch-sdpa once each, in that "
                  "order", python, fmt::join(names, ", "));
  }
  for (const nlohmann::json& r : j["rows"]) {
    PeerRow row;
    row.name = report::string_field(r, "name");
    row.call = terminal_line(report::string_field(r, "call"));
    row.tol = tol;
    if (r.contains("skipped") && r["skipped"] == true) {
      row.status = RunOutcome::Status::Skipped;
      const std::string& asked = row.name == kPeerRows[0] ? naive_skip : sdpa_skip;
      row.note = asked.empty() ? "the peer skipped it unasked" : asked;
    } else if (r.contains("error")) {
      row.status = RunOutcome::Status::Skipped;
      row.note = "torch " + run.torch_version + " raised " +
                 terminal_line(r["error"].is_string() ? r["error"].get<std::string>() : "an error");
    } else {
      const nlohmann::json& ms = r.value("forward_ms", nlohmann::json());
      if (!ms.is_array() || ms.empty() || !std::all_of(ms.begin(), ms.end(), [](const nlohmann::json& x) {
            return x.is_number() && x.get<double>() >= 0;
          }))
        ATTNPROF_FAIL("--peer torch: '{}' printed no forward times for {}", python, row.name);
      // One time per timed forward, each one a forward could take: from a nanosecond (perf_counter's grain) to
      // a day. A 0, a 1e-300 or a 1e308 would print as an infinite or 300-digit speed-up.
      if (ms.size() != size_t(iters))
        ATTNPROF_FAIL("--peer torch: '{}' printed {} forward times for {}, where it was asked to time {}", python,
                      ms.size(), row.name, iters);
      for (const nlohmann::json& x : ms)
        if (const double v = x.get<double>(); !(v >= 1e-6 && v <= 86.4e6))
          ATTNPROF_FAIL("--peer torch: '{}' printed a forward time of {} ms for {}: no forward takes that (1 ns .. "
                        "1 day)", python, terminal_line(x.dump()), row.name);
      for (const nlohmann::json& x : ms) row.forward_ms.push_back(x.get<double>());
      row.ms = analysis::median(row.forward_ms);
      // The other work beside its timed forwards, judged as the variants' is (its own threads are its CPU time).
      if (const nlohmann::json& b = r.value("beside", nlohmann::json()); b.is_object()) {
        auto number = [&b](const char* key) {
          return b.contains(key) && b[key].is_number() ? b[key].get<double>() : std::nan("");
        };
        row.sharing = analysis::cpu_sharing(number("machine_busy_s"), number("own_cpu_s"), number("wall_s"),
                                            run.threads > 0 ? run.threads : threads);
        if (const double wall = number("wall_s"); wall >= 0) row.sharing_window_s = wall;
      }
      // Its output, the next .npy array on stdout: fp32 [B, Hq, Nq, D], checked against the fp64 reference.
      if (at >= c.out.size()) ATTNPROF_FAIL("--peer torch: '{}' returned no output for {}", python, row.name);
      const npy::Header h = npy::parse_header(c.out.data() + at, c.out.size() - at, "the peer's " + row.name + " output");
      if (h.data_bytes > c.out.size() - at - h.data_offset)  // never read past what it printed
        ATTNPROF_FAIL("--peer torch: the peer's {} output is cut short: its shape needs {} data bytes, {} came",
                      row.name, h.data_bytes, c.out.size() - at - h.data_offset);
      const Tensor out = npy::load_from_memory(c.out.data() + at, h.data_offset + h.data_bytes,
                                               "the peer's " + row.name + " output");
      at += h.data_offset + h.data_bytes;
      const Shape4 want{p.B, p.Hq, p.Nq, p.D};
      if (out.shape() != want)
        ATTNPROF_FAIL("--peer torch: the peer's {} output has shape {}, expected {}", row.name, shape_str(out.shape()),
                      shape_str(want));
      row.err = check(out, tol);
      row.status = row.err.ok() ? RunOutcome::Status::Ok : RunOutcome::Status::Failed;
      if (!row.err.ok()) row.note = validation_failure(row.err, tol);
    }
    run.rows.push_back(std::move(row));
  }
  if (at != c.out.size())
    ATTNPROF_FAIL("--peer torch: '{}' printed {} bytes after its outputs (an output no row owns)", python,
                  c.out.size() - at);
  return run;
}

}  // namespace attnprof::cli
