// A CSV reader for the tests: RFC 4180 as Python's csv module and pandas read it (fields split at commas
// outside quotes, "" inside quotes one quote, LF ends a record), so a test reads back what a user's tools would.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

// The records of `text`, each a list of fields. Throws std::runtime_error on an unclosed quote or a last record
// without its newline.
inline std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, in_row = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += text[++i];
      else if (c == '"') quoted = false;
      else field += c;
      continue;
    }
    in_row = true;
    if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(std::exchange(field, {}));
    } else if (c == '\n') {
      row.push_back(std::exchange(field, {}));
      rows.push_back(std::exchange(row, {}));
      in_row = false;
    } else {
      field += c;
    }
  }
  if (quoted) throw std::runtime_error("CSV: an unclosed quote");
  if (in_row) throw std::runtime_error("CSV: the last record has no newline");
  return rows;
}

// The column of `header` named `name` (throws when there is none).
inline size_t csv_column(const std::vector<std::string>& header, const std::string& name) {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  throw std::runtime_error("CSV: no column " + name);
}
