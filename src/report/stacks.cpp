// Folded stacks (report.h, folded_stacks): each zone's self time under the chain of zones that enclose it, per
// thread, and the workers' shares of parallel regions under their thread.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "attnprof/analysis.h"
#include "attnprof/report.h"

namespace attnprof::report {

namespace {

// A frame as the format allows it: ';' separates frames and a line ends a stack. Steps merge as the table
// merges them.
std::string frame(std::string_view name) {
  if (analysis::is_step_zone(name)) return std::string(analysis::kStepRow);
  std::string f(name.empty() ? std::string_view("?") : name);
  for (char& c : f) {
    if (c == ';') c = ',';
    else if (c == '\n' || c == '\r') c = ' ';
  }
  return f;
}

}  // namespace

std::string folded_stacks(const prof::ProfileResult& r) {
  std::map<std::string, double> weight;  // stack -> ns, in byte order
  auto add = [&](const std::string& stack, double ns) {
    if (ns > 0 && std::isfinite(ns)) weight[stack] += ns;
  };
  // Each thread's zones as stacks below the thread: "ProfilerStep*;attn_fwd;softmax". A device activity sits
  // under the zone that launched it, below its GPU.
  std::vector<std::vector<std::string>> below(r.threads.size());
  for (size_t ti = 0; ti < r.threads.size(); ++ti) {
    const prof::ThreadTrace& t = r.threads[ti];
    const std::string root = frame(t.name.empty() ? fmt::format("thread {}", t.tid) : t.name);
    const size_t n = t.zones.size();
    std::vector<double> self = analysis::zone_self_ns(r, t);
    std::vector<std::string>& rel = below[ti];
    rel.resize(n);
    std::vector<std::string> path(n);
    for (size_t i = 0; i < n; ++i) {
      const int32_t p = t.zones[i].parent;
      const std::string f = frame(t.zones[i].name ? t.zones[i].name : "?");
      rel[i] = p >= 0 && size_t(p) < i ? rel[size_t(p)] + ";" + f : f;
      path[i] = root + ";" + rel[i];
    }
    for (const prof::WorkSpan& w : t.work) {
      const bool in_zone = w.zone >= 0 && size_t(w.zone) < n;
      // A share inside a zone (the calling thread's) is that zone's time already; a worker's is its own.
      const std::string at = in_zone ? path[size_t(w.zone)] : root + ";" + frame(w.name ? w.name : "?");
      double steps_ns = 0;
      if (w.phase_names)
        for (int k = 0; k < std::min<int>(w.n_phases, prof::kMaxPhases); ++k) {
          const double ns = r.ns(w.phase_ticks[size_t(k)]);
          add(at + ";" + frame(w.phase_names[k] ? w.phase_names[k] : "?"), ns);
          steps_ns += ns;
        }
      if (in_zone) self[size_t(w.zone)] = std::max(0.0, self[size_t(w.zone)] - steps_ns);
      else add(at, std::max(0.0, r.ns(std::max(w.t1, w.t0) - w.t0) - steps_ns));
    }
    for (size_t i = 0; i < n; ++i) add(path[i], self[i]);
  }
  // The GPU's time (CUDA profiles): each kernel, copy and fill under the zones that launched it.
  for (const prof::DeviceActivity& d : r.device) {
    std::string stack = fmt::format("GPU {}", d.device);
    if (d.thread >= 0 && size_t(d.thread) < below.size() && d.zone >= 0 && size_t(d.zone) < below[size_t(d.thread)].size())
      stack += ";" + below[size_t(d.thread)][size_t(d.zone)];
    add(stack + ";" + frame(d.name ? d.name : "?"), d.ns(r.ns_per_tick));
  }
  std::string out;
  for (const auto& [stack, ns] : weight)
    if (const long long v = std::llround(ns); v > 0) out += fmt::format("{} {}\n", stack, v);
  return out;
}

}  // namespace attnprof::report
