// Two profiles side by side: the op-by-op view of "what did this change of implementation remove, add or
// turn in place, and where did the time go" (naive -> inplace is the blog's second script; naive -> flash
// its last). Works on summary documents, so any two runs on disk can be compared.
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "attnprof/attention.h"
#include "attnprof/error.h"
#include "attnprof/report.h"
#include "report/figures.h"
#include "report/item_text.h"
#include "report/text_width.h"

namespace attnprof::report {
namespace {

// Two byte counts (or FLOPs per task) the diff takes as the same work: within 1 % of the larger.
bool within_1pct(double a, double b) { return std::abs(a - b) <= 0.01 * std::max(a, b); }

using nlohmann::json;

// A value as an error message quotes it: its JSON, cut to `n` bytes (a field may hold a whole document).
std::string excerpt(const json& v, size_t n) {
  return v.dump(-1, ' ', false, json::error_handler_t::replace).substr(0, n);
}

// A record's "cpu_sharing" (the other work its forwards ran beside, which decides its Busy line and its `*`):
// absent or null when it was not measured, else as attnprof writes it, or an error naming the field; a value
// read as "not measured" would drop that side's Busy line without a word.
std::optional<analysis::CpuSharing> sharing_field(const json& record, const std::string& what) {
  const auto it = record.find("cpu_sharing");
  if (it == record.end() || it->is_null()) return std::nullopt;
  if (const auto s = cpu_sharing_of(record)) return s;
  ATTNPROF_FAIL("{}: field 'cpu_sharing' is {}, not the other work its forwards ran beside (an object of "
                "other_cpus from 0 to cpus + 1, cpus and threads from 1; null when not measured)",
                what, excerpt(*it, 200));
}

// A figure read back from a file: within ±2^53 (report/figures.h: 104 days in ns, 8 PiB in bytes) and, unless
// it is a memory delta, not negative; anything else is a corrupt file, not a figure to print.
double real_figure(double v, const char* key, const std::string& what);

double checked(double v, const char* key, const std::string& what, bool may_be_negative) {
  // An error against the reference is as large as the data makes it (detail::real_valued_key).
  if (detail::real_valued_key(key)) return real_figure(v, key, what);
  if (!detail::figure_in_range(v) || (!may_be_negative && v < 0))
    ATTNPROF_FAIL("{}: field '{}' is {}, out of range (expected a{} number up to 2^53)", what, key, v,
                  may_be_negative ? "" : " non-negative");
  return v;
}

// A figure of any finite size (detail::real_valued_key: an error against the reference, whose scale is the
// data's); never negative.
double real_figure(double v, const char* key, const std::string& what) {
  if (!(v >= 0) || !std::isfinite(v)) ATTNPROF_FAIL("{}: field '{}' is {}, not a non-negative number", what, key, v);
  return v;
}

// A number field, 0 when absent or null; anything else is a corrupt summary. Memory deltas may be negative
// (an op can free more than it allocates); counts, times and bytes may not.
double number(const json& o, const char* key, const std::string& what, bool may_be_negative = false) {
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) return 0.0;
  if (!it->is_number()) ATTNPROF_FAIL("{}: field '{}' is not a number", what, key);
  return checked(it->get<double>(), key, what, may_be_negative);
}

// A count: present, integral and at least `min` (a summary's calls, a forward count).
double count(const json& o, const char* key, const std::string& what, double min) {
  const auto it = o.find(key);
  if (it == o.end()) ATTNPROF_FAIL("{}: field '{}' is missing", what, key);
  if (!it->is_number()) ATTNPROF_FAIL("{}: field '{}' is not a number", what, key);
  const double v = checked(it->get<double>(), key, what, /*may_be_negative=*/false);
  if (v != std::floor(v) || v < min) ATTNPROF_FAIL("{}: field '{}' is {}, not a whole number of at least {}", what, key, v, min);
  return v;
}

// A required number (a row's time).
double required(const json& o, const char* key, const std::string& what) {
  const auto it = o.find(key);
  if (it == o.end()) ATTNPROF_FAIL("{}: field '{}' is missing", what, key);
  if (!it->is_number()) ATTNPROF_FAIL("{}: field '{}' is not a number", what, key);
  return checked(it->get<double>(), key, what, /*may_be_negative=*/false);
}

// A time in ms: attnprof's clock counts nanoseconds, so a positive time under 1 ns is no time it measured (and
// would print a speed-up hundreds of digits long).
double time_ms(double ms, const char* key, const std::string& what) {
  if (ms > 0 && ms < 1e-6)
    ATTNPROF_FAIL("{}: field '{}' is {} ms, under the profiler's 1 ns resolution (attnprof never writes it)", what, key, ms);
  return ms;
}

// "" when `ms` is the median of `forwards` as attnprof has written it (the mean of the two middle ones for an even
// count; an older GPU run took the upper one, so anything between the two middle values passes), else the
// median, for the message.
std::string median_mismatch(double ms, std::vector<double> forwards) {
  if (forwards.empty()) return "";
  std::sort(forwards.begin(), forwards.end());
  const size_t n = forwards.size();
  const double lo = forwards[(n - 1) / 2], hi = forwards[n / 2], eps = 1e-9 * hi;
  if (ms >= lo - eps && ms <= hi + eps) return "";
  return n % 2 ? fmt::format("{}", lo) : fmt::format("{}, or between {} and {}", (lo + hi) / 2, lo, hi);
}

// A summary's or compare.json row's timed forwards: an array of non-negative numbers, or nothing (older
// compare.json files, rows that did not run).
std::vector<double> forward_times(const json& o, const std::string& what) {
  std::vector<double> ms;
  const auto it = o.find("forward_ms");
  if (it == o.end() || it->is_null()) return ms;
  if (!it->is_array()) ATTNPROF_FAIL("{}: field 'forward_ms' is not an array", what);
  for (const json& x : *it) {
    if (!x.is_number()) ATTNPROF_FAIL("{}: field 'forward_ms' holds something that is not a number", what);
    ms.push_back(time_ms(checked(x.get<double>(), "forward_ms", what, /*may_be_negative=*/false), "forward_ms", what));
  }
  return ms;
}

// A record's forward_on_cpu beside its `forwards` timed forwards: an array as long, of shares from 0 to 1 or
// null (task-clock not read), or nothing (not recorded: without --counters, or an older file).
std::vector<double> on_cpu_field(const json& o, size_t forwards, const std::string& what) {
  const auto it = o.find("forward_on_cpu");
  if (it == o.end() || it->is_null()) return {};
  if (!it->is_array() || it->size() != forwards)
    ATTNPROF_FAIL("{}: field 'forward_on_cpu' is not an array of one share per timed forward ({} of them)", what,
                  forwards);
  for (const json& x : *it)
    if (!x.is_null() && !(x.is_number() && x.get<double>() >= 0 && x.get<double>() <= 1))
      ATTNPROF_FAIL("{}: field 'forward_on_cpu' holds {}, not a share of a forward's wall time (0 to 1) or null",
                    what, x.dump());
  return on_cpu_of(o);
}

// A ratio of two times, readable at any size: 0.012, 1.37, 250, 1.2e+07 (two decimals would print an 84x
// slowdown as 0.01).
std::string ratio_text(double r) {
  return r < 0.1 ? fmt::format("{:.2g}", r)
         : r < 100 ? fmt::format("{:.2f}", r)
         : r < 1e6 ? fmt::format("{:.0f}", r)
                   : fmt::format("{:.2g}", r);
}

// A note when the two sides ran their ops on different thread counts (-1: not recorded), whose speed-ups are
// then the team's as much as the code's; "" otherwise.
std::string threads_note(double base, double next) {
  if (!(base > 0 && next > 0) || base == next) return "";
  return fmt::format("note: the runs used different thread counts (base {:.0f}, new {:.0f}); the ratios compare the "
                     "teams as well as the code.\n",
                     base, next);
}

// A run's "flash_block" ([rows, cols], the CPU flash kernel's blocks) as "256×64"; "" when absent or null.
std::string flash_block_field(const json& o, const std::string& what) {
  const auto it = o.find("flash_block");
  if (it == o.end() || it->is_null()) return "";
  const auto side = [](const json& x) {
    return x.is_number() && x.get<double>() >= 1 && x.get<double>() <= double(kFlashMaxBlock) &&
           x.get<double>() == std::floor(x.get<double>());
  };
  if (!it->is_array() || it->size() != 2 || !side((*it)[0]) || !side((*it)[1]))
    ATTNPROF_FAIL("{}: field 'flash_block' is {}, not [rows, cols] of the flash kernel's blocks (each 1 to {})", what,
                  excerpt(*it, 200), kFlashMaxBlock);
  return fmt::format("{}×{}", (*it)[0].get<int64_t>(), (*it)[1].get<int64_t>());
}

// A line when the two sides ran the CPU flash kernel on different blocks: the change a tile study makes.
std::string flash_block_line(const std::string& base, const std::string& next) {
  if (base.empty() || next.empty() || base == next) return "";
  return fmt::format("flash blocks (query rows × keys per tile): {} -> {}\n", base, next);
}

// The first character of `text` that a terminal would act on rather than show (is_terminal_control), as its
// offset and a label ("byte 0x1b", "U+202E"). Bytes that start no UTF-8 sequence are no such character.
std::optional<std::pair<size_t, std::string>> first_control(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = utf8_sequence(text, i, &cp);
    if (len == 0) {
      ++i;
      continue;
    }
    if (is_terminal_control(cp))
      return std::pair{i, cp < 0x80 ? fmt::format("byte 0x{:02x}", cp) : fmt::format("U+{:04X}", cp)};
    i += len;
  }
  return std::nullopt;
}

// A name printed in a table: attnprof writes none with control characters (a NUL would cut the line short,
// an escape sequence would reach the terminal, a right-to-left override would reverse the rest of the line),
// so such a name marks a corrupt or crafted file.
const std::string& printable_name(const std::string& name, const std::string& what) {
  if (const auto bad = first_control(name))
    ATTNPROF_FAIL("{}: the name '{}...' holds a control character ({}), which attnprof never writes", what,
                  name.substr(0, bad->first), bad->second);
  return name;
}

// The same for any other text diff prints from its inputs (a variant, a problem, a CPU's name): refused
// naming the field, for the same reasons.
const std::string& printable_field(const std::string& value, const std::string& field, const std::string& what) {
  if (const auto bad = first_control(value))
    ATTNPROF_FAIL("{}: field '{}' holds a control character ({}), which attnprof never writes", what, field,
                  bad->second);
  return value;
}

// A text field of an op_items entry: a JSON string without control characters (diff prints it); `may_be_empty`
// for the inner count's name, which an op may leave unnamed.
std::string item_text(const json& o, const char* key, const std::string& what, bool may_be_empty) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_string())
    ATTNPROF_FAIL("{}: field '{}' is {}, not a string", what, key,
                  it == o.end() ? "missing" : excerpt(*it, 80));
  const std::string v = it->get<std::string>();
  if (v.empty() && !may_be_empty) ATTNPROF_FAIL("{}: field '{}' is empty", what, key);
  return printable_field(v, key, what);
}

// A whole number an item's key or inner count is: 0 up to 2^31 - 1, as the recorder's int32 holds it.
int32_t item_index(const json& v, const char* key, const std::string& what) {
  const double x = v.is_number() ? v.get<double>() : NAN;
  if (!(x >= 0 && x < 2147483648.0 && x == std::floor(x)))
    ATTNPROF_FAIL("{}: field '{}' is {}, not a whole number from 0 to 2^31 - 1", what, key, excerpt(v, 80));
  return int32_t(x);
}

}  // namespace

