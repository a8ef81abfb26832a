// The guards every reader of attnprof's own files passes first, before any field is looked at: a size cap, a
// nesting cap, keys given twice, and the memory a parse would take. diff, report and `roofline --from` read
// summaries and compare.json through them (io/file.h reads the bytes).
#include <algorithm>
#include <cstdio>
#include <unistd.h>
#include <filesystem>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "attnprof/allocator.h"
#include "attnprof/error.h"
#include "attnprof/report.h"
#include "io/file.h"
#include "report/figures.h"

namespace attnprof::report {

using nlohmann::json;

std::string input_size_limit_text(uint64_t limit) {
  return limit % (uint64_t(1) << 20) == 0 ? fmt::format("{} MiB", limit >> 20) : fmt::format("{} bytes", limit);
}

std::string input_size_error(uint64_t bytes, uint64_t limit) {
  if (bytes <= limit) return "";
  return fmt::format("it is {} bytes ({}), over the {} attnprof reads: no file it writes is that large", bytes,
                     binary_size(double(bytes)), input_size_limit_text(limit));
}

std::string read_input_file(const std::string& path, uint64_t limit) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec))  // the rest io::read_file refuses, naming what it is
    if (const auto size = std::filesystem::file_size(path, ec); !ec)
      if (const std::string why = input_size_error(size, limit); !why.empty())
        ATTNPROF_FAIL("cannot read '{}': {}", path, why);
  return io::read_file(path);
}

std::string json_depth_error(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return fmt::format("it nests arrays and objects over {} deep, at byte {}: no file attnprof writes does",
                           kMaxJsonDepth, i);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return "";
}

namespace {

// Counts what a parse would build; nlohmann::json's layout on a 64-bit target: a value is 16 bytes inline, an
// array a 24-byte vector whose capacity may be twice its elements (so 32 bytes a value inside an array), an
// object a 48-byte map of ~96-byte nodes (key and value inline), a string a 32-byte object plus its characters
// past 15; each allocation ~16 more.
struct ParseCost : nlohmann::json_sax<json> {
  double bytes = 16;
  std::vector<bool> in_array{false};  // per open container: an array (its values cost capacity) or an object
  // The keys of each open object, to find one given twice (the parser keeps the last without a word); the first
  // such key.
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  bool value() {
    if (in_array.back()) bytes += 32;
    return true;
  }
  void text(size_t n) { bytes += n > 15 ? double(n + 1 + 16) : 0.0; }
  bool open(bool array, double size) {
    value();
    in_array.push_back(array);
    bytes += size + 16;
    return true;
  }
  bool close() {
    in_array.pop_back();
    return true;
  }
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t& s) override {
    bytes += 32 + 16;
    text(s.size());
    return value();
  }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override {
    keys.emplace_back();
    return open(false, 48);
  }
  bool key(string_t& k) override {
    bytes += 96 + 16;
    text(k.size());
    if (!keys.empty() && !keys.back().insert(k).second && duplicate.empty()) duplicate = k;
    return true;
  }
  bool end_object() override {
    if (!keys.empty()) keys.pop_back();
    return close();
  }
  bool start_array(std::size_t) override { return open(true, 24); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

// The bytes this process holds in memory now (/proc/self/statm's resident pages); 0 when unreadable.
double resident_bytes() {
  double bytes = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    long size = 0, resident = 0;
    if (std::fscanf(f, "%ld %ld", &size, &resident) == 2 && resident > 0)
      bytes = double(resident) * double(sysconf(_SC_PAGESIZE));
    std::fclose(f);
  }
  return bytes;
}

// Bytes the system would still give, and what bounds them, as the end of "more than ...": MemAvailable; under
// the memory limit of the cgroup the process runs in (a container's -m: past it the kernel kills the process),
// no more than that limit less what the process holds; under an address-space limit, no more than the limit
// less what the process maps now (the same bounds as the memory budget's). bytes -1 when none can be read.
struct MemoryLeft {
  double bytes = -1;
  std::string bound;
};
MemoryLeft memory_left() {
  MemoryLeft left;
  auto bound_by = [&](double bytes, std::string bound) {
    if (left.bytes < 0 || bytes < left.bytes) left = {bytes, std::move(bound)};
  };
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kb = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) bound_by(double(kb) * 1024.0, "the system has free");
    std::fclose(f);
  }
  if (const CgroupMemoryLimit& cg = process_cgroup_memory_limit(); cg.bytes > 0)
    bound_by(double(cg.bytes) - resident_bytes(),
             fmt::format("the memory limit of {} ({}) leaves", binary_size(double(cg.bytes)), cg.file));
  if (const int64_t limit = address_space_limit_bytes(); limit >= 0)
    bound_by(double(limit) - double(std::max<int64_t>(mapped_bytes(), 0)),
             fmt::format("the address-space limit (ulimit -v) of {} leaves", binary_size(double(limit))));
  return left;
}

ParseCost parse_cost(std::string_view text) {
  ParseCost cost;
  (void)json::sax_parse(text.begin(), text.end(), &cost, json::input_format_t::json, /*strict=*/false);
  return cost;
}
}  // namespace

double json_parse_bytes(std::string_view text) { return parse_cost(text).bytes; }

std::string json_memory_error(std::string_view text) { return json_memory_error(json_parse_bytes(text)); }

std::string json_memory_error(double need) {
  const MemoryLeft left = memory_left();
  // A quarter more than the estimate: the allocator's own slack and the parser's buffers beside the document.
  if (left.bytes < 0 || need * 1.25 <= left.bytes) return "";
  return fmt::format("reading it takes about {} of memory, more than {} ({} left): no file attnprof writes "
                     "needs that on this machine",
                     binary_size(need * 1.25), left.bound, binary_size(std::max(left.bytes, 0.0)));
}

std::string json_parse_error(std::string_view text) {
  // Said as such, not as a parser's "unexpected end of input": attnprof writes a file whole or not at all, so an
  // empty one was made by something else (a redirection that failed, a truncation).
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return text.empty() ? "it is empty (0 bytes): attnprof never writes an empty file"
                        : fmt::format("it holds only white space ({} bytes): attnprof never writes such a file",
                                      text.size());
  if (std::string why = json_depth_error(text); !why.empty()) return why;
  const ParseCost cost = parse_cost(text);
  if (!cost.duplicate.empty())
    return fmt::format("it gives the key \"{}\" twice in one object: no file attnprof writes does, and which of the "
                       "two counts would be a guess",
                       cost.duplicate.size() > 64 ? cost.duplicate.substr(0, 64) + "..." : cost.duplicate);
  return json_memory_error(cost.bytes);
}

}  // namespace attnprof::report
