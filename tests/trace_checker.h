// A checker for Chrome Trace Event JSON as Perfetto reads it. Header-only; any test may include it.
//
//   nlohmann::json j = nlohmann::json::parse(text);
//   TraceCheck c = check_trace(j);
//   EXPECT_TRUE(c.ok()) << c.report();
//
// Rules checked (shared/FIELD-NOTES.md, "Trace Event Format, as Perfetto reads it"):
//   - object form {"traceEvents": [...]}; no displayTimeUnit (ignored by Perfetto);
//   - required fields per phase: every event has a string "ph" and "pid"/"tid" that are integers;
//     X: string name, numeric ts and dur >= 0; B/E: name (B), ts; C: name, ts, object args of numbers;
//     i/I: name, ts, scope s in {g,p,t} when present; M: name in {process_name, thread_name,
//     process_sort_index, thread_sort_index, process_labels} with args.name (or args.sort_index);
//   - X events on one (pid, tid) nest or are disjoint (compared in integer ns, as written with 3 decimals);
//   - non-metadata events appear in (ts ascending, dur descending) order when `require_sorted`;
//   - every (pid, tid) that has X events is named by a thread_name M event, every pid by process_name;
//   - flow events (s / t / f): name, cat and id present, bp "e" when given; every flow that starts ends and
//     every flow that ends started (matched by cat and id).
#pragma once

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

struct TraceCheck {
  std::vector<std::string> problems;
  size_t x_events = 0, c_events = 0, i_events = 0, m_events = 0, flow_events = 0;
  bool ok() const { return problems.empty(); }
  std::string report() const {
    std::string s;
    for (size_t i = 0; i < problems.size() && i < 20; ++i) s += problems[i] + "\n";
    if (problems.size() > 20) s += "... and " + std::to_string(problems.size() - 20) + " more\n";
    return s;
  }
};

struct TraceCheckOptions {
  bool require_sorted = true;
  bool require_thread_names = true;
};