analysis::OpItems op_items_from_summary(const json& op, const std::string& where) {
  if (!op.is_object()) ATTNPROF_FAIL("{}: an op_items entry is {}, not an object", where, excerpt(op, 80));
  analysis::OpItems o;
  o.name = item_text(op, "name", where + " op_items entry", false);
  const std::string what = fmt::format("{} op_items '{}'", where, o.name);
  o.noun = item_text(op, "noun", what, false);
  o.inner = item_text(op, "inner", what, true);
  o.items = int64_t(count(op, "items", what, 1));
  o.regions = int64_t(count(op, "regions", what, 1));
  const auto keys = op.find("keys");
  if (keys == op.end() || !keys->is_array() || keys->size() != 3)
    ATTNPROF_FAIL("{}: field 'keys' is not an array of the 3 keys' names (a string, or null for a key not used)",
                  what);
  for (size_t k = 0; k < 3; ++k) {
    const json& key = (*keys)[k];
    if (!key.is_null() && !key.is_string())
      ATTNPROF_FAIL("{}: field 'keys' holds {}, not a name or null", what, excerpt(key, 80));
    if (key.is_string()) o.keys[k] = printable_field(key.get<std::string>(), "keys", what);
  }
  // Times up to a day (a tile of a tick or less converts to under 1 ns, and one the clock stepped back across
  // lasts 0); two figures the writer derived from the same times agree to rounding.
  constexpr double kDayNs = 8.64e13;
  auto time_ns = [&](const json& g, const char* key, const std::string& w) {
    const double ns = required(g, key, w);
    if (ns > kDayNs) ATTNPROF_FAIL("{}: field '{}' is {} ns, over a day", w, key, ns);
    return ns;
  };
  auto same = [](double x, double y) { return std::abs(x - y) <= 1e-9 * std::max(std::abs(x), std::abs(y)); };
  auto within = [&](double x, double limit) { return x <= limit || same(x, limit); };
  const auto groups = op.find("groups");
  if (groups == op.end() || !groups->is_array() || groups->empty())
    ATTNPROF_FAIL("{}: field 'groups' is not an array of one group or more", what);
  int64_t counted = 0;
  double longest = 0;
  for (const json& g : *groups) {
    if (!g.is_object()) ATTNPROF_FAIL("{}: a group is {}, not an object", what, excerpt(g, 80));
    analysis::OpItems::Group e;
    e.inner = item_index(g.contains("inner") ? g["inner"] : json(), "inner", what + " group");
    const std::string gw = fmt::format("{} group of {} {}", what, e.inner, detail::inner_name(o));
    if (!o.groups.empty() && e.inner <= o.groups.back().inner)
      ATTNPROF_FAIL("{}: it follows the group of {} (attnprof writes each inner count once, ascending)", gw,
                    o.groups.back().inner);
    e.count = int64_t(count(g, "count", gw, 1));
    e.median_ns = time_ns(g, "median_ns", gw);
    e.mean_ns = time_ns(g, "mean_ns", gw);
    e.max_ns = time_ns(g, "max_ns", gw);
    if (!within(e.median_ns, e.max_ns) || !within(e.mean_ns, e.max_ns))
      ATTNPROF_FAIL("{}: its {} of {} ns is past its longest, {} ns",
                    gw, within(e.median_ns, e.max_ns) ? "mean" : "median", std::max(e.median_ns, e.mean_ns), e.max_ns);
    e.flops = required(g, "flops", gw);
    counted += e.count;  // each count is under 2^53 and the sum stops at items (under 2^53): no overflow
    if (counted > o.items)
      ATTNPROF_FAIL("{}: field 'items' is {}, but its groups count more", what, o.items);
    longest = std::max(longest, e.max_ns);
    o.groups.push_back(e);
  }
  if (counted != o.items)
    ATTNPROF_FAIL("{}: field 'items' is {}, but its groups count {}", what, o.items, counted);
  if (const auto fit = op.find("fit"); fit != op.end() && !fit->is_null()) {
    if (!fit->is_object())
      ATTNPROF_FAIL("{}: field 'fit' is {}, not an object or null", what, excerpt(*fit, 80));
    const std::string fw = what + " fit";
    // The intercept may lie below zero, or far from the medians where they scatter; the slope is a rate above 0
    // (a line that falls with the work is written as none); r² is clamped to 1.
    const auto fixed = fit->find("fixed_ns");
    if (fixed == fit->end() || !fixed->is_number())
      ATTNPROF_FAIL("{}: field 'fixed_ns' is {}, not a number", fw,
                    fixed == fit->end() ? "missing" : excerpt(*fixed, 80));
    o.fixed_ns = number(*fit, "fixed_ns", fw, /*may_be_negative=*/true);
    o.marginal_gflops = required(*fit, "marginal_gflops", fw);
    o.r2 = required(*fit, "r2", fw);
    if (!(o.marginal_gflops > 0)) ATTNPROF_FAIL("{}: field 'marginal_gflops' is 0, not a rate", fw);
    if (o.r2 > 1) ATTNPROF_FAIL("{}: field 'r2' is {}, over 1", fw, o.r2);
    o.fitted = true;
  }
  const auto slow = op.find("slowest");
  if (slow == op.end() || !slow->is_object()) ATTNPROF_FAIL("{}: field 'slowest' is not an object", what);
  const std::string sw = what + " slowest";
  const auto sk = slow->find("keys");
  if (sk == slow->end() || !sk->is_array() || sk->size() != 3)
    ATTNPROF_FAIL("{}: field 'keys' is not an array of 3 whole numbers", sw);
  for (size_t k = 0; k < 3; ++k) o.slowest.keys[k] = item_index((*sk)[k], "keys", sw);
  o.slowest.inner = item_index(slow->contains("inner") ? (*slow)["inner"] : json(), "inner", sw);
  o.slowest.ns = required(*slow, "ns", sw);
  o.slowest.group_median_ns = required(*slow, "group_median_ns", sw);
  if (const auto st = slow->find("step"); st != slow->end() && !st->is_null())
    o.slowest.step = item_text(*slow, "step", sw, false);
  // Its step's time: the writer's own is at most the tile's, but a summary from before it said so may hold a
  // step a clock that stepped back made longer, read as the whole tile.
  o.slowest.step_ns = std::min(required(*slow, "step_ns", sw), o.slowest.ns);
  // The slowest item is the longest of all, in the group it names, beside that group's own median.
  const auto group = std::find_if(o.groups.begin(), o.groups.end(),
                                  [&](const analysis::OpItems::Group& g) { return g.inner == o.slowest.inner; });
  if (group == o.groups.end())
    ATTNPROF_FAIL("{}: field 'inner' is {}, the inner count of no group", sw, o.slowest.inner);
  if (!same(o.slowest.ns, longest) || !same(o.slowest.ns, group->max_ns))
    ATTNPROF_FAIL("{}: field 'ns' is {}, not the longest of its group and of all, {} ns", sw, o.slowest.ns, longest);
  if (!same(o.slowest.group_median_ns, group->median_ns))
    ATTNPROF_FAIL("{}: field 'group_median_ns' is {}, not its group's median, {} ns", sw, o.slowest.group_median_ns,
                  group->median_ns);
  return o;
}

