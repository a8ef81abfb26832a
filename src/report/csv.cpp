// CSV as RFC 4180 writes it, for the files spreadsheets and pandas read: the quoting every CSV file is written
// with (csv_field, csv_line: `<variant>.table.csv` from table.cpp, `sweep.csv` from the sweep command), and the
// rows of `compare.csv` (compare_csv) and `roofline.csv` (json_rows_csv).
#include <cmath>

#include <fmt/format.h>

#include "attnprof/report.h"

namespace attnprof::report {

std::string csv_field(std::string_view raw) {
  // UTF-8 as the JSON files hold the same text (pandas' read_csv refuses other bytes by default).
  const std::string text = utf8_replaced(raw);
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';  // a quote inside a quoted field is doubled
    out += c;
  }
  return out + "\"";
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += csv_field(fields[i]);
  }
  return out + "\n";
}

std::string csv_number(double v) {
  // The shortest text that reads back as the same double; an empty cell for what is not a number.
  return std::isfinite(v) ? fmt::format("{}", v) : std::string();
}

std::string csv_value(const nlohmann::json& v) {
  if (v.is_null()) return {};
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return csv_number(v.get<double>());
  return v.dump();  // integers and booleans as JSON spells them
}

std::string json_rows_csv(const nlohmann::json& rows, const std::vector<std::string>& keys) {
  std::string out = csv_line(keys);
  for (const nlohmann::json& row : rows) {
    std::vector<std::string> cells;
    for (const std::string& k : keys) cells.push_back(row.is_object() && row.contains(k) ? csv_value(row[k]) : "");
    out += csv_line(cells);
  }
  return out;
}

std::string compare_csv(const nlohmann::json& j) {
  using nlohmann::json;
  const std::vector<std::string> keys = {"ms",          "gflops",           "pct_peak", "peak_bytes",
                                         "ops",         "bytes",            "floor_ms", "floor_bound",
                                         "memory_time_share", "bound_ms",   "max_abs_err", "nmse",
                                         "tolerance_used"};
  // A row that ran: its status ok and a time (a peer's failed row keeps its time, as compare.json does).
  const auto ran_ms = [](const json& row) {
    const bool ok = row.value("status", "") == "ok" && row.contains("ms") && row["ms"].is_number();
    return ok ? row["ms"].get<double>() : 0.0;
  };
  std::vector<RowTime> times;
  for (const json& v : j["variants"]) times.push_back({v.value("name", ""), ran_ms(v), 0.0});
  const RowTime* b = speedup_base(times);
  std::vector<std::string> header = {"source", "name", "status"};
  header.insert(header.end(), keys.begin(), keys.end());
  header.insert(header.end(), {"speedup", "speedup_base", "note"});
  std::string out = csv_line(header);
  const auto add = [&](const char* source, const json& row) {
    std::vector<std::string> cells = {source, csv_value(row.value("name", json())), csv_value(row.value("status", json()))};
    for (const std::string& k : keys) cells.push_back(row.contains(k) ? csv_value(row[k]) : std::string());
    const double ms = ran_ms(row);
    const bool timed = b && ms > 0 && std::isfinite(ms);
    cells.push_back(timed ? csv_number(b->ms / ms) : std::string());
    cells.push_back(timed ? b->name : std::string());
    cells.push_back(csv_value(row.value("note", json())));
    out += csv_line(cells);
  };
  for (const json& v : j["variants"]) add("attnprof", v);
  if (const auto p = j.find("peers"); p != j.end() && p->is_object() && p->contains("rows"))
    for (const json& v : (*p)["rows"]) add("torch", v);
  return out;
}

}  // namespace attnprof::report
