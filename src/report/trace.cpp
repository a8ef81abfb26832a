// Chrome Trace Event JSON, as Perfetto and chrome://tracing read it, written straight from the profile.
//
//   {"traceEvents": [ M process_name / thread_name / thread_sort_index,
//                     X zones (cat cpu_op | user_annotation), C "Memory" counters, i "[memory]" instants,
//                     X thread_work: each thread's share of an op's OpenMP region, on that thread's track,
//                     X work_item: the tasks a share marked (the flash kernel's tiles), nested in it ],
//    "otherData": { metadata, clock, zone overhead, counters note },
//    "schemaVersion": 1, "deviceProperties": [ {"id", "name", Kineto's "totalGlobalMem", "computeMajor", ...,
//    "numSms" where known} per GPU with tracks; none on the CPU ]}
//
// Timestamps: integer nanoseconds since the session origin, printed as µs with 3 decimals (exact: no binary
// fractions reach the file). Each zone's end is rounded separately from its start, then clamped into its
// parent's interval, so X events on one (pid, tid) nest or are disjoint exactly as recorded. Events are
// written in (ts ascending, dur descending, depth ascending) order so parents precede their children.
// Zone args carry Kineto's "External id" (1, 2, ... over the zones in thread order; the GPU work a zone launched
// carries its id), "Input Dims" and "Input type" (torch's record_shapes keys), the inclusive cost model ("FLOPs",
// "bytes", "bytes_read", "bytes_written": the zone's own cost plus its children's, so masked_fill carries copy_ +
// masked_fill_), the variant, software counters when recorded, and on a CPU op whose work a library runs
// (matmul: oneDNN, OpenBLAS) a "threads" note: the library's threads are not traced, so the worker tracks look
// idle under it. No JSON DOM is built: export runs at millions of events per second.
//
// Device events (CUDA profiles), laid out as torch.profiler's Kineto traces lay them out:
//   - a process "GPU <n> (<device name>)" (pid = host pid + 1 + n) with one track per stream ("stream 7")
//     holding the kernel / gpu_memcpy / gpu_memset X events, args grid, block, registers per thread,
//     shared memory, bytes, correlation, the launching zone's External id, and the launching op's FLOPs and
//     bytes when they apply;
//   - a "cuda_runtime" X event for each launching API call on the launching CPU thread, clamped into the
//     zone that launched it, with a flow start (ph "s", cat "ac2g", id = correlation id) and a flow end
//     (ph "f", bp "e") on the activity, so Perfetto draws an arrow from the launch to the kernel;
//   - a "CUDA Mem" counter of live device bytes on the GPU process.
// Every event, host or device, goes through the one (ts, dur desc, depth) sort.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

#include "attnprof/report.h"
#include "io/atomic_file.h"