namespace {

struct OpFigures {
  double calls = 0, ns = 0, mem = 0, bytes = 0;
  double all_bytes = 0;  // with its children's: a wrapper (masked_fill) moves none itself
  double faults = -1;    // its own page faults (every thread's), when `profile --counters` recorded them
  std::vector<double> step_ns;  // its self time in each recorded step (self_ns_per_step), when the summary has it
};

struct Parsed {
  ProfileSide side;
  bool device = false;
  bool faults = false;  // its op rows carry page faults
  bool memory = true;   // its op rows carry memory (a profile without profile_memory holds nulls there)
  std::vector<std::pair<std::string, OpFigures>> ops;  // per forward, in the summary's order
  std::vector<StepDiff> steps;  // op_phases per forward, the side's figures in base_ns / base_flops
  std::vector<analysis::OpItems> items;  // op_items as written: counts over every recorded forward
};

// A summary read as diff and report read it; `what` names it in every error.
Parsed parse_as(const json& s, const std::string& what, const std::string& label, bool run_figures) {
  if (!s.is_object() || !s.contains("schema"))
    ATTNPROF_FAIL("{}: not an attnprof summary (expected \"schema\": \"attnprof.summary/1\"; write one with "
                  "`attnprof profile` or `attnprof compare`)", what);
  if (string_field(s, "schema") != "attnprof.summary/1")
    ATTNPROF_FAIL("{}: schema '{}' is not one this attnprof reads (attnprof.summary/1)", what, string_field(s, "schema"));
  const auto rows = s.find("rows");
  if (rows == s.end() || !rows->is_array()) ATTNPROF_FAIL("{}: no \"rows\" array", what);
  // "device" is a CUDA profile's section: it decides which clock the times are read from.
  if (const auto dev = s.find("device"); dev != s.end() && !dev->is_object())
    ATTNPROF_FAIL("{}: field 'device' is not an object (a CUDA profile's \"device\" section)", what);
  const json empty = json::object();
  // The figures above diff's table come from "run" (profile and compare write one into every summary);
  // without it they would print as zeros, which no run measured.
  const auto run_it = s.find("run");
  if (run_figures && (run_it == s.end() || run_it->is_null()))
    ATTNPROF_FAIL("{}: field 'run' is missing (attnprof writes a \"run\" object with the time, peak memory and ops "
                  "per forward into every summary)", what);
  if (run_it != s.end() && !run_it->is_null() && !run_it->is_object())
    ATTNPROF_FAIL("{}: field 'run' is not an object", what);
  const json& run = run_it != s.end() && run_it->is_object() ? *run_it : empty;
  Parsed p;
  p.device = s.contains("device");
  // What was recorded (absent in summaries written before it was optional: memory then was).
  if (const auto pr = s.find("profiler"); pr != s.end()) {
    if (!pr->is_object()) ATTNPROF_FAIL("{}: field 'profiler' is not an object", what);
    for (const char* key : {"profile_memory", "record_shapes"})
      if (const auto v = pr->find(key); v != pr->end() && !v->is_boolean())
        ATTNPROF_FAIL("{}: field 'profiler.{}' is {}, not true or false", what, key, v->dump());
  }
  p.memory = summary_has_memory(s);
  // The names the diff is labelled and counted by: a string where present, or the reader would take the field
  // as missing (an annotation of 5 would leave the forwards uncounted without a word).
  for (const char* section : {"run", "metadata"})
    if (const auto sec = s.find(section); sec != s.end() && sec->is_object())
      for (const char* key : {"variant", "annotation", "problem"})
        if (const auto v = sec->find(key); v != sec->end() && !v->is_null() && !v->is_string())
          ATTNPROF_FAIL("{}: field '{}.{}' is {}, not a string", what, section, key,
                        excerpt(*v, 200));
  p.side.label = !recorded(s, "variant").empty() ? printable_field(recorded(s, "variant"), "variant", what) : label;
  p.side.problem = printable_field(recorded(s, "problem"), "problem", what);
  if (run_figures && p.side.problem.empty())
    ATTNPROF_FAIL("{}: field 'problem' is missing (attnprof records it in \"run\" or \"metadata\")", what);
  const std::string annotation = recorded(s, "annotation");
  // The team its ops ran on (older summaries have none): a diff across thread counts says so. A device
  // profile's host threads do not run its kernels: checked, not kept.
  if (run_it != s.end() && run_it->is_object())
    if (const auto th = run_it->find("threads"); th != run_it->end() && !th->is_null())
      if (const double threads = count(*run_it, "threads", what + " run", 1); !p.device) p.side.threads = threads;
  if (run_it != s.end() && run_it->is_object()) p.side.flash_block = flash_block_field(*run_it, what + " run");

  // Forwards: the calls of the variant's annotation (one per recorded forward), else the timed forwards.
  bool annotated = false;
  for (const json& r : *rows) {
    if (!r.is_object() || !r.contains("name") || !r["name"].is_string())
      ATTNPROF_FAIL("{}: a row without a \"name\"", what);
    if (r["name"].get<std::string>().empty()) ATTNPROF_FAIL("{}: a row whose \"name\" is empty (every op has one)", what);
    (void)printable_name(r["name"].get<std::string>(), what);
    (void)count(r, "calls", fmt::format("{} row '{}'", what, r["name"].get<std::string>()), 1);
    if (!annotation.empty() && r["name"] == annotation) {
      p.side.forwards = std::max(1.0, number(r, "calls", what));
      annotated = true;
    }
  }
  // Every per-forward figure is divided by that count: a summary that names its annotation and has no row for
  // it would give figures several times too large.
  if (!annotation.empty() && !annotated)
    ATTNPROF_FAIL("{}: its annotation '{}' has no row, so its forwards cannot be counted (attnprof writes one row "
                  "per annotation)", what, annotation);
  if (annotation.empty()) {
    // Without an annotation, only the timed forwards count them; with neither, per-forward figures would be
    // totals over an unknown number of forwards.
    const std::vector<double> timed = forward_times(run, what + " run");
    if (!timed.empty()) p.side.forwards = double(timed.size());
    else if (run_figures)
      ATTNPROF_FAIL("{}: field 'annotation' is missing (attnprof records it in \"run\" or \"metadata\"), so its "
                    "forwards cannot be counted", what);
  }
  const double f = p.side.forwards;

  // Each figure is checked whenever it is there; with run_figures it must be.
  const std::string run_what = what + " run";
  auto present = [&](const char* key) { return run.contains(key) && !run[key].is_null(); };
  if (run_figures || present("ms_per_forward"))
    p.side.ms_per_forward = time_ms(required(run, "ms_per_forward", run_what), "ms_per_forward", run_what);
  // A summary is written for a run that timed its forwards: a median of 0 would drop the time line (and with it
  // the Noisy lines) from the diff.
  if (present("ms_per_forward") && p.side.ms_per_forward == 0)
    ATTNPROF_FAIL("{}: field 'ms_per_forward' is 0, which no timed run has (attnprof never writes it)", run_what);
  p.side.forward_ms = forward_times(run, run_what);
  // A forward that took no time would hide the spread of its run's forwards (as compare.json's rows are held to).
  if (std::find(p.side.forward_ms.begin(), p.side.forward_ms.end(), 0.0) != p.side.forward_ms.end())
    ATTNPROF_FAIL("{}: field 'forward_ms' holds 0 ms, which no forward takes (attnprof never writes it)", run_what);
  if (present("forward_ms") && p.side.forward_ms.empty())
    ATTNPROF_FAIL("{}: field 'forward_ms' is empty (attnprof writes one time per timed forward)", run_what);
  // The median its forwards give, as attnprof writes it (a hand-edited time beside them would be printed as the
  // run's).
  if (present("ms_per_forward"))
    if (const std::string med = median_mismatch(p.side.ms_per_forward, p.side.forward_ms); !med.empty())
      ATTNPROF_FAIL("{}: field 'ms_per_forward' is {}, not the median of its 'forward_ms' ({}), which attnprof writes",
                    run_what, p.side.ms_per_forward, med);
  p.side.sharing = sharing_field(run, run_what);
  p.side.on_cpu = on_cpu_field(run, p.side.forward_ms.size(), run_what);
  if (run_figures && !run.contains("ops_per_forward"))
    ATTNPROF_FAIL("{}: field 'ops_per_forward' is missing (null when it was not counted)", run_what);
  if (present("ops_per_forward")) {
    p.side.ops_per_forward = required(run, "ops_per_forward", run_what);
    // A whole count, as compare.json's 'ops' is: every forward runs the same ops.
    if (p.side.ops_per_forward != std::floor(p.side.ops_per_forward))
      ATTNPROF_FAIL("{}: field 'ops_per_forward' is {}, not a whole number of ops per forward", run_what,
                    p.side.ops_per_forward);
  }
  if (present("max_abs_err")) p.side.max_abs_err = number(run, "max_abs_err", run_what);
  if (run_figures || present("peak_extra_bytes")) {
    p.side.peak_bytes = required(run, "peak_extra_bytes", run_what);
    if (p.side.peak_bytes != std::floor(p.side.peak_bytes))
      ATTNPROF_FAIL("{}: field 'peak_extra_bytes' is {}, not a whole number of bytes", run_what, p.side.peak_bytes);
  } else if (p.device) {  // the sections a reader without the run's figure falls back on
    (void)number(s["device"], "peak_bytes", what);
  } else if (s.contains("memory") && s["memory"].is_object()) {
    (void)number(s["memory"], "peak_bytes", what);
    (void)number(s["memory"], "start_bytes", what);
  }

  // The memory timeline the report draws: live bytes over time, never negative.
  if (s.contains("memory") && s["memory"].is_object() && s["memory"].contains("timeline")) {
    const json& tl = s["memory"]["timeline"];
    if (!tl.is_null() && !tl.is_array()) ATTNPROF_FAIL("{}: field 'memory.timeline' is not an array", what);
    if (tl.is_array())
      for (const json& pt : tl) {
        if (!pt.is_object()) ATTNPROF_FAIL("{}: a memory.timeline point that is not an object", what);
        (void)required(pt, "t_us", what + " memory.timeline point");
        (void)required(pt, "bytes", what + " memory.timeline point");
      }
  }
  // Each op's OpenMP regions (thread_balance, absent before it was written): its threads' work fits in the
  // regions' wall times the team, so the share the report prints as "working" is at most 100 %.
  if (const auto tb = s.find("thread_balance"); tb != s.end() && !tb->is_null()) {
    if (!tb->is_array()) ATTNPROF_FAIL("{}: field 'thread_balance' is {}, not an array", what, tb->type_name());
    for (const json& b : *tb) {
      if (!b.is_object() || !b.contains("name") || !b["name"].is_string())
        ATTNPROF_FAIL("{}: a thread_balance entry without a \"name\"", what);
      const std::string b_what = fmt::format("{} thread_balance '{}'", what, printable_name(b["name"].get<std::string>(), what));
      (void)count(b, "regions", b_what, 1);
      (void)count(b, "threads", b_what, 1);
      for (const char* key : {"wall_ns", "busy_ns", "capacity_ns", "lag_ns", "items", "imbalance"}) (void)number(b, key, b_what);
      if (const double share = number(b, "busy_share", b_what); share > 1 + 1e-9)
        ATTNPROF_FAIL("{}: field 'busy_share' is {}, over 1: its threads cannot work more than the regions' wall "
                      "times the team",
                      b_what, share);
    }
  }

  // The steps kernels timed inside their shares (op_phases, absent in summaries from before it was written):
  // each thread's time and the FLOPs counted, per forward.
  if (const auto ph = s.find("op_phases"); ph != s.end() && !ph->is_null()) {
    if (!ph->is_array()) ATTNPROF_FAIL("{}: field 'op_phases' is {}, not an array", what, ph->type_name());
    for (const json& op : *ph) {
      if (!op.is_object() || !op.contains("name") || !op["name"].is_string() || !op.contains("steps") ||
          !op["steps"].is_array())
        ATTNPROF_FAIL("{}: an op_phases entry without a \"name\" and a \"steps\" array", what);
      const std::string op_name = printable_name(op["name"].get<std::string>(), what);
      const std::string op_what = fmt::format("{} op_phases '{}'", what, op_name);
      for (const char* key : {"regions", "threads", "share_ns"}) (void)number(op, key, op_what);
      for (const json& st : op["steps"]) {
        if (!st.is_object() || !st.contains("name") || !st["name"].is_string())
          ATTNPROF_FAIL("{}: a step without a \"name\"", op_what);
        StepDiff x;
        x.op = op_name;
        x.step = printable_name(st["name"].get<std::string>(), op_what);
        x.base_ns = required(st, "thread_ns", op_what + " step '" + x.step + "'") / f;
        x.base_flops = number(st, "flops", op_what + " step '" + x.step + "'") / f;
        p.steps.push_back(std::move(x));
      }
    }
  }

  // The tasks inside the ops that mark them (op_items: the flash kernel's tiles; absent in summaries from before
  // it was written), each entry held together as analysis::op_items writes it.
  if (const auto it = s.find("op_items"); it != s.end() && !it->is_null()) {
    if (!it->is_array()) ATTNPROF_FAIL("{}: field 'op_items' is {}, not an array", what, it->type_name());
    std::unordered_set<std::string> ops;
    for (const json& op : *it) {
      p.items.push_back(op_items_from_summary(op, what));
      if (!ops.insert(p.items.back().name).second)
        ATTNPROF_FAIL("{}: op_items gives '{}' twice (attnprof writes one entry per op)", what, p.items.back().name);
    }
  }

  std::unordered_map<std::string, size_t> index;  // op name -> its place in p.ops (a summary may hold 10^5 rows)
  // Every row's key as key_averages groups them: its name, category and, grouped by input shape, its shapes and
  // types. The same key twice is no summary attnprof writes: summing the two would double the op's calls and time.
  std::unordered_set<std::string> keys;
  for (const json& r : *rows) {
    const std::string name = r["name"].get<std::string>();
    const std::string cat = string_field(r, "category");
    {
      const auto dump = [&r](const char* k) { return r.contains(k) ? r[k].dump() : std::string(); };
      if (!keys.insert(nlohmann::json::array({name, cat, dump("input_shapes"), dump("input_types")}).dump()).second) {
        const std::string shapes = r.contains("input_shapes") && r["input_shapes"].is_string()
                                       ? r["input_shapes"].get<std::string>() : "";
        ATTNPROF_FAIL("{}: the row '{}'{} appears twice (attnprof writes one row per op, or per op, input shapes and "
                      "input types when grouped by them): its calls and time would be counted twice",
                      what, name, shapes.empty() ? "" : " with input shapes " + shapes);
      }
    }
    // The forward annotation's own time, what ran between its ops (freeing one op's buffers, allocating the
    // next's), is part of what a variant costs: one row under one name on every side ("between ops"), so
    // naive's attn_fwd and SDPA's sdpa_fwd pair. Steps and other annotations stay out. A device profile's
    // annotation holds host time only.
    const bool between = !p.device && !annotation.empty() && name == annotation;
    if (analysis::is_annotation(name, cat) && !between) continue;
    OpFigures o;
    const std::string row_what = fmt::format("{} row '{}'", what, name);
    o.calls = number(r, "calls", what) / f;
    (void)required(r, p.device ? "self_cuda_ns" : "self_ns", row_what);
    (void)number(r, "total_ns", row_what);
    (void)number(r, "flops", row_what);
    // The op's cost model, own and with its children's: summary_json writes both into every row, so one that is
    // missing or not an object is a corrupt file, not an op that moved no bytes (it would read as zeros).
    for (const char* key : {"self_cost", "cost"}) {
      const auto c = r.find(key);
      if (c == r.end())
        ATTNPROF_FAIL("{}: field '{}' is missing (attnprof writes the op's cost model into every row)", row_what, key);
      if (!c->is_object())
        ATTNPROF_FAIL("{}: field '{}' is {}, not an object (attnprof writes the op's cost model there)", row_what, key,
                      c->dump());
    }
    const json& self_cost = r["self_cost"];
    const json& cost = r["cost"];
    // The cost model's FLOPs, which roofline --from places ops by: numbers within range, or absent.
    for (const json* c : {&self_cost, &cost})
      for (const char* key : {"flops", "bf16_flops", "library_flops", "library_bf16_flops", "bytes_read", "bytes_written"})
        (void)number(*c, key, fmt::format("{} {}", row_what, c == &cost ? "cost" : "self_cost"));
    if (p.device) {
      // Device time and bytes belong to the activities; the host ops that launched them hold none (each
      // kernel counted once, as in the CUDA table).
      o.ns = number(r, "self_cuda_ns", what) / f;
      o.mem = number(r, "self_cuda_mem_bytes", what, /*may_be_negative=*/true) / f;
      o.bytes = o.all_bytes = analysis::is_device_category(cat) ? number(cost, "bytes", what) / f : 0.0;
    } else {
      o.ns = number(r, "self_ns", what) / f;
      o.mem = number(r, "self_mem_bytes", what, /*may_be_negative=*/true) / f;
      o.bytes = number(self_cost, "bytes", what) / f;
      o.all_bytes = between ? 0.0 : number(cost, "bytes", what) / f;  // the forward's own: no op's bytes
      if (const auto pf = r.find("self_page_faults"); pf != r.end() && !pf->is_null()) {
        o.faults = number(r, "self_page_faults", row_what) / f;
        p.faults = true;
      }
      // Each recorded step's self time: one per forward, summing to the row's self_ns, as summary_json writes
      // them; any other array would give medians of some other run (or of none).
      if (const auto ps = r.find("self_ns_per_step"); ps != r.end() && !ps->is_null()) {
        if (!ps->is_array())
          ATTNPROF_FAIL("{}: field 'self_ns_per_step' is {}, not an array (attnprof writes one time per recorded "
                        "step, or null)", row_what, ps->type_name());
        if (double(ps->size()) != f)
          ATTNPROF_FAIL("{}: field 'self_ns_per_step' holds {} times, but the summary recorded {} forward{} (attnprof "
                        "writes one per recorded step, a forward each)", row_what, ps->size(), f, f == 1 ? "" : "s");
        double sum = 0;
        for (const json& v : *ps) {
          if (!v.is_number())
            ATTNPROF_FAIL("{}: field 'self_ns_per_step' holds {}, not a time in ns (attnprof writes numbers >= 0)",
                          row_what, v.dump());
          o.step_ns.push_back(checked(v.get<double>(), "self_ns_per_step", row_what, false));
          sum += o.step_ns.back();
        }
        const double self = number(r, "self_ns", row_what);
        if (std::abs(sum - self) > 1e-6 * self + 1.0)
          ATTNPROF_FAIL("{}: field 'self_ns_per_step' sums to {} ns, not the row's self_ns of {} ns (attnprof writes "
                        "each step's share of it)", row_what, sum, self);
      }
    }
    // Rows grouped by input shape repeat a name: one op, its figures summed.
    const std::string key = between ? std::string(kBetweenOps) : name;
    if (const auto [at, fresh] = index.try_emplace(key, p.ops.size()); fresh) {
      p.ops.emplace_back(key, o);
    } else {
      const auto it = p.ops.begin() + ptrdiff_t(at->second);
      it->second.calls += o.calls;
      it->second.ns += o.ns;
      it->second.mem += o.mem;
      it->second.bytes += o.bytes;
      it->second.all_bytes += o.all_bytes;
      it->second.faults = it->second.faults >= 0 && o.faults >= 0 ? it->second.faults + o.faults : -1;
      // Per step, summed step by step; steps that do not line up are unknown.
      if (it->second.step_ns.size() == o.step_ns.size())
        for (size_t k = 0; k < o.step_ns.size(); ++k) it->second.step_ns[k] += o.step_ns[k];
      else
        it->second.step_ns.clear();
    }
  }
  return p;
}

Parsed parse(const json& s, const std::string& label, const char* which) {
  return parse_as(s, fmt::format("{} summary{}", which, label.empty() ? "" : " '" + label + "'"), label,
                  /*run_figures=*/true);
}

}  // namespace