inline TraceCheck check_trace(const nlohmann::json& j, const TraceCheckOptions& opt = {}) {
  TraceCheck c;
  auto problem = [&](size_t i, const std::string& what) {
    c.problems.push_back("event " + std::to_string(i) + ": " + what);
  };
  if (!j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array()) {
    c.problems.push_back("not the object form {\"traceEvents\": [...]}");
    return c;
  }
  if (j.contains("displayTimeUnit")) c.problems.push_back("displayTimeUnit present (Perfetto ignores it)");
  const auto& ev = j["traceEvents"];
  auto to_ns = [](const nlohmann::json& v) { return std::llround(v.get<double>() * 1000.0); };

  struct Span {
    long long s, e;
    size_t index;
  };
  std::map<std::pair<long long, long long>, std::vector<Span>> spans;
  std::set<std::pair<long long, long long>> named_threads;
  std::set<long long> named_processes, used_processes;
  std::set<std::pair<std::string, std::string>> flow_starts, flow_ends;
  bool have_prev = false;
  long long prev_ts = 0, prev_dur = 0;

  for (size_t i = 0; i < ev.size(); ++i) {
    const auto& e = ev[i];
    if (!e.is_object()) {
      problem(i, "not an object");
      continue;
    }
    if (!e.contains("ph") || !e["ph"].is_string()) {
      problem(i, "missing string ph");
      continue;
    }
    const std::string ph = e["ph"];
    if (!e.contains("pid") || !e["pid"].is_number_integer()) problem(i, "pid missing or not an integer");
    if (!e.contains("tid") || !e["tid"].is_number_integer()) problem(i, "tid missing or not an integer");
    if (!e.contains("pid") || !e.contains("tid") || !e["pid"].is_number_integer() || !e["tid"].is_number_integer())
      continue;
    const long long pid = e["pid"], tid = e["tid"];
    const bool has_name = e.contains("name") && e["name"].is_string();
    const bool has_ts = e.contains("ts") && e["ts"].is_number();
    if (ph == "M") {
      ++c.m_events;
      if (!has_name) {
        problem(i, "M without name");
        continue;
      }
      const std::string n = e["name"];
      static const std::set<std::string> known = {"process_name", "thread_name", "process_sort_index",
                                                  "thread_sort_index", "process_labels"};
      if (!known.count(n)) problem(i, "unknown metadata name " + n);
      if (!e.contains("args") || !e["args"].is_object()) {
        problem(i, "M without args");
        continue;
      }
      if ((n == "process_name" || n == "thread_name") && !(e["args"].contains("name") && e["args"]["name"].is_string()))
        problem(i, n + " without string args.name");
      if (n == "thread_name") named_threads.insert({pid, tid});
      if (n == "process_name") named_processes.insert(pid);
      continue;
    }
    used_processes.insert(pid);
    if (!has_ts) {
      problem(i, ph + " without numeric ts");
      continue;
    }
    const long long ts = to_ns(e["ts"]);
    long long dur = 0;
    if (ph == "X") {
      ++c.x_events;
      if (!has_name) problem(i, "X without name");
      if (!e.contains("dur") || !e["dur"].is_number()) {
        problem(i, "X without numeric dur");
        continue;
      }
      dur = to_ns(e["dur"]);
      if (dur < 0) problem(i, "negative dur");
      spans[{pid, tid}].push_back(Span{ts, ts + dur, i});
      if (opt.require_thread_names && !named_threads.count({pid, tid}))
        problem(i, "X on (pid " + std::to_string(pid) + ", tid " + std::to_string(tid) +
                       ") before a thread_name metadata event names it");
    } else if (ph == "C") {
      ++c.c_events;
      if (!has_name) problem(i, "C without name");
      if (!e.contains("args") || !e["args"].is_object() || e["args"].empty()) {
        problem(i, "C without an args object");
      } else {
        for (const auto& [k, v] : e["args"].items())
          if (!v.is_number()) problem(i, "C series '" + k + "' is not a number");
      }
    } else if (ph == "i" || ph == "I") {
      ++c.i_events;
      if (!has_name) problem(i, "instant without name");
      if (e.contains("s") && !(e["s"] == "g" || e["s"] == "p" || e["s"] == "t")) problem(i, "instant scope not g/p/t");
    } else if (ph == "s" || ph == "t" || ph == "f") {
      ++c.flow_events;
      if (!has_name) problem(i, "flow event without name");
      if (!e.contains("cat") || !e["cat"].is_string()) problem(i, "flow event without string cat");
      if (!e.contains("id") || !(e["id"].is_number_integer() || e["id"].is_string())) {
        problem(i, "flow event without id");
      } else {
        const std::pair<std::string, std::string> key{e.value("cat", ""), e["id"].dump()};
        if (ph == "s") flow_starts.insert(key);
        if (ph == "f") flow_ends.insert(key);
      }
      if (ph == "f" && e.contains("bp") && e["bp"] != "e") problem(i, "flow end with bp other than \"e\"");
    } else if (ph == "B" || ph == "E") {
      if (ph == "B" && !has_name) problem(i, "B without name");
    } else {
      problem(i, "unexpected ph '" + ph + "'");
      continue;
    }
    if (opt.require_sorted) {
      if (have_prev && (ts < prev_ts || (ts == prev_ts && ph == "X" && dur > prev_dur)))
        problem(i, "out of (ts ascending, dur descending) order");
      have_prev = true;
      prev_ts = ts;
      prev_dur = ph == "X" ? dur : 0;
    }
  }
  for (const auto& k : flow_starts)
    if (!flow_ends.count(k)) c.problems.push_back("flow " + k.first + "/" + k.second + " starts but never ends");
  for (const auto& k : flow_ends)
    if (!flow_starts.count(k)) c.problems.push_back("flow " + k.first + "/" + k.second + " ends but never started");
  for (long long pid : used_processes)
    if (!named_processes.count(pid)) c.problems.push_back("pid " + std::to_string(pid) + " has no process_name");

  // Nesting per (pid, tid): sort by (start asc, end desc) and sweep with a stack of open intervals.
  for (auto& [key, v] : spans) {
    std::stable_sort(v.begin(), v.end(), [](const Span& a, const Span& b) {
      return a.s != b.s ? a.s < b.s : a.e > b.e;
    });
    std::vector<Span> stack;
    for (const Span& s : v) {
      while (!stack.empty() && stack.back().e <= s.s) stack.pop_back();
      if (!stack.empty() && s.e > stack.back().e)
        c.problems.push_back("X event " + std::to_string(s.index) + " overlaps event " +
                             std::to_string(stack.back().index) + " on (pid " + std::to_string(key.first) +
                             ", tid " + std::to_string(key.second) + ") without nesting");
      stack.push_back(s);
    }
  }
  return c;
}
