// report/html_run.cpp: reading a run directory for the HTML report (see html_run.h).
#include "report/html_run.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <zlib.h>

#include "attnprof/analysis.h"
#include "attnprof/error.h"
#include "attnprof/report.h"
#include "report/figures.h"

namespace attnprof::report::html_run {

namespace fs = std::filesystem;

std::optional<std::string> read_file(const fs::path& p, std::string* why, uint64_t limit) {
  auto fail = [&](std::string reason) -> std::optional<std::string> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (ec || !fs::is_regular_file(st)) {
    // Not there is no reason; anything else that stands under the name is one (a directory, a FIFO, a link
    // to nothing, a directory that cannot be searched).
    if (ec == std::errc::no_such_file_or_directory && !fs::is_symlink(fs::symlink_status(p, ec))) return std::nullopt;
    if (ec == std::errc::no_such_file_or_directory) return fail("it is a symbolic link to a file that does not exist");
    if (ec) return fail(fmt::format("it cannot be read ({})", ec.message()));
    return fail(fs::is_directory(st) ? "it is a directory" : "it is not a regular file");
  }
  // Refused by its size before it is read: a file past any attnprof writes.
  const uint64_t size = fs::file_size(p, ec);
  if (ec) return fail(fmt::format("it cannot be read ({})", ec.message()));
  if (std::string too_large = input_size_error(size, limit); !too_large.empty()) {
    if (why) *why = std::move(too_large);
    return std::nullopt;
  }
  if (p.extension() == ".gz") {
    gzFile f = gzopen(p.c_str(), "rb");
    if (!f) return fail(fmt::format("it cannot be opened ({})", std::strerror(errno)));
    std::string out;
    std::array<char, 1 << 16> buf;
    int n;
    // A small file can inflate to any size: the limit holds for what it inflates to as well.
    while ((n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0) {
      if (out.size() + size_t(n) > limit) {
        gzclose(f);
        if (why)
          *why = fmt::format("it is {} bytes but inflates to more than the {} attnprof reads: no file it writes "
                             "is that large",
                             size, input_size_limit_text(limit));
        return std::nullopt;
      }
      out.append(buf.data(), size_t(n));
    }
    const bool ok = n == 0;
    gzclose(f);
    if (!ok) return fail("it is not valid gzip data");
    return out;
  }
  std::ifstream in(p, std::ios::binary);
  if (!in) return fail(fmt::format("it cannot be opened ({})", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Input read_json(const fs::path& p) {
  Input in;
  std::string why;
  auto text = read_file(p, &why);
  if (!text) {
    in.note = why.empty() ? fmt::format("{} not found", p.filename().string())
                          : fmt::format("{} not read: {}", p.filename().string(), why);
    in.why = why;
    return in;
  }
  if (std::string why = json_parse_error(*text); !why.empty()) {
    in.note = fmt::format("{} could not be parsed ({})", p.filename().string(), why);
    in.why = std::move(why);
    return in;
  }
  try {
    in.doc = json::parse(*text);
  } catch (const std::exception& e) {
    in.note = fmt::format("{} could not be parsed ({})", p.filename().string(), e.what());
    in.why = fmt::format("not valid JSON ({})", e.what());
    return in;
  }
  if (const std::string bad = detail::first_number_out_of_range(*in.doc); !bad.empty()) {
    in.doc.reset();
    in.why = fmt::format("not a file attnprof wrote: {} is out of range (beyond ±2^53)", bad);
    in.note = fmt::format("{} is {}", p.filename().string(), in.why);
  }
  return in;
}

double num(const json& j, std::string_view key, double def) {
  if (!j.is_object()) return def;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return def;
  return it->get<double>();
}

bool flag(const json& j, std::string_view key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::string str(const json& j, std::string_view key, std::string def) {
  if (!j.is_object()) return def;
  auto it = j.find(key);
  if (it == j.end()) return def;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number() || it->is_boolean()) return it->dump();
  return def;
}

const json* member(const json& j, std::initializer_list<std::string_view> keys) {
  if (!j.is_object()) return nullptr;
  for (auto k : keys) {
    auto it = j.find(k);
    if (it != j.end() && !it->is_null()) return &*it;
  }
  return nullptr;
}

bool is_annotation(const OpRow& r) { return analysis::is_annotation(r.name, r.category); }

namespace {

// Whether a zone (a summary row or a trace span) is the per-forward annotation: the one the run recorded
// (attn_fwd, sdpa_fwd, ...), as diff counts forwards, else the first user annotation that is not a step.
bool is_forward_zone(const std::string& name, const std::string& category, const std::string& annotation) {
  return annotation.empty() ? category == "user_annotation" && !analysis::is_step(name)
                            : name == annotation;
}

bool bf16_problem(const json& summary) {
  const json* m = member(summary, {"metadata"});
  return m && str(*m, "dtype") == "bf16";
}

// A cost object's FLOPs on bf16 units; in a summary written before the field existed, all of a bf16 problem's.
double bf16_flops_of(const json& cost, double flops, bool bf16_problem) {
  if (cost.is_object() && cost.contains("bf16_flops")) return num(cost, "bf16_flops");
  return bf16_problem ? flops : 0.0;
}



// Memory timeline: a list of points {t_us, bytes}, as summary_json writes them; returned in ms.
std::vector<std::pair<double, double>> parse_timeline(const json& tl) {
  std::vector<std::pair<double, double>> pts;
  if (!tl.is_array()) return pts;
  for (const json& p : tl) {
    if (!p.is_object()) continue;
    const double t = num(p, "t_us", NAN) * 1e-3, b = num(p, "bytes", NAN);
    if (std::isfinite(t) && std::isfinite(b)) pts.emplace_back(t, b);
  }
  return pts;
}

std::vector<std::pair<double, double>> timeline_from_summary(const json& s) {
  // A CUDA profile: device memory is the memory that matters (the host holds only the inputs).
  if (const json* dev = member(s, {"device"}); dev && dev->is_object())
    if (const json* tl = member(*dev, {"timeline"}); tl && tl->is_array() && !tl->empty()) return parse_timeline(*tl);
  if (const json* mem = member(s, {"memory"}); mem && mem->is_object())
    if (const json* tl = member(*mem, {"timeline"})) return parse_timeline(*tl);
  return {};
}

// Counter events of a Chrome trace: "C" events (one series per args key) or Kineto's "[memory]" instants.
std::vector<std::pair<double, double>> timeline_from_trace(const json& t) {
  std::vector<std::pair<double, double>> pts, instants;
  const json* ev = t.is_array() ? &t : member(t, {"traceEvents"});
  if (!ev || !ev->is_array()) return pts;
  for (const json& e : *ev) {
    if (!e.is_object()) continue;
    const std::string ph = str(e, "ph");
    const std::string name = str(e, "name");
    if (ph != "C" && name != "[memory]") continue;
    const json* args = member(e, {"args"});
    if (!args || !args->is_object()) continue;
    double b = NAN;
    for (const char* k : {"Allocated bytes", "Total Allocated", "allocated", "live_bytes", "bytes"}) {
      if (args->contains(k) && (*args)[k].is_number()) { b = (*args)[k].get<double>(); break; }
    }
    if (!std::isfinite(b) && ph == "C") {
      for (auto it = args->begin(); it != args->end(); ++it)
        if (it->is_number()) { b = it->get<double>(); break; }
    }
    const double ts = num(e, "ts", NAN);
    if (std::isfinite(b) && std::isfinite(ts)) (ph == "C" ? pts : instants).emplace_back(ts * 1e-3, b);
  }
  if (pts.empty()) pts = std::move(instants);
  std::sort(pts.begin(), pts.end());
  if (!pts.empty()) {
    const double t0 = pts.front().first;
    for (auto& p : pts) p.first -= t0;
  }
  return pts;
}

// One forward on the trace's timeline: the first call of the variant's per-forward annotation (`annotation`,
// else the first user annotation that is not a ProfilerStep) and every complete ("X") event that begins
// inside it, on its thread, or before the annotation's next call, on every other thread and GPU stream. Each
// span gets a lane, "<track> · <depth>" (depth by nesting on its track), and times in ms from the forward's
// start. At most `cap` spans are kept; `note` says why there are none, or that they were cut.
struct ForwardSpans {
  json rows = json::array();
  std::string note;
  ForwardDrawn drawn;
};

ForwardSpans forward_timeline(const json& t, const std::string& annotation, size_t cap) {
  ForwardSpans out;
  const json* ev = t.is_array() ? &t : member(t, {"traceEvents"});
  if (!ev || !ev->is_array()) {
    out.note = "no traceEvents";
    return out;
  }
  struct Span {
    std::string name, cat;
    double ts, dur;
    std::string track_key;  // "pid/tid"
  };
  std::map<std::string, std::string> track_names;  // "pid/tid" -> its thread_name metadata
  std::vector<Span> spans;
  for (const json& e : *ev) {
    if (!e.is_object()) continue;
    const std::string ph = str(e, "ph");
    const std::string key = str(e, "pid") + "/" + str(e, "tid");
    if (ph == "M" && str(e, "name") == "thread_name") {
      if (const json* a = member(e, {"args"})) track_names[key] = str(*a, "name");
      continue;
    }
    // A share's tasks (the flash kernel's tiles, hundreds a forward) would take the whole span budget: the
    // report draws them as the tiles chart, from the summaries, and Perfetto has them one by one.
    if (ph != "X" || str(e, "cat") == "work_item") continue;
    const double ts = num(e, "ts", NAN), dur = num(e, "dur", NAN);
    if (!std::isfinite(ts) || !std::isfinite(dur) || dur < 0) continue;
    std::string name = str(e, "name", "?");
    // A thread's share is drawn as its op, in the op's colour (traces before the suffix have the op's name).
    if (str(e, "cat") == "thread_work" && name.ends_with(kShareSuffix)) name.resize(name.size() - kShareSuffix.size());
    spans.push_back({std::move(name), str(e, "cat"), ts, dur, key});
  }
  auto is_forward = [&](const Span& sp) { return is_forward_zone(sp.name, sp.cat, annotation); };
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;  // parents before the children they enclose
  });
  const auto earliest = std::find_if(spans.begin(), spans.end(), is_forward);
  if (earliest == spans.end()) {
    out.note = annotation.empty() ? "no per-forward annotation in the trace"
                                  : fmt::format("no '{}' span in the trace", annotation);
    return out;
  }
  // The recorded forward closest to the median of the forwards on that thread (the earliest among equals): the
  // first one may be a cold start or a disturbed one (a 3.3 s forward of SDPA math beside a median of 1.8 s
  // shrank every other variant's row to a sliver).
  std::vector<std::vector<Span>::iterator> forwards;
  for (auto it = earliest; it != spans.end(); ++it)
    if (it->name == earliest->name && it->track_key == earliest->track_key) forwards.push_back(it);
  std::vector<double> durs;
  for (const auto& it : forwards) durs.push_back(it->dur);
  const double median = analysis::median(std::move(durs));
  size_t chosen = 0;
  for (size_t i = 1; i < forwards.size(); ++i)
    if (std::abs(forwards[i]->dur - median) < std::abs(forwards[chosen]->dur - median)) chosen = i;
  const auto first = forwards[chosen];
  out.drawn = {int(chosen), int(forwards.size()), first->dur * 1e-3, forwards.front()->dur * 1e-3, median * 1e-3};
  const double t0 = first->ts;
  const std::string fwd_name = first->name;
  double t_end = INFINITY;
  for (auto it = first + 1; it != spans.end(); ++it)
    if (it->name == fwd_name && it->track_key == first->track_key) {
      t_end = it->ts;
      break;
    }
  // Depth per track: a stack of the ends of the open spans.
  std::map<std::string, std::vector<double>> open;
  std::map<std::string, int> track_order;
  size_t kept = 0, total = 0;
  const double fwd_end = first->ts + first->dur;
  for (auto it = first; it != spans.end() && it->ts < t_end; ++it) {
    // On the forward's own thread, what begins after it ended is the step's bookkeeping (the next
    // ProfilerStep); other threads and GPU streams may still be running its work.
    if (it->track_key == first->track_key && it->ts >= fwd_end) continue;
    ++total;
    std::vector<double>& stack = open[it->track_key];
    while (!stack.empty() && stack.back() <= it->ts) stack.pop_back();
    const int depth = int(stack.size());
    stack.push_back(it->ts + it->dur);
    if (kept >= cap) continue;
    if (!track_order.count(it->track_key)) track_order.emplace(it->track_key, int(track_order.size()));
    const auto named = track_names.find(it->track_key);
    const std::string track = named != track_names.end() && !named->second.empty() ? named->second
                                                                                    : "track " + it->track_key;
    // What the span is, in words: a share is not a call inside the op above it.
    const bool share = it->cat == "thread_work";
    static const std::map<std::string, std::string> kWhat = {
        {"cpu_op", "op"},           {"user_annotation", "annotation"}, {"kernel", "GPU kernel"},
        {"gpu_memcpy", "GPU copy"}, {"gpu_memset", "GPU fill"},        {"cuda_runtime", "CUDA runtime call"}};
    const auto what = kWhat.find(it->cat);
    out.rows.push_back({{"name", it->name},
                        {"cat", it->cat},
                        {"what", share ? "this thread's share of " + it->name + "'s parallel region"
                                 : what != kWhat.end() ? what->second
                                                       : it->cat},
                        {"share", share},
                        {"lane", fmt::format("{} · {}", track, depth)},
                        {"lane_order", track_order[it->track_key] * 64 + std::min(depth, 63)},
                        {"start", (it->ts - t0) * 1e-3},
                        {"end", (it->ts + it->dur - t0) * 1e-3},
                        {"ms", it->dur * 1e-3}});
    ++kept;
  }
  if (total > kept) out.note = fmt::format("the first {} of {} spans", kept, total);
  return out;
}

analysis::KeyAverages key_averages_from_summary(const json& s) {
  analysis::KeyAverages ka;
  const json* rows = member(s, {"rows"});
  if (!rows || !rows->is_array()) return ka;
  const bool bf16 = bf16_problem(s);
  auto cost = [bf16](const json& r, const char* key) {
    OpCost c;
    if (const json* j = member(r, {key}); j && j->is_object()) {
      c.flops = num(*j, "flops");
      c.bytes_read = num(*j, "bytes_read");
      c.bytes_written = num(*j, "bytes_written");
      c.bf16_flops = bf16_flops_of(*j, c.flops, bf16);
      c.library_flops = num(*j, "library_flops");
      c.library_bf16_flops = num(*j, "library_bf16_flops");
    }
    return c;
  };
  for (const json& r : *rows) {
    if (!r.is_object()) continue;
    analysis::OpStats o;
    o.name = str(r, "name", "?");
    o.category = str(r, "category");
    o.input_shapes = str(r, "input_shapes");
    o.input_types = str(r, "input_types");  // "" in a summary from before it was written
    o.calls = int64_t(num(r, "calls"));
    o.self_ns = num(r, "self_ns");
    o.total_ns = num(r, "total_ns");
    o.mem_bytes = int64_t(num(r, "mem_bytes"));
    o.self_mem_bytes = int64_t(num(r, "self_mem_bytes"));
    o.freed_bytes = int64_t(num(r, "freed_bytes"));
    o.cost = cost(r, "cost");
    o.self_cost = cost(r, "self_cost");
    o.task_clock_ns = int64_t(num(r, "task_clock_ns", -1));
    o.page_faults = int64_t(num(r, "page_faults", -1));
    o.self_page_faults = int64_t(num(r, "self_page_faults", -1));
    if (const json* ps = member(r, {"self_ns_per_step"}); ps && ps->is_array())
      for (const json& x : *ps) o.step_self_ns.push_back(x.is_number() ? x.get<double>() : 0.0);
    o.self_device_ns = num(r, "self_cuda_ns");
    o.device_total_ns = num(r, "cuda_total_ns");
    o.device_mem_bytes = int64_t(num(r, "cuda_mem_bytes"));
    o.self_device_mem_bytes = int64_t(num(r, "self_cuda_mem_bytes"));
    ka.rows.push_back(std::move(o));
  }
  const json empty = json::object();
  const json* totals = member(s, {"totals"});
  const json* overhead = member(s, {"overhead"});
  const json* memory = member(s, {"memory"});
  ka.self_total_ns = num(totals ? *totals : empty, "self_cpu_time_total_ns");
  ka.zones = int64_t(num(totals ? *totals : empty, "zones"));
  ka.zone_overhead_ns = num(overhead ? *overhead : empty, "zone_overhead_ns");
  ka.overhead_subtracted_ns = num(overhead ? *overhead : empty, "subtracted_ns");
  ka.peak_bytes = int64_t(num(memory ? *memory : empty, "peak_bytes"));
  ka.start_bytes = int64_t(num(memory ? *memory : empty, "start_bytes"));
  ka.outside_zones_bytes = int64_t(num(memory ? *memory : empty, "outside_zones_bytes", 0));
  if (const json* c = member(s, {"counters"})) ka.counters_note = str(*c, "note");
  ka.has_memory = summary_has_memory(s);
  if (const json* pr = member(s, {"profiler"}); pr && pr->is_object())  // absent: written before it was optional
    ka.has_shapes = !pr->contains("record_shapes") || pr->at("record_shapes") != false;
  if (const json* d = member(s, {"device"}); d && d->is_object()) {
    ka.has_device = true;
    ka.device_name = str(*d, "name");
    ka.device_self_total_ns = num(*d, "self_cuda_time_total_ns");
    ka.device_peak_bytes = int64_t(num(*d, "peak_bytes"));
  }
  return ka;
}

// Whether `file` beside the variant's summary is an earlier run's: older than the summary by more than two
// seconds (the slack: a copied directory, cp -r, gets its files' times in copy order). Not when either time
// cannot be read, or there is no summary to hold it against.
bool older_than_summary(const fs::path& dir, const std::string& file, const VariantData& v) {
  std::error_code fec, sec;
  const auto ft = fs::last_write_time(dir / file, fec), st = fs::last_write_time(dir / v.summary_file, sec);
  return v.summary && !fec && !sec && ft + std::chrono::seconds(2) < st;
}

// The variant's torch-style table: its .table.txt when that is of the same run as the summary (profile and
// compare write both), else rebuilt from the summary, with a note when an older .table.txt was passed over.
std::string read_table_text(const fs::path& dir, const VariantData& v, std::vector<std::string>& notes) {
  if (v.summary) {
    if (const json* t = member(*v.summary, {"table", "torch_table"}); t && t->is_string()) return t->get<std::string>();
  }
  const std::string table_file = v.name + ".table.txt";
  if (auto text = read_file(dir / table_file)) {
    if (!older_than_summary(dir, table_file, v)) return *text;
    notes.push_back(fmt::format("{}: {} is older than {} (an earlier run's), so its table is rebuilt from the summary",
                                v.name, table_file, v.summary_file));
  }
  if (!v.summary) return "";
  analysis::KeyAverages ka = key_averages_from_summary(*v.summary);
  if (ka.rows.empty()) return "";
  TableOptions opt;  // the blog's key_averages().table(sort_by="cpu_time_total", row_limit=15)
  opt.sort_by = ka.has_device ? "cuda_time_total" : "cpu_time_total";
  opt.row_limit = 15;
  try {
    return table(ka, opt);
  } catch (const std::exception& e) {
    return fmt::format("(the table could not be rebuilt from {}: {})", v.summary_file, e.what());
  }
}

// The variant's folded stacks: its .stacks.txt when of the same run as the summary (profile and compare write
// both). Each line "frame;frame;... N", N a count of ns; a file with a line that is not one is left out whole,
// with a note naming the line.
std::vector<std::pair<std::vector<std::string>, double>> read_stacks(const fs::path& dir, const VariantData& v,
                                                                     std::vector<std::string>& notes) {
  std::vector<std::pair<std::vector<std::string>, double>> out;
  const std::string file = v.name + ".stacks.txt";
  std::string why;
  std::error_code ec;
  if (!fs::exists(dir / file, ec)) return out;
  const auto text = read_file(dir / file, &why);
  if (!text) {
    notes.push_back(fmt::format("{}: {}", v.name, why));
    return out;
  }
  if (older_than_summary(dir, file, v)) {
    notes.push_back(fmt::format("{}: {} is older than {} (an earlier run's), so no flame graph is drawn from it",
                                v.name, file, v.summary_file));
    return out;
  }
  size_t line_no = 0;
  for (size_t at = 0; at < text->size();) {
    size_t nl = text->find('\n', at);
    if (nl == std::string::npos) nl = text->size();
    std::string_view line(text->data() + at, nl - at);
    at = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF, as flamegraph.pl takes it
    if (line.empty()) continue;
    // As flamegraph.pl reads a line: the stack, white space, a count (a fraction allowed).
    const size_t sp = line.find_last_of(" \t");
    const std::string_view count = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
    const bool digits = !count.empty() && count.size() <= 18 && count.front() != '.' &&
                        std::count(count.begin(), count.end(), '.') <= 1 &&
                        std::all_of(count.begin(), count.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
    if (!digits || sp == 0) {
      notes.push_back(fmt::format("{}: line {} of {} is not a folded stack (\"frame;frame N\", N in ns), so no flame "
                                  "graph is drawn from it",
                                  v.name, line_no, file));
      return {};
    }
    std::vector<std::string> frames;
    const std::string_view stack = line.substr(0, sp);
    // No more frames than the graph draws (a line of a million ';' would otherwise be a million nodes).
    for (size_t f = 0; f <= stack.size() && frames.size() <= size_t(kMaxFlameDepth); ) {
      size_t semi = stack.find(';', f);
      if (semi == std::string_view::npos) semi = stack.size();
      frames.emplace_back(stack.substr(f, semi - f));
      f = semi + 1;
    }
    out.emplace_back(std::move(frames), std::stod(std::string(count)));
  }
  return out;
}

// The rows the page draws, from the summary's rows as the table reads them (key_averages_from_summary). A
// summary of a CUDA profile (it has a "device" section) is drawn in device time: Self CUDA per kernel / copy /
// fill row; the host ops that launched them keep no time, FLOPs or bytes of their own there, so nothing is
// counted twice. FLOPs and bytes are the op's own (its self cost model).
std::vector<OpRow> page_rows(const analysis::KeyAverages& ka) {
  std::vector<OpRow> rows;
  rows.reserve(ka.rows.size());
  for (const analysis::OpStats& r : ka.rows) {
    const OpCost& c = r.self_cost;
    OpRow o{r.name, r.category, double(r.calls), r.self_ns, r.total_ns, c.flops, c.bf16_flops, c.bytes(),
            c.library_flops, c.library_bf16_flops};
    if (ka.has_device) {
      o.self_ns = r.self_device_ns;
      o.total_ns = r.device_total_ns;
      if (!analysis::is_device_category(o.category))
        o.flops = o.bf16_flops = o.library_flops = o.library_bf16_flops = o.bytes = 0;
    }
    rows.push_back(std::move(o));
  }
  return rows;
}

// One variant the run keeps: its summary's rows, forwards and memory timeline, its trace's first forwards
// (and memory, when the summary has none), and its torch-style table. What cannot be read becomes a note.
void load_variant(const fs::path& dir, Input s, size_t max_spans, VariantData& v, std::vector<std::string>& op_notes) {
  std::string annotation;  // the per-forward annotation the summary recorded, if any
  if (!s.doc) {
    op_notes.push_back(v.name + ": " + s.note);
  } else {
    v.summary = std::move(s.doc);
    // Read once: the page's rows and the uneven-op notes both stand on them.
    const analysis::KeyAverages ka = key_averages_from_summary(*v.summary);
    v.ops = page_rows(ka);
    v.uneven = uneven_op_notes(ka);
    annotation = recorded(*v.summary, "annotation");
    // Forwards are the calls of the per-forward annotation.
    for (const OpRow& r : v.ops)
      if (r.calls > 0 && is_forward_zone(r.name, r.category, annotation)) {
        v.forwards = r.calls;
        v.per_forward = true;
        v.forward_zone = r.name;
        break;
      }
    v.memory = timeline_from_summary(*v.summary);
    if (!v.memory.empty())
      v.memory_source = v.summary->contains("device") ? v.summary_file + " (device memory)" : v.summary_file;
  }
  // A later run of the variant may have written its trace in the other format (profile after compare --gzip),
  // and removed the one compare.json names: the one that is there is the summary's.
  if (std::error_code ec; !v.trace_file.empty() && !fs::exists(dir / v.trace_file, ec)) {
    const std::string plain = v.name + ".trace.json", other = v.trace_file == plain ? plain + ".gz" : plain;
    if (fs::is_regular_file(dir / other, ec)) v.trace_file = other;
  }
  if (v.trace_file.empty()) {
    for (const char* suf : {".trace.json", ".trace.json.gz"})
      if (std::error_code ec; fs::is_regular_file(dir / (v.name + suf), ec)) { v.trace_file = v.name + suf; break; }
  }
  if (!v.trace_file.empty()) {
    Input t = read_json(dir / v.trace_file);
    if (t.doc) {
      if (v.memory.empty()) {
        v.memory = timeline_from_trace(*t.doc);
        if (!v.memory.empty()) v.memory_source = v.trace_file + " (counter events)";
      }
      ForwardSpans f = forward_timeline(*t.doc, annotation, max_spans);
      v.forward_spans = std::move(f.rows);
      v.forward_drawn = f.drawn;
      if (!f.note.empty()) v.forward_note = v.trace_file + ": " + f.note;
    } else {
      v.forward_note = t.note;
      std::error_code ec;
      v.trace_unreadable = fs::exists(dir / v.trace_file, ec);  // else the summary names a trace that is gone
    }
  } else {
    v.forward_note = "no trace file";
  }
  v.table = read_table_text(dir, v, op_notes);
  // Its rows as CSV, linked under its table when of the same run (an older one is another run's rows).
  const std::string csv = v.name + ".table.csv";
  if (std::error_code ec; fs::is_regular_file(dir / csv, ec) && !older_than_summary(dir, csv, v)) v.table_csv = csv;
  v.stacks = read_stacks(dir, v, op_notes);
}

// Why an op of roofline.json is not one `attnprof roofline` placed: a negative figure, an intensity that is not
// flops/bytes, GFLOP/s and GB/s that are not one rate at that intensity, a fraction of the roof that is not
// achieved over attainable; "" when it adds up (or is no object, which the section skips).
std::string roofline_op_error(const json& op) {
  if (!op.is_object()) return "";
  const std::string who = fmt::format("op '{}' of {}", str(op, "name", "?"), str(op, "variant", "?"));
  for (const char* key : {"flops", "bytes", "self_ns", "intensity", "achieved_gflops", "achieved_gbs",
                          "attainable_gflops", "fraction_of_attainable"})
    if (const double v = num(op, key, 0.0); !(v >= 0))
      return fmt::format("{}: field '{}' is {}, not a figure a run has", who, key, v);
  const double f = num(op, "flops", NAN), b = num(op, "bytes", NAN), ai = num(op, "intensity", NAN);
  const double g = num(op, "achieved_gflops", NAN), gb = num(op, "achieved_gbs", NAN);
  const double roof = num(op, "attainable_gflops", NAN), frac = num(op, "fraction_of_attainable", NAN);
  const auto off = [](double have, double want) { return std::abs(have - want) > 1e-6 * std::abs(want); };
  if (f > 0 && b > 0 && ai > 0 && off(ai, f / b))
    return fmt::format("{}: field 'intensity' is {}, not its flops over its bytes ({:.6g})", who, ai, f / b);
  if (ai > 0 && g > 0 && gb > 0 && off(gb, g / ai))
    return fmt::format("{}: fields 'achieved_gflops' ({}) and 'achieved_gbs' ({}) are not one rate at its "
                       "intensity ({:.6g} FLOP/B)",
                       who, g, gb, ai);
  if (roof > 0 && g >= 0 && frac >= 0 && off(frac, g / roof))
    return fmt::format("{}: field 'fraction_of_attainable' is {}, not its achieved_gflops over its "
                       "attainable_gflops ({:.6g})",
                       who, frac, g / roof);
  return "";
}

// The variants of a run directory: those compare.json ran, in its order (with their compare_ms), then every
// other <variant>.summary.json there (sorted); `not_run` gets the ones compare.json names but did not run, with
// the reason.
std::vector<VariantData> collect_variants(const fs::path& dir, const Input& compare,
                                          std::map<std::string, std::string>& not_run) {
  std::vector<VariantData> vs;
  std::set<std::string> seen, seen_files;
  auto add_variant = [&](const std::string& name, std::string summary_file, std::string trace_file, double ms) {
    if (summary_file.empty()) summary_file = name + ".summary.json";
    if (!seen.insert(name).second || !seen_files.insert(summary_file).second) return;
    VariantData v;
    v.name = name;
    v.summary_file = std::move(summary_file);
    v.trace_file = std::move(trace_file);
    v.compare_ms = ms;
    vs.push_back(std::move(v));
  };
  if (compare.doc) {
    if (const json* arr = member(*compare.doc, {"variants"}); arr && arr->is_array())
      for (const json& v : *arr)
        if (v.is_object() && v.contains("name")) {
          if (const double ms = num(v, "ms", NAN); std::isfinite(ms)) {
            // compare writes each row's summary as <name>.summary.json; a row naming another file (another
            // variant's) is read from its own name's, so that the other variant keeps its file.
            // The same for its trace: <name>.trace.json, or .trace.json.gz with --gzip.
            const std::string name = str(v, "name");
            const std::string trace = fs::path(str(v, "trace")).filename().string();
            add_variant(name, fs::path(name + ".summary.json").filename().string(),
                        trace == name + ".trace.json.gz" ? trace : fs::path(name + ".trace.json").filename().string(),
                        ms);
          } else {
            const std::string why = str(v, "note");
            not_run[str(v, "name")] = str(v, "status", "skipped") + (why.empty() ? "" : ": " + why);
          }
        }
  }
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string n = it->path().filename().string();
    const std::string suf = ".summary.json";
    if (n.size() > suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0) found.push_back(n);
  }
  std::sort(found.begin(), found.end());
  for (const auto& n : found) add_variant(n.substr(0, n.size() - 13), n, "", NAN);
  return vs;
}

}  // namespace

Run read_run(const fs::path& dir, size_t max_spans) {
  Run run;
  // "<file>: why" for an input that is there and cannot be used; the checks' own messages begin with the file.
  auto unusable = [&](const std::string& file, std::string why) {
    if (why.starts_with(file + ": ")) why.erase(0, file.size() + 2);
    run.unusable.emplace_back(file, std::move(why));
  };
  std::error_code lec;
  (void)fs::directory_iterator(dir, lec);
  if (lec)
    unusable("", fmt::format("it cannot be listed ({}), so no <variant>.summary.json in it can be found", lec.message()));
  run.compare = read_json(dir / "compare.json");
  // A compare.json with figures attnprof never writes (a time that is not a number, a negative byte count, a
  // row without a name) is not drawn with guessed values: the section says what is wrong instead.
  if (run.compare.doc) try {
      check_compare_json(*run.compare.doc, "compare.json");
    } catch (const Error& e) {
      run.compare.doc.reset();
      run.compare.note = fmt::format("{} (not drawn: attnprof does not write such a file)", e.what());
      run.compare.why = e.what();
    }
  run.sweep = read_json(dir / "sweep.json");
  run.roofline = read_json(dir / "roofline.json");
  // sweep.json and roofline.json are drawn leniently, field by field, but only when they are what the name
  // says: another command's JSON (or a list, a number) under that name is no sweep or roofline.
  auto check_kind = [](Input& in, const char* file, const char* kind,
                       std::initializer_list<std::string_view> fields) {
    if (!in.doc) return;
    std::string why;
    if (!in.doc->is_object()) {
      why = "not an attnprof " + std::string(kind) + ": it is not a JSON object";
    } else if (const json* k = member(*in.doc, {"kind"}); k && (!k->is_string() || k->get<std::string>() != kind)) {
      why = fmt::format("not an attnprof {}: its \"kind\" is {}, not \"{}\"", kind, k->dump(), kind);
    } else if (!member(*in.doc, fields)) {
      std::string names;
      for (std::string_view f : fields) names += (names.empty() ? "" : " or ") + fmt::format("\"{}\"", f);
      why = fmt::format("not an attnprof {}: it has no {}", kind, names);
    }
    if (why.empty()) return;
    in.doc.reset();
    in.note = fmt::format("{} is {}", file, why);
    in.why = why;
  };
  check_kind(run.sweep, "sweep.json", "sweep", {"points"});
  check_kind(run.roofline, "roofline.json", "roofline", {"machine", "peaks", "ops"});
  // Its ops' figures hold together as `attnprof roofline` computes them: an edited rate would place an op
  // above its roof, an edited intensity off the chart. Such a file is not drawn (the section falls back on
  // compare.json and the summaries), and the note names the first figure that does not add up.
  if (run.roofline.doc)
    if (const json* ops = member(*run.roofline.doc, {"ops"}); ops && ops->is_array())
      for (const json& op : *ops)
        if (const std::string why = roofline_op_error(op); !why.empty()) {
          run.roofline.doc.reset();
          run.roofline.why = why + " (attnprof does not write such a file)";
          run.roofline.note = "roofline.json is not drawn: " + run.roofline.why;
          run.notes.push_back(run.roofline.note + "; the roofline below is built from compare.json and the summaries.");
          run.left_out.insert("roofline.json");
          break;
        }
  for (const auto& [in, file] : {std::pair<const Input&, const char*>{run.compare, "compare.json"},
                                 {run.sweep, "sweep.json"},
                                 {run.roofline, "roofline.json"}}) {
    if (in.doc) ++run.usable;
    else if (!in.why.empty()) unusable(file, in.why);
  }
  const Input& compare = run.compare;

  // Variants: those compare.json names, in its order, then any other <variant>.summary.json in the directory;
  // the ones compare.json did not run (skipped over the budget, failed validation), with the reason.
  std::map<std::string, std::string> not_run;
  run.variants = collect_variants(dir, compare, not_run);
  std::vector<VariantData>& vs = run.variants;

  // A directory keeps what every earlier run left in it. A summary of another problem must not be drawn beside
  // this run's: the step-by-step changes, rooflines and tables would compare different problems. The run's
  // problem is compare.json's; without one, that of the newest summary or roofline.json.
  auto problem_in = [](const json& doc) { return recorded(doc, "problem"); };
  std::vector<Input> summaries;
  std::string reference, reference_from;
  if (compare.doc) {
    reference = str(*compare.doc, "problem");
    reference_from = "compare.json's";
  }
  fs::file_time_type newest{};
  auto consider = [&](const json& doc, const std::string& file) {
    if (compare.doc) return;
    const std::string p = problem_in(doc);
    std::error_code tec;
    const fs::file_time_type t = fs::last_write_time(dir / file, tec);
    if (!p.empty() && !tec && (reference.empty() || t > newest)) {
      reference = p;
      newest = t;
      reference_from = "the newest file's (" + file + ")";
    }
  };
  for (VariantData& v : vs) {
    summaries.push_back(read_json(dir / v.summary_file));
    if (summaries.back().doc) consider(*summaries.back().doc, v.summary_file);
  }
  // A roofline.json that placed no op (an older attnprof's --peaks-only wrote one, naming the default problem)
  // says nothing about the run's problem.
  if (run.roofline.doc)
    if (const json* ops = member(*run.roofline.doc, {"ops"}); ops && ops->is_array() && !ops->empty())
      consider(*run.roofline.doc, "roofline.json");
  auto other_problem = [&](const json& doc) {
    const std::string p = problem_in(doc);
    return !reference.empty() && !p.empty() && p != reference ? p : std::string();
  };
  auto left_out = [&](const std::string& file, const std::string& p) {
    return fmt::format("{} is left out: it is of {}, not of this run's problem {} ({}). It is from another run "
                       "in this directory; give each problem its own --out, or compare two runs with `attnprof diff`.",
                       file, p, reference, reference_from);
  };
  std::error_code cec;
  const fs::file_time_type compare_time = fs::last_write_time(dir / "compare.json", cec);
  auto older_than_compare = [&](const std::string& file) {
    std::error_code fec;
    const fs::file_time_type t = fs::last_write_time(dir / file, fec);
    return compare.doc && !cec && !fec && t < compare_time;
  };

  if (run.roofline.doc) {
    if (const std::string p = other_problem(*run.roofline.doc); !p.empty()) {
      run.notes.push_back(left_out("roofline.json", p));
      run.roofline.doc.reset();
      run.roofline.note = "roofline.json is of another problem (see the top of the page)";
    } else if (older_than_compare("roofline.json")) {
      // Placed before this compare ran (roofline --from an earlier compare, or its own run): its points are
      // that run's ops, some of variants this compare may not have run. The chart is built from compare.json.
      run.notes.push_back("roofline.json is left out: it is older than compare.json, so it placed an earlier run's "
                          "ops. The roofline below is built from compare.json and its summaries; `attnprof roofline "
                          "--from` this directory places this run's.");
      run.left_out.insert("roofline.json");
      run.roofline.doc.reset();
      run.roofline.note = "roofline.json is an earlier run's (see the top of the page)";
    }
  }

  std::vector<std::string>& op_notes = run.op_notes;
  std::vector<bool> keep(vs.size(), true);
  auto leave_out = [&](size_t i, std::string note) {
    run.notes.push_back(std::move(note));
    run.left_out.insert(vs[i].summary_file);
    for (std::string_view suf : kVariantFileSuffixes) run.left_out.insert(vs[i].name + std::string(suf));
    if (!vs[i].trace_file.empty()) run.left_out.insert(vs[i].trace_file);
    keep[i] = false;
  };
  for (size_t i = 0; i < vs.size(); ++i) {
    VariantData& v = vs[i];
    Input s = std::move(summaries[i]);
    if (!s.doc && !s.why.empty()) unusable(v.summary_file, s.why);
    if (s.doc)
      if (const std::string p = other_problem(*s.doc); !p.empty()) {
        ++run.usable;  // a good file, of another problem
        leave_out(i, left_out(v.summary_file, p));
        continue;
      }
    // compare.json says this run did not run the variant: a summary older than it is an earlier run's, and
    // beside this run's figures it would compare the two runs without saying so.
    if (const auto nr = not_run.find(v.name); s.doc && nr != not_run.end() && older_than_compare(v.summary_file)) {
      ++run.usable;  // an earlier run's, left out
      leave_out(i, fmt::format("{} is left out: compare.json did not run {} ({}), so the file is an earlier run's "
                               "in this directory.", v.summary_file, v.name, nr->second));
      continue;
    }
    // Nor does a summary compare.json does not name at all (compare --variants chose others), older than it:
    // its bars, tables and threads would stand beside this run's unmarked. A profile run after the compare is
    // newer and is drawn with it.
    if (s.doc && !std::isfinite(v.compare_ms) && not_run.count(v.name) == 0 && older_than_compare(v.summary_file)) {
      ++run.usable;
      leave_out(i, fmt::format("{} is left out: it is older than compare.json, which did not run {}, so it is an "
                               "earlier run's in this directory. Run `attnprof profile {}` into this --out after "
                               "the compare to draw it beside this run, or give each run its own --out.",
                               v.summary_file, v.name, v.name));
      continue;
    }
    // A summary of another variant (copied over, or named for this one in compare.json) would be drawn under
    // this variant's name: its ops in this variant's bars, its changes in this variant's step panels.
    if (const std::string recorded_as = s.doc ? recorded(*s.doc, "variant") : std::string();
        !recorded_as.empty() && recorded_as != v.name) {
      ++run.usable;  // a good file, of another variant
      leave_out(i, fmt::format("{} is left out: it is variant '{}'s summary, not '{}'s (a copy, or compare.json "
                               "names it for the wrong variant), so {} is drawn without a profile.",
                               v.summary_file, recorded_as, v.name, v.name));
      continue;
    }
    if (s.doc) try {
        check_summary(*s.doc, v.summary_file);
      } catch (const Error& e) {
        unusable(v.summary_file, e.what());
        leave_out(i, fmt::format("{} is left out: {} (attnprof does not write such a file).", v.summary_file, e.what()));
        continue;
      }
    if (s.doc) ++run.usable;
    // A summary compare.json ran but did not write (a later `profile` replaced it): drawn, as the directory's
    // latest, and said so, since its time is not the one in the Comparison table. compare writes both figures
    // from one number, so any difference means another run.
    if (const json* summary_run = s.doc ? member(*s.doc, {"run"}) : nullptr; summary_run)
      if (const double in_summary = num(*summary_run, "ms_per_forward", NAN);
          std::isfinite(v.compare_ms) && std::isfinite(in_summary) && v.compare_ms != in_summary)
        op_notes.push_back(fmt::format(
            "{}: {} is from a later run than compare.json ({:.3f} ms per forward against the {:.3f} in the "
            "Comparison table): {}'s bars, step changes, memory, timeline and table are that run's.",
            v.name, v.summary_file, in_summary, v.compare_ms, v.name));
    load_variant(dir, std::move(s), max_spans, v, op_notes);
  }
  for (size_t i = vs.size(); i-- > 0;)
    if (!keep[i]) vs.erase(vs.begin() + std::ptrdiff_t(i));
  return run;
}

}  // namespace attnprof::report::html_run

namespace attnprof::report {

analysis::KeyAverages key_averages_from_summary(const nlohmann::json& summary) {
  return html_run::key_averages_from_summary(summary);
}

bool summary_has_memory(const nlohmann::json& s) {
  const nlohmann::json* pr = html_run::member(s, {"profiler"});
  if (pr && pr->is_object() && pr->contains("profile_memory") && pr->at("profile_memory") == false) return false;
  const char* key = html_run::member(s, {"device"}) ? "self_cuda_mem_bytes" : "self_mem_bytes";
  const nlohmann::json* rows = html_run::member(s, {"rows"});
  if (!rows || !rows->is_array()) return true;
  return std::none_of(rows->begin(), rows->end(), [key](const nlohmann::json& r) {
    return r.is_object() && r.contains(key) && r[key].is_null();
  });
}

}  // namespace attnprof::report