void check_summary(const json& s, const std::string& what, bool run_figures) {
  (void)parse_as(s, what, "", run_figures);
}

std::string DiffRow::label() const {
  if (base_name.empty()) return new_name;
  if (new_name.empty() || new_name == base_name) return base_name;
  return base_name + " -> " + new_name;
}

ProfileDiff diff_summaries(const json& base, const json& next, const std::string& base_label,
                           const std::string& new_label) {
  const Parsed a = parse(base, base_label, "base"), b = parse(next, new_label, "new");
  if (a.device != b.device)
    ATTNPROF_FAIL("cannot diff a {} profile against a {} profile: their times are different clocks (compare two "
                  "CPU summaries or two --device cuda summaries)",
                  a.device ? "device (CUDA)" : "CPU", b.device ? "device (CUDA)" : "CPU");
  ProfileDiff d;
  d.base = a.side;
  d.next = b.side;
  // The kernels' steps, paired by (op, step), each base step once: base's order, then the new side's own. A
  // queue of base's unpaired places per (op, step), so a summary of many steps pairs in one pass.
  d.steps = a.steps;
  std::map<std::pair<std::string, std::string>, std::deque<size_t>> unpaired;
  for (size_t i = 0; i < d.steps.size(); ++i) unpaired[{d.steps[i].op, d.steps[i].step}].push_back(i);
  for (const StepDiff& y : b.steps) {
    std::deque<size_t>& q = unpaired[{y.op, y.step}];
    size_t at = d.steps.size();
    if (!q.empty()) {
      at = q.front();
      q.pop_front();
    } else {
      StepDiff only;
      only.op = y.op;
      only.step = y.step;
      d.steps.push_back(std::move(only));
    }
    d.steps[at].new_ns = y.base_ns;
    d.steps[at].new_flops = y.base_flops;
  }
  // The ops' tasks, paired by op: base's order, then the ops only the new side marked.
  std::unordered_map<std::string, size_t> item_at;
  for (const analysis::OpItems& x : a.items) {
    item_at[x.name] = d.items.size();
    d.items.push_back({x.name, x, std::nullopt, {}});
  }
  for (const analysis::OpItems& y : b.items) {
    if (const auto it = item_at.find(y.name); it != item_at.end()) d.items[it->second].next = y;
    else d.items.push_back({y.name, std::nullopt, y, {}});
  }
  // A group pairs with the other side's of the same inner count when the tasks are the same: the same FLOPs
  // per task within 1 % (blocks clipped to a short sequence are the same tile whatever the flash blocks), or the
  // same flash blocks on the same problem (another kernel body may count other FLOPs on the diagonal).
  const bool same_tiles = !a.side.flash_block.empty() && a.side.flash_block == b.side.flash_block &&
                          !a.side.problem.empty() && a.side.problem == b.side.problem;
  for (ItemsDiff& x : d.items) {
    std::unordered_map<int32_t, size_t> row_of;  // inner count -> base's row (each count once a side)
    if (x.base)
      for (size_t i = 0; i < x.base->groups.size(); ++i) {
        row_of[x.base->groups[i].inner] = x.rows.size();
        x.rows.push_back({x.base->groups[i].inner, int(i), -1});
      }
    if (x.next)
      for (size_t j = 0; j < x.next->groups.size(); ++j) {
        const analysis::OpItems::Group& g = x.next->groups[j];
        const auto it = row_of.find(g.inner);
        if (it != row_of.end() &&
            (same_tiles || within_1pct(x.base->groups[size_t(x.rows[it->second].base)].flops_each(), g.flops_each())))
          x.rows[it->second].next = int(j);
        else
          x.rows.push_back({g.inner, -1, int(j)});
      }
    std::stable_sort(x.rows.begin(), x.rows.end(),
                     [](const ItemsDiff::Row& p, const ItemsDiff::Row& q) { return p.inner < q.inner; });
  }
  d.device = a.device;
  d.faults = a.faults && b.faults;
  d.memory = a.memory && b.memory;
  std::map<std::string, OpFigures> in_a(a.ops.begin(), a.ops.end()), in_b(b.ops.begin(), b.ops.end());
  std::map<std::string, bool> used_b;
  // An op on both sides does the same work when it runs as often and moves the same bytes (within 1 %); paired
  // by name only, naive's mul over N×N scores and SDPA math's two over q and k are "changed", not "same".
  // A wrapper's own bytes are 0 on both sides, so its children's count too.
  auto same_work = [&](const OpFigures& x, const OpFigures& y) {
    return std::abs(x.calls - y.calls) < 1e-9 && within_1pct(x.bytes, y.bytes) && within_1pct(x.all_bytes, y.all_bytes);
  };
  auto row_of = [&](const std::string& an, const OpFigures* x, const std::string& bn, const OpFigures* y,
                   std::string change) {
    DiffRow r;
    r.base_name = an;
    r.new_name = bn;
    r.change = std::move(change);
    if (x) {
      r.base_calls = x->calls;
      r.base_ns = x->ns;
      r.base_mem = x->mem;
      r.base_bytes = x->bytes;
      r.base_all_bytes = x->all_bytes;
      r.base_median_ns = x->step_ns.empty() ? -1 : analysis::median(x->step_ns);
    }
    // An op one side did not run faulted nothing there; a row without counters stays unknown (-1).
    r.base_faults = !d.faults ? -1 : x ? x->faults : 0;
    if (y) {
      r.new_calls = y->calls;
      r.new_ns = y->ns;
      r.new_mem = y->mem;
      r.new_bytes = y->bytes;
      r.new_all_bytes = y->all_bytes;
      r.new_median_ns = y->step_ns.empty() ? -1 : analysis::median(y->step_ns);
    }
    r.new_faults = !d.faults ? -1 : y ? y->faults : 0;
    r.same_work = x && y && same_work(*x, *y);
    return r;
  };
  for (const auto& [name, x] : a.ops) {
    if (auto it = in_b.find(name); it != in_b.end()) {
      DiffRow r = row_of(name, &x, name, &it->second, "");
      r.change = r.same_work ? "same" : "changed";
      d.rows.push_back(std::move(r));
      used_b[name] = true;
      continue;
    }
    // An op and its in-place form (mul / mul_, softmax / softmax_) are the same step written two ways, when
    // only one of them is on each side.
    const bool trailing = !name.empty() && name.back() == '_';
    const std::string twin = trailing ? name.substr(0, name.size() - 1) : name + "_";
    if (auto it = in_b.find(twin); it != in_b.end() && !in_a.count(twin) && !used_b[twin]) {
      d.rows.push_back(row_of(name, &x, twin, &it->second, trailing ? "out of place" : "in place"));
      used_b[twin] = true;
      continue;
    }
    d.rows.push_back(row_of(name, &x, "", nullptr, "removed"));
  }
  for (const auto& [name, y] : b.ops)
    if (!used_b[name]) d.rows.push_back(row_of("", nullptr, name, &y, "added"));
  for (const DiffRow& r : d.rows) {
    d.base_ns += r.base_ns;
    d.new_ns += r.new_ns;
  }
  std::stable_sort(d.rows.begin(), d.rows.end(), [](const DiffRow& x, const DiffRow& y) {
    return std::abs(x.new_ns - x.base_ns) > std::abs(y.new_ns - y.base_ns);
  });
  return d;
}

