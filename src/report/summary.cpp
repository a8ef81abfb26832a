// The machine-readable summary: one JSON document per profile (schema in docs/profiler.md).
#include <algorithm>

#include "attnprof/report.h"

namespace attnprof::report {
namespace {

nlohmann::json cost_json(const OpCost& c) {
  return {{"flops", c.flops},
          {"bf16_flops", c.bf16_flops},
          {"library_flops", c.library_flops},
          {"library_bf16_flops", c.library_bf16_flops},
          {"bytes_read", c.bytes_read},
          {"bytes_written", c.bytes_written},
          {"bytes", c.bytes()}};
}

}  // namespace

std::string string_field(const nlohmann::json& o, std::string_view key) {
  if (!o.is_object()) return {};
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool same_peaks(const nlohmann::json& a, const nlohmann::json& b) {
  const auto peaks = [](nlohmann::json j) {
    if (j.is_object()) j.erase("from_cache");
    return j;
  };
  return peaks(a) == peaks(b);
}

std::string recorded(const nlohmann::json& doc, std::string_view key) {
  if (!doc.is_object()) return {};
  for (const char* section : {"run", "metadata"})
    if (const auto it = doc.find(section); it != doc.end() && it->is_object())
      if (std::string v = string_field(*it, key); !v.empty()) return v;
  return string_field(doc, key);
}

nlohmann::json summary_json(const prof::ProfileResult& r, const analysis::KeyAverages& ka) {
  using nlohmann::json;
  json j;
  j["schema"] = "attnprof.summary/1";
  json meta = json::object();
  for (const auto& [k, v] : r.metadata) meta[k] = v;
  j["metadata"] = meta;
  j["clock"] = {{"source", r.clock}, {"ns_per_tick", r.ns_per_tick}};
  // What was recorded, in torch.profiler's names: a memory figure of a profile without memory is null, not 0.
  j["profiler"] = {{"profile_memory", r.memory_recorded}, {"record_shapes", r.shapes_recorded}};
  const auto mem_figure = [&](int64_t bytes) { return ka.has_memory ? json(bytes) : json(nullptr); };

  // Wall span of the recorded zones (first open to last close, all threads).
  uint64_t lo = UINT64_MAX, hi = 0;
  size_t mem_events = 0;
  for (const auto& t : r.threads) {
    for (const auto& e : t.zones) {
      lo = std::min(lo, e.t0);
      hi = std::max(hi, e.t1);
    }
    mem_events += t.mem.size();
  }
  const double wall_ns = hi > lo ? r.ns(hi - lo) : 0.0;
  j["totals"] = {{"self_cpu_time_total_ns", ka.self_total_ns},
                 {"wall_ns", wall_ns},
                 {"zones", ka.zones},
                 {"threads", r.threads.size()},
                 {"memory_events", mem_events}};
  j["overhead"] = {{"zone_overhead_ns", ka.zone_overhead_ns},
                   {"zones", ka.zones},
                   {"subtracted_ns", ka.overhead_subtracted_ns}};

  json rows = json::array();
  for (const analysis::OpStats& s : ka.rows) {
    const double pct_base = ka.self_total_ns > 0 ? 100.0 / ka.self_total_ns : 0.0;
    json row = {{"name", s.name},
                {"category", s.category},
                {"input_shapes", s.input_shapes},
                {"input_types", s.input_types},
                {"calls", s.calls},
                {"self_ns", s.self_ns},
                {"total_ns", s.total_ns},
                {"avg_ns", s.calls ? s.total_ns / double(s.calls) : 0.0},
                {"self_pct", s.self_ns * pct_base},
                {"total_pct", s.total_ns * pct_base},
                {"mem_bytes", mem_figure(s.mem_bytes)},
                {"self_mem_bytes", mem_figure(s.self_mem_bytes)},
                {"freed_bytes", mem_figure(s.freed_bytes)},
                {"cost", cost_json(s.cost)},
                {"self_cost", cost_json(s.self_cost)},
                {"gflops_per_s", s.rate_ns() > 0 ? s.cost.flops / s.rate_ns() : 0.0},
                {"gb_per_s", s.rate_ns() > 0 ? s.cost.bytes() / s.rate_ns() : 0.0},
                {"flop_per_byte", s.cost.intensity()}};
    if (ka.has_device) {
      const double dev_pct = ka.device_self_total_ns > 0 ? 100.0 / ka.device_self_total_ns : 0.0;
      row.update({{"self_cuda_ns", s.self_device_ns},
                  {"cuda_total_ns", s.device_total_ns},
                  {"cuda_avg_ns", s.calls ? s.device_total_ns / double(s.calls) : 0.0},
                  {"self_cuda_pct", s.self_device_ns * dev_pct},
                  {"cuda_mem_bytes", mem_figure(s.device_mem_bytes)},
                  {"self_cuda_mem_bytes", mem_figure(s.self_device_mem_bytes)}});
    }
    // Each recorded step's self time (null when some of the op's zones ran outside every step).
    row["self_ns_per_step"] = s.step_self_ns.empty() ? json(nullptr) : json(s.step_self_ns);
    row["task_clock_ns"] = s.task_clock_ns >= 0 ? json(s.task_clock_ns) : json(nullptr);
    row["page_faults"] = s.page_faults >= 0 ? json(s.page_faults) : json(nullptr);
    row["self_page_faults"] = s.self_page_faults >= 0 ? json(s.self_page_faults) : json(nullptr);
    rows.push_back(std::move(row));
  }
  j["rows"] = std::move(rows);

  // Memory timeline: every tracked allocation/free, all threads, in time order.
  std::vector<std::pair<double, int64_t>> timeline;
  timeline.reserve(mem_events);
  for (const auto& t : r.threads)
    for (const auto& m : t.mem) timeline.emplace_back(r.us_since_origin(m.t), m.total);
  std::stable_sort(timeline.begin(), timeline.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  json tl = json::array();
  for (const auto& [t_us, bytes] : timeline) tl.push_back({{"t_us", t_us}, {"bytes", bytes}});
  j["memory"] = {{"start_bytes", mem_figure(ka.start_bytes)},
                 {"peak_bytes", mem_figure(ka.peak_bytes)},
                 {"end_bytes", mem_figure(timeline.empty() ? ka.start_bytes : timeline.back().second)},
                 {"outside_zones_bytes", mem_figure(ka.outside_zones_bytes)},
                 {"timeline", std::move(tl)}};
  j["counters"] = {{"note", r.counters_note}, {"recorded", r.counters_recorded}, {"task_clock_recorded", r.task_clock_recorded}};
  json threads = json::array();  // each op's OpenMP regions (analysis::thread_balance)
  for (const analysis::ThreadBalance& b : analysis::thread_balance(r))
    threads.push_back({{"name", b.name},
                       {"regions", b.regions},
                       {"threads", b.threads},
                       {"wall_ns", b.wall_ns},
                       {"busy_ns", b.busy_ns},
                       {"capacity_ns", b.capacity_ns},
                       {"busy_share", b.busy_share()},
                       {"imbalance", b.imbalance()},
                       {"lag_ns", b.lag_ns},
                       {"items", b.items}});
  j["thread_balance"] = std::move(threads);
  json phases = json::array();  // the steps inside ops that time them (analysis::op_phases: the flash kernel's)
  for (const analysis::OpPhases& op : analysis::op_phases(r)) {
    json steps = json::array();
    for (const analysis::OpPhases::Step& st : op.steps)
      steps.push_back({{"name", st.name}, {"thread_ns", st.ns}, {"flops", st.flops}});
    phases.push_back({{"name", op.name},
                      {"regions", op.regions},
                      {"threads", op.threads},
                      {"share_ns", op.share_ns},
                      {"steps", std::move(steps)}});
  }
  j["op_phases"] = std::move(phases);
  json items = json::array();  // the tasks inside ops that mark them (analysis::op_items: the flash kernel's tiles)
  for (const analysis::OpItems& op : analysis::op_items(r)) {
    json groups = json::array();
    for (const analysis::OpItems::Group& g : op.groups)
      groups.push_back({{"inner", g.inner},
                        {"count", g.count},
                        {"median_ns", g.median_ns},
                        {"mean_ns", g.mean_ns},
                        {"max_ns", g.max_ns},
                        {"flops", g.flops}});
    json keys = json::array();
    for (const std::string& k : op.keys) keys.push_back(k.empty() ? json() : json(k));
    const auto& sl = op.slowest;
    items.push_back({{"name", op.name},
                     {"noun", op.noun},
                     {"inner", op.inner},
                     {"keys", std::move(keys)},
                     {"items", op.items},
                     {"regions", op.regions},
                     {"groups", std::move(groups)},
                     {"fit", op.fitted ? json{{"fixed_ns", op.fixed_ns},
                                              {"marginal_gflops", op.marginal_gflops},
                                              {"r2", op.r2}}
                                       : json()},
                     {"slowest", {{"label", op.item_label(sl.keys)},
                                  {"keys", sl.keys},
                                  {"inner", sl.inner},
                                  {"ns", sl.ns},
                                  {"group_median_ns", sl.group_median_ns},
                                  {"step", sl.step.empty() ? json() : json(sl.step)},
                                  {"step_ns", sl.step_ns}}}});
  }
  j["op_items"] = std::move(items);
  if (ka.has_device) {
    json dtl = json::array();  // device memory: every tracked cudaMalloc-backed allocation and free
    for (const prof::DeviceMemEvent& m : r.device_mem) dtl.push_back({{"t_us", r.us_since_origin(m.t)}, {"bytes", m.total}});
    j["device"] = {{"name", ka.device_name},
                   {"self_cuda_time_total_ns", ka.device_self_total_ns},
                   {"activities", r.device.size()},
                   {"peak_bytes", mem_figure(ka.device_peak_bytes)},
                   {"timeline", std::move(dtl)}};
  }
  return j;
}

}  // namespace attnprof::report
