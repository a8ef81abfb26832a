// CSV as RFC 4180 writes it, for the files spreadsheets and pandas read: `<variant>.table.csv`,
// `compare.csv`, `sweep.csv`.
#include <cmath>

#include <fmt/format.h>

#include "attnprof/report.h"

namespace attnprof::report {

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
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

}  // namespace attnprof::report