namespace {

std::string signed_time(double ns) {
  return fmt::format("{}{}", ns > 0 ? "+" : ns < 0 ? "-" : "", format_time_ns(std::abs(ns)));
}
std::string calls(double c) { return std::abs(c - std::round(c)) < 1e-9 ? fmt::format("{:.0f}", c) : fmt::format("{:.2f}", c); }

// Rows whose mean per forward (the table's) a few slow forwards lift on either side: an op's medians per
// forward beside its means, where its self time per step was recorded on both sides, the row holds at least
// kUnevenShare of that side's total, and its mean is over kNoisySpread times its median there. At most four,
// the largest gap between the two deltas first.
std::vector<std::string> uneven_diff_rows(const ProfileDiff& d, int row_limit) {
  std::vector<std::pair<double, std::string>> found;
  // The rows the table shows (--row-limit keeps the largest changes), ops only: profile's rule, as its
  // uneven_op_notes (the forwards' own time between ops is no op).
  const size_t shown = row_limit > 0 ? std::min(d.rows.size(), size_t(row_limit)) : d.rows.size();
  for (size_t i = 0; i < shown; ++i) {
    const DiffRow& r = d.rows[i];
    // A side that ran the op needs its per-forward times; a side that did not (a removed or added op: the
    // savings line names it with its mean) took none.
    const bool base_known = r.base_median_ns >= 0 || r.base_calls == 0, new_known = r.new_median_ns >= 0 || r.new_calls == 0;
    if (!base_known || !new_known || r.label() == kBetweenOps) continue;
    const double base_median = std::max(r.base_median_ns, 0.0), new_median = std::max(r.new_median_ns, 0.0);
    const bool base = is_uneven(r.base_ns, base_median, d.base_ns, d.base.forwards),
               next = is_uneven(r.new_ns, new_median, d.new_ns, d.next.forwards);
    if (!base && !next) continue;
    const double gap = std::abs((r.new_ns - r.base_ns) - (new_median - base_median));
    found.emplace_back(gap, fmt::format("Uneven: {}'s self time per forward: medians {} -> {} ({}); the means above, "
                                        "{} -> {}, include forwards over {:.2f}x the median on the {} side{}.",
                                        r.label(), format_time_ns(base_median), format_time_ns(new_median),
                                        signed_time(new_median - base_median), format_time_ns(r.base_ns),
                                        format_time_ns(r.new_ns), kNoisySpread,
                                        base && next ? "base and new" : base ? "base" : "new", base && next ? "s" : ""));
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> lines;
  for (size_t i = 0; i < found.size() && i < 4; ++i) lines.push_back(std::move(found[i].second));
  return lines;
}

}  // namespace

namespace {
// Bytes one forward moved on each side: every row's own (the cost model's; on a GPU the activities', whose
// launching zones hold none), so a wrapper's children count once.
std::pair<double, double> bytes_moved(const ProfileDiff& d) {
  double base = 0, next = 0;
  for (const DiffRow& r : d.rows) {
    base += r.base_bytes;
    next += r.new_bytes;
  }
  return {base, next};
}
}  // namespace

namespace {
// One op's tasks on both sides (the flash kernel's tiles), by the inner count each visited: the tasks per
// forward, the median task on each side and the change, the GFLOP/s per thread; then each side's line through
// the medians and its slowest task. A side without the op, or without a group, shows --.
std::string items_block(const ItemsDiff& x, const ProfileDiff& d, bool definitions) {
  const analysis::OpItems& any = x.base ? *x.base : *x.next;  // the names: both sides' op wrote them alike
  using Group = analysis::OpItems::Group;
  auto group = [](const std::optional<analysis::OpItems>& o, int i) {
    return i >= 0 ? &o->groups[size_t(i)] : nullptr;
  };
  const std::string inner = detail::inner_header(any), nouns = detail::item_nouns(any, 2);
  std::string s = fmt::format("Inside {}, its {} by the {} each visited (the median {}'s time; {} per forward):\n",
                              x.op, nouns, detail::inner_name(any), any.noun, nouns);
  auto per_forward = [](const Group* g, double forwards) {
    return g ? calls(double(g->count) / forwards) : std::string("--");
  };
  auto median = [](const Group* g) { return g ? format_time_ns(g->median_ns) : std::string("--"); };
  auto rate = [](const Group* g) { return g ? format_thread_gflops(g->flops, g->thread_ns()) : "--"; };
  // inner count, FLOPs per task, tasks per forward, medians, change, rates
  std::vector<std::array<std::string, 7>> cells;
  size_t w0 = detail::display_width(inner), w1 = 10, w2 = detail::display_width(nouns);
  for (const ItemsDiff::Row& r : x.rows) {
    const Group *a = group(x.base, r.base), *b = group(x.next, r.next), *g = a ? a : b;
    auto mflop = [](const Group* e) {
      return e->flops > 0 ? fmt::format("{:.2f}", e->flops_each() * 1e-6) : "--";
    };
    cells.push_back({std::to_string(r.inner),
                     a && b && !within_1pct(a->flops_each(), b->flops_each())
                         ? mflop(a) + " -> " + mflop(b)
                         : mflop(g),
                     per_forward(a, d.base.forwards) + " -> " + per_forward(b, d.next.forwards), median(a), median(b),
                     a && b ? signed_time(b->median_ns - a->median_ns) : std::string("--"),
                     rate(a) + " -> " + rate(b)});
    w0 = std::max(w0, cells.back()[0].size());
    w1 = std::max(w1, cells.back()[1].size());
    w2 = std::max(w2, cells.back()[2].size());
  }
  s += fmt::format("  {}  {:>{}}  {}  {:>11}  {:>11}  {:>11}  {}\n", detail::pad_left(inner, w0), "MFLOP each", w1,
                   detail::pad_left(nouns, w2), "base", "new", "change", "GFLOP/s per thread");
  for (const auto& c : cells)
    s += fmt::format("  {}  {:>{}}  {}  {:>11}  {:>11}  {:>11}  {}\n", detail::pad_left(c[0], w0), c[1], w1,
                     detail::pad_left(c[2], w2), c[3], c[4], c[5], c[6]);
  // Tiles of other sizes (other flash blocks) share no inner count: the lines through the medians, against
  // FLOPs per task, still compare them.
  const bool apart = x.base && x.next && std::none_of(x.rows.begin(), x.rows.end(), [](const ItemsDiff::Row& r) {
                       return r.base >= 0 && r.next >= 0;
                     });
  auto fit = [](const std::optional<analysis::OpItems>& o) {
    return !o ? std::string("--")
           : o->fitted ? fmt::format("{} (r² {:.3f})", detail::item_fit_text(*o), o->r2)
                       : std::string("no line through its medians");
  };
  if ((x.base && x.base->fitted) || (x.next && x.next->fitted))
    s += fmt::format("  Per {}: {} -> {}\n", any.noun, fit(x.base), fit(x.next));
  // Smaller tasks cost less each but come in greater numbers: what the fixed costs add up to in a forward.
  if (x.base && x.next && x.base->fitted && x.next->fitted && x.base->fixed_ns >= 0 && x.next->fixed_ns >= 0 &&
      double(x.base->items) / d.base.forwards != double(x.next->items) / d.next.forwards)
    s += fmt::format("  Fixed costs per forward ({} per forward × the fixed cost, thread time): {} -> {}\n", nouns,
                     format_time_ns(x.base->fixed_ns * double(x.base->items) / d.base.forwards),
                     format_time_ns(x.next->fixed_ns * double(x.next->items) / d.next.forwards));
  if (apart)
    s += fmt::format("  No group pairs: the two sides' {} are other tasks{}, of other FLOPs for as many {}; {}.\n",
                     nouns,
                     !d.base.flash_block.empty() && !d.next.flash_block.empty() &&
                             d.base.flash_block != d.next.flash_block
                         ? fmt::format(" (flash blocks {} -> {})", d.base.flash_block, d.next.flash_block)
                         : std::string(),
                     detail::inner_name(any),
                     x.base->fitted && x.next->fitted
                         ? "the lines per " + any.noun + ", against FLOPs, compare them"
                         : fmt::format("with no line through the medians on {}, the time per forward above compares "
                                       "the runs",
                                       !x.base->fitted && !x.next->fitted ? "either side"
                                       : !x.base->fitted                  ? "the base side"
                                                                          : "the new side"));
  for (const auto& [side, label] : {std::pair{&x.base, "base"}, std::pair{&x.next, "new"}})
    if (*side) s += fmt::format("  Slowest {} ({}): {}.\n", any.noun, label, detail::item_slowest_text(**side));
  if (definitions)
    s += fmt::format("  Each {0} is one task a thread took; its time runs from its thread's step before it to its "
                     "last. A row holds the {2} of one count of {1} on both sides when they are the same tasks: "
                     "the same FLOPs per {0} within 1 %, or the same flash blocks on the same problem; else each "
                     "side's has a row. MFLOP each: the FLOPs one {0}'s steps counted. Medians are over every {0} a "
                     "side recorded with that many {1}; GFLOP/s per thread: the group's FLOPs over its {2}' summed "
                     "time.\n",
                     any.noun, detail::inner_name(any), nouns);
  return s;
}
}  // namespace

std::string diff_table(const ProfileDiff& d, int row_limit, bool definitions) {
  const char* time = d.device ? "Self CUDA" : "Self CPU";
  const char* mem = d.device ? "Self CUDA Mem" : "Self CPU Mem";
  std::string s = fmt::format("attnprof diff — {} (base) vs {} (new), per forward{}\n", d.base.label, d.next.label,
                              d.device ? ", device time" : "");
  if (!d.base.problem.empty() && d.base.problem == d.next.problem) s += fmt::format("problem: {}\n", d.base.problem);
  else s += fmt::format("problems: base {}; new {}\n", d.base.problem.empty() ? "?" : d.base.problem,
                        d.next.problem.empty() ? "?" : d.next.problem);
  if (!d.base.problem.empty() && !d.next.problem.empty() && d.base.problem != d.next.problem)
    s += "note: the runs are of different problems; the ratios compare different work.\n";
  s += threads_note(d.base.threads, d.next.threads);
  s += flash_block_line(d.base.flash_block, d.next.flash_block);
  if (d.base.ms_per_forward > 0 && d.next.ms_per_forward > 0) {
    const double b = d.base.ms_per_forward, n = d.next.ms_per_forward;
    const std::string r = ratio_text(n < b ? b / n : n / b);
    s += fmt::format("time per forward (median): {:.3f} ms -> {:.3f} ms ({})\n", b, n,
                     r == "1.00" ? std::string("same") : r + "x " + (n < b ? "faster" : "slower"));
    // A ratio of medians that stand on disturbed forwards says little: name them, as compare does.
    std::vector<Timings> timings;
    for (const ProfileSide* side : {&d.base, &d.next})
      if (!side->forward_ms.empty())
        timings.push_back({side->label + (side == &d.base ? " (base)" : " (new)"), side->forward_ms, side->sharing,
                           -1.0, side->on_cpu});
    for (const std::string& line : timing_notes(timings, "", kMoreForwardsOfAStoredRun)) s += line + "\n";
  }
  s += fmt::format("peak memory above the inputs: {} -> {}", format_bytes(int64_t(d.base.peak_bytes)),
                   format_bytes(int64_t(d.next.peak_bytes)));
  if (d.base.ops_per_forward > 0 || d.next.ops_per_forward > 0) {
    // -1: not counted (a GPU run whose activities CUPTI could not collect), printed as such, never as 0.
    auto ops = [](double n) { return n >= 0 ? calls(n) : std::string("--"); };
    s += fmt::format("; {} per forward: {} -> {}", d.device ? "device activities" : "ops", ops(d.base.ops_per_forward),
                     ops(d.next.ops_per_forward));
  }
  s += "\n";
  // What the bytes column sums to: the traffic a change of variant removes (naive -> inplace: the copy).
  if (const auto [b, n] = bytes_moved(d); b > 0 || n > 0)
    s += fmt::format("bytes moved per forward ({}' own, cost model): {} -> {}{}\n",
                     d.device ? "the activities" : "the ops", format_bytes(int64_t(std::llround(b))),
                     format_bytes(int64_t(std::llround(n))),
                     b > 0 && n > 0 ? fmt::format(" ({}x)", ratio_text(n / b)) : std::string());
  if (d.base.max_abs_err >= 0 && d.next.max_abs_err >= 0)
    s += fmt::format("max abs error vs fp64: {:.2e} -> {:.2e}\n", d.base.max_abs_err, d.next.max_abs_err);

  size_t w = 8;
  for (const DiffRow& r : d.rows) w = std::max(w, r.label().size());
  w = std::min<size_t>(w, 60);
  // Page faults per forward when both sides recorded them (`profile --counters`): what first touches of fresh
  // memory cost, the allocations an in-place op avoids.
  auto faults = [](double v) { return v >= 0 ? calls(v) : std::string("--"); };
  const std::string fault_head = d.faults ? fmt::format("  {:>8}  {:>8}", "Faults", "new") : "";
  const std::string head = fmt::format("{:>{}}  {:>13}  {:>11}  {:>11}  {:>11}  {:>13}  {:>13}  {:>11}  {:>11}{}  {}", "Op",
                                       w, "Calls", std::string(time), "new", "change", std::string(mem), "new",
                                       "Bytes moved", "new", fault_head, "Change");
  std::vector<std::string> lines;  // the rows, under a rule as wide as the widest of them and the header
  int n = 0;
  for (const DiffRow& r : d.rows) {
    if (row_limit > 0 && n++ >= row_limit) break;
    std::string name = r.label();
    if (name.size() > w) name = name.substr(0, w - 3) + "...";
    const std::string fault_cells =
        d.faults ? fmt::format("  {:>8}  {:>8}", faults(r.base_faults), faults(r.new_faults)) : "";
    lines.push_back(fmt::format("{:>{}}  {:>13}  {:>11}  {:>11}  {:>11}  {:>13}  {:>13}  {:>11}  {:>11}{}  {}", name, w,
                     calls(r.base_calls) + " -> " + calls(r.new_calls), format_time_ns(r.base_ns),
                     format_time_ns(r.new_ns), signed_time(r.new_ns - r.base_ns),
                     d.memory ? format_bytes(int64_t(std::llround(r.base_mem))) : "--",
                     d.memory ? format_bytes(int64_t(std::llround(r.new_mem))) : "--",
                     format_bytes(int64_t(std::llround(r.base_bytes))),
                     format_bytes(int64_t(std::llround(r.new_bytes))), fault_cells, r.change));
  }
  size_t width = detail::display_width(head);
  for (const std::string& l : lines) width = std::max(width, detail::display_width(l));
  const std::string rule(width, '-');
  s += rule + "\n" + head + "\n" + rule + "\n";
  for (const std::string& l : lines) s += l + "\n";
  s += rule + "\n";
  if (row_limit > 0 && d.rows.size() > size_t(row_limit))
    s += fmt::format("{} more op{} with smaller changes (--row-limit {}); the totals below count every op.\n",
                     d.rows.size() - size_t(row_limit), d.rows.size() - size_t(row_limit) == 1 ? "" : "s", row_limit);
  // The rows' sum: torch's Self CPU time total also holds the steps' own time (ProfilerStep*), which no row has.
  s += fmt::format("{} total of the rows per forward (mean over {} and {} recorded forwards): {} -> {} ({})\n", time,
                   calls(d.base.forwards), calls(d.next.forwards), format_time_ns(d.base_ns), format_time_ns(d.new_ns),
                   signed_time(d.new_ns - d.base_ns));
  // The words of the Change column, and the one row that is no op.
  bool between = false;
  for (const DiffRow& r : d.rows) between = between || r.label() == kBetweenOps;
  const std::string between_text = between ? "between ops: the forward's own time outside its ops (freeing one op's "
                                              "buffers, allocating the next's)."
                                            : "";
  if (definitions)
    s += fmt::format("Change: same = the same calls and bytes moved on both sides (its time may still differ); changed = "
                     "the same name doing other work; in place / out of place = the op's other form (mul -> mul_).{}\n",
                     between ? " " + between_text : "");
  else if (between)  // a row that is no op: said even under --brief
    s += between_text + "\n";
  std::vector<std::string> gone, came, inplace, outofplace, changed;
  double gone_ns = 0, gone_mem = 0, gone_faults = 0;
  // A pair's calls and bytes on both sides, when they do other work: a changed op's, and an op turned in place
  // or out of place that also runs another number of times (SDPA math's two `mul` over q and k against
  // in-place's one `mul_` over the scores). A wrapper moves nothing itself: its children's bytes are what changed.
  const auto work = [&](const DiffRow& r) -> std::string {
    if (r.same_work) return "";
    const bool wrapper = r.base_bytes == 0 && r.new_bytes == 0;
    const double b = wrapper ? r.base_all_bytes : r.base_bytes, n = wrapper ? r.new_all_bytes : r.new_bytes;
    return fmt::format(" ({} -> {} calls, {} -> {} moved{})", calls(r.base_calls), calls(r.new_calls),
                       format_bytes(int64_t(std::llround(b))), format_bytes(int64_t(std::llround(n))),
                       wrapper ? " by its children" : "");
  };
  for (const DiffRow& r : d.rows) {
    if (r.change == "removed") {
      gone.push_back(r.base_name);
      gone_ns += r.base_ns;
      gone_mem += r.base_mem;
      gone_faults += std::max(r.base_faults, 0.0);
    }
    if (r.change == "added") came.push_back(r.new_name);
    if (r.change == "in place") inplace.push_back(r.label() + work(r));
    if (r.change == "out of place") outofplace.push_back(r.label() + work(r));
    if (r.change == "changed") changed.push_back(r.label() + work(r));
  }
  // At most 12 names a line: a summary of thousands of ops would otherwise print one line of all of them.
  auto join = [](const std::vector<std::string>& v) {
    constexpr size_t kNames = 12;
    std::string out;
    for (size_t i = 0; i < v.size() && i < kNames; ++i) out += (out.empty() ? "" : ", ") + v[i];
    if (v.size() > kNames) out += fmt::format(" and {} more", v.size() - kNames);
    return out;
  };
  if (!gone.empty())
    s += fmt::format("removed: {} ({}{}{} per forward gone with them)\n", join(gone), format_time_ns(gone_ns),
                     d.memory ? fmt::format(", {} allocated", format_bytes(int64_t(std::llround(gone_mem)))) : "",
                     d.faults ? fmt::format(" and {} page faults", calls(gone_faults)) : std::string());
  if (!inplace.empty()) s += fmt::format("turned in place: {}\n", join(inplace));
  if (!outofplace.empty()) s += fmt::format("turned out of place: {}\n", join(outofplace));
  if (!came.empty()) s += fmt::format("added: {}\n", join(came));
  if (!changed.empty()) s += fmt::format("changed (same name, other work): {}\n", join(changed));
  for (const std::string& line : uneven_diff_rows(d, row_limit)) s += line + "\n";
  // Inside the kernels that time their steps: where a fused op's time moved, which its one row cannot say.
  for (size_t i = 0; i < d.steps.size();) {
    const std::string& op = d.steps[i].op;
    size_t sw = 4;
    for (size_t k = i; k < d.steps.size() && d.steps[k].op == op; ++k) sw = std::max(sw, detail::display_width(d.steps[k].step));
    s += fmt::format("Inside {}, the kernel's steps (each thread's time per forward, summed over the threads):\n", op);
    auto pad = [&](const std::string& name) { return detail::pad_right(name, sw); };
    s += fmt::format("  {}  {:>11}  {:>11}  {:>11}  {}\n", pad("Step"), "base", "new", "change", "GFLOP/s per thread");
    for (; i < d.steps.size() && d.steps[i].op == op; ++i) {
      const StepDiff& x = d.steps[i];
      auto t = [](double ns) { return ns >= 0 ? format_time_ns(ns) : std::string("--"); };
      const std::string rates = x.base_flops > 0 || x.new_flops > 0
                                    ? format_thread_gflops(x.base_flops, x.base_ns) + " -> " +
                                          format_thread_gflops(x.new_flops, x.new_ns)
                                    : "";
      s += fmt::format("  {}  {:>11}  {:>11}  {:>11}{}\n", pad(x.step), t(x.base_ns), t(x.new_ns),
                       x.base_ns >= 0 && x.new_ns >= 0 ? signed_time(x.new_ns - x.base_ns) : std::string("--"),
                       rates.empty() ? "" : "  " + rates);
    }
  }
  for (const ItemsDiff& x : d.items) s += items_block(x, d, definitions);
  if (definitions)
    s += "Per forward: each side's totals divided by the forwards it recorded. Bytes moved: the op's own cost model. "
         "Sizes in torch's binary units (1 Mb = 2^20 B; compare's table prints decimal MB).\n";
  else  // the unit, without which "2.56 Gb" beside compare's 2.75 GB reads as another figure (or as gigabits)
    s += "Sizes in torch's binary units: 1 Mb = 2^20 B, 1 Gb = 2^30 B.\n";
  if (!d.memory)
    s += fmt::format("{}: -- (a profile that recorded no memory, profile_memory off, is on one side or both).\n",
                     mem);
  if (d.faults && definitions)
    s += "Faults: the op's own page faults (not its children's), every thread's (--counters): one per first "
         "touch of a 4 KiB page, or of a 2 MiB one where the kernel backs a buffer with a huge page.\n";
  return s;
}

json diff_json(const ProfileDiff& d, int row_limit) {
  const std::pair<double, double> moved = bytes_moved(d);  // (not a structured binding: clang 14 cannot capture one)
  const double base_bytes = moved.first, new_bytes = moved.second;
  auto side = [&](const ProfileSide& p) {
    return json{{"label", p.label},
                {"bytes_per_forward", &p == &d.base ? base_bytes : new_bytes},  // every op's own, as the table's
                {"problem", p.problem},
                {"forwards", count_json(p.forwards)},
                {"ms_per_forward", p.ms_per_forward > 0 ? json(p.ms_per_forward) : json()},
                {"peak_bytes", count_json(p.peak_bytes)},
                {"ops_per_forward", p.ops_per_forward >= 0 ? count_json(p.ops_per_forward) : json()},
                {"max_abs_err", p.max_abs_err >= 0 ? json(p.max_abs_err) : json()},
                {"forward_ms", p.forward_ms},
                {"threads", p.threads > 0 ? count_json(p.threads) : json()},
                {"flash_block", p.flash_block.empty() ? json() : json(p.flash_block)}};
  };
  json rows = json::array();
  const size_t shown = row_limit > 0 ? std::min(d.rows.size(), size_t(row_limit)) : d.rows.size();
  for (size_t i = 0; i < shown; ++i) {
    const DiffRow& r = d.rows[i];
    rows.push_back({{"base_name", r.base_name.empty() ? json() : json(r.base_name)},
                    {"new_name", r.new_name.empty() ? json() : json(r.new_name)},
                    {"change", r.change},
                    {"base_calls", count_json(r.base_calls)},
                    {"new_calls", count_json(r.new_calls)},
                    {"base_ns", r.base_ns},
                    {"new_ns", r.new_ns},
                    {"delta_ns", r.new_ns - r.base_ns},
                    {"base_mem_bytes", d.memory ? json(r.base_mem) : json()},
                    {"new_mem_bytes", d.memory ? json(r.new_mem) : json()},
                    {"base_bytes", r.base_bytes},
                    {"new_bytes", r.new_bytes},
                    {"base_all_bytes", r.base_all_bytes},
                    {"new_all_bytes", r.new_all_bytes},
                    {"base_median_ns", r.base_median_ns >= 0 ? json(r.base_median_ns) : json()},
                    {"new_median_ns", r.new_median_ns >= 0 ? json(r.new_median_ns) : json()},
                    {"base_page_faults", r.base_faults >= 0 ? json(r.base_faults) : json()},
                    {"new_page_faults", r.new_faults >= 0 ? json(r.new_faults) : json()}});
  }
  return {{"kind", "diff"},
          {"attnprof_version", ATTNPROF_VERSION},
          {"device", d.device ? "cuda" : "cpu"},
          {"per", "forward"},
          {"base", side(d.base)},
          {"new", side(d.next)},
          {"base_ns", d.base_ns},
          {"new_ns", d.new_ns},
          {"rows", rows},
          {"rows_left_out", d.rows.size() - shown},  // by --row-limit: the smallest changes; base_ns/new_ns count all
          {"items", [&] {
             // Each op's tasks: the rows as the table pairs them, each side's figures per forward, and each side's
             // line and slowest task as its summary holds them.
             json items = json::array();
             auto group = [&](const std::optional<analysis::OpItems>& o, int i, double forwards) {
               if (i < 0) return json();
               const analysis::OpItems::Group& g = o->groups[size_t(i)];
               // FLOPs and rates null where the tasks counted none, or took no time (the table's --).
               return json{{"per_forward", g.count / forwards},
                           {"flops_each", g.flops > 0 ? json(g.flops_each()) : json()},
                           {"median_ns", g.median_ns},
                           {"mean_ns", g.mean_ns},
                           {"max_ns", g.max_ns},
                           {"gflops_per_thread",
                            g.flops > 0 && g.thread_ns() > 0 ? json(g.flops / g.thread_ns()) : json()}};
             };
             auto fit = [](const std::optional<analysis::OpItems>& o) {
               return o && o->fitted ? json{{"fixed_ns", o->fixed_ns}, {"marginal_gflops", o->marginal_gflops},
                                            {"r2", o->r2}}
                                     : json();
             };
             auto per_forward = [](const std::optional<analysis::OpItems>& o, double forwards) {
               return o ? json(double(o->items) / forwards) : json();
             };
             auto slowest = [](const std::optional<analysis::OpItems>& o) {
               if (!o) return json();
               const auto& sl = o->slowest;
               return json{{"label", o->item_label(sl.keys)}, {"inner", sl.inner}, {"ns", sl.ns},
                           {"group_median_ns", sl.group_median_ns},
                           {"step", sl.step.empty() ? json() : json(sl.step)}, {"step_ns", sl.step_ns}};
             };
             for (const ItemsDiff& x : d.items) {
               const analysis::OpItems& any = x.base ? *x.base : *x.next;
               json rows = json::array();
               for (const ItemsDiff::Row& r : x.rows)
                 rows.push_back({{"inner", r.inner},
                                 {"base", group(x.base, r.base, d.base.forwards)},
                                 {"new", group(x.next, r.next, d.next.forwards)}});
               items.push_back({{"op", x.op},
                                {"noun", any.noun},
                                {"inner", any.inner},
                                {"base_items_per_forward", per_forward(x.base, d.base.forwards)},
                                {"new_items_per_forward", per_forward(x.next, d.next.forwards)},
                                {"groups", std::move(rows)},
                                {"base_fit", fit(x.base)},
                                {"new_fit", fit(x.next)},
                                {"base_slowest", slowest(x.base)},
                                {"new_slowest", slowest(x.next)}});
             }
             return items;
           }()},
          {"steps", [&] {
             json steps = json::array();
             for (const StepDiff& x : d.steps)
               steps.push_back({{"op", x.op},
                                {"step", x.step},
                                {"base_thread_ns", x.base_ns >= 0 ? json(x.base_ns) : json()},
                                {"new_thread_ns", x.new_ns >= 0 ? json(x.new_ns) : json()},
                                {"base_flops", x.base_ns >= 0 ? json(x.base_flops) : json()},
                                {"new_flops", x.new_ns >= 0 ? json(x.new_flops) : json()}});
             return steps;
           }()}};
}

// ---- two compare runs -------------------------------------------------------------------------------
namespace {

std::string run_label(const json& c) {
  std::string where;
  if (c.contains("gpu") && c["gpu"].is_string()) where = c["gpu"].get<std::string>();
  else if (c.contains("machine") && c["machine"].is_object()) {
    where = string_field(c["machine"], "cpu");
    if (const std::string sig = string_field(c["machine"], "cpu_signature"); !sig.empty()) where += " (" + sig + ")";
    // The SIMD target the peaks and kernels ran with: one CPU under ATTNPROF_ISA=scalar and as itself are two runs.
    if (const std::string isa = string_field(c["machine"], "isa"); !isa.empty()) where += ", " + isa;
    const double threads = c.contains("threads") && c["threads"].is_number() ? c["threads"].get<double>() : 0.0;
    if (threads >= 1 && threads <= 1e6) where += fmt::format(", {:.0f} thread{}", threads, threads == 1 ? "" : "s");
  }
  const std::string problem = string_field(c, "problem");
  return fmt::format("{}{}", problem.empty() ? "?" : problem, where.empty() ? "" : " on " + where);
}

// A number that may be null (a variant that did not run): -1 then.
double maybe(const json& o, const char* key, const std::string& what) {
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) return -1;
  if (!it->is_number()) ATTNPROF_FAIL("{}: field '{}' is not a number", what, key);
  return checked(it->get<double>(), key, what, /*may_be_negative=*/false);
}

void check_compare(const json& c, const std::string& which) {
  if (!c.is_object() || string_field(c, "kind") != "compare" || !c.contains("variants") || !c["variants"].is_array())
    ATTNPROF_FAIL("{}: not a compare.json (expected \"kind\": \"compare\" and a \"variants\" array; write one "
                  "with `attnprof compare`)", which);
  // compare runs at least one variant and writes a row for each: an empty list would diff, draw or place
  // nothing, as if the run had measured no variant.
  if (c["variants"].empty())
    ATTNPROF_FAIL("{}: field 'variants' is empty (attnprof writes a row for every variant compare ran)", which);
  // The run's settings, which readers print and roofline --from copies: whole counts in range, a dtype attnprof
  // runs.
  for (const auto& [key, least, most] : {std::tuple<const char*, double, double>{"threads", 1, 65536},
                                         {"iters", 1, 1e9}, {"warmup", 0, 1e9}})
    if (const auto it = c.find(key); it != c.end() && !it->is_null())
      if (!it->is_number() || !(it->get<double>() >= least && it->get<double>() <= most) ||
          it->get<double>() != std::floor(it->get<double>()))
        ATTNPROF_FAIL("{}: field '{}' is {}, not a whole number from {} to {:g}", which, key, it->dump(), least, most);
  if (const auto dt = c.find("dtype"); dt != c.end() && !dt->is_null())
    if (!dt->is_string() || (*dt != "fp32" && *dt != "bf16" && *dt != "fp16"))
      ATTNPROF_FAIL("{}: field 'dtype' is {}, none of fp32, bf16, fp16", which, printable_name(dt->dump(), which));
  // What diff prints of the run, in its header and notes.
  if (const auto pr = c.find("problem"); pr != c.end() && !pr->is_string())
    ATTNPROF_FAIL("{}: field 'problem' is {}, not a string (the shape, as attnprof writes it)", which, pr->type_name());
  (void)printable_field(string_field(c, "problem"), "problem", which);
  if (c.contains("gpu") && c["gpu"].is_string()) (void)printable_field(c["gpu"].get<std::string>(), "gpu", which);
  if (c.contains("machine") && c["machine"].is_object())
    for (const char* key : {"cpu", "cpu_signature", "isa", "bf16_matmul", "library_isa", "measured_at", "measured_busy",
                            "memory_reclaim"})
      (void)printable_field(string_field(c["machine"], key), std::string("machine.") + key, which);
  // The device every row ran on: absent (older CPU runs) or one of the two attnprof runs on.
  if (const auto dev = c.find("device"); dev != c.end() && !dev->is_null()) {
    if (!dev->is_string()) ATTNPROF_FAIL("{}: field 'device' is {}, not a string (cpu or cuda)", which, dev->dump());
    const std::string d = dev->get<std::string>();
    if (d != "cpu" && d != "cuda")
      ATTNPROF_FAIL("{}: field 'device' is '{}', none of cpu, cuda", which, printable_name(d, which));
  }
}

// One side's figures of a compare.json row; anything attnprof never writes is an error naming the row.
void fill(RunDiffRow& r, const json& v, bool is_base, const std::string& what) {
  // Files written before "status" existed say "skipped": "<why>" (or true) and "ok": false instead; a
  // "status" that is there but not a string is neither format, and must not be read as the older one.
  const auto st = v.find("status");
  if (st != v.end() && !st->is_string())
    ATTNPROF_FAIL("{}: field 'status' is {}, not a string (ok, failed or skipped)", what, st->dump());
  const std::string status = compare_row_status(v);
  if (status != "ok" && status != "failed" && status != "skipped")
    ATTNPROF_FAIL("{}: status '{}' is none of ok, failed, skipped", what, status);
  (is_base ? r.base_status : r.new_status) = status;
  const bool ran = status == "ok";
  double& ms = is_base ? r.base_ms : r.new_ms;
  ms = time_ms(maybe(v, "ms", what), "ms", what);
  if (ran && ms < 0)
    ATTNPROF_FAIL("{}: status 'ok' without a time ('ms'); attnprof writes one for every variant that ran", what);
  // A row that did not run has no time: one would be printed beside the others as a speed-up.
  if (!ran && ms >= 0)
    ATTNPROF_FAIL("{}: status '{}' with a time ('ms') of {}; attnprof writes null for a variant that did not run", what,
                  status, ms);
  // A variant that ran took time: a 0 would be printed as its time, with no speed-up beside it.
  if (ran && ms == 0)
    ATTNPROF_FAIL("{}: status 'ok' with a time ('ms') of 0; attnprof writes the median of forwards it timed, and "
                  "none takes no time", what);
  (is_base ? r.base_peak : r.new_peak) = maybe(v, "peak_bytes", what);
  (is_base ? r.base_ops : r.new_ops) = maybe(v, "ops", what);
  (is_base ? r.base_err : r.new_err) = maybe(v, "max_abs_err", what);
  // The row's other figures, which diff does not print but report draws: numbers, not negative, or null. Checked
  // on rows that ran: a skipped row keeps its cost model's figures for a shape that may be far past 2^53 bytes.
  if (ran) {
    for (const char* key : {"gflops", "pct_peak", "peak_total_bytes", "bytes", "bound_ms", "floor_ms", "nmse",
                            "tolerance_used", "warmup_forwards"})
      (void)maybe(v, key, what);
    if (maybe(v, "floor_memory_share", what) > 1)
      ATTNPROF_FAIL("{}: field 'floor_memory_share' is {}, not a share of the floor (0 to 1)", what,
                    v["floor_memory_share"].get<double>());
    if (maybe(v, "memory_time_share", what) > 1)
      ATTNPROF_FAIL("{}: field 'memory_time_share' is {}, not a share of the row's op time (0 to 1)", what,
                    v["memory_time_share"].get<double>());
  }
  std::vector<double>& forwards = is_base ? r.base_forward_ms : r.new_forward_ms;
  forwards = forward_times(v, what);
  if (ran && v.contains("forward_ms") && forwards.empty())
    ATTNPROF_FAIL("{}: status 'ok' with an empty 'forward_ms' (attnprof writes one time per timed forward)", what);
  if (ran && std::find(forwards.begin(), forwards.end(), 0.0) != forwards.end())
    ATTNPROF_FAIL("{}: status 'ok' with a forward of 0 ms in 'forward_ms'; attnprof writes the time of each forward "
                  "it timed, and none takes no time", what);
  // The figures that stand on others, as attnprof computes them: a hand-edited time or count would be printed
  // (and drawn) beside the forwards that contradict it.
  if (ran)
    if (const std::string med = median_mismatch(ms, forwards); !med.empty())
      ATTNPROF_FAIL("{}: field 'ms' is {}, not the median of its 'forward_ms' ({}), which attnprof writes", what, ms,
                    med);
  if (const double ops = is_base ? r.base_ops : r.new_ops; ops >= 0 && ops != std::floor(ops))
    ATTNPROF_FAIL("{}: field 'ops' is {}, not a whole number of ops per forward", what, ops);
  if (const double peak = is_base ? r.base_peak : r.new_peak; peak >= 0 && peak != std::floor(peak))
    ATTNPROF_FAIL("{}: field 'peak_bytes' is {}, not a whole number of bytes", what, peak);
  (is_base ? r.base_sharing : r.new_sharing) = sharing_field(v, what);
  (is_base ? r.base_on_cpu : r.new_on_cpu) = on_cpu_field(v, forwards.size(), what);
  // Slowest over fastest timed forward: null with fewer than two, 0 when the fastest took no time, else at
  // least 1. The diff recomputes it from forward_ms; a value outside that is a corrupt row, not one to skip.
  if (const auto sp = v.find("spread"); sp != v.end() && !sp->is_null()) {
    if (!sp->is_number()) ATTNPROF_FAIL("{}: field 'spread' is {}, not a number", what, sp->dump());
    const double x = sp->get<double>();
    if (!std::isfinite(x) || (x != 0 && x < 1) || !detail::figure_in_range(x))
      ATTNPROF_FAIL("{}: field 'spread' is {}, not a ratio of the slowest to the fastest forward (at least 1)", what, x);
  }
}

// Every row of one compare.json into d, as the base or the new side (`which` names it in errors).
void add_compare_rows(RunDiff& d, const json& doc, bool is_base, const std::string& which) {
  for (const json& v : doc["variants"]) {
    const std::string name = v.is_object() ? string_field(v, "name") : "";
    if (name.empty()) ATTNPROF_FAIL("{}: a variant without a \"name\"", which);
    (void)printable_name(name, which);
    // report reads <name>.summary.json, .table.txt and the traces beside compare.json: a name that is not a
    // plain file name ("../../etc/x", "a/b", ".x") would reach files outside the run's directory.
    if (name.find_first_of("/\\") != std::string::npos || name.front() == '.')
      ATTNPROF_FAIL("{}: field 'name' of a variant is '{}', not a plain file name (attnprof writes names like "
                    "naive, sdpa-flash)", which, name);
    auto it = std::find_if(d.rows.begin(), d.rows.end(), [&](const RunDiffRow& r) { return r.variant == name; });
    if (it != d.rows.end() && !(is_base ? it->base_status : it->new_status).empty())
      ATTNPROF_FAIL("{}: variant '{}' appears twice in one compare.json", which, name);
    if (it == d.rows.end()) {
      d.rows.push_back({});
      d.rows.back().variant = name;
      it = d.rows.end() - 1;
    }
    const std::string what = fmt::format("{} variant '{}'", which, name);
    fill(*it, v, is_base, what);
    // The rate and its share of the peak, from the run's attention FLOPs and peak (where the file has them).
    const double ms = is_base ? it->base_ms : it->new_ms;
    const double flops = maybe(doc, "attention_flops", which), peak = maybe(doc, "peak_gflops", which);
    const double gflops = maybe(v, "gflops", what), pct = maybe(v, "pct_peak", what);
    if (ms > 0 && flops > 0 && gflops >= 0) {
      const double want = flops / (ms * 1e6);
      if (std::abs(gflops - want) > 1e-6 * want)
        ATTNPROF_FAIL("{}: field 'gflops' is {}, not the run's attention_flops over its time ({:.6g}), which attnprof "
                      "writes",
                      what, gflops, want);
    }
    if (peak > 0 && gflops >= 0 && pct >= 0) {
      const double want = 100.0 * gflops / peak;
      if (std::abs(pct - want) > 1e-6 * std::max(want, 1e-9))
        ATTNPROF_FAIL("{}: field 'pct_peak' is {}, not its gflops over the run's peak_gflops ({:.6g} %), which "
                      "attnprof writes",
                      what, pct, want);
    }
  }
}

std::string ms_cell(double ms) { return ms >= 0 ? fmt::format("{:.3f}", ms) : "--"; }
std::string bytes_cell(double b) { return b >= 0 ? format_bytes(int64_t(b)) : "--"; }
std::string err_cell(double e) { return e >= 0 ? fmt::format("{:.2e}", e) : "--"; }

}  // namespace

