// attnprof sweep: time and peak memory over sequence lengths, and the scaling exponents fitted on log-log
// (expect time ≈ N^2 for every variant; memory ≈ N^2 for the naive paths that hold N×N scores, ≈ N for
// flash). Points over the memory budget are skipped with a note. Every point is validated before it is timed:
// the first and the last head of the output against the fp64 reference of those heads. `--device cuda`
// sweeps the CUDA registry on the GPU: CUDA-event times and device memory.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include <fmt/ranges.h>

#include "attnprof/allocator.h"
#include "attnprof/cuda.h"
#include "attnprof/ops.h"
#include "attnprof/report.h"
#include "common.h"

namespace attnprof::cli {
namespace {

struct SweepArgs {
  CommonOptions common;
  std::string seq = "256..8192";
  std::string variants = "naive,flash";
  std::string backend;
  std::string device = "cpu";
  bool variants_given = false;  // named on the command line (not the default list)
  PeerOptions peer;             // --peer torch: PyTorch's two rows at every N (peer_torch.cpp)
};

// Longer sequences could not be held by any machine (and doubling past 2^62 would overflow).
constexpr int64_t kMaxSeq = int64_t(1) << 31;

// `note` gets where a FIRST..LAST range stopped short of LAST, for the caller to print once every input is checked.
std::vector<int64_t> parse_seq(const std::string& s, std::string& note) {
  // Each length as every integer option reads it (plain_decimal): no spaces, '+' or hex.
  auto num = [&](const std::string& t) -> int64_t {
    if (t.empty())
      ATTNPROF_FAIL("malformed --seq '{}': a length is missing; expected FIRST..LAST (doubling) or a list like "
                    "256,768,1024",
                    s);
    const std::optional<__int128> v = plain_decimal(t);
    if (!v)
      ATTNPROF_FAIL("malformed --seq '{}': '{}' is not a decimal integer; expected FIRST..LAST (doubling) or a list "
                    "like 256,768,1024",
                    s, t);
    if (*v <= 0) ATTNPROF_FAIL("--seq: sequence lengths must be positive, got {}", t);
    if (*v > kMaxSeq) ATTNPROF_FAIL("--seq: {} is too long: at most 2^31 = {}", t, kMaxSeq);
    return int64_t(*v);
  };
  std::vector<int64_t> out;
  if (const size_t dots = s.find(".."); dots != std::string::npos) {
    const int64_t first = num(s.substr(0, dots)), last = num(s.substr(dots + 2));
    if (last < first) ATTNPROF_FAIL("--seq '{}': the last length is smaller than the first", s);
    for (int64_t n = first; n <= last; n *= 2) out.push_back(n);
    // A range that doubles past LAST at once gives one point, and no scaling fit: a mistake, not a sweep.
    if (out.size() == 1 && last != first)
      ATTNPROF_FAIL("--seq '{}' gives the one length {}: doubling from {} passes {} at once (name a LAST of at least "
                    "{}, or list the lengths: {},{})",
                    s, first, first, last, 2 * first, first, last);
    if (out.back() != last)
      note = fmt::format("--seq {}: doubling from {} stops at {} (the next, {}, passes {})", s, first, out.back(),
                         2 * out.back(), last);
    return out;
  }
  for (const std::string& part : split_list(s)) {
    const int64_t n = num(part);
    if (std::find(out.begin(), out.end(), n) != out.end())
      ATTNPROF_FAIL("--seq '{}' lists N={} twice: each length is one point of the scaling fit", s, n);
    out.push_back(n);
  }
  return out;
}

struct Point {
  std::string variant;
  int64_t seq = 0;
  double ms = 0;
  double gflops = 0;    // attention FLOPs (causal halved) per forward / ms
  double pct_peak = 0;  // gflops over the target's peak (0 when it has none)
  std::vector<double> forward_ms;  // every timed forward (host); the GPU keeps only the median
  int64_t peak_bytes = 0;  // above the inputs (and prepared state) live before the forward; -1: not measured (peer)
  double max_abs_err = -1;  // of the spot-checked heads against fp64; -1 when not validated
  std::optional<analysis::CpuSharing> sharing;  // host: the other work beside the timed forwards, when measurable
  double sharing_window_s = -1.0;                // host: the stretch it was measured over (warm-ups included)
  std::string status = "ok", note;
  bool peer = false;  // a --peer torch row: torch in its own process, not one of attnprof's variants
  std::string call;   // the peer's: what ran
};

// [1, 1, N, D] copy of head (b, h) of a [B, H, N, D] tensor.
Tensor head_of(const Tensor& t, int64_t b, int64_t h) {
  const Tensor c = t.contiguous();
  Tensor out = Tensor::empty({1, 1, c.shape(2), c.shape(3)}, c.dtype());
  const size_t offset = size_t((b * c.shape(1) + h) * c.shape(2) * c.shape(3)) * c.element_size();
  std::memcpy(out.raw(), static_cast<const char*>(c.raw()) + offset, out.nbytes());
  return out;
}

// An output's first and last head checked against the fp64 reference of those heads (a full reference at
// N = 8192 would cost minutes; every head runs the same code).
ErrorStats check_heads(const Tensor& out, const Inputs& in, const Tolerance& tol) {
  const int64_t G = in.p.Hq / in.p.Hkv;
  ErrorStats worst;
  for (const auto& [b, h] : {std::pair<int64_t, int64_t>{0, 0}, {in.p.B - 1, in.p.Hq - 1}}) {
    const Reference ref = reference_attention(head_of(in.q, b, h), head_of(in.k, b, h / G), head_of(in.v, b, h / G),
                                              in.opt);
    const ErrorStats e = compare_to_reference(head_of(out, b, h), ref, tol);
    if (e.max_abs >= worst.max_abs) worst.max_abs = e.max_abs;
    worst.violations += e.violations;
    worst.non_finite += e.non_finite;
    worst.count += e.count;
  }
  return worst;
}

// The point's status and note from the check of its heads: false, marked failed, when it did not pass.
bool record_check(const ErrorStats& err, const Tolerance& tol, Point& pt) {
  pt.max_abs_err = err.max_abs;
  if (err.ok()) return true;
  pt.status = "failed";
  pt.note = validation_failure(err, tol) + " (of the first and last head, the ones checked)";
  return false;
}

// One forward of the point, its heads checked (check_heads). False, with the point marked failed, when a checked
// element is outside the variant's tolerance.
bool spot_check(Runner& runner, const Variant& v, const Inputs& in, Point& pt) {
  const AttnOutput out = runner.run(in.q, in.k, in.v);
  const Tolerance tol = v.tolerance(in.p.dtype);
  return record_check(check_heads(out.out, in, tol), tol, pt);
}

// One point on the host: `warmup` forwards (the validation forward counting as the first; without --warmup,
// more until kWarmupFloorS has passed), then the median of `iters` timed ones and the largest peak above what
// was live before each.
void measure_on_host(Runner& runner, const Inputs& in, const CommonOptions& o, Point& pt) {
  const analysis::OtherWork beside;  // from the first warm-up, as compare's
  (void)warm_up(o.warmup - 1, warmup_floor_s(o), [&] { (void)runner.run(in.q, in.k, in.v); });
  std::vector<double> ms;
  for (int i = 0; i < o.iters; ++i) {
    reset_peak_memory();
    const int64_t before = memory_stats().current_bytes;
    const double t = now_s();
    {
      AttnOutput out = runner.run(in.q, in.k, in.v);
      ms.push_back(elapsed_s(t) * 1e3);
    }
    pt.peak_bytes = std::max(pt.peak_bytes, memory_stats().peak_bytes - before);
  }
  pt.ms = median(ms);
  pt.forward_ms = std::move(ms);
  pt.sharing = analysis::cpu_sharing(beside, ops::num_threads());
  pt.sharing_window_s = beside.seconds();
}

// One point on the GPU: inputs uploaded once, one forward for the device memory peak above the inputs, then
// `warmup` forwards and the median of at least 10 timed with CUDA events (a forward at small N takes
// microseconds). The allocator's cache is emptied afterwards so that the next length starts from nothing.
void measure_on_device(Runner& runner, const Inputs& in, const CommonOptions& o, Point& pt) {
  auto* dev = dynamic_cast<cuda::DeviceRunner*>(&runner);
  ATTNPROF_CHECK(dev, "CUDA variant {} has no device runner", pt.variant);
  {
    const cuda::DeviceTensor dq = cuda::DeviceTensor::from_host(in.q), dk = cuda::DeviceTensor::from_host(in.k),
                             dv = cuda::DeviceTensor::from_host(in.v);
    pt.peak_bytes = device_forward_peak(*dev, dq, dk, dv).extra;
    pt.ms = cuda::time_device_forward(*dev, dq, dk, dv, o.warmup, std::max(o.iters, 10)).median_ms;
  }
  cuda::empty_cache();
}

// A progress bar with an ETA on a terminal; plain lines otherwise (logs, CI, tests). Each point is an item of
// the plan: its series (a variant, or torch's two rows) and its work (attention FLOPs of its forwards). The ETA
// is the work left in each series at the rate that series' latest measured point ran (with --seq in rising
// order, a larger N at the rate of the largest yet), and at the rate of all measured points for a series not
// yet begun; only points that ran
// kRateSeconds or more give a rate, and until one has the ETA is "--". A small point's time is mostly fixed costs
// (inputs, the reference check): extrapolated by FLOPs, N doubling, it had put a 10 s sweep's first ETA at 500 s.
class Progress {
 public:
  struct Item {
    size_t series;
    double work;
  };
  explicit Progress(std::vector<Item> plan) : plan_(std::move(plan)), tty_(::isatty(2) != 0), t0_(now_s()) {
    for (const Item& it : plan_) total_ += it.work;
  }
  // Item k begins.
  void start(size_t k, const std::string& what) {
    current_ = k;
    started_ = now_s();
    show(what);
  }
  // Item k ended; `measured`: it ran (a skipped point's time says nothing of the rate).
  void end(size_t k, bool measured) {
    const double dt = now_s() - started_;
    done_ += plan_[k].work;
    if (measured && dt >= kRateSeconds && plan_[k].work > 0) {
      rate_[plan_[k].series] = plan_[k].work / dt;
      measured_work_ += plan_[k].work;
      measured_s_ += dt;
    }
    current_ = k + 1;
  }
  size_t items() const { return plan_.size(); }
  void finish(const char* how) {
    show(how);
    if (tty_) std::fputc('\n', stderr);
  }