namespace attnprof::report {
namespace {

using Buf = fmt::memory_buffer;

void put(Buf& b, std::string_view s) { b.append(s.data(), s.data() + s.size()); }

// A JSON string of `s`; a byte that is not part of valid UTF-8 (a path from a filesystem that is not UTF-8, in
// the run's metadata) becomes U+FFFD, as nlohmann's replace handler writes the summary, so strict readers
// (Python's json, nlohmann) take the trace.
void put_escaped(Buf& b, std::string_view text) {
  b.push_back('"');
  if (std::none_of(text.begin(), text.end(), [](char c) {
        return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x80;
      })) {
    put(b, text);
    b.push_back('"');
    return;
  }
  const std::string s = utf8_replaced(text);
  for (char c : s) {
    switch (c) {
      case '"': put(b, "\\\""); break;
      case '\\': put(b, "\\\\"); break;
      case '\n': put(b, "\\n"); break;
      case '\r': put(b, "\\r"); break;
      case '\t': put(b, "\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) fmt::format_to(std::back_inserter(b), "\\u{:04x}", int(c));
        else b.push_back(c);
    }
  }
  b.push_back('"');
}

void put_int(Buf& b, int64_t v) {
  const fmt::format_int f(v);
  b.append(f.data(), f.data() + f.size());
}

// Integer ns as µs with exactly 3 decimals.
void put_us(Buf& b, int64_t ns) {
  if (ns < 0) {
    b.push_back('-');
    ns = -ns;
  }
  put_int(b, ns / 1000);
  const int frac = int(ns % 1000);
  const char d[4] = {'.', char('0' + frac / 100), char('0' + frac / 10 % 10), char('0' + frac % 10)};
  b.append(d, d + 4);
}

void put_number(Buf& b, double v) {
  if (!std::isfinite(v)) v = 0.0;
  if (std::fabs(v) < 9e15 && v == std::floor(v)) put_int(b, int64_t(v));
  else fmt::format_to(std::back_inserter(b), "{}", v);
}

enum class Kind : uint8_t { Zone, Memory, Work, WorkItem, Launch, Device, DeviceMemory };

struct Item {
  int64_t ts;
  int64_t dur;
  uint32_t thread;
  uint32_t index;
  uint16_t depth;
  Kind kind;
};

int64_t to_ns(const prof::ProfileResult& r, uint64_t t) {
  const double ns = double(int64_t(t - r.origin_ticks)) * r.ns_per_tick;
  return std::max<int64_t>(0, std::llround(ns));
}

// The GPU's process in the trace: after the host's, one per device.
long device_pid(long host_pid, uint32_t device) { return host_pid + 1 + long(device); }

// Whether an activity's launch is on the host timeline: it then has a cuda_runtime slice and a flow, whose
// start (at the launch) and end (at the activity) must both be written or neither.
bool has_launch(const prof::ProfileResult& r, const prof::DeviceActivity& d) {
  return d.launch_api && d.thread >= 0 && size_t(d.thread) < r.threads.size() && d.launch_t1 >= d.launch_t0;
}

// A thread's track id in the trace: its sequential id plus one (1 is the first thread that recorded, usually
// main). Never 0: the process's own metadata events use tid 0, and viewers have read a thread 0 as the same
// track as thread 1 (Perfetto before its fix of Aug 2025; Tracy's Chrome import), stacking main's ops and a
// worker's shares as if they overlapped.
int64_t trace_tid(const prof::ThreadTrace& t) { return int64_t(t.tid) + 1; }

// One device-side item (rare next to zones: formatted, not hand-appended).
// A launch and its activity carry the launching zone's External id (as Kineto's cuda_runtime and kernel events carry
// their cpu_op's), when the launch was tied to a zone; `correlation` pairs the two.
// `flow`: the item's activity has a launch → kernel flow (Layout::flow), whose start the Launch item writes and
// whose end the activity writes.
void put_device_item(Buf& b, const prof::ProfileResult& r, const Item& it, long pid, int64_t external_id, bool flow) {
  auto out = std::back_inserter(b);
  if (it.kind == Kind::DeviceMemory) {
    const prof::DeviceMemEvent& m = r.device_mem[it.index];
    fmt::format_to(out, ",\n{{\"ph\":\"C\",\"name\":\"CUDA Mem\",\"pid\":{},\"tid\":0,\"ts\":", device_pid(pid, 0));
    put_us(b, it.ts);
    fmt::format_to(out, ",\"args\":{{\"Total Allocated\":{}}}}}", m.total);
    return;
  }
  const prof::DeviceActivity& d = r.device[it.index];
  if (it.kind == Kind::Launch) {
    const std::string tid = fmt::format_int(trace_tid(r.threads[it.thread])).str();
    put(b, ",\n{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":");
    put_escaped(b, d.launch_api);
    fmt::format_to(out, ",\"pid\":{},\"tid\":{},\"ts\":", pid, tid);
    put_us(b, it.ts);
    put(b, ",\"dur\":");
    put_us(b, it.dur);
    fmt::format_to(out, ",\"args\":{{\"correlation\":{}", d.correlation);
    if (external_id > 0) fmt::format_to(out, ",\"External id\":{}", external_id);
    put(b, "}}");
    if (!flow) return;
    fmt::format_to(out, ",\n{{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":",
                   d.correlation, pid, tid);
    put_us(b, it.ts);
    put(b, "}");
    return;
  }
  const long dpid = device_pid(pid, d.device);
  put(b, ",\n{\"ph\":\"X\",\"cat\":");
  put_escaped(b, analysis::device_category(d.kind));
  put(b, ",\"name\":");
  put_escaped(b, d.name ? d.name : "?");
  fmt::format_to(out, ",\"pid\":{},\"tid\":{},\"ts\":", dpid, d.stream);
  put_us(b, it.ts);
  put(b, ",\"dur\":");
  put_us(b, it.dur);
  fmt::format_to(out, ",\"args\":{{\"device\":{},\"stream\":{},\"correlation\":{}", d.device, d.stream,
                 d.correlation);
  if (external_id > 0) fmt::format_to(out, ",\"External id\":{}", external_id);
  if (d.kind == prof::DeviceActivity::Kind::Kernel) {
    fmt::format_to(out,
                   ",\"grid\":[{},{},{}],\"block\":[{},{},{}],\"registers per thread\":{},\"shared memory\":{}",
                   d.grid[0], d.grid[1], d.grid[2], d.block[0], d.block[1], d.block[2], d.registers,
                   d.static_smem + d.dynamic_smem);
    if (d.occupancy >= 0)  // Kineto's key, in percent
      fmt::format_to(out, ",\"est. achieved occupancy %\":{:.1f}", 100.0 * d.occupancy);
  } else {
    fmt::format_to(out, ",\"bytes\":{}", d.bytes);
  }
  if (d.variant) {
    put(b, ",\"variant\":");
    put_escaped(b, d.variant);
  }
  if (d.cost.does_work()) {
    put(b, ",\"FLOPs\":");
    put_number(b, d.cost.flops);
    put(b, ",\"bytes moved\":");
    put_number(b, d.cost.bytes());
  }
  put(b, "}}");
  if (flow) {
    fmt::format_to(out, ",\n{{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":",
                   d.correlation, dpid, d.stream);
    put_us(b, it.ts);
    put(b, "}");
  }
}

// A share's or item's `"steps_us":{...}` arg: the time in each of the share's steps, in µs; a step it spent no time
// in (the mask step without an explicit mask) is left out, as op_phases leaves it out.
void put_steps_us(Buf& b, const prof::ProfileResult& r, const prof::WorkSpan& share,
                  const std::array<uint64_t, prof::kMaxPhases>& ticks) {
  put(b, ",\"steps_us\":{");
  bool first_step = true;
  for (int k = 0; k < std::min<int>(share.n_phases, prof::kMaxPhases); ++k) {
    if (ticks[size_t(k)] == 0 || !share.phase_names[k]) continue;
    if (!first_step) put(b, ",");
    first_step = false;
    put_escaped(b, share.phase_names[k]);
    put(b, ":");
    put_us(b, std::llround(r.ns(ticks[size_t(k)])));
  }
  put(b, "}");
}

using Sink = std::function<void(std::string_view)>;

// Every event of the trace, placed on the timeline in the order it is written: zones clamped into their parents
// (a clock read a few ns apart must not put a child outside), each thread's work shares nested in the zone open
// when they began, launches in their launching zone.
struct Layout {
  std::vector<Item> items;                 // sorted by ts, longer first, outer first
  std::vector<std::vector<OpCost>> incl;   // per thread, per zone: its inclusive cost (the zone's args)
  // Per device activity: whether a launch → activity flow is drawn. One per correlation id (an API call that
  // made several activities, a graph launch, gets one launch slice and one arrow, to its first activity: a flow
  // id pairs one start with one end), and only where the activity starts at or after its launch on the mapped
  // clock (an arrow back in time is one Perfetto drops, and a clock fit's error, not the GPU's order).
  std::vector<char> flow;
  // Kineto's "External id" of zone i of thread t: first_id[t] + i, unique in the trace (1, 2, ... in thread
  // order; first_id[t + 1] is where the next thread's start, so an index past thread t's zones names none). The
  // GPU work a zone launched carries the same number.
  std::vector<int64_t> first_id;
  std::vector<std::vector<int32_t>> item_share;  // per thread: analysis::item_shares (-1: the item is not placed)
  int64_t external_id(int32_t thread, int32_t zone) const {
    return thread >= 0 && size_t(thread) + 1 < first_id.size() && zone >= 0 &&
                   first_id[size_t(thread)] + zone < first_id[size_t(thread) + 1]
               ? first_id[size_t(thread)] + zone
               : 0;
  }
};

Layout lay_out(const prof::ProfileResult& r, const TraceOptions& opt) {
  Layout l;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> spans(r.threads.size());  // per zone: clamped interval
  l.incl.resize(r.threads.size());
  l.item_share.resize(r.threads.size());
  l.first_id.assign(1, 1);
  for (const prof::ThreadTrace& t : r.threads) l.first_id.push_back(l.first_id.back() + int64_t(t.zones.size()));
  size_t n_items = 0;
  for (const auto& t : r.threads) n_items += t.zones.size() + t.mem.size() + t.work.size() + t.items.size();
  n_items += 2 * r.device.size() + r.device_mem.size();
  l.items.reserve(n_items);
  for (size_t ti = 0; ti < r.threads.size(); ++ti) {
    const prof::ThreadTrace& t = r.threads[ti];
    auto& sp = spans[ti];
    sp.resize(t.zones.size());
    for (size_t i = 0; i < t.zones.size(); ++i) {
      const prof::ZoneEvent& e = t.zones[i];
      int64_t s = to_ns(r, e.t0), f = to_ns(r, std::max(e.t1, e.t0));
      if (e.parent >= 0 && size_t(e.parent) < i) {
        const auto [ps, pf] = sp[size_t(e.parent)];
        s = std::clamp(s, ps, pf);
        f = std::clamp(f, s, pf);
      }
      sp[i] = {s, f};
      l.items.push_back(Item{s, f - s, uint32_t(ti), uint32_t(i), e.depth, Kind::Zone});
    }
    l.incl[ti] = analysis::inclusive_costs(t);  // the figure key_averages sums into OpStats::cost
    // A thread's share of a region nests in the zone open on that thread when it began (the op's own zone
    // on the calling thread); a worker's shares are roots of its track.
    struct Placed {
      int64_t s, f;    // the share's interval, its start moved past each item placed
      uint16_t depth;  // its items'
    };
    std::vector<Placed> placed(t.work.size());
    for (size_t i = 0; i < t.work.size(); ++i) {
      const prof::WorkSpan& w = t.work[i];
      int64_t s = to_ns(r, w.t0), f = to_ns(r, std::max(w.t1, w.t0));
      uint16_t depth = 0;
      if (w.zone >= 0 && size_t(w.zone) < t.zones.size()) {
        const auto [ps, pf] = sp[size_t(w.zone)];
        s = std::clamp(s, ps, pf);
        f = std::clamp(f, s, pf);
        depth = uint16_t(t.zones[size_t(w.zone)].depth + 1);
      }
      l.items.push_back(Item{s, f - s, uint32_t(ti), uint32_t(i), depth, Kind::Work});
      placed[i] = {s, f, uint16_t(depth + 1)};
    }
    // A share's items nest in it (its region on the same thread), each after the one before it: a clock that
    // stepped back between two laps must not overlap two siblings. One whose share was not kept is left out.
    l.item_share[ti] = analysis::item_shares(t);
    for (size_t i = 0; i < t.items.size(); ++i) {
      const prof::WorkItem& w = t.items[i];
      if (l.item_share[ti][i] < 0) continue;
      Placed& p = placed[size_t(l.item_share[ti][i])];
      const int64_t s = std::clamp(to_ns(r, w.t0), p.s, p.f), f = std::clamp(to_ns(r, std::max(w.t1, w.t0)), s, p.f);
      l.items.push_back(Item{s, f - s, uint32_t(ti), uint32_t(i), p.depth, Kind::WorkItem});
      p.s = f;  // where the next item may begin
    }
    if (opt.memory_counters || opt.memory_instants)
      for (size_t i = 0; i < t.mem.size(); ++i)
        l.items.push_back(Item{to_ns(r, t.mem[i].t), 0, uint32_t(ti), uint32_t(i), 0, Kind::Memory});
  }
  // Device side: launch slices nest in their launching zone; activities on their stream tracks.
  l.flow.assign(r.device.size(), 0);
  std::set<uint64_t> launched;  // correlation ids whose launch slice is placed
  for (size_t i = 0; i < r.device.size(); ++i) {
    const prof::DeviceActivity& d = r.device[i];
    l.items.push_back(Item{to_ns(r, d.t0), to_ns(r, std::max(d.t1, d.t0)) - to_ns(r, d.t0), 0, uint32_t(i), 0, Kind::Device});
    if (!has_launch(r, d) || !launched.insert(uint64_t(d.correlation)).second) continue;
    const auto& zones = r.threads[size_t(d.thread)].zones;
    int64_t s0 = to_ns(r, d.launch_t0), s1 = to_ns(r, d.launch_t1);
    uint16_t depth = 0;
    if (d.zone >= 0 && size_t(d.zone) < zones.size()) {
      const auto [ps, pf] = spans[size_t(d.thread)][size_t(d.zone)];
      s0 = std::clamp(s0, ps, pf);
      s1 = std::clamp(s1, s0, pf);
      depth = uint16_t(zones[size_t(d.zone)].depth + 1);
    }
    l.items.push_back(Item{s0, s1 - s0, uint32_t(d.thread), uint32_t(i), depth, Kind::Launch});
    l.flow[i] = to_ns(r, d.t0) >= s0;
  }
  for (size_t i = 0; i < r.device_mem.size(); ++i)
    l.items.push_back(Item{to_ns(r, r.device_mem[i].t), 0, 0, uint32_t(i), 0, Kind::DeviceMemory});
  std::stable_sort(l.items.begin(), l.items.end(), [](const Item& a, const Item& b) {
    if (a.ts != b.ts) return a.ts < b.ts;
    if (a.dur != b.dur) return a.dur > b.dur;
    return a.depth < b.depth;
  });
  return l;
}

// The "M" events that name the tracks: attnprof's process and each thread (sorted by tid), then one process
// per GPU with a track per stream.
void put_track_names(Buf& b, const prof::ProfileResult& r, long pid) {
  fmt::format_to(std::back_inserter(b),
                 "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{0},\"tid\":0,\"args\":{{\"name\":\"attnprof\"}}}}",
                 pid);
  for (const prof::ThreadTrace& t : r.threads) {
    fmt::format_to(std::back_inserter(b), ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":",
                   pid, trace_tid(t));
    put_escaped(b, t.name);
    fmt::format_to(std::back_inserter(b),
                   "}}}},\n{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{}}}}}",
                   pid, trace_tid(t), t.tid);
  }
  std::map<uint32_t, std::set<uint32_t>> streams;
  for (const prof::DeviceActivity& d : r.device) streams[d.device].insert(d.stream);
  if (!r.device_mem.empty()) streams[0];  // the CUDA Mem counter lives on device 0's process
  for (const auto& [dev, ids] : streams) {
    const long dpid = device_pid(pid, dev);
    fmt::format_to(std::back_inserter(b), ",\n{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":",
                   dpid);
    put_escaped(b, r.gpu.name.empty() ? fmt::format("GPU {}", dev) : fmt::format("GPU {} ({})", dev, r.gpu.name));
    fmt::format_to(std::back_inserter(b),
                   "}}}},\n{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{0},\"tid\":0,\"args\":{{\"sort_index\":{0}}}}}",
                   dpid);
    for (uint32_t st : ids)
      fmt::format_to(std::back_inserter(b),
                     ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{0},\"tid\":{1},\"args\":{{\"name\":\"stream {1}\"}}}}",
                     dpid, st);
  }
}

constexpr std::string_view kLibraryThreadsArg =
    "\"threads\":\"the library's own (oneDNN or OpenBLAS), not traced: the worker tracks look idle under this op\"";

// A zone's args, after the opening brace: Kineto's "External id", torch's "Input Dims" and "Input type"
// (record_shapes), its inclusive cost model, its variant and its software counters. Appends only (the hot loop).
void put_zone_args(Buf& b, const prof::ZoneEvent& e, const OpCost& c, int64_t external_id, bool device) {
  put(b, "\"External id\":");
  put_int(b, external_id);
  auto key = [&](std::string_view k) {
    b.push_back(',');
    put(b, k);
  };
  if (e.n_shapes > 0) {
    key("\"Input Dims\":[");
    for (int k = 0; k < e.n_shapes; ++k) {
      const auto& d = e.shapes[size_t(k)];
      put(b, k ? ",[" : "[");
      for (int x = 0; x < 4; ++x) {
        if (x) b.push_back(',');
        put_int(b, d[size_t(x)]);
      }
      b.push_back(']');
    }
    b.push_back(']');
    // torch's "Input type" beside it, one per input: our dtype names ("" for a shape recorded without one).
    bool typed = false;
    for (int k = 0; k < e.n_shapes; ++k) typed = typed || e.types[size_t(k)];
    if (typed) {
      put(b, ",\"Input type\":[");
      for (int k = 0; k < e.n_shapes; ++k) {
        if (k) b.push_back(',');
        b.push_back('"');
        if (const char* ty = e.types[size_t(k)]) put(b, ty);
        b.push_back('"');
      }
      b.push_back(']');
    }
  }
  if (c.does_work()) {
    key("\"FLOPs\":");
    put_number(b, c.flops);
    put(b, ",\"bytes\":");
    put_number(b, c.bytes());
    put(b, ",\"bytes_read\":");
    put_number(b, c.bytes_read);
    put(b, ",\"bytes_written\":");
    put_number(b, c.bytes_written);
  }
  if (e.variant) {
    key("\"variant\":");
    put_escaped(b, e.variant);
  }
  // An op whose work a CPU library runs on threads of its own, which the profiler does not see: said on the op, as
  // the worker tracks beside it look idle while those threads compute. (A GPU library's kernels are traced.)
  if (e.cost.library_flops > 0 && !device) key(kLibraryThreadsArg);
  if (e.task_clock_ns >= 0) {
    key("\"task_clock_ns\":");
    put_int(b, e.task_clock_ns);
  }
  if (e.page_faults >= 0) {
    key("\"page_faults\":");
    put_int(b, e.page_faults);
  }
}

// The trace's closing "otherData": what recorded it, the clock, the calibrated zone overhead, the counters note,
// what was recorded (torch's switches) and the run's metadata.
void put_other_data(Buf& b, const prof::ProfileResult& r) {
  put(b, "\n],\n\"otherData\":{");
  fmt::format_to(std::back_inserter(b), "\"profiler\":\"attnprof\",\"clock\":");
  put_escaped(b, r.clock);
  put(b, ",\"zone_overhead_ns\":");
  if (std::isfinite(r.zone_overhead_ns)) put_number(b, r.zone_overhead_ns);
  else put(b, "null");  // not a figure: no number stands in for it
  put(b, ",\"counters\":");
  put_escaped(b, r.counters_note);
  fmt::format_to(std::back_inserter(b), ",\"profile_memory\":{},\"record_shapes\":{}", r.memory_recorded,
                 r.shapes_recorded);
  put(b, ",\"metadata\":{");
  bool first = true;
  for (const auto& [k, v] : r.metadata) {
    if (!first) b.push_back(',');
    first = false;
    put_escaped(b, k);
    b.push_back(':');
    put_escaped(b, v);
  }
  put(b, "}}");
  // Kineto's own top-level keys, which trace analysis tools written for torch's traces look for: its schema
  // version and the GPUs the trace has tracks of (none on the CPU; the name is what the profile keeps).
  put(b, ",\n\"schemaVersion\":1,\"deviceProperties\":[");
  if (r.has_device) {
    std::set<uint32_t> devices;
    for (const prof::DeviceActivity& d : r.device) devices.insert(d.device);
    if (devices.empty()) devices.insert(0);
    bool first_device = true;
    for (uint32_t id : devices) {
      if (!first_device) b.push_back(',');
      first_device = false;
      put(b, "{\"id\":");
      put_int(b, int64_t(id));
      put(b, ",\"name\":");
      put_escaped(b, r.gpu.name);
      // Kineto's keys for the figures the profile kept (those of the GPU it ran on; none it does not know).
      const prof::DeviceProperties& g = r.gpu;
      if (id == uint32_t(g.id))
        for (const auto& [key, v] : {std::pair<const char*, int64_t>{"totalGlobalMem", g.total_global_mem},
                                     {"computeMajor", g.compute_major},
                                     {"computeMinor", g.compute_minor},
                                     {"maxThreadsPerBlock", g.max_threads_per_block},
                                     {"maxThreadsPerMultiprocessor", g.max_threads_per_sm},
                                     {"regsPerBlock", g.regs_per_block},
                                     {"regsPerMultiprocessor", g.regs_per_sm},
                                     {"warpSize", g.warp_size},
                                     {"sharedMemPerBlock", g.shared_mem_per_block},
                                     {"sharedMemPerMultiprocessor", g.shared_mem_per_sm},
                                     {"sharedMemPerBlockOptin", g.shared_mem_per_block_optin},
                                     {"numSms", g.sms}})
          if (v > 0 || (g.compute_major > 0 && std::string_view(key) == "computeMinor")) {
            fmt::format_to(std::back_inserter(b), ",\"{}\":", key);
            put_int(b, v);
          }
      put(b, "}");
    }
  }
  put(b, "]}\n");
}

// Writes the trace through `sink` in chunks of about 1 MiB, so a file export never holds the whole text.
void stream_trace(const prof::ProfileResult& r, const TraceOptions& opt, const Sink& sink) {
  const long pid = long(::getpid());
  const Layout lay = lay_out(r, opt);

  Buf b;
  constexpr size_t kChunk = size_t(1) << 20;
  b.reserve(kChunk + 4096);
  auto maybe_flush = [&] {
    if (b.size() >= kChunk) {
      sink(std::string_view(b.data(), b.size()));
      b.clear();
    }
  };
  put(b, "{\"traceEvents\":[\n");
  put_track_names(b, r, pid);
  // The hot loop: no format strings but a work item's name (one per tile), only appends (export runs at millions of
  // events per second).
  std::string pid_s = fmt::format_int(pid).str();
  std::vector<std::string> tid_s;
  for (const prof::ThreadTrace& t : r.threads) tid_s.push_back(fmt::format_int(trace_tid(t)).str());
  auto put_where = [&](uint32_t thread) {
    put(b, ",\"pid\":");
    put(b, pid_s);
    put(b, ",\"tid\":");
    put(b, tid_s[thread]);
    put(b, ",\"ts\":");
  };
  for (const Item& it : lay.items) {
    maybe_flush();
    if (it.kind == Kind::Launch || it.kind == Kind::Device || it.kind == Kind::DeviceMemory) {
      const prof::DeviceActivity* d = it.kind == Kind::DeviceMemory ? nullptr : &r.device[it.index];
      put_device_item(b, r, it, pid, d ? lay.external_id(d->thread, d->zone) : 0,
                      it.kind != Kind::DeviceMemory && lay.flow[it.index]);
      continue;
    }
    const prof::ThreadTrace& t = r.threads[it.thread];
    // An X slice on the item's thread, up to the opening of its args.
    auto put_slice = [&](const char* cat, const char* name) {
      put(b, ",\n{\"ph\":\"X\",\"cat\":");
      put_escaped(b, cat);
      put(b, ",\"name\":");
      put_escaped(b, name ? name : "?");
      put_where(it.thread);
      put_us(b, it.ts);
      put(b, ",\"dur\":");
      put_us(b, it.dur);
      put(b, ",\"args\":{");
    };
    if (it.kind == Kind::Zone) {
      const prof::ZoneEvent& e = t.zones[it.index];
      put_slice(e.category ? e.category : "cpu_op", e.name);
      put_zone_args(b, e, lay.incl[it.thread][it.index], lay.external_id(int32_t(it.thread), int32_t(it.index)),
                    r.has_device);
      put(b, "}}");
    } else if (it.kind == Kind::Work) {
      const prof::WorkSpan& w = t.work[it.index];
      const std::string op = w.name ? w.name : "?";
      put_slice("thread_work", (op + std::string(kShareSuffix)).c_str());
      put(b, "\"op\":");
      put_escaped(b, op);
      put(b, ",\"region\":");
      put_int(b, int64_t(w.region));
      if (w.items > 0) {
        put(b, ",\"items\":");
        put_int(b, w.items);
      }
      // The op's steps, when it timed them (the flash kernel): this share's time in each, in µs.
      if (w.n_phases > 0 && w.phase_names) put_steps_us(b, r, w, w.phase_ticks);
      put(b, "}}");
    } else if (it.kind == Kind::WorkItem) {
      // One task of a share (the flash kernel's tile), named by its last key ("Q block 15"): its keys, inner
      // count, steps and FLOPs.
      const prof::WorkItem& w = t.items[it.index];
      const prof::WorkSpan& share = t.work[size_t(lay.item_share[it.thread][it.index])];
      const prof::ItemNames* n = w.names;
      int last = -1;
      for (int k = 0; k < 3; ++k)
        if (n && n->keys[size_t(k)]) last = k;
      const std::string name = !n || !n->noun ? std::string("item")
                               : last < 0     ? std::string(n->noun)
                                              : fmt::format("{} {}", n->noun, w.keys[size_t(last)]);
      put_slice("work_item", name.c_str());
      put(b, "\"op\":");
      put_escaped(b, share.name ? share.name : "?");
      for (int k = 0; k <= last; ++k) {
        if (!n->keys[size_t(k)]) continue;
        put(b, ",");
        put_escaped(b, n->keys[size_t(k)]);
        put(b, ":");
        put_int(b, w.keys[size_t(k)]);
      }
      if (n && n->inner) {
        put(b, ",");
        put_escaped(b, n->inner);
        put(b, ":");
        put_int(b, w.inner);
      }
      if (w.flops > 0) {
        put(b, ",\"FLOPs\":");
        put_number(b, w.flops);
      }
      if (share.n_phases > 0 && share.phase_names) put_steps_us(b, r, share, w.phase_ticks);
      put(b, "}}");
    } else {
      const prof::MemEvent& m = t.mem[it.index];
      if (opt.memory_counters) {
        put(b, ",\n{\"ph\":\"C\",\"name\":\"Memory\"");
        put_where(it.thread);
        put_us(b, it.ts);
        put(b, ",\"args\":{\"Allocated bytes\":");
        put_int(b, m.total);
        put(b, "}}");
      }
      if (opt.memory_instants) {
        put(b, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\"");
        put_where(it.thread);
        put_us(b, it.ts);
        // Kineto's keys: Addr pairs a free with its allocation; Total Reserved is 0, as torch's CPU allocator
        // reports it (no cache: nothing is held beyond what is allocated).
        put(b, ",\"args\":{\"Device Type\":0,\"Device Id\":-1,\"Addr\":");
        put_int(b, int64_t(m.addr));
        put(b, ",\"Bytes\":");
        put_int(b, m.delta);
        put(b, ",\"Total Allocated\":");
        put_int(b, m.total);
        put(b, ",\"Total Reserved\":0}}");
      }
    }
  }
  put_other_data(b, r);
  sink(std::string_view(b.data(), b.size()));
}

}  // namespace

std::string chrome_trace_text(const prof::ProfileResult& r, const TraceOptions& opt) {
  std::string out;
  size_t n = 0;
  for (const auto& t : r.threads) n += t.zones.size() + 2 * t.mem.size() + t.work.size() + t.items.size();
  out.reserve(4096 + n * 180);
  stream_trace(r, opt, [&](std::string_view chunk) { out.append(chunk); });
  return out;
}

nlohmann::json chrome_trace_json(const prof::ProfileResult& r, const TraceOptions& opt) {
  return nlohmann::json::parse(chrome_trace_text(r, opt));
}

nlohmann::json chrome_trace_json(const prof::ProfileResult& r) { return chrome_trace_json(r, TraceOptions{}); }

void write_chrome_trace(const prof::ProfileResult& r, const std::string& path, const TraceOptions& opt) {
  io::AtomicFile f(path);
  stream_trace(r, opt, [&](std::string_view chunk) { f.write(chunk); });
  f.commit();
}

void write_chrome_trace(const prof::ProfileResult& r, const std::string& path) {
  write_chrome_trace(r, path, TraceOptions{});
}

namespace {
// The length of the sequence a lead byte starts (2 to 4), 0 for a byte that starts none: ASCII, a continuation
// byte, an overlong lead (0xC0, 0xC1) or one past U+10FFFF (0xF5 and up).
size_t utf8_lead_length(unsigned char c) {
  return c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
}
}  // namespace

size_t utf8_sequence(std::string_view text, size_t i, uint32_t* code_point) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  if (i >= n) return 0;
  const unsigned char c = s[i];
  if (c < 0x80) {
    if (code_point) *code_point = c;
    return 1;
  }
  const size_t len = utf8_lead_length(c);
  if (len == 0 || i + len > n) return 0;
  uint32_t cp = len == 2 ? c & 0x1fu : len == 3 ? c & 0x0fu : c & 0x07u;
  for (size_t k = 1; k < len; ++k) {
    if ((s[i + k] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i + k] & 0x3fu);
  }
  if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  if (code_point) *code_point = cp;
  return len;
}

bool is_terminal_control(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

std::string utf8_replaced(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    if (const size_t len = utf8_sequence(text, i); len > 0) {
      out.append(text.substr(i, len));
      i += len;
      continue;
    }
    // The maximal subpart: a lead byte and the continuation bytes that could still have completed it (the
    // second byte's range depends on the lead: no overlong form, no surrogate, nothing past U+10FFFF).
    const unsigned char c = s[i];
    const size_t len = utf8_lead_length(c);
    size_t n = 1;
    for (size_t k = 1; len > 0 && k < len && i + k < text.size(); ++k) {
      const unsigned char x = s[i + k];
      const unsigned char lo = k > 1 ? 0x80 : c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
      const unsigned char hi = k > 1 ? 0xbf : c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
      if (x < lo || x > hi) break;
      ++n;
    }
    out += "\xef\xbf\xbd";  // U+FFFD
    i += n;
  }
  return out;
}

}  // namespace attnprof::report