RunDiff diff_compare_runs(const json& base, const json& next) {
  check_compare(base, "base");
  check_compare(next, "new");
  RunDiff d;
  d.base_label = run_label(base);
  d.new_label = run_label(next);
  d.same_problem = string_field(base, "problem") == string_field(next, "problem");
  // A GPU run's host threads do not run its kernels.
  auto threads = [](const json& c) {
    return !c.contains("gpu") && c.contains("threads") && c["threads"].is_number() ? c["threads"].get<double>() : -1.0;
  };
  d.base_threads = threads(base);
  d.new_threads = threads(next);
  d.base_flash_block = base.contains("gpu") ? "" : flash_block_field(base, "base");
  d.new_flash_block = next.contains("gpu") ? "" : flash_block_field(next, "new");
  auto gemm = [](const json& c) {
    return string_field(c, "dtype") == "bf16" && c.contains("machine") && c["machine"].is_object()
               ? string_field(c["machine"], "bf16_matmul")
               : std::string();
  };
  if (const std::string b = gemm(base), n = gemm(next); !b.empty() && !n.empty() && b != n) {
    d.base_bf16_matmul = b;
    d.new_bf16_matmul = n;
  }
  add_compare_rows(d, base, true, "base");
  add_compare_rows(d, next, false, "new");
  return d;
}