 private:
  // Seconds left, or a negative number while no point has been measured.
  double eta() const {
    if (measured_s_ <= 0) return -1;
    double left = 0;
    for (size_t k = current_; k < plan_.size(); ++k) {
      const auto r = rate_.find(plan_[k].series);
      left += plan_[k].work / (r != rate_.end() ? r->second : measured_work_ / measured_s_);
    }
    if (current_ < plan_.size()) left -= std::min(left, now_s() - started_);  // the running item's time so far
    return left;
  }
  void show(const std::string& what) {
    const double el = elapsed_s(t0_);
    const double frac = total_ > 0 ? std::min(1.0, done_ / total_) : 1.0;
    const double left = eta();
    const std::string eta_text = left < 0 ? "--" : fmt::format("{:.1f}s", left);
    if (tty_) {
      const int width = 30, fill = int(frac * width + 0.5);
      print_err("\r[{}{}] {:3.0f}% {:<28} elapsed {:5.1f}s ETA {:>6}", std::string(size_t(fill), '#'),
                std::string(size_t(width - fill), '.'), frac * 100, what, el, eta_text);
      std::fflush(stderr);
    } else {
      progress(fmt::format("sweep: {} ({:.0f}% of the work, elapsed {:.1f}s, ETA {})", what, frac * 100, el, eta_text));
    }
  }
  static constexpr double kRateSeconds = 0.25;
  std::vector<Item> plan_;
  double total_ = 0, done_ = 0, measured_work_ = 0, measured_s_ = 0;
  std::map<size_t, double> rate_;  // work per second of each series' last measured point
  size_t current_ = 0;
  double started_ = 0;
  bool tty_;
  double t0_;
};

// A timed point's attention GFLOP/s and its share of the target's peak.
void set_rate(Point& pt, const AttnProblem& p, const Target& target) {
  if (pt.status != "ok" || pt.ms <= 0) return;
  pt.gflops = gflops_at(p, pt.ms);
  pt.pct_peak = pct_of_peak(target, pt.gflops);
}

// The peer's two rows at one N (--peer torch): torch in its own process on the point's inputs, each output's
// first and last head checked as the variants' are, with the unfused variants' tolerance (torch rounds between
// ops as naive does). A row whose N×N scores would not fit the memory budget, or that torch cannot run, is a
// skipped point with the reason (both over the budget: no inputs drawn, no interpreter started). A peer that
// fails (stopped at --peer-timeout, a traceback, output not as asked) skips both rows here and, in
// `failed_at`, every length after this one: a torch too slow at this N is slower at the next.
void measure_peer(int64_t n, const CommonOptions& o, const PeerOptions& po, const std::string& torch_version,
                  std::optional<int64_t>& failed_at, std::vector<Point>& out) {
  const auto point = [&](const std::string& name) -> Point& {
    Point& pt = out.emplace_back();
    pt.variant = name;
    pt.seq = n;
    pt.peer = true;
    pt.peak_bytes = -1;  // torch's CPU allocator keeps no count to read
    return pt;
  };
  const auto skip_both = [&](const std::array<std::string, 2>& notes) {
    for (size_t i = 0; i < kPeerRows.size(); ++i) {
      Point& pt = point(kPeerRows[i]);
      pt.status = "skipped";
      pt.note = notes[i];
    }
  };
  if (failed_at) {
    const std::string note = fmt::format("not run: the peer failed at N={} (above)", *failed_at);
    return skip_both({note, note});
  }
  if (const auto skips = peer_budget_skips(problem_of(o, n), torch_version); !skips[0].empty() && !skips[1].empty())
    return skip_both(skips);
  try {
    const Inputs in = make_inputs(o, n, /*with_reference=*/false);
    const Tolerance tol = find_variant("naive").tolerance(in.p.dtype);
    const PeerRun run = run_torch_peer(
        in, po.python, torch_version, ops::num_threads(), o.warmup, warmup_floor_s(o), o.iters, tol,
        [&in](const Tensor& t, const Tolerance& tl) { return check_heads(t, in, tl); }, po.timeout);
    for (const PeerRow& r : run.rows) {
      Point& pt = point(r.name);
      pt.call = r.call;
      if (r.status == RunOutcome::Status::Skipped) {
        pt.status = "skipped";
        pt.note = r.note;
      } else if (record_check(r.err, tol, pt)) {  // a failed point is not counted, as a variant's is not timed
        pt.ms = r.ms;
        pt.forward_ms = r.forward_ms;
        pt.sharing = r.sharing;
        pt.sharing_window_s = r.sharing_window_s;
      }
    }
  } catch (const OutOfBudget& e) {  // the inputs themselves
    skip_both({e.what(), e.what()});
  } catch (const Error& e) {
    failed_at = n;
    skip_both({e.what(), e.what()});
  }
}

// Every (variant, N) point, in that order: validated on two heads, then timed (host or device); one over the memory
// budget, or that the variant cannot serve, is a skipped point with the reason. Then, with --peer torch, torch's
// two rows at every N. A progress bar with an ETA. A first Ctrl-C stops it after the point in progress
// (stop_requested()): the points that finished are returned, and `interrupted` says whether any was left out
// (a Ctrl-C during the last point leaves none: the sweep is whole).
std::vector<Point> measure_points(const std::vector<const Variant*>& variants, const std::vector<int64_t>& seqs,
                                  const CommonOptions& o, bool gpu, const Target& target, const PeerOptions& po,
                                  const std::string& torch_version, bool& interrupted) {
  // The plan for the ETA, in the order the points run: each variant's, then torch's two rows at each N (one item).
  std::vector<Progress::Item> plan;
  for (size_t vi = 0; vi < variants.size(); ++vi)
    for (int64_t n : seqs) plan.push_back({vi, attention_flops(problem_of(o, n)) * (o.warmup + o.iters)});
  if (po.on())
    for (int64_t n : seqs) plan.push_back({variants.size(), 2 * attention_flops(problem_of(o, n)) * (o.warmup + o.iters)});
  Progress bar(std::move(plan));
  size_t item = 0;
  std::vector<Point> points;
  const GracefulStop graceful;
  for (const Variant* v : variants) {
    for (int64_t n : seqs) {
      if (stop_requested()) break;
      const AttnProblem p0 = problem_of(o, n);
      Point pt;
      pt.variant = v->name;
      pt.seq = n;
      bar.start(item, fmt::format("{} N={}", v->name, n));
      try {
        if (auto why = v->unsupported(p0)) throw OutOfBudget(*why);  // before drawing the inputs
        // and the budget, inputs and naive's N×N scores together: at N=16384 the inputs are seconds to draw
        check_forward_fits(*v, p0, /*with_reference=*/false);
        if (gpu) {  // the device's budget, which only the CUDA variant's prepare checks (no host estimate)
          AttnOptions planned;
          planned.is_causal = o.causal;
          (void)v->prepare(p0, planned);
        }
        const Inputs in = make_inputs(o, n, /*with_reference=*/false);
        std::unique_ptr<Runner> runner = v->prepare(in.p, in.opt);
        if (!spot_check(*runner, *v, in, pt)) {
          progress(fmt::format("sweep: {} N={} not timed: {}", v->name, n, pt.note));
        } else if (gpu) {
          measure_on_device(*runner, in, o, pt);
        } else {
          measure_on_host(*runner, in, o, pt);
        }
        set_rate(pt, in.p, target);
      } catch (const OutOfBudget& e) {
        pt.status = "skipped";
        pt.note = e.what();
        if (::isatty(2)) std::fputc('\n', stderr);
        progress(fmt::format("sweep: {} N={} skipped: {}", v->name, n, e.what()));
      }
      bar.end(item++, pt.status == "ok");
      points.push_back(std::move(pt));
    }
  }
  if (po.on()) {
    std::vector<Point> peer;  // per N both rows; listed below per row, as the variants' points are
    std::optional<int64_t> failed_at;
    for (int64_t n : seqs) {
      if (stop_requested()) break;
      bar.start(item, fmt::format("torch N={}", n));
      const size_t before = peer.size();
      measure_peer(n, o, po, torch_version, failed_at, peer);
      for (size_t i = before; i < peer.size(); ++i) {
        Point& pt = peer[i];
        set_rate(pt, problem_of(o, n), target);
        if (pt.status == "ok") continue;
        if (::isatty(2)) std::fputc('\n', stderr);
        progress(fmt::format("sweep: {} N={} {}: {}", pt.variant, n, pt.status, pt.note));
      }
      bool measured = false;
      for (size_t i = before; i < peer.size(); ++i) measured = measured || peer[i].status == "ok";
      bar.end(item++, measured);
    }
    for (const char* name : kPeerRows)
      for (Point& pt : peer)
        if (pt.variant == name) points.push_back(std::move(pt));
  }
  interrupted = stop_requested() && item < bar.items();
  bar.finish(interrupted ? "interrupted" : "done");
  return points;
}

// The least-squares power laws of time and memory over N, per variant: their lines of the text (with a note for
// each kind of doubtful fit), and one object each into `fits` (sweep.json's).
// `names`: the variants', then the peer's rows; a series whose memory was not measured (the peer's) has a time fit
// only.
std::string scaling_fits(const std::vector<std::string>& names, const std::vector<Point>& points,
                         nlohmann::json& fits) {
  std::string text;
  text += "Scaling fits (least squares on log-log, y = a·N^b):\n";
  bool any_weak = false, any_implausible = false, any_disturbed = false, any_fixed = false;  // a note for each doubt
  for (const std::string& name : names) {
    std::vector<double> x, t, mem;
    size_t disturbed = 0;  // points whose forwards shared the CPUs (Busy) or disagreed (Noisy)
    bool memory_measured = true;
    for (const Point& p : points)
      if (p.variant == name && p.status == "ok") {
        memory_measured = memory_measured && p.peak_bytes >= 0;
        x.push_back(double(p.seq));
        t.push_back(p.ms);
        mem.push_back(double(std::max<int64_t>(p.peak_bytes, 1)));
        if (report::is_disturbed(p.forward_ms, p.sharing)) ++disturbed;
      }
    if (x.size() < 2) {
      text += fmt::format("  {}: fewer than 2 points ran, no fit\n", name);
      continue;
    }
    for (const auto& [metric, y] : {std::pair<const char*, const std::vector<double>&>{"time", t}, {"memory", mem}}) {
      if (!memory_measured && std::string(metric) == "memory") continue;
      const analysis::PowerFit f = analysis::fit_power_law(x, y);
      // Attention's work grows as N² (N·Nk/2 pairs causal): a time exponent past 3, or below 0, is no property
      // of the variant but of disturbed timings, however well two or three points line up.
      const bool implausible = std::string(metric) == "time" && (f.exponent > 3.0 || f.exponent < 0.0);
      // Work that grows as N² in a time that grows slower than N: what each forward costs whatever N (threads
      // starting, buffers allocated) still outweighs the work at these lengths, however well the points line up.
      const bool fixed_costs = std::string(metric) == "time" && !implausible && f.exponent < 1.0;
      any_fixed = any_fixed || fixed_costs;
      // A time fit through points most of which were Busy or Noisy fits the machine's load as much as the
      // variant, however straight the line (a loaded run put flash at N^0.02, r² 0.6, "a power law"). Memory is
      // counted, not timed: not affected.
      const size_t dist = std::string(metric) == "time" ? disturbed : 0;
      const bool mostly_disturbed = report::fit_disturbed(double(dist), double(x.size()));
      any_weak = any_weak || f.weak();
      any_implausible = any_implausible || implausible;
      any_disturbed = any_disturbed || mostly_disturbed;
      // Two points fix a line exactly: no error estimate (null in the file, not a perfect 0), and r² is 1 by
      // construction.
      const auto estimate = [&](double v) { return x.size() > 2 ? nlohmann::json(v) : nlohmann::json(); };
      fits.push_back({{"variant", name},
                           {"metric", metric},
                           {"exponent", f.exponent},
                           {"coefficient", f.coefficient},
                           {"r2", estimate(f.r2)},
                           {"stderr", estimate(f.exponent_stderr)},
                           {"rms_log_error", estimate(f.rms_log_error)},
                           {"points", x.size()},
                           {"weak", f.weak()},
                           {"implausible", implausible},
                           {"fixed_costs", fixed_costs},
                           {"disturbed_points", dist}});
      const std::string dist_text =
          mostly_disturbed ? fmt::format("  disturbed: {} of {} points Busy or Noisy", dist, x.size()) : "";
      const std::string exponent = report::format_exponent(f.exponent);
      text += x.size() > 2 ? fmt::format("  {:<11} {:<7} exponent {} ± {:.3f}  (r² {:.4f}, {} points){}{}{}\n", name,
                                         metric, exponent, f.exponent_stderr, f.r2, x.size(),
                                         f.weak() ? "  weak: no power law" : "",
                                         implausible ? "  implausible" : fixed_costs ? "  fixed costs" : "",
                                         dist_text)
                           : fmt::format("  {:<11} {:<7} exponent {}  (2 points: a line through both, no error "
                                         "estimate){}{}\n", name, metric, exponent,
                                         implausible ? "  implausible" : fixed_costs ? "  fixed costs" : "",
                                         dist_text);
    }
  }
  if (any_fixed)
    text += "fixed costs: a time exponent below 1 while the work grows as N^2: what each forward costs whatever N "
            "(threads starting, buffers allocated, the peer's call overhead) outweighs the work at these lengths; "
            "sweep larger N for the scaling law.\n";
  if (any_implausible)
    text += "implausible: a time exponent outside 0..3, which no attention forward has (its work grows as N^2): the "
            "timings of those points were disturbed (Busy/Noisy above); rerun, or raise --iters.\n";
  if (any_disturbed)
    text += "disturbed: half the fit's points or more were Busy or Noisy (above), so its exponent describes the machine's "
            "load as much as the variant; rerun on an idle machine, or raise --iters.\n";
  if (any_weak)
    text += "weak: the points stray from a power law (± above 0.15, or points off the line by a root-mean-square "
            "above 0.25 in natural log, about 28 %), so that exponent is no scaling law: at small N fixed costs "
            "dominate, or the timings were disturbed (Busy/Noisy above); sweep larger N, or raise --iters.\n";
  return text;
}

void run_sweep(const SweepArgs& a) {
  const CommonOptions& o = a.common;
  check_peer_options(a.peer, /*gpu=*/a.device == "cuda");
  const bool gpu = use_cuda(a.device);
  apply_runtime_options(o, gpu);
  std::string seq_note;  // printed once the other inputs are checked: a refused run prints its one error line only
  const std::vector<int64_t> seqs = parse_seq(a.seq, seq_note);
  ATTNPROF_CHECK(o.kv_len == 0, "--kv-len does not apply to sweep: every point has Nq = Nk = N from --seq");
  const std::vector<std::string> names = split_variant_list(a.variants);
  ATTNPROF_CHECK(a.backend.empty() || std::find(names.begin(), names.end(), "sdpa") != names.end(),
                 "--backend applies to the variant 'sdpa', which --variants '{}' does not name", a.variants);
  const std::vector<const Variant*> variants = resolve_variants_on(gpu, names, a.backend, problem_of(o, seqs.front()),
                                                                !a.variants_given);
  check_flash_block_applies(o, variants);
  // Every point's shape is one the library takes, and one whose check (the reference of two heads,
  // check_heads) ends, before any point runs.
  for (int64_t n : seqs) check_reference_work(problem_of(o, n), 2.0);
  check_html_if_asked(o);
  const std::string torch_version = probe_peer(a.peer);  // after the cheap checks, before anything runs
  prepare_out_dir(o.out);
  check_out_files(o, {}, {"sweep.txt", "sweep.csv", "sweep.json"});
  if (!seq_note.empty()) progress(seq_note);
  report::FileBatch outputs;  // this run's files replace the last run's together, or not at all
  const int threads = ops::num_threads();
  std::optional<cuda::DeviceInfo> dev;
  if (gpu) dev = cuda::device_info();
  const std::string gpu_name = dev ? dev->name : "";
  // What each point's rate is set against, as compare's % peak: the CPU's measured peaks or the GPU's datasheet.
  if (!gpu) progress("measuring (or loading cached) machine peaks");
  // The problem every point shares (N varies).
  const AttnProblem ps = problem_of(o, seqs.front());
  const Target target = dev ? device_target(*dev, ps.dtype) : host_target(threads, ps.dtype);

  bool interrupted = false;
  const std::vector<Point> points = measure_points(variants, seqs, o, gpu, target, a.peer, torch_version, interrupted);
  // Stopped by Ctrl-C: the points that finished are the sweep's, said to be a part of what was asked.
  const size_t planned = seqs.size() * (variants.size() + (a.peer.on() ? kPeerRows.size() : 0));
  if (interrupted && points.empty()) {
    remove_created_dirs_if_empty();
    print_err("attnprof: interrupted before any point finished: nothing written\n");
    exit_as_planned(kInterruptedExit);
  }
  std::vector<std::string> series = names_of(variants);  // the variants', then the peer's rows
  if (a.peer.on()) series.insert(series.end(), kPeerRows.begin(), kPeerRows.end());

  // The shared problem, as compare.json records its shape, so report can tell a sweep of grouped-query heads
  // or another batch from the run beside it.
  const std::string shared = fmt::format("B={} Hq={} Hkv={} D={}", ps.B, ps.Hq, ps.Hkv, ps.D);
  nlohmann::json j = {{"kind", "sweep"},
                      {"attnprof_version", ATTNPROF_VERSION},
                      {"device", a.device},
                      {"shape", {{"B", ps.B}, {"Hq", ps.Hq}, {"Hkv", ps.Hkv}, {"D", ps.D}}},
                      {"dtype", std::string(dtype_name(ps.dtype))},  // canonical, as compare.json: "BF16" is bf16
                      {"causal", o.causal},
                      {"threads", threads},
                      {"flash_block", !gpu && runs_cpu_flash(variants)
                                          ? nlohmann::json{flash_block().rows, flash_block().cols}
                                          : nlohmann::json()},
                      {"warmup", o.warmup},
                      {"iters", o.iters},
                      {"memory_budget", memory_budget()},
                      {"flops_convention", "4*B*Hq*D per forward per visible (query, key) pair: 4*B*Hq*N^2*D, halved "
                                           "when causal (compare.json's attention_flops); gflops = that / ms per "
                                           "forward"},
                      {"peak_kind", target.peak_kind},
                      {"peak_gflops", target.peak},
                      {"peak_isa", target.peak_isa},
                      {"peaks", nlohmann::json(target.m)},
                      {"points", nlohmann::json::array()},
                      {"fits", nlohmann::json::array()}};
  if (interrupted) j["interrupted"] = {{"points", points.size()}, {"planned", planned}};
  const std::string reclaim = gpu ? "" : analysis::memory_reclaim_note().value_or("");
  if (a.peer.on())
    j["peer"] = {{"kind", "torch"},
                 {"python", a.peer.python},
                 {"torch_version", torch_version},
                 {"threads", threads},
                 {"timing", "time.perf_counter around each forward, in the peer's process"},
                 {"check", "the first and last head of each output against the fp64 reference, with naive's tolerance"},
                 {"peak_bytes", "not measured: torch's CPU allocator keeps no count to read"}};
  if (gpu) j.update({{"gpu", gpu_name}, {"memory_budget", nlohmann::json()}});
  // Why a noisy point may be the machine's, and which GEMM naive's and inplace's bf16 matmul ran on (their peak
  // memory holds its fp32 scratch when widened), as compare.json records them.
  else j["machine"] = {{"memory_reclaim", reclaim}, {"bf16_matmul", ops::bf16_matmul_key()}};
  std::string csv = "source,variant,seq,ms,gflops,peak_bytes,status,note\n";
  for (const Point& p : points) {
    const bool ok = p.status == "ok", bytes = ok && p.peak_bytes >= 0;
    j["points"].push_back({{"variant", p.variant},
                           {"source", p.peer ? "torch" : "attnprof"},  // as compare.csv's: the peer's rows are torch's
                           {"seq", p.seq},
                           {"ms", ok ? nlohmann::json(p.ms) : nlohmann::json()},
                           {"gflops", ok ? nlohmann::json(p.gflops) : nlohmann::json()},
                           {"pct_peak", ok && target.peak > 0 ? nlohmann::json(p.pct_peak) : nlohmann::json()},
                           {"forward_ms", p.forward_ms},
                           {"spread", ok ? report::spread_json(p.forward_ms) : nlohmann::json()},
                           {"cpu_sharing", report::cpu_sharing_json(p.sharing)},
                           {"peak_bytes", bytes ? nlohmann::json(p.peak_bytes) : nlohmann::json()},
                           {"max_abs_err", p.max_abs_err >= 0 ? nlohmann::json(p.max_abs_err) : nlohmann::json()},
                           {"status", p.status},
                           {"note", p.note}});
    if (p.peer) j["points"].back()["call"] = p.call;
    csv += report::csv_line({p.peer ? "torch" : "attnprof", p.variant, std::to_string(p.seq), ok ? report::csv_number(p.ms) : "",
                             ok ? report::csv_number(p.gflops) : "", bytes ? std::to_string(p.peak_bytes) : "",
                             p.status, p.note});
  }
  // The lengths the sweep tried, not --seq as typed (the table says which ran): FIRST..LAST stops at the last doubling that does not pass LAST.
  Text text = fmt::format("attnprof sweep — {} with N = {}, {} {}, {}\n", shared, fmt::join(seqs, ","), dtype_name(ps.dtype),
                                 o.causal ? "causal" : "no mask",
                                 gpu ? gpu_name + " (CUDA events, device memory)"
                                     : threads_text(threads) + flash_block_note());
  // Rates as compare prints them: GFLOP/s on the CPU, TFLOP/s on a GPU.
  const char* rate = gpu ? "TFLOP/s" : "GFLOP/s";
  const double rate_scale = gpu ? 1e-3 : 1.0;
  text += fmt::format("{:<12}{:>8}{:>12}{:>10}{:>8}{:>14}{:>11}\n", "Variant", "N", "ms/fwd", rate, "% peak", "Peak mem",
                      "Max err");
  for (const Point& p : points)
    text += p.status == "ok"
                ? fmt::format("{:<12}{:>8}{:>12.3f}{:>10.1f}{:>8}{:>14}{:>11.2e}\n", p.variant, p.seq, p.ms,
                              p.gflops * rate_scale, fmt::format("{:.1f}%", p.pct_peak),
                              p.peak_bytes >= 0 ? report::format_bytes_decimal(p.peak_bytes) : "--", p.max_abs_err)
                : fmt::format("{:<12}{:>8}  {}: {}\n", p.variant, p.seq, p.status, p.note);
  if (interrupted)
    text += fmt::format("Interrupted (Ctrl-C) after {} of the {} points: the table, the fits, sweep.json and sweep.csv "
                        "hold those that finished.\n",
                        points.size(), planned);
  if (a.peer.on()) {
    std::vector<std::string> calls;  // what each row ran, from its first point that says
    for (const char* name : kPeerRows) {
      const auto it = std::find_if(points.begin(), points.end(), [&](const Point& p) {
        return p.variant == name && !p.call.empty();
      });
      if (it != points.end()) calls.push_back(fmt::format("{} = {}", name, it->call));
    }
    text += fmt::format("Peer: torch {} ('{}', {}){}{}; each forward timed by time.perf_counter in the peer's process, "
                        "not profiled; the first and last head of its output checked as the variants'; its peak memory "
                        "is not measured (--): torch's CPU allocator keeps no count.\n",
                        torch_version, a.peer.python, threads_text(threads), calls.empty() ? "" : ": ",
                        fmt::join(calls, "; "));
  }
  std::vector<report::Timings> timings;
  for (const Point& p : points)
    if (p.status == "ok") timings.push_back({fmt::format("{} at N={}", p.variant, p.seq), p.forward_ms, p.sharing, p.sharing_window_s});
  if (!gpu) text += oversubscribed_line(threads);
  for (const std::string& line : report::timing_notes(timings, reclaim))
    text += line + "\n";
  // Which GEMM the unfused variants' matmul ran on, as compare says it: their time and peak memory depend on it.
  std::vector<std::string> unfused;
  for (const char* name : {"naive", "inplace"})
    if (std::any_of(points.begin(), points.end(),
                    [&](const Point& p) { return !p.peer && p.variant == name && p.status == "ok"; }))
      unfused.push_back(name);
  if (const std::string note = report::unfused_matmul_note(dtype_name(ps.dtype), ops::bf16_matmul_key(),
                                                           fmt::format("{}", fmt::join(unfused, ", ")));
      !gpu && !unfused.empty() && !note.empty())
    text += note + "\n";
  text += scaling_fits(series, points, j["fits"]);
  // What the fits should show, the blog's conclusion: kept under --brief.
  text += "Time: expect exponent ≈ 2 for every variant once N is large (the work is N²): flash wins by a constant "
          "factor and by memory, not by its exponent.\n";
  text.define(fmt::format("{}: attention FLOPs per forward (4·B·Hq·N²·D, halved when causal, as compare counts them) / "
                      "time; % peak of the {} {:.1f} {} ({}). Expect it to climb with N while fixed costs amortise "
                      "and to level off where the variant's own limit (bandwidth for the N×N paths, compute for "
                      "flash) takes over; a fall points at disturbed points or a working set past the caches.{}\n",
                      rate, target.peak_kind, target.peak * rate_scale, rate,
                      gpu ? gpu_name
                          : threads_text(target.m.threads) + ", " + target.peak_isa + "; " +
                                analysis::peaks_provenance(target.m),
                      dispatch_note(target)));
  if (!gpu) text.brief_only(busy_peaks_line(target.m));
  {
    std::vector<std::string> over;
    for (const Point& p : points)
      if (p.status == "ok" && p.pct_peak > 100) over.push_back(fmt::format("{} at N={}", p.variant, p.seq));
    text += over_peak_note(target, over);
  }
  text.define(fmt::format("Max err: max |out - fp64| over the first and last head, checked before timing (a failed "
                          "point is not timed){}.\n", a.peer.on() ? "; the peer's, of its last timed forward" : ""));
  text.define(fmt::format("Peak mem: {}bytes one forward allocates at its peak above its inputs, in decimal units as "
                      "compare prints them (1 MB = 10^6 B; the torch-style tables print binary 1 Mb = 2^20 B); expect exponent ≈ 2 naive, flash ≈ 1 once its output outgrows its fixed "
                      "per-thread scratch (less at small N).\n",
                      gpu ? "device " : ""));
  commit_and_print(o, "sweep", j, text, csv, outputs);
  if (interrupted)
    print_err("attnprof: interrupted after {} of the {} points; wrote the {} that finished\n", points.size(), planned,
              points.size());
  // The exit status is attnprof's variants': the peer's rows are set beside them, as compare's are. A point that
  // failed its check is a failure whether or not the sweep was interrupted (exit 1 before 130).
  std::vector<std::string> failed;
  size_t own = 0, skipped = 0;
  for (const Point& p : points) {
    if (p.peer) continue;
    ++own;
    if (p.status == "failed") failed.push_back(fmt::format("{} at N={}", p.variant, p.seq));
    if (p.status == "skipped") ++skipped;
  }
  exit_if_validation_failed(failed);
  if (interrupted) exit_as_planned(kInterruptedExit);
  exit_if_nothing_measured(own - skipped, skipped, "point");
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* sub = app.add_subcommand("sweep", "time and peak memory over sequence lengths, with scaling fits");
  sub->add_option("--seq", args->seq, "FIRST..LAST doubles from FIRST; or a list 256,768,1024")->capture_default_str();
  CLI::Option* variants =
      sub->add_option("--variants", args->variants, "comma-separated: naive, inplace, sdpa, sdpa-math, sdpa-flash, flash")
          ->capture_default_str();
  sub->add_option("--backend", args->backend,
                  "SDPA backend for 'sdpa' in --variants: math | flash | auto (with --device cuda: math | cudnn | auto)");
  sub->add_option("--device", args->device, "cpu (default) or cuda (the CUDA registry, timed on the GPU)");
  add_peer_options(sub, args->peer, "at every N (torch-naive and torch-sdpa, time fits only)",
                   "that N's torch rows and every later N's are skipped points, the sweep goes on");
  add_common_options(sub, args->common, {.warmup = 2, .iters = 3, .file_inputs = false});
  // Every point's N (queries and keys alike) comes from --seq: the shared help lines say so here.
  sub->get_option("--shape")->description("B,H,N,D: every point's B, H and D (default: the blog's 8,16,1024,64); N "
                                          "comes from --seq, and this N is read but not used");
  sub->get_option("--kv-len")->description("not for sweep (refused): every point has Nq = Nk = N from --seq");
  sub->footer(variants_help());
  sub->callback([args, variants] {
    args->variants_given = variants->count() > 0;
    run_sweep(*args);
  });
}

}  // namespace attnprof::cli