std::string compare_row_status(const json& row) {
  if (const auto st = row.find("status"); st != row.end()) return st->is_string() ? st->get<std::string>() : "";
  // Files written before "status" existed say "skipped": "<why>" (or true) and "ok": false instead.
  const auto sk = row.find("skipped"), ok = row.find("ok");
  const bool skipped = sk != row.end() && ((sk->is_string() && !sk->get<std::string>().empty()) ||
                                           (sk->is_boolean() && sk->get<bool>()));
  return skipped ? "skipped" : ok != row.end() && ok->is_boolean() && !ok->get<bool>() ? "failed" : "ok";
}

void check_compare_json(const json& c, const std::string& what) {
  check_compare(c, what);
  RunDiff d;
  add_compare_rows(d, c, true, what);
}

namespace {
// A speed-up the machine may have made (the text's `*`): one side's forwards spread beyond the noise threshold,
// or shared the CPUs with other work.
bool disturbed(const RunDiffRow& r) {
  return is_disturbed(r.base_forward_ms, r.base_sharing, r.base_on_cpu) ||
         is_disturbed(r.new_forward_ms, r.new_sharing, r.new_on_cpu);
}
}  // namespace

std::string diff_table(const RunDiff& d, bool definitions) {
  std::string s = "attnprof diff — two compare runs\n";
  s += fmt::format("base: {}\nnew:  {}\n", d.base_label, d.new_label);
  if (!d.same_problem) s += "note: the runs are of different problems; the ratios compare different work.\n";
  s += threads_note(d.base_threads, d.new_threads);
  s += flash_block_line(d.base_flash_block, d.new_flash_block);
  // The GEMM under the unfused variants' matmul changed: said of those that ran on both sides, whose speed-ups
  // carry it.
  std::vector<std::string> unfused;
  for (const RunDiffRow& r : d.rows)
    if ((r.variant == "naive" || r.variant == "inplace") && r.base_status == "ok" && r.new_status == "ok")
      unfused.push_back(r.variant + "'s");
  if (!d.base_bf16_matmul.empty() && !unfused.empty())
    s += fmt::format("note: {} bf16 matmul ran on different GEMMs (base: {}, new: {}); {} speed-up{} include{} that "
                     "change.\n",
                     spoken_list(unfused), d.base_bf16_matmul, d.new_bf16_matmul,
                     unfused.size() == 1 ? "its" : "their", unfused.size() == 1 ? "" : "s",
                     unfused.size() == 1 ? "s" : "");
  const std::string head = fmt::format("{:<12}{:>12}{:>12}{:>16}{:>12}{:>12}{:>10}{:>9}{:>11}{:>11}", "Variant",
                                       "ms base", "ms new", "speed-up", "Peak base", "Peak new", "Ops base",
                                       "Ops new", "Err base", "Err new");
  const std::string rule(head.size(), '-');
  s += rule + "\n" + head + "\n" + rule + "\n";
  std::vector<Timings> timings;
  bool any_noisy = false;
  for (const RunDiffRow& r : d.rows) {
    timings.push_back({r.variant + " (base)", r.base_forward_ms, r.base_sharing, -1.0, r.base_on_cpu});
    timings.push_back({r.variant + " (new)", r.new_forward_ms, r.new_sharing, -1.0, r.new_on_cpu});
    std::string ratio = "--";
    if (r.base_ms > 0 && r.new_ms > 0) {
      const bool noisy = disturbed(r);
      any_noisy = any_noisy || noisy;
      ratio = ratio_text(r.base_ms / r.new_ms) + "x" + (noisy ? "*" : "");
    }
    else if (r.base_status.empty()) ratio = "new only";
    else if (r.new_status.empty()) ratio = "base only";
    else ratio = r.base_status + "/" + r.new_status;  // e.g. ok/skipped: one side did not run
    s += fmt::format("{:<12}{:>12}{:>12}{:>16}{:>12}{:>12}{:>10}{:>9}{:>11}{:>11}\n", r.variant, ms_cell(r.base_ms),
                     ms_cell(r.new_ms), ratio, bytes_cell(r.base_peak), bytes_cell(r.new_peak),
                     r.base_ops >= 0 ? fmt::format("{:.0f}", r.base_ops) : "--",
                     r.new_ops >= 0 ? fmt::format("{:.0f}", r.new_ops) : "--", err_cell(r.base_err),
                     err_cell(r.new_err));
  }
  s += rule + "\n";
  if (definitions)
    s += "speed-up: base ms / new ms (above 1: the new run is faster). Ops: ops with work of their own on a CPU, "
       "device activities on a GPU. Peak: bytes one forward allocates above its inputs, in torch's binary units "
       "(1 Mb = 2^20 B; compare's table prints decimal MB).\n";
  if (any_noisy)
    s += fmt::format("*: the forwards of one side spread by more than {:.0f} %, shared the CPUs with other work or "
                     "ran off the CPU: that speed-up may be the machine's, not the code's.\n",
                     (kNoisySpread - 1.0) * 100.0);
  // Compare runs: their forwards come from --iters (no --schedule there).
  for (const std::string& line : timing_notes(timings, "")) s += line + "\n";
  return s;
}

json diff_json(const RunDiff& d) {
  auto num_or_null = [](double x) { return x >= 0 ? json(x) : json(); };
  auto count_or_null = [](double x) { return x >= 0 ? count_json(x) : json(); };
  json rows = json::array();
  for (const RunDiffRow& r : d.rows)
    rows.push_back({{"variant", r.variant},
                    {"base_status", r.base_status.empty() ? json() : json(r.base_status)},
                    {"new_status", r.new_status.empty() ? json() : json(r.new_status)},
                    {"base_ms", num_or_null(r.base_ms)},
                    {"new_ms", num_or_null(r.new_ms)},
                    {"speedup", r.base_ms > 0 && r.new_ms > 0 ? json(r.base_ms / r.new_ms) : json()},
                    {"base_peak_bytes", count_or_null(r.base_peak)},
                    {"new_peak_bytes", count_or_null(r.new_peak)},
                    {"base_ops", count_or_null(r.base_ops)},
                    {"new_ops", count_or_null(r.new_ops)},
                    {"base_max_abs_err", num_or_null(r.base_err)},
                    {"new_max_abs_err", num_or_null(r.new_err)},
                    {"base_spread", spread_json(r.base_forward_ms)},
                    {"new_spread", spread_json(r.new_forward_ms)},
                    {"base_cpu_sharing", cpu_sharing_json(r.base_sharing)},
                    {"new_cpu_sharing", cpu_sharing_json(r.new_sharing)},
                    // the text's `*`: the speed-up may be the machine's (null when there is no speed-up)
                    {"disturbed", r.base_ms > 0 && r.new_ms > 0 ? json(disturbed(r)) : json()}});
  return {{"kind", "diff-compare"},
          {"attnprof_version", ATTNPROF_VERSION},
          {"base", d.base_label},
          {"new", d.new_label},
          {"same_problem", d.same_problem},
          {"threads", d.base_threads > 0 && d.new_threads > 0
                          ? json({{"base", count_json(d.base_threads)}, {"new", count_json(d.new_threads)}})
                          : json()},
          {"flash_block", d.base_flash_block.empty() && d.new_flash_block.empty()
                              ? json()
                              : json({{"base", d.base_flash_block.empty() ? json() : json(d.base_flash_block)},
                                      {"new", d.new_flash_block.empty() ? json() : json(d.new_flash_block)}})},
          {"bf16_matmul", d.base_bf16_matmul.empty()
                              ? json()
                              : json({{"base", d.base_bf16_matmul}, {"new", d.new_bf16_matmul}})},
          {"rows", rows}};
}

}  // namespace attnprof::report
