// report/html.cpp: the self-contained HTML report (see include/attnprof/html.h).
//
// The run directory is read by html_run.cpp (lenient: a missing file becomes a note). The page is built in
// three parts: HTML written here (tables, notes, links: every string escaped), the
// Vega-Lite specs built here as JSON with their data inline (so a test can read exactly what is drawn), and
// a few lines of JavaScript that hand each spec to vega-embed. Field names in the specs are fixed; names from
// the run (variants, ops, files) only ever appear as data values, never inside Vega expressions.
#include "attnprof/html.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "attnprof/allocator.h"
#include "attnprof/analysis.h"
#include "attnprof/error.h"
#include "attnprof/report.h"
#include "report/chart_layout.h"
#include "report/text_width.h"
#include "report/html_run.h"

#ifndef ATTNPROF_VERSION
#define ATTNPROF_VERSION "0.0.0"
#endif

namespace attnprof::report {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---- escaping ----------------------------------------------------------------------------------------------
std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 16);
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string script_json(const json& j) {
  // dump() escapes control characters; replace-mode keeps invalid UTF-8 from throwing (U+FFFD instead).
  const std::string raw = j.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(raw.size() + raw.size() / 16);
  for (size_t i = 0; i < raw.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(raw[i]);
    // Outside strings JSON has no <, > or &; inside strings the \u form reads back as the same character.
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else if (c == 0xE2 && i + 2 < raw.size() && static_cast<unsigned char>(raw[i + 1]) == 0x80 &&
             (static_cast<unsigned char>(raw[i + 2]) == 0xA8 || static_cast<unsigned char>(raw[i + 2]) == 0xA9)) {
      out += static_cast<unsigned char>(raw[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string href_for_file(std::string_view name) {
  std::string out;
  for (unsigned char c : name) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') out += static_cast<char>(c);
    else out += fmt::format("%{:02X}", c);
  }
  // A name such as "javascript:..." has its ':' encoded above, so it always stays a relative path.
  return out;
}

namespace {

using html_run::flag;
using html_run::ForwardDrawn;
using html_run::Input;
using html_run::is_annotation;
using html_run::member;
using html_run::num;
using html_run::OpRow;
using html_run::read_file;
using html_run::read_json;
using html_run::str;
using html_run::VariantData;

// ---- number formatting for the HTML tables -----------------------------------------------------------------
// The command line's messages' units, so a size reads the same on the page and in the terminal.
std::string fmt_bytes(double b) { return binary_size(b); }

std::string fmt_num(double v, int decimals = 2) {
  if (!std::isfinite(v)) return "–";
  return fmt::format("{:.{}f}", v, decimals);
}

// A rate or a share with `decimals` places, or two significant digits below 1, which the places would print as 0.0
// (a tiny run's 0.052 GFLOP/s).
std::string fmt_rate(double v, int decimals = 1) {
  if (std::isfinite(v) && v != 0.0 && std::fabs(v) < 1.0) return fmt::format("{:.2g}", v);
  return fmt_num(v, decimals);
}

std::string fmt_sci(double v) {
  if (v == 0.0) return "0";
  if (!std::isfinite(v)) return "–";
  return fmt::format("{:.2e}", v);
}

// Keeps at most `cap` points, keeping each bucket's peak so the chart shows the true high-water marks.
std::vector<std::pair<double, double>> downsample(std::vector<std::pair<double, double>> pts, size_t cap) {
  if (pts.size() <= cap) return pts;
  std::vector<std::pair<double, double>> out;
  const size_t per = (pts.size() + cap - 1) / cap;
  for (size_t i = 0; i < pts.size(); i += per) {
    auto best = pts[i];
    for (size_t k = i; k < std::min(pts.size(), i + per); ++k)
      if (pts[k].second > best.second) best = pts[k];
    out.push_back(best);
  }
  out.push_back(pts.back());
  return out;
}

// The summary's rows back into key averages, so report::table prints them exactly as the CLI does.

// ---- page assembly -----------------------------------------------------------------------------------------
constexpr const char* kSchema = "https://vega.github.io/schema/vega-lite/v6.json";  // an identifier; never fetched
constexpr int kWidth = 720;
// The y axes of the sweep's stacked charts take this much room whatever their tick labels, so their plots line up.
constexpr int kSweepAxisExtent = 64;
// A Vega expression that shortens a long label in its middle, keeping both ends: GPU kernels' names share long
// prefixes (sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_...) and differ at the end, which a cut at the end loses.
// The data keeps the whole name, which the tooltips show.
constexpr const char* kMiddleEllipsis =
    "length(datum.label) > 40 ? slice(datum.label, 0, 18) + '\u2026' + slice(datum.label, -18) : datum.label";
constexpr size_t kMaxSpans = 400;  // per variant on the timeline: a forward of any variant here has far fewer

// A log axis over [lo, hi] labelled at 1, 2 and 5 times each power of ten (detail::log_ticks), figures printed
// as 0.05, 20, 1,000. The scale's domain is left as the caller sets it.
json log_axis(double lo, double hi, double decades_125 = 4) {
  json axis = {{"format", ",~g"}};
  if (std::vector<double> ticks = detail::log_ticks(lo, hi, decades_125); !ticks.empty()) axis["values"] = ticks;
  return axis;
}

// A log channel whose domain is what the chart draws on it, not a chart library's round decades around that:
// the positive `keys` of every row of `sets`, widened by `below` and `above`, labelled by log_axis. Left as it
// is when no value is positive.
void fit_log_domain(json& channel, std::initializer_list<const json*> sets, std::initializer_list<const char*> keys,
                    double below, double above) {
  double lo = INFINITY, hi = 0;
  for (const json* set : sets)
    for (const json& p : *set)
      for (const char* key : keys)
        if (const json* v = member(p, {key}); v && v->is_number() && v->get<double>() > 0) {
          lo = std::min(lo, v->get<double>());
          hi = std::max(hi, v->get<double>());
        }
  if (!(hi > 0)) return;
  lo /= below;
  hi *= above;
  channel["scale"] = {{"type", "log"}, {"domain", {lo, hi}}, {"nice", false}};
  channel["axis"] = log_axis(lo, hi);
}

// Text for a paragraph: escaped, and each command the notes quote as the terminal prints them (`attnprof ...`,
// `ulimit -v`...) set as code: a backtick opens one only before "attnprof " or "ulimit ", and the next backtick
// closes it, so a backtick inside a name from a file (a variant named na`ive) stays a backtick.
std::string prose(const std::string& text) {
  const std::string e = html_escape(text);
  std::string out;
  size_t i = 0;
  while (i < e.size()) {
    const size_t open = e.find('`', i);
    if (open == std::string::npos) break;
    const std::string_view rest = std::string_view(e).substr(open + 1);
    const size_t close = e.find('`', open + 1);
    if (close != std::string::npos && (rest.starts_with("attnprof ") || rest.starts_with("ulimit "))) {
      out += e.substr(i, open - i) + "<code>" + e.substr(open + 1, close - open - 1) + "</code>";
      i = close + 1;
    } else {
      out += e.substr(i, open + 1 - i);
      i = open + 1;
    }
  }
  return out + e.substr(std::min(i, e.size()));
}

class Page {
 public:
  // One colour per variant across every chart: the colour domain lists all variants of the run in one order.
  std::vector<std::string> variants;
  // The colour domain: attnprof's variants and the peer's rows in one fixed order, whether the run has them or
  // not, so that flash is one colour on every page (a GPU run's flash had taken a CPU run's in-place colour);
  // then any other name the run has, in its order.
  static const std::vector<std::string>& known_variants() {
    static const std::vector<std::string> known = {"naive",      "inplace",    "sdpa-math",   "sdpa-flash",
                                                   "flash",      "sdpa-cudnn", "torch-naive", "torch-sdpa"};
    return known;
  }
  std::vector<std::string> colour_domain() const {
    std::vector<std::string> d = known_variants();
    for (const std::string& v : variants)
      if (std::find(d.begin(), d.end(), v) == d.end()) d.push_back(v);
    return d;
  }
  // The variants in the order legends list them: the known ones in their fixed order (naive first, as the blog),
  // whichever file named them first, then any other name in the order met.
  void order_variants() {
    const auto rank = [](const std::string& v) {
      const auto& k = known_variants();
      return size_t(std::find(k.begin(), k.end(), v) - k.begin());
    };
    std::stable_sort(variants.begin(), variants.end(),
                     [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  }
  // `present`: the variants this chart draws, so its legend lists only those.
  json variant_color(const std::set<std::string>& present = {}) const {
    json c = {{"field", "variant"}, {"type", "nominal"}, {"title", "variant"}, {"scale", {{"scheme", "tableau10"}}}};
    if (!variants.empty()) c["scale"]["domain"] = colour_domain();
    if (!present.empty()) {
      json values = json::array();
      for (const auto& v : variants)
        if (present.count(v)) values.push_back(v);
      c["legend"] = {{"values", values}};
    }
    return c;
  }
  // One colour per op across the charts that colour by op (time and bytes by op, the steps, the flame graphs,
  // the timeline), the same on every page: the names attnprof records have fixed colours (op_fixed_colour),
  // any other name (a GPU kernel, an op of a newer build) the next free one of a chosen list, in the order the
  // page first draws it. Light shades, none of them a variant's (tableau10, saturated): an op never reads as
  // the variant of that colour. `names`: what this chart draws, listed alone in its legend.
  static std::optional<std::string> op_fixed_colour(const std::string& name) {
    // The work: a hue per op, its in-place form a lighter shade of it; the fused kernel a yellow no unfused op
    // has; its steps hues of their own (the softmax's near softmax's pink).
    static const std::map<std::string, std::string, std::less<>> fixed = {
        {"matmul", "#aec7e8"},       {"mul", "#ffbb78"},          {"mul_", "#fdd9b5"},
        {"copy_", "#ff9896"},        {"masked_fill_", "#c5b0d5"}, {"softmax", "#f7b6d2"},
        {"softmax_", "#fbdcea"},     {"to", "#dbdb8d"},           {"triu", "#9edae5"},
        {"where", "#cbeef3"},        // the additive mask built from triu's: a lighter shade of it
        {"add", "#c49c94"},          {"add_", "#e3cdc8"},         {"logical_not", "#8dd3c7"},
        {"transpose", "#d6ecd2"},    {"flash_attention_fwd", "#ffed6f"},
        {"load Q, K, V", "#80b1d3"}, {"Q·Kᵀ", "#7fc97f"},        {"mask", "#bc80bd"},
        {"online softmax", "#e78ac3"}, {"P·V", "#b3de69"},      {"store O", "#fdb462"},
        // The structure, in greys: steps, annotations, wrappers whose work is their children's, the time
        // between ops, and the flame graphs' thread roots.
        {"ProfilerStep*", "#bdbdbd"}, {"attn_fwd", "#d0d0d0"},   {"sdpa_fwd", "#c8c8c8"},
        {"flash_kernel_fwd", "#d8d8d8"}, {std::string(kBetweenOps), "#e6e6e6"}, {"masked_fill", "#b0b0b0"},
        {"scaled_dot_product_attention", "#a8a8a8"}, {"_scaled_dot_product_flash_attention", "#c0c0c0"},
        {"_scaled_dot_product_attention_math", "#b8b8b8"}, {"main", "#ececec"}};
    if (const auto it = fixed.find(name); it != fixed.end()) return it->second;
    // "worker K": a grey of its own for the first sixteen (57 % to 87 % light), past them the free colours.
    if (name.rfind("worker ", 0) == 0) {
      const std::string k = name.substr(7);
      if (!k.empty() && k.size() <= 2 && std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; }))
        if (const int i = std::stoi(k); i >= 1 && i <= 16) return fmt::format("hsl(0, 0%, {}%)", 55 + 2 * i);
    }
    return std::nullopt;
  }
  // The colours of op_domain_, in its order: each name's fixed colour, or the next of the free list (chosen
  // shades unlike the fixed ones, then hues stepping by the golden angle in alternating lightness), so that no
  // two names share a colour.
  json op_range() const {
    static const std::vector<std::string> chosen = {"#9ecae1", "#fdae6b", "#a1d99b", "#fcbba1", "#bcbddc",
                                                    "#fee391", "#d4b9da", "#c7e9c0", "#dadaeb", "#98df8a"};
    json range = json::array();
    size_t next = 0;
    for (const json& n : op_domain_) {
      if (auto c = op_fixed_colour(n.get<std::string>())) {
        range.push_back(*c);
        continue;
      }
      const size_t i = next++;
      range.push_back(i < chosen.size()
                          ? chosen[i]
                          : fmt::format("hsl({:.1f}, {}%, {}%)", std::fmod(double(i) * 137.508, 360.0),
                                        i % 2 ? 55 : 45, i % 3 == 0 ? 68 : i % 3 == 1 ? 78 : 73));
    }
    return range;
  }
  json op_color(const std::string& field, const std::string& title, const json& names, json legend) {
    for (const json& n : names)
      if (op_seen_.insert(n.get<std::string>()).second) op_domain_.push_back(n);
    legend["values"] = names;
    legend["labelExpr"] = kMiddleEllipsis;
    return {{"field", field},
            {"type", "nominal"},
            {"title", title},
            {"scale", {{"range", op_range()}, {"domain", op_domain_}}},
            {"legend", std::move(legend)}};
  }
  void h2(const std::string& id, const std::string& title) {
    html_ += fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n", id, html_escape(title));
    toc_.emplace_back(id, title);
  }
  void end_section() { html_ += "</section>\n"; }
  void p(const std::string& text) { html_ += "<p>" + prose(text) + "</p>\n"; }
  void note(const std::string& text) { html_ += "<p class=\"note\">" + prose(text) + "</p>\n"; }
  void raw(const std::string& s) { html_ += s; }
  void chart(const std::string& kind, json spec, const std::string& caption) {
    const std::string id = fmt::format("chart-{}", charts_.size());
    spec["$schema"] = kSchema;
    if (!spec.contains("config")) spec["config"] = json::object();
    spec["config"]["font"] = "system-ui, sans-serif";
    spec["config"]["axis"]["labelSeparation"] = 6;  // a label that would touch its neighbour is left out
    charts_.push_back({{"id", id}, {"kind", kind}, {"spec", std::move(spec)}});
    html_ += fmt::format("<figure><div class=\"chart\" id=\"{}\" data-kind=\"{}\"></div>", id, html_escape(kind));
    if (!caption.empty()) html_ += "<figcaption>" + prose(caption) + "</figcaption>";
    html_ += "</figure>\n";
  }
  const std::string& html() const { return html_; }
  const json& charts() const { return charts_; }
  const std::vector<std::pair<std::string, std::string>>& toc() const { return toc_; }

 private:
  json op_domain_ = json::array();
  std::set<std::string> op_seen_;
  std::string html_;
  json charts_ = json::array();
  std::vector<std::pair<std::string, std::string>> toc_;
};

std::string td(const std::string& s, bool numeric = false) {
  return std::string(numeric ? "<td class=\"num\">" : "<td>") + html_escape(s) + "</td>";
}

// --- the comparison table and a bar of ms per forward against the bytes-bound lower bound ---
// A compare row's or sweep point's timed forwards (files from before they were recorded have none).
std::vector<double> forward_ms(const json& entry) {
  std::vector<double> ms;
  if (const json* f = member(entry, {"forward_ms"}); f && f->is_array())
    for (const json& x : *f)
      if (x.is_number()) ms.push_back(x.get<double>());
  return ms;
}

// What a compare.json or sweep.json says it ran: its shape's fields in the problem's order, dtype, mask,
// threads and GPU, as one line ("B=8 Hq=16 ... · bf16 · causal · 2 threads ").
std::string run_meta(const json& c) {
  std::string meta;
  if (const json* sh = member(c, {"shape"})) {
    if (sh->is_object()) {
      // In the order of the problem's shape, then any other keys.
      std::vector<std::string> keys = {"B", "H", "Hq", "Hkv", "N", "Nq", "Nk", "D"};
      for (auto it = sh->begin(); it != sh->end(); ++it)
        if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) keys.push_back(it.key());
      for (const auto& k : keys)
        if (sh->contains(k)) meta += fmt::format("{}={} ", k, (*sh)[k].is_string() ? (*sh)[k].get<std::string>() : (*sh)[k].dump());
    } else {
      meta += "shape " + (sh->is_string() ? sh->get<std::string>() : sh->dump()) + " ";
    }
  }
  if (c.contains("dtype")) meta += "· " + str(c, "dtype") + " ";
  if (c.contains("causal") && c["causal"].is_boolean()) meta += c["causal"].get<bool>() ? "· causal " : "· no mask ";
  if (const double th = num(c, "threads", NAN); std::isfinite(th)) meta += fmt::format("· {} thread{} ", str(c, "threads"), th == 1 ? "" : "s");
  // The CPU flash kernel's tiles (--flash-block), as the run's header line gave them.
  if (const auto fb = c.find("flash_block"); fb != c.end() && fb->is_array() && fb->size() == 2 &&
                                              (*fb)[0].is_number_integer() && (*fb)[1].is_number_integer())
    meta += fmt::format("· flash blocks {}×{} ", (*fb)[0].get<int64_t>(), (*fb)[1].get<int64_t>());
  if (str(c, "device") == "cuda") meta += "· on " + str(c, "gpu", "a CUDA GPU") + " ";
  return meta;
}

// The part of a run's problem that a sweep keeps for every point (all but N): "B=1 Hq=4 Hkv=2 D=64 bf16
// causal", or "" when the file does not say (an older sweep.json's shape is a string).
std::string problem_but_n(const json& c) {
  const json* sh = member(c, {"shape"});
  if (!sh || !sh->is_object() || !c.contains("causal") || !c["causal"].is_boolean()) return "";
  for (const char* k : {"B", "Hq", "Hkv", "D"})
    if (!sh->contains(k) || !(*sh)[k].is_number_integer()) return "";
  return fmt::format("B={} Hq={} Hkv={} D={} {} {}", (*sh)["B"].dump(), (*sh)["Hq"].dump(), (*sh)["Hkv"].dump(),
                     (*sh)["D"].dump(), str(c, "dtype"), c["causal"].get<bool>() ? "causal" : "no mask");
}

// compare --peer torch's rows: PyTorch on the same inputs, checked against the same reference, timed in its own
// process. Not variants: no profile, memory or floor of theirs, so a table of their own under the comparison.
void section_compare_peers(Page& pg, const json& c) {
  const json* peers = member(c, {"peers"});
  const json* rows = peers ? member(*peers, {"rows"}) : nullptr;
  if (!rows || !rows->is_array() || rows->empty()) return;
  std::string t = "<table class=\"data\"><thead><tr><th>peer</th><th>ms / forward</th><th>GFLOP/s</th>"
                  "<th>% of peak</th><th>max |err|</th><th>check</th><th>what ran</th></tr></thead><tbody>\n";
  for (const json& r : *rows) {
    t += "<tr>" + td(str(r, "name", "?"));
    const std::string status = str(r, "status", "?");
    if (status == "skipped" || !std::isfinite(num(r, "ms", NAN))) {
      const std::string why = str(r, "note");
      t += "<td colspan=\"6\" class=\"skipped\">" + html_escape(status == "skipped" ? status : "not run") +
           (why.empty() ? "" : ": " + html_escape(why)) + "</td></tr>\n";
      continue;
    }
    t += td(fmt_num(num(r, "ms", NAN), 3), true) + td(fmt_rate(num(r, "gflops", NAN)), true) +
         td(fmt_rate(num(r, "pct_peak", NAN)), true) + td(fmt_sci(num(r, "max_abs_err", NAN)), true) +
         td(status == "ok" ? "OK" : status == "failed" ? "FAIL" : status) + td(str(r, "call")) + "</tr>\n";
  }
  t += "</tbody></table>\n";
  pg.p(fmt::format("PyTorch on the same inputs: torch {} ({}, {} thread{}), each forward timed by {}; its outputs "
                   "checked against the same fp64 reference.",
                   str(*peers, "torch_version", "?"), str(*peers, "python", "?"), str(*peers, "threads", "?"),
                   num(*peers, "threads", 0) == 1 ? "" : "s", str(*peers, "timing", "the peer")));
  pg.raw(t);
}

void section_compare(Page& pg, const Input& in) {
  pg.h2("compare", "Comparison");
  if (!in.doc) {
    pg.note(in.note + ": run `attnprof compare --out DIR` to fill this section.");
    pg.end_section();
    return;
  }
  const json& c = *in.doc;
  const json* variants = member(c, {"variants"});
  std::string t = "<table class=\"data\"><thead><tr>"
                  "<th>variant</th><th>ms / forward</th><th>GFLOP/s</th><th>% of peak</th><th>peak memory</th>"
                  "<th>ops</th><th>bytes moved</th><th>floor ms</th><th>× floor</th><th>bound</th><th>max |err|</th>"
                  "<th>NMSE</th>"
                  "</tr></thead><tbody>\n";
  json bars = json::array();
  std::vector<Timings> timings;
  json memory_bars = json::array();  // per variant: peak memory and bytes moved, one forward's
  // The tick on each bar: the roofline floor; rows written before compare recorded it have only the bytes'.
  int with_floor = 0, bytes_only = 0;
  std::vector<RowTime> row_times;  // the rows that ran: the speed-up line, the far-from-floor notes
  if (variants && variants->is_array()) {
    for (const json& v : *variants) {
      const std::string name = str(v, "name", "?");
      // Not run: "status" is skipped/failed with a "note"; older files give "skipped" as a string or flag.
      std::string status = str(v, "status", "ok");
      std::string why = str(v, "note");
      if (const json* sk = member(v, {"skipped"}); sk && ((sk->is_string() && !sk->get<std::string>().empty()) ||
                                                         (sk->is_boolean() && sk->get<bool>()))) {
        status = "skipped";
        if (sk->is_string()) why = sk->get<std::string>();
      }
      t += "<tr>" + td(name);
      if (status != "ok" || !std::isfinite(num(v, "ms", NAN))) {
        if (status == "ok") status = "not run";
        t += "<td colspan=\"11\" class=\"skipped\">" + html_escape(status) + (why.empty() ? "" : ": " + html_escape(why)) +
             "</td></tr>\n";
        continue;
      }
      const double share = num(v, "floor_memory_share", NAN);
      const double floor_ms = num(v, "floor_ms", NAN), over_floor = num(v, "ms", NAN) / floor_ms;
      t += td(fmt_num(num(v, "ms", NAN), 3), true) + td(fmt_rate(num(v, "gflops", NAN)), true) +
           td(fmt_rate(num(v, "pct_peak", NAN)), true) + td(format_bytes_decimal(num(v, "peak_bytes")), true) +
           td(fmt_num(num(v, "ops", NAN), 0), true) + td(format_bytes_decimal(num(v, "bytes")), true) +
           td(fmt_num(floor_ms, 3), true) +
           (floor_ms > 0 && std::isfinite(over_floor)
                ? std::string(over_floor > kFarFromFloor ? "<td class=\"num far\">" : "<td class=\"num\">") +
                      html_escape(fmt::format("{:.1f}×", over_floor)) + "</td>"
                : td(fmt_num(NAN), true)) +
           td(share >= 0.0 && share <= 1.0  // NaN (absent) and figures no compare writes give "--"
                  ? fmt::format("{} (memory {:.0f}% of the floor)", analysis::floor_bound_kind(share), 100.0 * share)
                  : fmt_num(NAN)) +
           td(fmt_sci(num(v, "max_abs_err", NAN)), true) + td(fmt_sci(num(v, "nmse", NAN)), true) + "</tr>\n";
      ++(std::isfinite(floor_ms) ? with_floor : bytes_only);
      // The fastest and slowest timed forward beside the median, the whisker the bar carries.
      const std::vector<double> fwd = forward_ms(v);
      const auto [lo, hi] = std::minmax_element(fwd.begin(), fwd.end());
      const double lo_ms = fwd.empty() ? num(v, "ms") : *lo, hi_ms = fwd.empty() ? num(v, "ms") : *hi;
      bars.push_back({{"variant", name}, {"ms", num(v, "ms")},
                      {"floor_ms", std::isfinite(floor_ms) ? floor_ms : num(v, "bound_ms", 0.0)},
                      {"gflops", num(v, "gflops", 0.0)}, {"min_ms", lo_ms}, {"max_ms", hi_ms},
                      {"forwards", fwd.size()}});
      for (const auto& [measure, bytes] : {std::pair<const char*, double>{"peak memory above the inputs",
                                                                           num(v, "peak_bytes", NAN)},
                                           {"bytes moved (cost model)", num(v, "bytes", NAN)}})
        if (bytes > 0) memory_bars.push_back({{"variant", name}, {"measure", measure}, {"mb", bytes * 1e-6}});
      const std::optional<analysis::CpuSharing> sharing = cpu_sharing_of(v);
      const std::vector<double> on_cpu = on_cpu_of(v);
      timings.push_back({name, fwd, sharing, -1.0, on_cpu});
      const double memory_time = num(v, "memory_time_share", NAN);
      row_times.push_back({name, num(v, "ms"), floor_ms, share >= 0.0 && share <= 1.0 ? share : -1.0,
                           is_disturbed(fwd, sharing, on_cpu), memory_time >= 0.0 && memory_time <= 1.0 ? memory_time : -1.0});
    }
  }
  t += "</tbody></table>\n";
  std::string meta = run_meta(c);
  const bool gpu = str(c, "device") == "cuda";
  std::vector<std::string> over_peak;  // rows (and peer rows) above 100 % of the peak, as compare names them
  const json* peer_doc = member(c, {"peers"});
  for (const json* rows : {variants, peer_doc ? member(*peer_doc, {"rows"}) : nullptr})
    if (rows && rows->is_array())
      for (const json& v : *rows)
        if (str(v, "status", "ok") != "skipped" && num(v, "pct_peak", 0.0) > 100)
          over_peak.push_back(str(v, "name", "?"));
  if (c.contains("inputs")) meta += "· inputs: " + str(c, "inputs") + " ";
  if (c.contains("sdpa_auto_backend")) meta += "· sdpa (auto) picks " + str(c, "sdpa_auto_backend");
  if (!meta.empty()) pg.p(meta);
  pg.raw(t);
  // The ratios the blog reads off, and rows whose time went where the cost model does not look, as compare prints.
  if (const std::string line = speedup_line(row_times); !line.empty()) pg.p(line);
  if (const std::string line = blog_ratio_line(row_times); !line.empty()) pg.p(line);
  if (const std::string line = memory_time_line(row_times, gpu); !line.empty()) pg.p(line);
  if (const std::string far = far_from_floor_summary(row_times, gpu); !far.empty()) pg.note(far);
  if (std::string over = over_peak_note(gpu, over_peak); !over.empty()) pg.note(over.substr(0, over.size() - 1));
  // What each column means, folded: three paragraphs that would stand between the table and its charts.
  pg.raw("<details><summary>What the columns mean</summary>\n");
  pg.note(std::string(gpu ? "ms / forward is the median device time of one forward timed with CUDA events. "
                           : "ms / forward is the median wall time of one profiled forward. ") +
          "Floor ms is the roofline floor of what one forward ran: each " + (gpu ? "kernel, copy and fill" : "op") +
          " at max(bytes / bandwidth, FLOPs / its peak) against " +
          (gpu ? "the GPU's datasheet ceilings" : "the machine's measured ceilings") +
          ", summed: what those " + (gpu ? "activities" : "ops") +
          " take at those ceilings (data that stays in cache can beat it); × floor is ms / forward over it, marked "
          "past 4×. Bound says which side sets it: the share of the floor spent in ops held by their bytes "
          "(memory at 75 % or more, compute at 25 % or less, else mixed). Every variant with a time was checked "
          "against the fp64 reference (max |err|, NMSE) before it was timed.");
  // What GFLOP/s, % of peak and the check count, as compare's footnotes say: the tables below count every FLOP
  // of every op (the cost model), so their rates differ from these.
  {
    std::string defs = "GFLOP/s counts the attention FLOPs of one forward";
    if (const double f = num(c, "attention_flops", NAN); std::isfinite(f)) defs += fmt::format(", {:.3g}", f);
    if (const std::string conv = str(c, "flops_convention"); !conv.empty()) defs += " (" + conv + ")";
    defs += ", over its ms: the profiler tables below bill every op's own FLOPs instead, so their rates differ.";
    if (const double peak = num(c, "peak_gflops", NAN); std::isfinite(peak) && peak > 0)
      defs += fmt::format(" % of peak is against the {} {} peak, {:.1f} {}{}.", gpu ? "datasheet" : "measured", str(c, "peak_kind", "compute"),
                          gpu ? peak * 1e-3 : peak, gpu ? "TFLOP/s" : "GFLOP/s",
                          str(c, "peak_isa").empty() ? "" : " (" + str(c, "peak_isa") + ")");
    defs += " max |err| is the largest |output − fp64 reference|; NMSE the mean squared error over the reference's "
            "mean square; a variant runs only when every element is within its tolerance (|err| ≤ atol + rtol·|ref|): "
            "one that is not is a failed row, with its note.";
    pg.note(defs);
  }
  pg.note("Peak memory (one forward, above its inputs) and bytes moved are in decimal units, as compare prints them "
          "(1 MB = 10^6 B); the profiler tables below use torch's binary ones (1 Mb = 2^20 B).");
  pg.raw("</details>\n");
  const json* machine = member(c, {"machine"});
  // The GEMM under naive's and in-place's bf16 matmul, as compare recorded it (not oneDNN's below AVX-512).
  // A CPU run records the bf16 GEMM it used (a GPU run none); its fp16 GEMM is always the widened one.
  const std::string gemm_key = machine ? str(*machine, "bf16_matmul") : "";
  std::vector<std::string> unfused;  // naive and in-place where they ran: the rows the note speaks of
  if (const json* vs = member(c, {"variants"}); vs && vs->is_array())
    for (const json& v : *vs)
      if (const std::string n = str(v, "name"); (n == "naive" || n == "inplace") && str(v, "status", "ok") != "skipped")
        unfused.push_back(n);
  const std::string gemm_note = gemm_key.empty() || unfused.empty()
                                    ? ""
                                    : report::unfused_matmul_note(str(c, "dtype"), gemm_key,
                                                                  fmt::format("{}", fmt::join(unfused, ", ")));
  if (!gemm_note.empty()) pg.note(gemm_note);
  section_compare_peers(pg, c);
  // Busy and Noisy lines, as compare prints them under its table and the peer's: the peer's timed rows too.
  const json* peers = member(c, {"peers"});
  if (const json* peer_rows = peers ? member(*peers, {"rows"}) : nullptr; peer_rows && peer_rows->is_array())
    for (const json& r : *peer_rows)
      if (str(r, "status") != "skipped" && std::isfinite(num(r, "ms", NAN)))
        timings.push_back({str(r, "name", "?"), forward_ms(r), cpu_sharing_of(r)});
  // A compare's or a sweep's forwards come from --iters (no --schedule there).
  for (const std::string& line : timing_notes(timings, machine ? str(*machine, "memory_reclaim") : "")) pg.note(line);
  if (!bars.empty()) {
    json color = pg.variant_color();
    color["legend"] = nullptr;
    json spec = {
        {"data", {{"values", bars}}},
        {"width", kWidth},
        {"layer",
         {{{"mark", {{"type", "bar"}}},
           {"encoding",
            {{"y", {{"field", "variant"}, {"type", "nominal"}, {"sort", nullptr}, {"title", nullptr}}},
             {"color", color},
             {"x", {{"field", "ms"}, {"type", "quantitative"},
                    {"title", bytes_only == 0   ? "ms per forward (bar) and roofline floor (tick)"
                              : with_floor == 0 ? "ms per forward (bar) and bytes / bandwidth (tick)"
                                                : "ms per forward (bar) and roofline floor, else bytes / bandwidth (tick)"}}},
             {"tooltip", {{{"field", "variant"}}, {{"field", "ms"}, {"format", ".3f"}, {"title", "ms per forward (median)"}},
                          {{"field", "gflops"}, {"format", ".1f"}, {"title", "GFLOP/s"}}}}}}},
          {{"mark", {{"type", "rule"}, {"color", "#555"}, {"strokeWidth", 1.5}}},
           {"encoding",
            {{"y", {{"field", "variant"}, {"type", "nominal"}, {"sort", nullptr}}},
             {"x", {{"field", "min_ms"}, {"type", "quantitative"}}},
             {"x2", {{"field", "max_ms"}}},
             {"tooltip", {{{"field", "variant"}}, {{"field", "min_ms"}, {"format", ".3f"}, {"title", "fastest forward, ms"}},
                          {{"field", "max_ms"}, {"format", ".3f"}, {"title", "slowest forward, ms"}},
                          {{"field", "forwards"}, {"title", "timed forwards"}}}}}}},
          {{"mark", {{"type", "tick"}, {"color", "#111"}, {"thickness", 3}}},
           {"encoding",
            {{"y", {{"field", "variant"}, {"type", "nominal"}, {"sort", nullptr}}},
             {"x", {{"field", "floor_ms"}, {"type", "quantitative"}}},
             {"tooltip", {{{"field", "floor_ms"}, {"format", ".3f"}, {"title", "roofline floor, ms"}}}}}}},
          // Each median written past its slowest forward: where one variant's slow forward sets the axis, the
          // fast ones' bars are slivers, and their figure is what the reader wants.
          {{"mark", {{"type", "text"}, {"align", "left"}, {"dx", 4}, {"fontSize", 10}, {"color", "#333"}}},
           {"encoding",
            {{"y", {{"field", "variant"}, {"type", "nominal"}, {"sort", nullptr}}},
             {"x", {{"field", "max_ms"}, {"type", "quantitative"}}},
             {"text", {{"field", "ms"}, {"type", "quantitative"}, {"format", ",.3~f"}}}}}}}}};
    pg.chart("compare", spec,
             std::string("Time per forward for each variant (the median; the thin line spans its fastest to slowest "
                         "timed forward); the black tick is ") +
                 (bytes_only == 0 ? "its roofline floor."
                  : with_floor == 0
                      ? "its bytes divided by the bandwidth (this run's compare.json has no roofline floor)."
                      : "its roofline floor, or its bytes divided by the bandwidth for a row of compare.json "
                        "without one (floor ms: –)."));
  }
  if (!memory_bars.empty()) {
    // A log axis has no zero for the bars to start from: its domain is set from the figures, and shared by both
    // panels so that bar lengths compare across them.
    double lo_mb = INFINITY, hi_mb = 0;
    for (const json& b : memory_bars) {
      lo_mb = std::min(lo_mb, b["mb"].get<double>());
      hi_mb = std::max(hi_mb, b["mb"].get<double>());
    }
    json color = pg.variant_color();
    color["legend"] = nullptr;
    for (json& b : memory_bars) b["label"] = format_bytes_decimal(b["mb"].get<double>() * 1e6);
    const json y = {{"field", "variant"}, {"type", "nominal"}, {"sort", nullptr}, {"title", nullptr}};
    // Room right of the longest bar for its figure; on a panel half the page wide, 1-2-5 ticks over more than
    // two decades crowd into each other, so powers of ten alone.
    const json x = {{"field", "mb"}, {"type", "quantitative"},
                    {"scale", {{"type", "log"}, {"domain", {lo_mb / 2, hi_mb * 4}}}},
                    {"axis", log_axis(lo_mb / 2, hi_mb * 4, 2)},
                    {"title", "MB per forward (log scale)"}};
    json spec = {{"data", {{"values", memory_bars}}},
                 {"facet", {{"column", {{"field", "measure"}, {"type", "nominal"}, {"title", nullptr},
                                        {"sort", {"peak memory above the inputs", "bytes moved (cost model)"}}}}}},
                 {"spec",
                  {{"width", kWidth / 2 - 80},
                   {"layer",
                    {{{"mark", {{"type", "bar"}}},
                      {"encoding",
                       {{"y", y},
                        {"x", x},
                        {"x2", {{"datum", lo_mb / 2}}},  // each bar starts at the axis' left end
                        {"color", color},
                        {"tooltip", {{{"field", "variant"}}, {{"field", "measure"}},
                                     {{"field", "mb"}, {"format", ",.1f"}, {"title", "MB"}}}}}}},
                     // The figure at each bar's end: on a log axis lengths are not ratios (8.4 MB draws 2.4x
                     // as long as 1.07 MB, not 7.8x).
                     {{"mark", {{"type", "text"}, {"align", "left"}, {"dx", 3}, {"fontSize", 10}, {"color", "#333"}}},
                      {"encoding", {{"y", y}, {"x", x}, {"text", {{"field", "label"}}}}}}}}}}};
    pg.chart("compare-memory", spec,
             "What one forward allocates above its inputs and the bytes its ops move (decimal MB, log scale: the "
             "figures, not the bar lengths, give the ratios): the unfused variants hold and stream the N×N scores, "
             "the fused ones neither.");
  }
  pg.end_section();
}

// --- per variant: self time by op and bytes moved by op, stacked ---
// A host variant's time bar is the mean recorded forward (its ops' self times summed over the forwards, divided
// by their number); compare and profile report the median forward. A gap over this share of the median gets a
// note naming both (a forward that waited on the machine, or a cold first one, moves the mean only).
constexpr double kMeanMedianGap = 0.05;

// The note for one host variant whose bar adds up to `bar_ms`, or "" when its median is within kMeanMedianGap.
// The median is the summary's own (the run the bars are from), else compare.json's for it.
std::string mean_median_note(const VariantData& v, double bar_ms) {
  const json* run = v.summary ? member(*v.summary, {"run"}) : nullptr;
  const double in_summary = run ? num(*run, "ms_per_forward", NAN) : NAN;
  const double median = std::isfinite(in_summary) && in_summary > 0 ? in_summary : v.compare_ms;
  if (!(std::isfinite(median) && median > 0 && std::isfinite(bar_ms)) ||
      std::abs(bar_ms - median) <= kMeanMedianGap * median)
    return "";
  const std::string where = std::isfinite(v.compare_ms) && v.compare_ms == median
                                ? "the Comparison table's"
                                : fmt::format("{}'s", v.summary_file);
  std::string recorded;  // the forwards' own times, when the summary kept them
  if (const std::vector<double> ms = run ? forward_ms(*run) : std::vector<double>{}; !ms.empty()) {
    double sum = 0;
    for (double x : ms) sum += x;
    const auto [lo, hi] = std::minmax_element(ms.begin(), ms.end());
    if (ms.size() <= 10) {
      recorded = "; they took ";
      for (size_t i = 0; i < ms.size(); ++i) recorded += fmt::format("{}{:.3f}", i ? ", " : "", ms[i]);
      recorded += " ms";
    } else {
      recorded = fmt::format("; they took from {:.3f} to {:.3f} ms", *lo, *hi);
    }
    recorded += fmt::format(" (mean {:.3f})", sum / double(ms.size()));
  }
  return fmt::format("{}: its time bar adds up to {:.3f} ms, the mean over its {:.0f} recorded forwards of their "
                     "ops' self times (the profiler's own cost per zone taken off, as in the tables){}, and "
                     "{} {:.3f} ms per forward is their median: {} moves the mean, not the median.",
                     v.name, bar_ms, v.forwards, recorded, where, median,
                     bar_ms > median ? "a forward far slower than the others (one that waited on the machine, a "
                                       "cold first one)"
                                     : "a forward far faster than the others");
}

void section_ops(Page& pg, const std::vector<VariantData>& vs, const std::vector<std::string>& notes) {
  pg.h2("ops", "Where the time and the bytes go");
  json time_rows = json::array(), byte_rows = json::array();
  bool all_per_forward = !vs.empty();
  bool any_host = false, any_device = false;  // variants drawn in host time, in device time (Self CUDA)
  // Where a host bar (the mean recorded forward) and the median forward the tables show differ by more than
  // kMeanMedianGap of the median: one line naming both, so the reader sees why the bar is not the table's time.
  std::vector<std::string> mean_notes;
  for (const VariantData& v : vs) {
    if (!v.summary) continue;
    all_per_forward = all_per_forward && v.per_forward;
    const bool host = !v.summary->contains("device");
    (host ? any_host : any_device) = true;
    double bar_ms = 0;  // what this variant's time bar adds up to
    for (const OpRow& r : v.ops) {
      // The forward's own time between its ops (freeing the last op's buffers, allocating the next's) is part
      // of what the variant costs: naive's frees of its N×N scores take a tenth of its forward, where
      // sdpa-math's land in an op's self time. Its own slice, so every bar adds up to the forward: the mean
      // recorded one, since each slice is a sum over the recorded forwards divided by their number.
      if (host && is_annotation(r) && r.name == v.forward_zone && r.self_ns > 0) {
        time_rows.push_back({{"variant", v.name}, {"op", std::string(kBetweenOps)},
                             {"ms", r.self_ns * 1e-6 / v.forwards}, {"calls", r.calls / v.forwards}});
        bar_ms += r.self_ns * 1e-6 / v.forwards;
        continue;
      }
      if (is_annotation(r)) continue;
      if (r.self_ns > 0) {
        time_rows.push_back({{"variant", v.name}, {"op", r.name}, {"ms", r.self_ns * 1e-6 / v.forwards},
                             {"calls", r.calls / v.forwards}});
        bar_ms += r.self_ns * 1e-6 / v.forwards;
      }
      if (r.bytes > 0)
        byte_rows.push_back({{"variant", v.name}, {"op", r.name}, {"mb", r.bytes / 1e6 / v.forwards},
                             {"gflop", r.flops / 1e9 / v.forwards}});
    }
    if (host && v.per_forward && bar_ms > 0)
      if (std::string n = mean_median_note(v, bar_ms); !n.empty()) mean_notes.push_back(std::move(n));
  }
  for (const auto& n : notes) pg.note(n);
  if (time_rows.empty() && byte_rows.empty()) {
    pg.note("No <variant>.summary.json with per-op rows in this directory: run `attnprof profile VARIANT` or "
            "`attnprof compare` with --out pointing here.");
    pg.end_section();
    return;
  }
  const std::string unit = all_per_forward ? "per forward" : "over all profiled steps";
  // One colour per op in both charts: the domain is every op of either, in order of appearance.
  json ops = json::array();
  std::set<std::string> seen_ops;
  for (const json* rows : {&time_rows, &byte_rows})
    for (const json& r : *rows)
      if (seen_ops.insert(r["op"].get<std::string>()).second) ops.push_back(r["op"]);
  const json op_colors = pg.op_color("op", "op", ops, {{"labelLimit", 320}, {"columns", 1}});
  auto stacked = [&](const json& rows, const std::string& field, const std::string& title, const json& tooltip) {
    return json{{"data", {{"values", rows}}},
                {"width", kWidth - 80},  // room for a legend of 40-character names beside it in the page's box
                {"mark", {{"type", "bar"}}},
                {"encoding",
                 {{"y", {{"field", "variant"}, {"type", "nominal"}, {"sort", nullptr}, {"title", nullptr}}},
                  {"x", {{"field", field}, {"type", "quantitative"}, {"stack", "zero"}, {"title", title}}},
                  {"color", op_colors},
                  {"order", {{"field", field}, {"type", "quantitative"}, {"sort", "descending"}}},
                  {"tooltip", tooltip}}}};
  };
  if (!time_rows.empty()) {
    // Each slice is an op's self time summed over the recorded forwards and divided by their number: a mean.
    // The tables above give the median forward; the caption says which is which, and mean_notes where they part.
    std::string caption =
        all_per_forward ? "Self time by op, the mean per recorded forward (each op's self time summed over the "
                          "profiled forwards, divided by their number): what dominates each variant."
                        : "Self time by op: what dominates each variant. A variant whose summary has no per-forward "
                          "annotation is drawn over all its profiled steps, and so is the axis.";
    if (any_host)
      caption += std::string(" The forward annotation's own time (attn_fwd's, sdpa_fwd's), what ran between its ops "
                             "(freeing one op's buffers, allocating the next's), is a slice of its own, 'between "
                             "ops', so each bar adds up to ") +
                 (all_per_forward ? "the mean recorded forward" : "the time profiled") +
                 "; steps (ProfilerStep*) are left out.";
    if (any_device)
      caption += " A GPU variant's bar stacks its kernels', copies' and fills' Self CUDA time (the host ops that "
                 "launched them keep none); the device's idle time between them is in no slice, so the bar can be "
                 "shorter than the forward's CUDA-event time.";
    if (any_host && all_per_forward)
      caption += fmt::format(" The ms per forward that compare and profile report (the Comparison table's) is the "
                             "median recorded forward, not the mean: a slow forward lengthens a bar but not the "
                             "median (a note names both figures where they differ by more than {:.0f} %).",
                             100.0 * kMeanMedianGap);
    pg.chart("time-by-op",
             stacked(time_rows, "ms",
                     all_per_forward ? "self time per forward, mean over the recorded forwards (ms)"
                                     : "self time " + unit + " (ms)",
                     {{{"field", "variant"}}, {{"field", "op"}}, {{"field", "ms"}, {"format", ".3f"}},
                      {{"field", "calls"}, {"format", ".0f"}}}),
             caption);
    for (const std::string& n : mean_notes) pg.note(n);
  }
  if (!byte_rows.empty())
    pg.chart("bytes-by-op",
             stacked(byte_rows, "mb", "bytes moved " + unit + " (MB, cost model)",
                     {{{"field", "variant"}}, {{"field", "op"}}, {{"field", "mb"}, {"format", ".1f"}, {"title", "MB moved"}},
                      {{"field", "gflop"}, {"format", ".3f"}, {"title", "GFLOP"}}}),
             "Bytes each op reads and writes by the cost model: the unfused variants move the N×N score "
             "matrix through memory once per op, the fused ones keep it in cache.");
  // Inside the fused kernels: the steps the flash kernel times on every thread (summaries' op_phases), as the
  // mean thread's time per forward, so a bar compares with the fused op's slice above.
  json step_rows = json::array(), steps = json::array();
  std::map<std::string, double> step_index;  // each step's place in run order, where its slice stacks
  for (const VariantData& v : vs) {
    const json* ph = v.summary ? member(*v.summary, {"op_phases"}) : nullptr;
    if (!ph || !ph->is_array()) continue;
    for (const json& op : *ph) {
      const double threads = num(op, "threads", 0);
      const json* st = member(op, {"steps"});
      if (!(threads >= 1) || !st || !st->is_array()) continue;
      for (const json& x : *st) {
        const double ns = num(x, "thread_ns", NAN), flops = num(x, "flops", 0);
        const std::string name = str(x, "name", "");
        if (!(ns >= 0) || name.empty()) continue;
        if (step_index.try_emplace(name, double(step_index.size())).second) steps.push_back(name);
        json row = {{"bar", v.name + " · " + str(op, "name", "?")},
                    {"step", name},
                    {"ms", ns * 1e-6 / threads / v.forwards},
                    {"share", 0.0}};
        // Written out: a step that computes nothing has no rate, which a number format would print as NaN.
        row["gflops_per_thread"] = format_thread_gflops(flops, ns);
        step_rows.push_back(std::move(row));
      }
    }
  }
  if (!step_rows.empty()) {
    std::map<std::string, double> bar_total;
    for (const json& r : step_rows) bar_total[r["bar"].get<std::string>()] += r["ms"].get<double>();
    for (json& r : step_rows) {
      const double t = bar_total[r["bar"].get<std::string>()];
      r["share"] = t > 0 ? 100.0 * r["ms"].get<double>() / t : 0.0;
      r["step_index"] = step_index[r["step"].get<std::string>()];
    }
    json spec = {{"data", {{"values", step_rows}}},
                 {"width", kWidth},
                 {"mark", {{"type", "bar"}}},
                 {"encoding",
                  {{"y", {{"field", "bar"}, {"type", "nominal"}, {"sort", nullptr}, {"title", nullptr}}},
                   {"x", {{"field", "ms"}, {"type", "quantitative"}, {"stack", "zero"},
                          {"title", std::string("each step's time ") +
                                        (all_per_forward ? "per forward" : "over all profiled steps") +
                                        ", the mean thread's (ms)"}}},
                   {"color", pg.op_color("step", "step", steps, {{"labelLimit", 320}, {"columns", 1}})},
                   {"order", {{"field", "step_index"}, {"type", "quantitative"}}},
                   {"tooltip",
                    {{{"field", "bar"}, {"title", "variant · op"}}, {{"field", "step"}},
                     {{"field", "ms"}, {"format", ".3f"}}, {{"field", "share"}, {"format", ".1f"}, {"title", "% of the op"}},
                     {{"field", "gflops_per_thread"}, {"title", "GFLOP/s per thread"}}}}}}};
    pg.chart("steps-inside",
             spec,
             "Inside the fused kernel: the flash kernel's one zone split by the steps it times on every thread (load "
             "Q, K, V and hand out the tasks; Q·Kᵀ; the online softmax; P·V; store O), each step's thread time "
             "(each thread's clock from step to step, time it waited for a CPU included) over the threads: the mean "
             "thread's. Where the unfused variants spend a pass over memory per op, here "
             "everything but the two products is what fusion did not remove. The tooltip gives the products' "
             "GFLOP/s per thread.");
  }
  // And tile by tile: the flash kernel's tasks (summaries' op_items), each group's median time against the K/V
  // blocks its tiles visited, with the line through the medians and the slowest tile in the notes.
  json tile_rows = json::array();
  std::set<std::string> tiled;
  std::vector<std::string> tile_notes;
  std::string inner_title = "K/V blocks";
  for (const VariantData& v : vs) {
    const json* items = v.summary ? member(*v.summary, {"op_items"}) : nullptr;
    if (!items || !items->is_array()) continue;
    for (const json& op : *items) {
      // check_summary held every entry together before the summary was drawn (report::op_items_from_summary):
      // one that is not has left the whole summary out, with a note naming its field.
      const analysis::OpItems o = op_items_from_summary(op, v.summary_file);
      for (const analysis::OpItems::Group& g : o.groups) {
        tile_rows.push_back({{"variant", v.name},
                             {"op", o.name},
                             {"inner", g.inner},
                             {"count", g.count},
                             {"median_us", g.median_ns * 1e-3},
                             {"mean_us", g.mean_ns * 1e-3},
                             {"max_us", g.max_ns * 1e-3},
                             {"gflops_per_thread", format_thread_gflops(g.flops, g.thread_ns())},
                             // The line's time for a tile of the group's FLOPs: the fit the tasks line gives.
                             {"fit_us", o.fitted ? json((o.fixed_ns + g.flops_each() / o.marginal_gflops) * 1e-3)
                                                 : json()}});
      }
      if (!o.inner.empty()) inner_title = o.inner;
      tiled.insert(v.name);
      if (const std::string line = item_line(v.name, o); !line.empty()) tile_notes.push_back(line);
    }
  }
  if (!tile_rows.empty()) {
    const json enc = {{"x", {{"field", "inner"},
                             {"type", "quantitative"},
                             {"scale", {{"zero", true}}},
                             {"axis", {{"format", "d"}, {"tickMinStep", 1}}},
                             {"title", inner_title + " each tile visited"}}},
                      {"y", {{"field", "median_us"}, {"type", "quantitative"}, {"title", "median time per tile (µs)"}}},
                      {"color", pg.variant_color(tiled)},
                      {"detail", {{"field", "op"}}},
                      {"tooltip",
                       {{{"field", "variant"}}, {{"field", "op"}}, {{"field", "inner"}, {"title", inner_title}},
                        {{"field", "count"}, {"title", "tiles"}}, {{"field", "median_us"}, {"format", ".1f"}},
                        {{"field", "mean_us"}, {"format", ".1f"}}, {{"field", "max_us"}, {"format", ".1f"}},
                        {{"field", "gflops_per_thread"}, {"title", "GFLOP/s per thread"}}}}};
    // Each variant's fitted line, dashed, under its medians: where a group sits off it (a last Q block that is
    // not whole, a group slowed by the machine), the chart shows it.
    json fit_enc = enc;
    fit_enc["y"]["field"] = "fit_us";
    fit_enc["tooltip"] = {{{"field", "variant"}}, {{"field", "inner"}, {"title", inner_title}},
                          {{"field", "fit_us"}, {"format", ".1f"}, {"title", "fitted µs"}}};
    json spec = {{"data", {{"values", tile_rows}}},
                 {"width", kWidth},
                 {"layer",
                  {{{"transform", {{{"filter", "isValid(datum.fit_us)"}}}},
                    {"mark", {{"type", "line"}, {"strokeDash", {5, 4}}, {"strokeWidth", 1.5}, {"opacity", 0.7}}},
                    {"encoding", fit_enc}},
                   {{"mark", {{"type", "line"}}}, {"encoding", enc}},
                   {{"mark", {{"type", "point"}, {"filled", true}, {"size", 60}}}, {"encoding", enc}}}}};
    pg.chart("tiles-inside",
             spec,
             "Inside the fused kernel, tile by tile: each (batch, head, Q block) task a thread took, the median time "
             "of the tiles that visited as many K/V blocks (a tile's time runs from its thread's step before it to "
             "its last step). Under a causal mask a tile visits only the K/V blocks left of the diagonal and the "
             "diagonal's own, so its time climbs with its Q block: the triangle of work the kernel does, beside "
             "the one it skips (a last Q block that is not whole visits its blocks with fewer rows, and sits below "
             "the line). The dashed line is each variant's fitted cost per tile, a fixed cost plus its FLOPs at the "
             "marginal rate (the tasks line below), at each group's FLOPs; a point off it is a group the line does "
             "not explain. The trace holds every tile as a work_item slice; the tooltip gives the mean, the slowest "
             "and the rate.");
    for (const std::string& n : tile_notes) pg.note(n);
  }
  pg.end_section();
}

// --- flame graphs: every thread's time by stack, from the variants' folded stacks ---
// An icicle per variant: the threads at the top, each frame under the frame that encloses it, its width its
// time (self and children's) per forward; siblings in name order, as flamegraph.pl lays them out.
void section_flame(Page& pg, const std::vector<VariantData>& vs) {
  constexpr double kMinShare = 0.002;  // frames under 0.2 % of the variant's time are left out
  constexpr int kMaxDepth = html_run::kMaxFlameDepth;
  struct Node {
    std::string name;
    double ns = 0;
    std::map<std::string, size_t> kids;  // by name: the layout's order
  };
  bool any = false;
  for (const VariantData& v : vs) {
    if (v.stacks.empty()) continue;
    std::vector<Node> nodes(1);  // 0: the root, above the threads
    for (const auto& [frames, ns] : v.stacks) {
      if (!(ns > 0)) continue;
      size_t at = 0;
      nodes[0].ns += ns;
      for (const std::string& f : frames) {
        auto it = nodes[at].kids.find(f);
        if (it == nodes[at].kids.end()) {
          it = nodes[at].kids.emplace(f, nodes.size()).first;
          nodes.push_back(Node{f, 0.0, {}});
        }
        at = it->second;
        nodes[at].ns += ns;
      }
    }
    const double total = nodes[0].ns;
    if (!(total > 0)) continue;
    const double scale = 1e-6 / v.forwards;  // ns summed over the recorded forwards -> ms per forward
    json rows = json::array();
    int depth_seen = 0;
    size_t left_out = 0;
    // Depth first, each child starting where the previous sibling ended.
    std::function<void(size_t, double, int)> place = [&](size_t i, double x0, int depth) {
      double x = x0;
      for (const auto& [name, k] : nodes[i].kids) {
        const Node& c = nodes[k];
        if (c.ns < kMinShare * total || depth >= kMaxDepth) {
          ++left_out;
          x += c.ns;
          continue;
        }
        const double width_px = c.ns / total * kWidth;
        const size_t chars = size_t(std::max(0.0, width_px / 6.5 - 1));
        const std::string label = chars >= 4 ? detail::fit_width(name, chars) : "";
        rows.push_back({{"name", name},
                        {"depth", depth},
                        {"x0", x * scale},
                        {"x1", (x + c.ns) * scale},
                        {"ms", c.ns * scale},
                        {"share", 100.0 * c.ns / total},
                        {"label", label}});
        depth_seen = std::max(depth_seen, depth + 1);
        place(k, x, depth + 1);
        x += c.ns;
      }
    };
    place(0, 0.0, 0);
    if (rows.empty()) continue;
    if (!any) {
      pg.h2("flame", "Every thread's time by stack");
      pg.p("A flame graph (an icicle: callers above) per variant from its folded stacks (<variant>.stacks.txt, the "
           "format of torch's export_stacks): the threads at the top, each op under the annotation or op it ran "
           "in, its width its time per forward (its own and what ran inside it), the flash kernel's steps under "
           "flash_attention_fwd. The OpenMP workers' shares of each parallel op sit under their thread, so the width "
           "is every thread's time, not the wall: every thread of attnprof's own, that is; the threads oneDNN and "
           "OpenBLAS run inside matmul are their libraries' and not seen. Frames of under 0.2 % of a variant's time "
           "are left out.");
      any = true;
    }
    json spec = {
        {"data", {{"values", rows}}},
        {"width", kWidth},
        {"height", 22 * depth_seen},
        {"encoding",
         {{"y", {{"field", "depth"}, {"type", "ordinal"}, {"axis", nullptr}}},
          {"x", {{"field", "x0"},
                 {"type", "quantitative"},
                 {"title", v.per_forward ? "ms per forward, every thread's (mean of the recorded forwards)"
                                         : "ms over the recorded steps, every thread's"}}},
          // On both layers: a frame's label covers most of a narrow frame, and must not hide its name.
          {"tooltip",
           {{{"field", "name"}, {"title", "frame"}},
            {{"field", "ms"}, {"format", ".3f"}, {"title", v.per_forward ? "ms per forward" : "ms"}},
            {{"field", "share"}, {"format", ".1f"}, {"title", "% of the variant's time"}}}}}},
        {"layer",
         {{{"mark", {{"type", "rect"}, {"stroke", "#fff"}, {"strokeWidth", 0.5}}},
           {"encoding", {{"x2", {{"field", "x1"}}}}}},
          {{"mark", {{"type", "text"}, {"align", "left"}, {"dx", 3}, {"fontSize", 10}}},
           {"encoding", {{"text", {{"field", "label"}}}}}}}}};
    // Every frame gets a colour of its own name: the domain grows with the names this chart draws.
    json names = json::array();
    std::set<std::string> seen;
    for (const json& r : rows)
      if (seen.insert(r["name"].get<std::string>()).second) names.push_back(r["name"]);
    spec["layer"][0]["encoding"]["color"] = pg.op_color("name", "frame", names, json::object());
    spec["layer"][0]["encoding"]["color"]["legend"] = nullptr;  // the labels and the tooltip name each frame
    pg.raw("<h3>" + html_escape(v.name) + "</h3>\n");
    pg.chart("flame", spec,
             fmt::format("{}: {} {} over every thread{}.", v.name, format_time_ns(total * 1e6 * scale),
                         v.per_forward ? "per forward" : "over the recorded steps (its summary names no forward)",
                         left_out > 0 ? fmt::format(" ({} frame{} left out: under 0.2 % of the time, or more than {} "
                                                    "deep)",
                                                    left_out, left_out == 1 ? "" : "s", kMaxDepth)
                                      : ""));
  }
  if (any) pg.end_section();
}

// --- what each step away from the baseline changes (report::diff_summaries, as `attnprof diff`) ---
void section_changes(Page& pg, const std::vector<VariantData>& vs) {
  pg.h2("changes", "What each step removes");
  const VariantData* base = nullptr;
  for (const VariantData& v : vs)
    if (v.summary && (!base || v.name == "naive")) base = &v;  // naive, else the first variant
  json rows = json::array();
  std::string table = "<table class=\"data\"><thead><tr><th>step</th><th>ms per forward (median)</th><th>removed</th>"
                      "<th>turned in place</th><th>turned out of place</th><th>added</th></tr></thead><tbody>\n";
  int steps = 0;
  bool device = false;  // GPU runs: the times are Self CUDA
  bool faults = false;  // some step's two summaries recorded page faults (--counters)
  bool memory = true;   // every step's two summaries recorded memory (profile_memory)
  // Facets in the run's variant order, by a numeric field: Vega-Lite would sort names alphabetically, and a
  // sort list of names is compiled into a Vega expression, which a hostile name can break.
  for (const VariantData& v : vs) {
    if (!base || !v.summary || &v == base) continue;
    ProfileDiff d;
    try {
      d = diff_summaries(*base->summary, *v.summary, base->name, v.name);
    } catch (const Error& e) {
      pg.note(base->name + " → " + v.name + ": " + e.what());
      continue;
    }
    const std::string step = base->name + " → " + v.name;
    device = device || d.device;
    faults = faults || d.faults;
    memory = memory && d.memory;
    std::vector<std::string> gone, inplace, outofplace, came;
    for (const DiffRow& r : d.rows) {
      if (r.base_ns <= 0 && r.new_ns <= 0) continue;  // views: no time on either side
      const std::string op = r.label();
      rows.push_back({{"step", step}, {"step_index", steps}, {"op", op}, {"change", r.change},
                      {"delta_ms", (r.new_ns - r.base_ns) * 1e-6},
                      {"base_ms", r.base_ns * 1e-6}, {"new_ms", r.new_ns * 1e-6},
                      {"base_mem_mb", d.memory ? json(r.base_mem / 1e6) : json()},
                      {"new_mem_mb", d.memory ? json(r.new_mem / 1e6) : json()}});
      if (d.faults) {
        rows.back()["base_faults"] = r.base_faults;
        rows.back()["new_faults"] = r.new_faults;
      }
      if (r.change == "removed") gone.push_back(r.base_name);
      if (r.change == "in place") inplace.push_back(op);
      if (r.change == "out of place") outofplace.push_back(op);
      if (r.change == "added") came.push_back(r.new_name);
    }
    auto join = [](const std::vector<std::string>& xs) {
      std::string o;
      for (const auto& x : xs) o += (o.empty() ? "" : ", ") + x;
      return o.empty() ? std::string("—") : o;
    };
    const std::string ms = d.base.ms_per_forward > 0 && d.next.ms_per_forward > 0
                               ? fmt::format("{:.3f} → {:.3f}", d.base.ms_per_forward, d.next.ms_per_forward)
                               : std::string("—");
    table += "<tr>" + td(step) + td(ms, true) + td(join(gone)) + td(join(inplace)) + td(join(outofplace)) +
             td(join(came)) + "</tr>\n";
    ++steps;
  }
  if (steps == 0 || rows.empty()) {
    // Say what is here: one summary has nothing to be set against; none is a directory of other results; two or
    // more whose every pair failed have their reasons in the notes above.
    const auto summaries = std::count_if(vs.begin(), vs.end(), [](const VariantData& v) { return v.summary.has_value(); });
    pg.note(summaries >= 2 ? "No step could be drawn: every pair of summaries here failed to diff (the notes above say "
                             "why)."
            : summaries == 1 && base
                ? fmt::format("Needs a second <variant>.summary.json in this directory to set {} against (`attnprof "
                              "compare`, or `attnprof profile {}` with the same --out): each variant is set "
                              "against naive op by op, as `attnprof diff` does.",
                              base->name, base->name == "naive" ? "flash" : "naive")
                : "Needs two or more <variant>.summary.json in this directory (run `attnprof compare`): each variant "
                  "is set against naive op by op, as `attnprof diff` does.");
    pg.end_section();
    return;
  }
  // The blog's baseline is naive: where this page has no summary of it, say what stands in, and why where a
  // note above does (a naive summary it could not read).
  if (base->name != "naive") {
    const bool named = std::any_of(vs.begin(), vs.end(), [](const VariantData& v) { return v.name == "naive"; });
    pg.note(named ? fmt::format("No summary of naive is on this page (a note above says why): each variant is set "
                                "against {} instead.",
                                base->name)
                  : fmt::format("This directory holds no naive.summary.json (`attnprof profile naive` with the same "
                                "--out writes one): each variant is set against {} instead.",
                                base->name));
  }
  json tooltip = {{{"field", "step"}}, {{"field", "op"}}, {{"field", "change"}},
                  {{"field", "base_ms"}, {"format", ".3f"}, {"title", "base ms"}},
                  {{"field", "new_ms"}, {"format", ".3f"}, {"title", "new ms"}},
                  {{"field", "delta_ms"}, {"format", "+.3f"}, {"title", "change ms"}}};
  if (memory) {  // not where a side was profiled without memory: a null would print as 0.0
    tooltip.push_back({{"field", "base_mem_mb"}, {"format", ".1f"}, {"title", "base MB allocated"}});
    tooltip.push_back({{"field", "new_mem_mb"}, {"format", ".1f"}, {"title", "new MB allocated"}});
  }
  if (faults) {  // the op's own page faults per forward, every thread's: what touching fresh buffers cost
    tooltip.push_back({{"field", "base_faults"}, {"format", ".0f"}, {"title", "base page faults"}});
    tooltip.push_back({{"field", "new_faults"}, {"format", ".0f"}, {"title", "new page faults"}});
  }
  // Purples for what a step removes or turns in place, a brown, a grey, and near-black for what it adds: none a
  // variant's tableau10 hue, so that no bar reads as a variant (flash's own kernel, added, had been the red of
  // sdpa-math).
  const json change_scale = {{"domain", {"removed", "in place", "out of place", "changed", "same", "added"}},
                             {"range", {"#3f007d", "#807dba", "#c2a5cf", "#8c510a", "#bdbdbd", "#252525"}}};
  // Each panel is titled with its net change, the sum of its bars; the legend lists the changes drawn.
  std::map<std::string, double> net_ms;
  std::set<std::string> changes_drawn;
  for (const json& r : rows) {
    net_ms[r["step"].get<std::string>()] += r["delta_ms"].get<double>();
    changes_drawn.insert(r["change"].get<std::string>());
  }
  for (json& r : rows)
    r["panel"] = fmt::format("{}: {:+.3f} ms per forward in all (mean of the forwards)", r["step"].get<std::string>(),
                             net_ms[r["step"].get<std::string>()]);
  json legend_values = json::array();
  for (const json& c : change_scale["domain"])
    if (changes_drawn.count(c.get<std::string>())) legend_values.push_back(c);
  // Ticks with zero among them, and zero's gridline dark: the sign is what the chart says.
  double lo_ms = 0, hi_ms = 0;
  for (const json& r : rows) {
    lo_ms = std::min(lo_ms, r["delta_ms"].get<double>());
    hi_ms = std::max(hi_ms, r["delta_ms"].get<double>());
  }
  json x_axis = {{"gridColor", {{"condition", {{"test", "datum.value === 0"}, {"value", "#333"}}}, {"value", "#ddd"}}},
                 {"gridWidth", {{"condition", {{"test", "datum.value === 0"}, {"value", 1.5}}}, {"value", 1}}}};
  if (const std::vector<double> ticks = detail::zero_ticks(lo_ms, hi_ms); !ticks.empty()) x_axis["values"] = ticks;
  json spec = {
      {"data", {{"values", rows}}},
      {"facet", {{"row", {{"field", "panel"}, {"type", "nominal"}, {"sort", {{"field", "step_index"}, {"op", "min"}}},
                          {"title", nullptr},
                          // Each panel's title above it, not beside it: beside, the long titles pushed the
                          // legend and the axis's right end out of the page's box.
                          {"header", {{"labelAngle", 0}, {"labelOrient", "top"}, {"labelAnchor", "start"},
                                      {"labelFontWeight", "bold"}}}}}}},
      {"spec",
       {{"width", kWidth - 220},
        {"mark", {{"type", "bar"}}},
        {"encoding",
         {{"y", {{"field", "op"}, {"type", "nominal"}, {"sort", {{"field", "delta_ms"}}}, {"title", nullptr},
                 {"axis", {{"labelLimit", 360}, {"labelExpr", kMiddleEllipsis}}}}},
          {"x", {{"field", "delta_ms"}, {"type", "quantitative"}, {"axis", x_axis},
                 {"title", std::string(device ? "change in Self CUDA time" : "change in self time") +
                               " per forward (ms; negative = saved)"}}},
          {"color", {{"field", "change"}, {"type", "nominal"}, {"title", "change"}, {"scale", change_scale},
                     {"legend", {{"values", legend_values}}}}},
          {"tooltip", tooltip}}}}},
      {"resolve", {{"scale", {{"y", "independent"}}}}}};
  pg.chart("changes", spec,
           "Each variant against " + base->name +
               ", op by op and per forward (attnprof diff): ops removed, turned in place or added, and how "
               "much self time each one saved or cost" +
               (faults ? "; the tooltips add each op's own page faults (the runs were made with --counters)." : ".") +
               " same: the same calls and bytes moved on both sides (its time may still differ); changed: the same "
               "name doing other work. The bars and each panel's total are per-forward means (each op's self time "
               "summed over the recorded forwards, over their number); the table's ms per forward are medians, as "
               "compare prints them, so the two differ where a forward was slow.");
  pg.raw(table + "</tbody></table>\n");
  pg.end_section();
}

// --- the scaling sweep, log-log, with the fitted power laws ---
void section_sweep(Page& pg, const Input& in, const std::optional<json>& compare) {
  pg.h2("sweep", "Scaling with sequence length");
  if (!in.doc) {
    pg.note(in.note + ": run `attnprof sweep --out DIR` to fill this section.");
    pg.end_section();
    return;
  }
  const json& s = *in.doc;
  // A sweep is its own study, drawn whatever its problem; the page says which, and says so when it is not
  // the comparison's (an earlier run in the same directory).
  if (const std::string meta = run_meta(s); !meta.empty()) pg.p("Every point: " + meta + "· N = the point's length");
  // A sweep stopped by Ctrl-C holds the points that finished.
  if (const json* cut = member(s, {"interrupted"}); cut && cut->is_object()) {
    const double done = num(*cut, "points", NAN), planned = num(*cut, "planned", NAN);
    pg.note(std::isfinite(done) && std::isfinite(planned) && done >= 0 && planned >= done
                ? fmt::format("This sweep was interrupted (Ctrl-C) after {} of its {} points: the {} below are those that "
                              "finished.", fmt_num(done, 0), fmt_num(planned, 0), fmt_num(done, 0))
                : std::string("This sweep was interrupted (Ctrl-C): the points below are those that finished."));
  }
  // sweep --peer torch: its rows are PyTorch's, timed in its own process, as the sweep's Peer line says.
  if (const json* peer = member(s, {"peer"}); peer && peer->is_object())
    pg.note(fmt::format("torch-naive and torch-sdpa are PyTorch {} ('{}', {} thread{}) on each point's inputs: each "
                        "forward timed by time.perf_counter in its own process, not profiled, and the first and last "
                        "head of its output checked as the variants'. Their peak memory is not measured (torch's CPU "
                        "allocator keeps no count): no memory points, and time fits only.",
                        str(*peer, "torch_version", "?"), str(*peer, "python", "?"), fmt_num(num(*peer, "threads", 0), 0),
                        num(*peer, "threads", 0) == 1 ? "" : "s"));
  if (compare)
    if (const std::string mine = problem_but_n(s), theirs = problem_but_n(*compare);
        !mine.empty() && !theirs.empty() && mine != theirs)
      pg.note(fmt::format("This sweep is of {} at every N, not of the comparison's {}: sweep.json is from another "
                          "run in this directory.", mine, theirs));
  std::map<std::string, std::pair<double, double>> range;  // variant -> (min seq, max seq) of measured points
  json time_pts = json::array(), mem_pts = json::array(), rate_pts = json::array();
  // Rates as the sweep printed them: GFLOP/s on the CPU, TFLOP/s on a GPU.
  const bool gpu = str(s, "device") == "cuda";
  const double rate_scale = gpu ? 1e-3 : 1.0;
  const char* rate_unit = gpu ? "TFLOP/s" : "GFLOP/s";
  std::vector<std::string> skipped, over_peak;
  std::vector<Timings> timings;
  if (const json* pts = member(s, {"points"}); pts && pts->is_array()) {
    for (const json& p : *pts) {
      const std::string v = str(p, "variant", "?");
      const double seq = num(p, "seq", num(p, "n", NAN));
      const std::string status = str(p, "status", "ok");
      if (status != "ok") {
        skipped.push_back(fmt::format("{} at N={}: {}{}", v, fmt_num(seq, 0), status,
                                      str(p, "note").empty() ? "" : " (" + str(p, "note") + ")"));
        continue;
      }
      // A point sweep never writes (no whole length above 0, or a time or a peak it cannot have) is named, not
      // dropped without a word or drawn at a length no run had.
      const double ms_at = num(p, "ms", NAN), peak_at = num(p, "peak_bytes", NAN);
      const char* bad = !std::isfinite(seq) || seq <= 0 || seq != std::floor(seq) ? "no sequence length"
                        : !(ms_at > 0)                                             ? "no time"
                        : peak_at < 0                                              ? "a negative peak memory"
                                                                                   : nullptr;
      if (bad) {
        skipped.push_back(fmt::format("{} at N={}: left out, sweep.json gives it {} (attnprof never writes such a "
                                      "point)",
                                      v, fmt_num(seq, seq == std::floor(seq) ? 0 : 3), bad));
        continue;
      }
      const std::optional<analysis::CpuSharing> sharing = cpu_sharing_of(p);
      // Busy or Noisy: a faded dot, so a fit through such points reads as what it is (the text says which).
      const bool disturbed = report::is_disturbed(forward_ms(p), sharing);
      timings.push_back({fmt::format("{} at N={}", v, fmt_num(seq, 0)), forward_ms(p), sharing});
      if (num(p, "pct_peak", 0.0) > 100) over_peak.push_back(fmt::format("{} at N={}", v, fmt_num(seq, 0)));
      auto [it, fresh] = range.try_emplace(v, seq, seq);
      it->second.first = std::min(it->second.first, seq);
      it->second.second = std::max(it->second.second, seq);
      time_pts.push_back({{"variant", v}, {"seq", seq}, {"y", ms_at}, {"kind", "measured"}, {"disturbed", disturbed}});
      if (double g = num(p, "gflops", NAN); std::isfinite(g) && g > 0)
        rate_pts.push_back(
            {{"variant", v}, {"seq", seq}, {"y", g * rate_scale}, {"kind", "measured"}, {"disturbed", disturbed}});
      if (peak_at > 0) mem_pts.push_back({{"variant", v}, {"seq", seq}, {"y", peak_at * 1e-6}, {"kind", "measured"}});
    }
  }
  json time_fit = json::array(), mem_fit = json::array();
  std::string fit_table = "<table class=\"data\"><thead><tr><th>variant</th><th>metric</th><th>exponent</th>"
                          "<th>± std. error</th><th>coefficient a (ms, or bytes for memory)</th><th>R²</th>"
                          "<th>points</th><th>fit</th></tr></thead><tbody>\n";
  bool any_fit = false, any_weak = false, any_implausible = false, any_disturbed = false, any_fixed = false;
  if (const json* fits = member(s, {"fits"}); fits && fits->is_array()) {
    for (const json& f : *fits) {
      const std::string v = str(f, "variant", "?");
      const std::string metric = str(f, "metric", "time");
      const double b = num(f, "exponent", NAN), a = num(f, "coefficient", NAN);
      // A fit sweep never writes (no finite exponent, no positive coefficient) is named, not printed as "nan".
      if (const char* bad = !std::isfinite(b) ? "no exponent" : !(std::isfinite(a) && a > 0) ? "no positive coefficient"
                                                                                            : nullptr) {
        skipped.push_back(fmt::format("the {} fit of {}: left out, sweep.json gives it {} (attnprof never writes "
                                      "such a fit)",
                                      metric, v, bad));
        continue;
      }
      // Two points fix a line exactly: no error estimate, and R² is 1 by construction, so neither is shown.
      const bool two = num(f, "points", NAN) == 2;
      // A weak fit's exponent is no scaling law: its row and its chart label say so, as sweep prints it.
      const bool weak = flag(f, "weak");
      any_weak = any_weak || weak;
      // A time exponent no attention forward has (outside 0..3): the timings were disturbed.
      const bool implausible = flag(f, "implausible");
      any_implausible = any_implausible || implausible;
      // A time exponent under 1: per-forward fixed costs still outweigh the N² work (absent in older files).
      const bool fixed = flag(f, "fixed_costs");
      any_fixed = any_fixed || fixed;
      // Half its points or more Busy or Noisy (sweep.json's disturbed_points; absent in files from before it).
      const double dist = num(f, "disturbed_points", 0), npts = num(f, "points", 0);
      const bool disturbed = fit_disturbed(dist, npts);
      any_disturbed = any_disturbed || disturbed;
      std::string verdict = weak ? "weak: no power law" : implausible || disturbed || fixed ? "" : "a power law";
      if (implausible) verdict += std::string(verdict.empty() ? "" : "; ") + "implausible: disturbed timings";
      if (fixed) verdict += std::string(verdict.empty() ? "" : "; ") + "fixed costs: not yet N²";
      if (disturbed)
        verdict += std::string(verdict.empty() ? "" : "; ") +
                   fmt::format("disturbed: {:.0f} of {:.0f} points Busy or Noisy", dist, npts);
      fit_table += "<tr>" + td(v) + td(metric) + td(format_exponent(b), true) +
                   td(two ? "–" : fmt_num(num(f, "stderr", NAN), 3), true) + td(fmt_sci(a), true) +
                   td(two ? "–" : fmt_num(num(f, "r2", NAN), 4), true) + td(fmt_num(num(f, "points", NAN), 0), true) +
                   td(verdict) + "</tr>\n";
      any_fit = true;
      auto r = range.find(v);
      if (r == range.end()) continue;
      const bool mem = metric == "memory";
      // The coefficient is in the unit of the fitted metric: ms for time, bytes for memory (plotted in decimal
      // MB, as sweep prints its Peak mem and the Comparison its peak memory).
      const double scale = mem ? 1e-6 : 1.0;
      const std::string label =
          fmt::format("N^{}{}", format_exponent(b, 2),
                      implausible ? " (implausible)" : weak ? " (weak fit)" : disturbed ? " (disturbed)"
                                                         : fixed ? " (fixed costs)" : "");
      json& dst = mem ? mem_fit : time_fit;
      for (const bool end : {false, true}) {
        const double x = end ? r->second.second : r->second.first;
        dst.push_back({{"variant", v}, {"seq", x}, {"y", a * std::pow(x, b) * scale}, {"label", label},
                       {"exponent", b}, {"end", end}});
      }
    }
  }
  fit_table += "</tbody></table>\n";
  // Each exponent is written at its line's right end; ends closer than a factor 1.7 (about a label's height on
  // these log axes) are moved apart, the higher one up, so that the labels do not print over each other.
  auto place_labels = [](json& fit) {
    std::vector<json*> ends;
    for (json& p : fit)
      if (p["end"].get<bool>()) ends.push_back(&p);
    std::sort(ends.begin(), ends.end(), [](const json* a, const json* b) { return (*a)["y"] > (*b)["y"]; });
    double below = INFINITY;  // the highest a label may sit: a factor 1.5 under the one above it
    for (json* p : ends) {
      const double y = std::min((*p)["y"].get<double>(), below);
      (*p)["label_y"] = y;
      below = y / 1.7;
    }
  };
  place_labels(time_fit);
  place_labels(mem_fit);
  auto loglog = [&](const json& pts, const json& fit, const std::string& ytitle) {
    // The tooltip names the figure without the axis's "(log scale)".
    std::string tip_title = ytitle;
    if (const size_t at = tip_title.find(" (log scale)"); at != std::string::npos) tip_title.erase(at);
    json layers = json::array();
    // A few pixels of room at each end: the first and last N's points are not cut by the plot's edges.
    const json x0 = {{"field", "seq"}, {"type", "quantitative"},
                     // nice off: Vega rounds a padded domain out to whole octaves, a third of the plot blank
                     {"scale", {{"type", "log"}, {"base", 2}, {"padding", 14}, {"nice", false}}},
                     {"title", "sequence length N (log scale)"}};
    // The y domain is the data's, a quarter wider each way (the fitted lines and their labels included): the
    // library's decades had drawn 0.01..10 for points from 0.03 to 3.6.
    json y = {{"field", "y"}, {"type", "quantitative"}, {"scale", {{"type", "log"}}}, {"title", ytitle}};
    fit_log_domain(y, {&pts, &fit}, {"y", "label_y"}, 1.25, 1.25);
    y["axis"]["minExtent"] = kSweepAxisExtent;  // the stacked charts' plots line up, whatever their tick labels
    std::set<std::string> present;
    for (const json& p : pts) present.insert(p["variant"].get<std::string>());
    json color = pg.variant_color(present);
    color["legend"]["orient"] = "bottom";
    color["legend"]["direction"] = "horizontal";
    std::set<double> seqs;
    for (const json& p : pts) seqs.insert(p["seq"].get<double>());
    json xa = x0;
    xa["axis"] = {{"values", std::vector<double>(seqs.begin(), seqs.end())}, {"format", "d"}};
    layers.push_back({{"data", {{"values", pts}}},
                      {"mark", {{"type", "point"}, {"filled", true}, {"size", 60}}},
                      {"encoding", {{"x", xa}, {"y", y}, {"color", color},
                                    // a Busy or Noisy point faded (memory is counted, not timed: never)
                                    {"opacity", {{"condition", {{"test", "datum.disturbed"}, {"value", 0.3}}},
                                                 {"value", 1.0}}},
                                    {"tooltip", {{{"field", "variant"}}, {{"field", "seq"}, {"title", "N"}},
                                                 {{"field", "y"}, {"format", ".3f"}, {"title", tip_title}}}}}}});
    if (!fit.empty()) {
      layers.push_back({{"data", {{"values", fit}}},
                        {"mark", {{"type", "line"}, {"strokeDash", {4, 3}}}},
                        {"encoding", {{"x", xa}, {"y", y}, {"color", color}, {"detail", {{"field", "variant"}}},
                                      {"tooltip", {{{"field", "variant"}},
                                                   {{"field", "label"}, {"title", "least-squares fit"}}}}}}});
      // The exponent, written at the end of each fitted line.
      json label_y = y;
      label_y["field"] = "label_y";
      layers.push_back({{"data", {{"values", fit}}},
                        {"transform", {{{"filter", "datum.end"}}}},
                        {"mark", {{"type", "text"}, {"align", "left"}, {"dx", 6}, {"fontSize", 12}, {"fontWeight", "bold"}}},
                        {"encoding", {{"x", xa}, {"y", label_y}, {"color", color}, {"text", {{"field", "label"}}}}}});
    }
    return json{{"width", kWidth - 80}, {"height", 300}, {"layer", layers}};
  };
  if (!time_pts.empty())
    pg.chart("sweep-time", loglog(time_pts, time_fit, "ms per forward (log scale)"),
             "Time per forward against N, log–log: dots are measurements (faded: Busy or Noisy, below), dashed lines "
             "the least-squares power law; the label is its exponent (2 means quadratic).");
  if (!mem_pts.empty())
    pg.chart("sweep-memory", loglog(mem_pts, mem_fit, "peak memory above the inputs, MB (log scale)"),
             "Peak tracked memory against N, log–log: the naive variants hold the N×N scores (exponent ≈ 2), "
             "FlashAttention only its O(N) output beside a fixed scratch (exponent ≈ 1 once the output dominates).");
  if (!rate_pts.empty()) {
    // Throughput on a linear axis against N on log2, with the peak the sweep measured against as a rule: the
    // picture of fixed costs amortising (rising dots) and of where each variant's own limit holds it.
    // Linear, unless the rates span more than 10× (torch 1.13's rows beside flash's, naive's small N beside its
    // large): then log, where a linear axis would flatten the slow series onto zero.
    double lo = INFINITY, hi = 0;
    for (const json& p : rate_pts) {
      lo = std::min(lo, p["y"].get<double>());
      hi = std::max(hi, p["y"].get<double>());
    }
    const bool log_rate = hi > 10 * lo;
    const double peak = num(s, "peak_gflops", NAN);
    // A log axis labelled 1-2-5 as the page's others (the library's own: 1, 2, 3, 10, 20, 30, ...), over the
    // points and the peak's rule.
    const double top = std::isfinite(peak) && peak > 0 ? std::max(hi, peak * rate_scale) : hi;
    json spec = loglog(rate_pts, json::array(), "");
    for (json& layer : spec["layer"]) {
      json& y = layer["encoding"]["y"];
      if (log_rate) {
        y["scale"] = {{"type", "log"}, {"domain", {lo / 1.25, top * 1.25}}, {"nice", false}};
        y["axis"] = log_axis(lo / 1.25, top * 1.25);
      } else {
        y["scale"] = {{"type", "linear"}, {"zero", true}};
        y["axis"] = json::object();
      }
      y["axis"]["minExtent"] = kSweepAxisExtent;
      y["title"] = fmt::format("attention {} ({} scale)", rate_unit, log_rate ? "log" : "linear");
      if (layer["encoding"].contains("tooltip"))
        for (json& t : layer["encoding"]["tooltip"])
          if (t["field"] == "y") t["title"] = fmt::format("attention {}", rate_unit);
    }
    // Each variant's points joined in N order, so its curve reads at a glance.
    json joined = spec["layer"][0];
    joined["mark"] = {{"type", "line"}, {"opacity", 0.6}};
    joined["encoding"].erase("tooltip");
    joined["encoding"].erase("opacity");  // the dots' fading is per point; the line is the series
    joined["encoding"]["detail"] = {{"field", "variant"}};
    // Under the dots, so that hovering a dot gives its tooltip, not the line's nothing.
    spec["layer"].insert(spec["layer"].begin(), joined);
    if (std::isfinite(peak) && peak > 0) {
      const json rule_y = {{"field", "y"}, {"type", "quantitative"}, {"title", spec["layer"][0]["encoding"]["y"]["title"]}};
      const json rule = {{"y", peak * rate_scale}, {"label", fmt::format("{} peak {} {}", str(s, "peak_kind", "the"),
                                                                          fmt_num(peak * rate_scale, 1), rate_unit)}};
      spec["layer"].push_back({{"data", {{"values", {rule}}}},
                               {"mark", {{"type", "rule"}, {"strokeDash", {6, 4}}, {"color", "#888"}}},
                               {"encoding", {{"y", rule_y}}}});
      spec["layer"].push_back({{"data", {{"values", {rule}}}},
                               {"mark", {{"type", "text"}, {"align", "left"}, {"baseline", "bottom"}, {"x", 4},
                                         {"dy", -3}, {"color", "#666"}}},
                               {"encoding", {{"y", rule_y}, {"text", {{"field", "label"}}}}}});
    }
    pg.chart("sweep-rate", spec,
             fmt::format("Attention {} against N (FLOPs of the useful work, causal halved, over the median time). "
                         "Expect the dots to rise while fixed costs amortise and to level off where the variant's "
                         "own limit takes over, far below the dashed peak for the N×N paths that wait on memory; a "
                         "fall points at disturbed points or a working set past the caches.",
                         rate_unit));
  }
  if (time_pts.empty() && mem_pts.empty()) pg.note("sweep.json has no measured points.");
  if (any_fit) pg.raw(fit_table);
  if (std::string over = over_peak_note(gpu, over_peak); !over.empty()) pg.note(over.substr(0, over.size() - 1));
  if (any_weak)
    pg.note("weak: the points stray from a power law (± above 0.15, or points off the line by a root-mean-square "
            "above 0.25 in natural log, about 28 %), so that exponent is no scaling law: at small N fixed costs "
            "dominate, or the timings were disturbed.");
  if (any_fixed)
    pg.note("fixed costs: a time exponent below 1 while the work grows as N²: what each forward costs whatever N "
            "outweighs the work at these lengths; a sweep to larger N gives the scaling law.");
  if (any_implausible)
    pg.note("implausible: a time exponent outside 0..3, which no attention forward has (its work grows as N²): the "
            "timings of those points were disturbed.");
  if (any_disturbed)
    pg.note("disturbed: half the fit's points or more were Busy or Noisy (their lines below), so its exponent describes "
            "the machine's load as much as the variant.");
  if (!skipped.empty()) {
    std::string list = "<ul class=\"note\">";
    for (const auto& sk : skipped) list += "<li>" + html_escape(sk) + "</li>";
    pg.raw(list + "</ul>\n");
  }
  if (const json* fits = member(s, {"fits"});
      fits && fits->is_array() && std::any_of(fits->begin(), fits->end(), [](const json& f) { return num(f, "points", NAN) == 2; }))
    pg.note("A fit through two points is a line through both: it has no error estimate and its R² is 1 by "
            "construction (shown as –).");
  const json* machine = member(s, {"machine"});
  // A compare's or a sweep's forwards come from --iters (no --schedule there).
  // Many Busy and Noisy lines (a loaded machine: one per point) fold under one line that counts them.
  const std::vector<std::string> lines = timing_notes(timings, machine ? str(*machine, "memory_reclaim") : "");
  size_t disturbed_points = 0;
  for (const json& p : time_pts) disturbed_points += p["disturbed"].get<bool>() ? 1 : 0;
  if (lines.size() > 3)
    pg.raw(fmt::format("<details><summary>{} of {} timed points Busy or Noisy (the faded dots): why, point by point"
                       "</summary>\n",
                       disturbed_points, time_pts.size()));
  for (const std::string& line : lines) pg.note(line);
  if (lines.size() > 3) pg.raw("</details>\n");
  pg.end_section();
}

// --- the roofline ---
struct Machine {
  double fp32 = 0, bf16 = 0, bw = 0;
  std::string cpu;
  bool gpu = false;  // a GPU's datasheet ceilings (isa "sm_XY"), not a CPU's measured ones
  // The ISA OpenBLAS and oneDNN ran at and its peaks (0 in files from before they were recorded).
  std::string isa, lib_isa;
  double lib_fp32 = 0, lib_bf16 = 0;
  std::string when;  // ", measured 2026-12-04 10:31 UTC[, on a busy machine (...)], from the peaks cache"; "" where
                     // the file does not say
  // The loops the bandwidth is the best of; none measured in files from before them, whose bandwidth is STREAM
  // triad's.
  analysis::BandwidthLoops loops;
  std::string implausible;  // a figure no machine gives ("bandwidth_gbs 1e-30 is outside 0.1..1e+05 GB/s"): unused
  bool lib_differs() const { return !lib_isa.empty() && lib_isa != isa && lib_fp32 > 0; }
};

Machine machine_of(const json* m) {
  Machine out;
  if (!m || !m->is_object()) return out;
  out.fp32 = num(*m, "fp32_gflops");
  out.bf16 = num(*m, "bf16_gflops");
  out.bw = num(*m, "bandwidth_gbs");
  // The loops the bandwidth is the best of, held to what the peaks cache and roofline --from hold them to: each a
  // figure a machine gives, and the bandwidth their best. Damaged, they make the peaks implausible (below), not a
  // caption that calls the slope STREAM triad's or names loops it is not the best of.
  std::string loops_wrong;
  if (const auto it = m->find("bandwidth_loops"); it != m->end())
    loops_wrong = analysis::bandwidth_loops_from_json(*it, out.bw, out.loops);
  out.isa = str(*m, "isa");
  out.lib_isa = str(*m, "library_isa");
  out.lib_fp32 = num(*m, "library_fp32_gflops");
  out.lib_bf16 = num(*m, "library_bf16_gflops");
  out.cpu = str(*m, "cpu");
  if (const std::string sig = str(*m, "cpu_signature"); !sig.empty()) out.cpu += " (" + sig + ")";
  out.gpu = str(*m, "isa").rfind("sm_", 0) == 0;
  if (const std::string at = str(*m, "measured_at"); !at.empty()) out.when = ", measured " + at;
  out.when += analysis::busy_peaks_clause(str(*m, "measured_busy"));
  if (flag(*m, "from_cache")) out.when += ", from the peaks cache";
  // The bounds the peaks cache and roofline --from hold figures to: a damaged or edited file's peaks would draw
  // ridges at 10^32 FLOP/B or at infinity. bf16 peaks may be 0 (no bf16 unit), the library's absent (older files).
  auto check = [&](const char* key, double v, bool bandwidth, bool zero_ok) {
    if (out.implausible.empty()) out.implausible = analysis::implausible_peak(key, v, bandwidth, zero_ok);
  };
  check("fp32_gflops", out.fp32, false, false);
  check("bf16_gflops", out.bf16, false, true);
  check("bandwidth_gbs", out.bw, true, false);
  check("library_fp32_gflops", out.lib_fp32, false, true);
  check("library_bf16_gflops", out.lib_bf16, false, true);
  if (out.implausible.empty()) out.implausible = loops_wrong;
  if (!out.implausible.empty()) out.fp32 = out.bf16 = out.bw = out.lib_fp32 = out.lib_bf16 = 0;
  return out;
}

// The peaks a directory of profiles recorded: every summary's "machine", when they all hold the same ones
// (whether measured or read from the cache); null when one has none or two differ, as roofline --from refuses.
const json* profiles_machine(const std::vector<VariantData>& vs) {
  const json* first = nullptr;
  for (const VariantData& v : vs) {
    if (!v.summary) continue;
    const json* m = member(*v.summary, {"machine"});
    if (!m || !m->is_object()) return nullptr;
    if (!first) first = m;
    else if (!same_peaks(*m, *first)) return nullptr;
  }
  return first;
}

void section_roofline(Page& pg, const Input& in, const std::optional<json>& compare,
                      const std::vector<VariantData>& vs) {
  pg.h2("roofline", "Roofline");
  json points = json::array();
  // Ops that move bytes and compute nothing in the cost model (flops == 0, bytes > 0: copies, casts, triu's
  // mask): no place on a FLOP/s axis, so a table of their bandwidth instead. (variant, op, GB/s) A mask fill
  // (masked_fill_) is not one of them: its compare-and-select is 1 FLOP per element, so it is a point.
  std::vector<std::tuple<std::string, std::string, double>> bytes_only;
  Machine m;
  std::string source;
  if (in.doc) {
    m = machine_of(member(*in.doc, {"machine", "peaks"}));
    if (const json* ops = member(*in.doc, {"ops", "points"}); ops && ops->is_array()) {
      for (const json& o : *ops) {
        const double ai = num(o, "intensity"), g = num(o, "achieved_gflops");
        if (num(o, "flops") <= 0 && num(o, "bytes") > 0 && num(o, "self_ns") > 0) {
          bytes_only.emplace_back(str(o, "variant", "?"), str(o, "name", "?"), num(o, "bytes") / num(o, "self_ns"));
          continue;
        }
        if (ai <= 0 || g <= 0) continue;
        points.push_back({{"variant", str(o, "variant", "?")}, {"op", str(o, "name", "?")}, {"intensity", ai},
                          {"gflops", g}, {"attainable", num(o, "attainable_gflops")},
                          {"peak", num(o, "compute_ceiling_gflops")}, {"bound", str(o, "bound", "?")}});
      }
    }
    // roofline --from placed an earlier compare's ops: say so, by the file's name only (the path is the
    // machine's where it ran).
    const std::string from = str(*in.doc, "from");
    source = from.empty() ? "roofline.json"
                          : "roofline.json, which placed the ops of the run in " +
                                std::filesystem::path(from).filename().string() + " without running them again";
  } else if (const json* recorded = compare ? member(*compare, {"machine"}) : profiles_machine(vs)) {
    // No roofline.json: place each op of each summary with the measured machine peaks compare.json recorded, or
    // (a directory of profiles) those every profile's summary recorded.
    m = machine_of(recorded);
    analysis::MachinePeaks peaks;
    peaks.fp32_gflops = m.fp32;
    peaks.bf16_gflops = m.bf16;
    peaks.library_fp32_gflops = m.lib_fp32;
    peaks.library_bf16_gflops = m.lib_bf16;
    for (const VariantData& v : vs) {
      for (const OpRow& r : v.ops) {
        // Each op by its own cost over its self time, as `attnprof roofline` places it: a wrapper has none.
        if (!is_annotation(r) && r.flops <= 0 && r.bytes > 0 && r.self_ns > 0) {
          bytes_only.emplace_back(v.name, r.name, r.bytes / r.self_ns);  // B/ns = GB/s
          continue;
        }
        if (is_annotation(r) || r.flops <= 0 || r.bytes <= 0 || r.self_ns <= 0) continue;
        const double ai = r.flops / r.bytes, g = r.flops / r.self_ns;  // FLOP/ns = GFLOP/s
        OpCost c;
        c.flops = r.flops;
        c.bf16_flops = r.bf16_flops;
        c.library_flops = r.library_flops;
        c.library_bf16_flops = r.library_bf16_flops;
        // the op's own: bf16 units or fp32, a library's at the library's ISA
        const double peak = analysis::compute_ceiling_gflops(c, peaks);
        const double att = std::min(peak, ai * m.bw);
        points.push_back({{"variant", v.name}, {"op", r.name}, {"intensity", ai}, {"gflops", g}, {"attainable", att},
                          {"peak", peak}, {"bound", ai * m.bw < peak ? "memory" : "compute"}});
      }
    }
    source = compare ? "compare.json's machine peaks and the per-op cost model in the summaries"
                     : "the machine peaks the profiles recorded in their summaries, and the per-op cost model there";
  }
  if (!m.implausible.empty()) {
    pg.note(fmt::format("{} gives machine peaks no machine has ({}), so no op is placed under them: run `attnprof "
                        "roofline --out DIR` (or `attnprof compare`) again to fill this section.",
                        in.doc ? "roofline.json" : compare ? "compare.json" : "the summaries", m.implausible));
    pg.end_section();
    return;
  }
  if (m.bw <= 0 || (m.fp32 <= 0 && m.bf16 <= 0)) {
    pg.note((in.doc ? std::string("roofline.json has no machine peaks") : in.note) +
            ": run `attnprof roofline --out DIR` (or `attnprof compare`) to fill this section.");
    pg.end_section();
    return;
  }
  std::set<std::string> roof_present;
  for (const json& p : points) roof_present.insert(p["variant"].get<std::string>());
  double lo = 1e30, hi = 0;
  for (const json& p : points) {
    lo = std::min(lo, p["intensity"].get<double>());
    hi = std::max(hi, p["intensity"].get<double>());
  }
  // The chart's rate unit: a GPU's peaks are 10^5 GFLOP/s and more, drawn in TFLOP/s as its datasheet gives
  // them. The points keep GFLOP/s (the comparison with the summaries below reads them); the drawn copy is scaled.
  const double unit = m.gpu ? 1e-3 : 1.0;
  const std::string rate_unit = m.gpu ? "TFLOP/s" : "GFLOP/s";
  const auto rate = [&](double gflops) {
    const double v = gflops * unit;
    return v >= 100 ? fmt::format("{:.0f} {}", v, rate_unit) : fmt::format("{:.3g} {}", v, rate_unit);
  };
  struct Ceiling {
    std::string label;  // the legend's: "BF16 dot-product peak 795 GFLOP/s"
    std::string name;   // the ridges' and the points': "BF16"
    double peak;
  };
  std::vector<Ceiling> ceilings;
  if (m.fp32 > 0)
    ceilings.push_back({fmt::format("{} {}", m.gpu ? "FP32 CUDA-core peak" : "FP32 FMA peak", rate(m.fp32)), "FP32",
                        m.fp32});
  if (m.bf16 > 0)
    ceilings.push_back({fmt::format("{} {}", m.gpu ? "BF16 tensor-core peak" : "BF16 dot-product peak", rate(m.bf16)),
                        "BF16", m.bf16});
  if (m.lib_differs()) {
    ceilings.push_back({fmt::format("matmul libraries' FP32 FMA peak ({}) {}", m.lib_isa, rate(m.lib_fp32)),
                        "library FP32", m.lib_fp32});
    if (m.lib_bf16 > 0)
      ceilings.push_back({fmt::format("matmul libraries' BF16 dot-product peak ({}) {}", m.lib_isa, rate(m.lib_bf16)),
                          "library BF16", m.lib_bf16});
  }
  // Which ceiling each point is judged against: the one its compute peak is (within 0.5 %), by name.
  for (json& p : points) {
    const double peak = p.value("peak", 0.0);
    std::string name = "?";
    for (const Ceiling& c : ceilings)
      if (peak > 0 && std::abs(c.peak - peak) <= 0.005 * peak) {
        name = c.name;
        break;
      }
    if (name == "?" && peak > 0) name = rate(peak);
    p["ceiling"] = name;
    p["pct"] = p["attainable"].get<double>() > 0 ? 100.0 * p["gflops"].get<double>() / p["attainable"].get<double>() : 0.0;
  }
  for (const Ceiling& c : ceilings) {
    lo = std::min(lo, c.peak / m.bw);
    hi = std::max(hi, c.peak / m.bw);
  }
  lo /= 2;
  hi *= 2;
  json roof = json::array();
  for (const Ceiling& c : ceilings) {
    const double ridge = c.peak / m.bw;
    const std::string name = fmt::format("{} / {} {:.1f} GB/s", c.label, m.gpu ? "DRAM" : "bandwidth", m.bw);
    for (double x : {lo, ridge, hi})
      roof.push_back({{"ceiling", name}, {"intensity", x}, {"gflops", unit * std::min(c.peak, x * m.bw)}});
  }
  // Rings, each variant's a size smaller than the one before, so that variants running the same kernel
  // (sdpa-flash and flash) stay visible where their points coincide.
  json drawn = points;
  for (json& p : drawn) {
    const auto it = std::find(pg.variants.begin(), pg.variants.end(), p["variant"].get<std::string>());
    p["ring"] = 230.0 - 45.0 * double(std::min<ptrdiff_t>(it - pg.variants.begin(), 4));
    for (const char* key : {"gflops", "attainable", "peak"}) p[key] = unit * p[key].get<double>();
  }
  const json x = {{"field", "intensity"}, {"type", "quantitative"},
                  {"scale", {{"type", "log"}, {"domain", {lo, hi}}, {"nice", false}}},
                  {"axis", log_axis(lo, hi)},
                  {"title", "arithmetic intensity, FLOP per byte (log scale)"}};
  // The y range: the roofs from the left edge up, and every point, the lowest a ring's width clear of the axis.
  json y = {{"field", "gflops"}, {"type", "quantitative"}, {"scale", {{"type", "log"}}},
            {"title", rate_unit + " (log scale)"}};
  fit_log_domain(y, {&roof, &drawn}, {"gflops"}, 1.5, 1.25);
  json layers = json::array();
  layers.push_back({{"data", {{"values", roof}}},
                    {"mark", {{"type", "line"}, {"color", "#555"}, {"strokeWidth", 2}}},
                    {"encoding", {{"x", x}, {"y", y},
                                  {"strokeDash", {{"field", "ceiling"}, {"type", "nominal"}, {"title", "ceiling"},
                                                  {"legend", {{"orient", "bottom"}, {"direction", "vertical"}, {"labelLimit", 600}}}}}}}});
  // Each ridge, where a ceiling meets the bandwidth slope: left of it an op at that ceiling is memory-bound.
  json ridges = json::array();
  for (const Ceiling& c : ceilings)
    ridges.push_back({{"intensity", c.peak / m.bw}, {"label", fmt::format("{} ridge {:.1f}", c.name, c.peak / m.bw)}});
  layers.push_back({{"data", {{"values", ridges}}},
                    {"mark", {{"type", "rule"}, {"strokeDash", {2, 3}}, {"color", "#999"}}},
                    {"encoding", {{"x", x}}}});
  layers.push_back({{"data", {{"values", ridges}}},
                    {"mark", {{"type", "text"}, {"angle", 270}, {"align", "left"}, {"baseline", "bottom"},
                              {"dx", 4}, {"dy", -3}, {"y", {{"expr", "height"}}}, {"fontSize", 10}, {"color", "#777"}}},
                    {"encoding", {{"x", x}, {"text", {{"field", "label"}}}}}});
  // Layer 3 (after the ceilings, the ridges and their labels; before the op labels and their leaders), from
  // each point up to the roof it is judged
  // against (the bandwidth slope, or its own compute ceiling): which of the flat lines is its own shows where the
  // line ends, and its length is the gap.
  json drop_y2 = {{"field", "attainable"}};
  layers.push_back({{"data", {{"values", drawn}}},
                    {"mark", {{"type", "rule"}, {"strokeDash", {1, 2}}, {"strokeWidth", 1.2}, {"opacity", 0.8}}},
                    {"encoding", {{"x", x}, {"y", y}, {"y2", drop_y2}, {"color", pg.variant_color(roof_present)}}}});
  // Each point's op written beside it (the colour says the variant), placed in pixels so that no label covers
  // another label or a point (detail::place_labels), then written at the data coordinates of that place: a label
  // left of its point ends there, one right of it begins there.
  const int plot_w = kWidth - 80, plot_h = 380;
  size_t labels_left_off = 0;
  if (!drawn.empty()) {
    const json& yd = y["scale"]["domain"];
    const double ylo = std::log(yd[0].get<double>()), yhi = std::log(yd[1].get<double>());
    const double xlo = std::log(lo), xhi = std::log(hi);
    const auto px_x = [&](double v) { return plot_w * (std::log(v) - xlo) / (xhi - xlo); };
    const auto px_y = [&](double v) { return plot_h * (1 - (std::log(v) - ylo) / (yhi - ylo)); };
    std::vector<detail::LabelPoint> at;
    for (const json& p : drawn)
      at.push_back({px_x(p["intensity"].get<double>()), px_y(p["gflops"].get<double>()),
                    detail::fit_width_middle(p["op"].get<std::string>(), 28)});
    // What labels should not cross: the roofs (each ceiling's slope and flat) and each point's drop to its roof.
    std::vector<detail::LabelSegment> lines;
    for (size_t i = 1; i < roof.size(); ++i)
      if (roof[i]["ceiling"] == roof[i - 1]["ceiling"])
        lines.push_back({px_x(roof[i - 1]["intensity"].get<double>()), px_y(roof[i - 1]["gflops"].get<double>()),
                         px_x(roof[i]["intensity"].get<double>()), px_y(roof[i]["gflops"].get<double>())});
    for (size_t i = 0; i < drawn.size(); ++i)
      if (const double top = drawn[i]["attainable"].get<double>(); top > 0)
        lines.push_back({at[i].x, at[i].y, at[i].x, px_y(top), 1});
    json left_end = json::array(), right_end = json::array(), leaders = json::array();
    const detail::PlacedLabels labels = detail::place_labels(at, plot_w, plot_h, lines);
    const auto data_x = [&](double px) { return std::exp(xlo + px / plot_w * (xhi - xlo)); };
    const auto data_y = [&](double py) { return std::exp(ylo + (1 - py / plot_h) * (yhi - ylo)); };
    for (const detail::PlacedLabel& l : labels.placed) {
      (l.right_aligned ? right_end : left_end)
          .push_back({{"intensity", data_x(l.x)}, {"gflops", data_y(l.y)}, {"label", at[l.point].text}});
      // A label a line away from its point: a thin line from the point to the text's near edge.
      if (l.leader) {
        const detail::LabelPoint& p = at[l.point];
        const double edge = l.y + (l.y < p.y ? 6.0 : -6.0);
        leaders.push_back({{"intensity", drawn[l.point]["intensity"]}, {"gflops", drawn[l.point]["gflops"]},
                           {"x2", data_x(l.x)}, {"y2", data_y(edge)}});
      }
    }
    labels_left_off = labels.left_off;
    for (const auto& [values, align] : {std::pair{&left_end, "left"}, std::pair{&right_end, "right"}})
      layers.push_back({{"data", {{"values", *values}}},
                        {"mark", {{"type", "text"}, {"align", align}, {"baseline", "middle"}, {"fontSize", 10},
                                  {"color", "#444"}}},
                        {"encoding", {{"x", x}, {"y", y}, {"text", {{"field", "label"}}}}}});
    layers.push_back({{"data", {{"values", leaders}}},
                      {"mark", {{"type", "rule"}, {"color", "#999"}, {"strokeWidth", 0.8}}},
                      {"encoding", {{"x", x}, {"y", y}, {"x2", {{"field", "x2"}}}, {"y2", {{"field", "y2"}}}}}});
  }
  // The memory loops that moved fewer bytes a second than the roof's (the roof is the best of them): each a thin
  // slope under it, up to the highest compute ceiling, named in a legend of their own. An in-place op between
  // them and the roof beats triad, as the write-allocate read it skips says it can.
  bool loop_slopes = false;
  if (!m.gpu && m.loops.measured()) {
    double top = 0;
    for (const Ceiling& c : ceilings) top = std::max(top, c.peak);
    json slopes = json::array(), names = json::array();
    for (const auto& [name, gbs] : {std::pair{"in-place update", m.loops.update}, std::pair{"copy", m.loops.copy},
                                    std::pair{"STREAM triad", m.loops.triad}}) {
      if (!(gbs < m.bw)) continue;  // the roof's own loop is the slope already drawn
      const std::string loop = fmt::format("{} {:.1f} GB/s", name, gbs);
      names.push_back(loop);
      for (double xv : {lo, std::min(hi, top / gbs)})
        slopes.push_back({{"loop", loop}, {"intensity", xv}, {"gflops", unit * std::min(top, xv * gbs)}});
    }
    if (!slopes.empty()) {
      loop_slopes = true;
      layers.push_back({{"data", {{"values", slopes}}},
                        {"mark", {{"type", "line"}, {"color", "#aaa"}, {"strokeWidth", 1.2}}},
                        {"encoding", {{"x", x}, {"y", y},
                                      // Dashes of their own (the ceilings' scale is resolved apart), so
                                      // neither legend lists the other's lines.
                                      {"strokeDash", {{"field", "loop"}, {"type", "nominal"},
                                                      {"scale", {{"domain", names},
                                                                 {"range", {{4, 3}, {1, 2}}}}},
                                                      {"title", "memory loops below the roof"},
                                                      {"legend", {{"orient", "bottom"}, {"direction", "vertical"},
                                                                  {"labelLimit", 600}, {"titleLimit", 600}}}}},
                                      {"tooltip", {{{"field", "loop"}, {"title", "memory loop"}}}}}}});
    }
  }
  // The points, even none (the browser test counts a mark per point there), last: over the lines that start at
  // them (the drop to the roof, a label's leader), which would otherwise take the hover at a point's centre and
  // say nothing, or name another point whose line passes there. Before them: 0 ceilings, 1 ridges, 2 their
  // labels, 3 the drops, and when there are points, 4-5 the op labels and 6 the leaders; then the memory loops'
  // slopes where the peaks name them.
  const json point_tooltip = {{{"field", "variant"}}, {{"field", "op"}},
                              {{"field", "intensity"}, {"format", ".3f"}, {"title", "FLOP/B"}},
                              {{"field", "gflops"}, {"format", ".2f"}, {"title", "achieved " + rate_unit}},
                              {{"field", "attainable"}, {"format", ".2f"}, {"title", "attainable " + rate_unit}},
                              {{"field", "pct"}, {"format", ".1f"}, {"title", "% of attainable"}},
                              {{"field", "ceiling"}, {"title", "compute ceiling"}},
                              {{"field", "bound"}}};
  layers.push_back({{"data", {{"values", drawn}}},
                    {"mark", {{"type", "point"}, {"filled", false}, {"strokeWidth", 2.2}, {"opacity", 0.9}}},
                    {"encoding", {{"x", x}, {"y", y},
                                  {"size", {{"field", "ring"}, {"type", "quantitative"}, {"scale", nullptr},
                                            {"legend", nullptr}}},
                                  {"color", pg.variant_color(roof_present)},
                                  {"shape", {{"field", "bound"}, {"type", "nominal"}, {"title", "bound"},
                                             // one shape per verdict on every page, whichever are present
                                             {"scale", {{"domain", {"compute", "memory"}},
                                                        {"range", {"circle", "square"}}}}}},
                                  {"tooltip", point_tooltip}}}});
  json spec = {{"width", plot_w}, {"height", plot_h}, {"layer", layers},
               {"resolve", {{"legend", {{"strokeDash", "independent"}}}, {"scale", {{"strokeDash", "independent"}}}}}};
  // Mask fills are drawn (1 FLOP per element in the cost model); say so where one is, as the table's note
  // says what is not drawn. On a GPU the fill kernel's name is mangled (_Z15masked_fill_ker...): a substring.
  bool mask_fill_placed = false, matmul_placed = false, fused_placed = false;
  for (const json& p : points) {
    const std::string op = p["op"].get<std::string>();
    mask_fill_placed = mask_fill_placed || op.find("masked_fill") != std::string::npos;
    matmul_placed = matmul_placed || op == "matmul";
    fused_placed = fused_placed || op.find("flash") != std::string::npos;
  }
  // Why the unfused matmul can sit as high as the fused kernel and still lose: its rate counts work a causal
  // forward throws away.
  const bool causal_note = matmul_placed && fused_placed && compare && flag(*compare, "causal");
  // By how much: every score over the visible pairs the convention counts (2x when Nq = Nk, 4x at Nk = 2·Nq,
  // under 2x when the queries outnumber the keys), from the run's own shape and FLOPs.
  std::string how_much = "more FLOPs than";
  if (const json* shape = compare ? member(*compare, {"shape"}) : nullptr; shape && shape->is_object()) {
    double all = 4.0;
    for (const char* k : {"B", "Hq", "Nq", "Nk", "D"}) all *= num(*shape, k, NAN);
    const double ratio = all / num(*compare, "attention_flops", NAN);
    if (std::isfinite(ratio) && ratio > 1)
      how_much = std::abs(ratio - 2) < 1e-9 ? std::string("twice the FLOPs") : fmt::format("{:.2f}x the FLOPs", ratio);
  }
  pg.chart("roofline", spec,
           std::string(m.gpu ? "Every kernel of every variant that computes (has FLOPs in the cost model) against "
                               "the GPU's datasheet ceilings (from "
                             : "Every op of every variant that computes (has FLOPs in the cost model) against the "
                               "machine's measured ceilings (from ") +
               source + m.when +
               "). Each point is an op (or kernel), labelled with its name and coloured by its variant; points under the sloped line are limited by memory bandwidth, under the flat line by compute; "
               "the dotted verticals are the ridges, where they meet, each named by its compute ceiling; "
               "from each point a dotted line rises to the roof it is judged against (the slope, or the flat line of "
               "its own compute ceiling: FP32 for fp32 work, BF16 for bf16 dot products), and its length is what the "
               "implementation leaves on the table. " +
               (m.gpu ? std::string("A point above the sloped line moved its bytes faster than the datasheet "
                                    "bandwidth: its data stayed in L2.")
                      : m.loops.measured()
                          ? "A point above the sloped line moved its bytes faster than the measured bandwidth, "
                            "the best of three memory loops over 128 MB arrays (" +
                                analysis::bandwidth_loops_text(m.loops) + "): its data stayed in "
                            "cache, or the machine's memory was busier while the bandwidth was measured." +
                                (loop_slopes ? std::string(" The thin dashed slopes under it are the other loops': "
                                                           "an op between them and the roof moved its bytes faster "
                                                           "than those patterns can, as an in-place op, which pays no "
                                                           "write-allocate read, may.")
                                             : std::string())
                          : std::string("A point above the sloped line moved its bytes faster than the measured "
                                    "bandwidth (STREAM triad), which counts the bytes triad asks for, 2 reads and 1 "
                                    "write per element, while the hardware also reads each line it writes "
                                    "(write-allocate): an op that reads and writes the same lines (in place) pays "
                                    "no such read and can move up to 4/3 of the triad figure; beyond that, its data "
                                    "stayed in cache, or the bandwidth was measured on a busy machine.")) +
               (mask_fill_placed ? " Mask fills (masked_fill_) are placed: the cost model counts their compare "
                                   "and select as 1 FLOP per element."
                                 : "") +
               (causal_note ? " On this causal problem the unfused variants' matmul computes every score, the masked "
                              "ones too, and its rate counts that work: a matmul point can sit as high as the fused "
                              "kernel, which skips the masked tiles, while doing " + how_much +
                                  " the attention needs (the comparison's GFLOP/s counts those only)."
                            : std::string()) +
               (bytes_only.empty() ? "" : " Ops that compute nothing are in the table below."));
  if (points.empty()) pg.note("No op had both FLOPs and bytes in the cost model, so only the ceilings are drawn.");
  if (labels_left_off > 0)
    pg.note(fmt::format("{}: each place beside {} would cover another label or point. Hover a point for its "
                        "variant and op.",
                        labels_left_off == 1 ? std::string("One point carries no label")
                                             : fmt::format("{} points carry no label", labels_left_off),
                        labels_left_off == 1 ? "it" : "them"));
  // roofline.json is a run of its own: where this directory's summaries (compare's run) timed the same op at
  // another speed, the page would show two answers without a word. Named, and the variants it left out.
  // A roofline.json that `roofline --from` wrote placed the summaries' own ops: nothing to set against them.
  if (in.doc && !points.empty() && str(*in.doc, "from").empty()) {
    std::vector<std::string> apart, missing;
    std::set<std::string> summarised;
    for (const VariantData& v : vs) {
      if (!v.summary) continue;
      summarised.insert(v.name);
      if (!roof_present.count(v.name)) missing.push_back(v.name);
      // Each op once: rows of one name (grouped by shape) summed, as roofline places an op by its name.
      std::vector<std::string> order;
      std::map<std::string, std::pair<double, double>> by_name;  // flops, self ns
      for (const OpRow& r : v.ops) {
        if (is_annotation(r) || r.flops <= 0 || r.self_ns <= 0) continue;
        if (!by_name.count(r.name)) order.push_back(r.name);
        by_name[r.name].first += r.flops;
        by_name[r.name].second += r.self_ns;
      }
      for (const std::string& name : order) {
        const double here = by_name[name].first / by_name[name].second;
        const json* point = nullptr;
        int found = 0;
        for (const json& p : points)
          if (p["variant"] == v.name && p["op"] == name) {
            point = &p;
            ++found;
          }
        if (found != 1) continue;  // not placed, or placed twice (by shape): no one figure to set against
        const double there = (*point)["gflops"].get<double>();
        if (there > 1.2 * here || here > 1.2 * there)
          apart.push_back(fmt::format("{} {} {:.3g} against {:.3g}", v.name, name, there, here));
      }
    }
    // Variants the chart draws under names no summary has: the two files name them differently, so which
    // variants are missing cannot be told.
    bool same_names = true;
    for (const std::string& name : roof_present) same_names = same_names && summarised.count(name) > 0;
    if (!same_names) missing.clear();
    if (!apart.empty()) {
      std::string list;
      for (size_t i = 0; i < apart.size() && i < 6; ++i) list += (i ? "; " : "") + apart[i];
      if (apart.size() > 6) list += fmt::format("; and {} more", apart.size() - 6);
      pg.note(fmt::format("The points are roofline.json's own run, and {} of its ops ran more than 20 % faster or "
                          "slower there than in this directory's summaries (GFLOP/s, roofline.json against the "
                          "summaries: {}): one of the two runs was disturbed or cold; the Comparison's Busy and Noisy "
                          "lines speak for the summaries' run. Re-run `attnprof roofline`, or place the summaries' ops "
                          "with `attnprof roofline --from DIR`.",
                          apart.size(), list));
    }
    if (!missing.empty()) {
      std::string list;
      for (size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + missing[i];
      pg.note(fmt::format("Not on the chart: {} (roofline.json did not place {}).", list,
                          missing.size() == 1 ? "it" : "them"));
    }
  }
  if (!bytes_only.empty()) {
    std::string t = "<table class=\"data\"><thead><tr><th>variant</th><th>op</th><th>GB/s</th><th>% of "
                    "bandwidth</th></tr></thead><tbody>\n";
    for (const auto& [variant, op, gbs] : bytes_only)
      t += "<tr>" + td(variant) + td(op) + td(fmt_num(gbs, 2), true) + td(fmt_num(100.0 * gbs / m.bw, 1), true) + "</tr>\n";
    // Name the ops the table holds, so the note cannot list a kind of op the chart placed.
    std::vector<std::string> names;
    for (const auto& [variant, op, gbs] : bytes_only)
      if (std::find(names.begin(), names.end(), op) == names.end()) names.push_back(op);
    std::string listed;
    for (size_t i = 0; i < names.size(); ++i) listed += (i ? ", " : "") + names[i];
    // The chart's caption says where the mask fills are: not repeated here.
    pg.note(fmt::format("Ops that move bytes and compute nothing in the cost model ({}; here {}) have no place on "
                        "a FLOP/s axis; against the {:.1f} GB/s bandwidth ceiling instead:",
                        m.gpu ? "copies, memsets, casts"
                              : "copies, casts, where's additive mask, and triu, whose causal mask is index "
                                "arithmetic",
                        listed, m.bw));
    pg.raw(t + "</tbody></table>\n");
  }
  if (m.lib_differs())
    pg.note(fmt::format("Our kernels ran at {}, and are placed under its ceilings; matmul (OpenBLAS/oneDNN) under the "
                        "{} ones: the libraries choose their own ISA.",
                        m.isa, m.lib_isa));
  if (!m.cpu.empty()) pg.note("Machine: " + m.cpu);
  pg.end_section();
}

// --- memory timeline ---
// One chart row per variant, labelled on the left, in the run's order: rows carry a numeric "order" (a sort
// list of names would be compiled into a Vega expression).
json variant_rows_facet() {
  return {{"row", {{"field", "variant"}, {"type", "nominal"}, {"sort", {{"field", "order"}, {"op", "min"}}},
                   {"title", nullptr},
                   {"header", {{"labelAngle", 0}, {"labelAlign", "left"}, {"labelFontWeight", "bold"}}}}}};
}

void section_memory(Page& pg, const std::vector<VariantData>& vs) {
  pg.h2("memory", "Memory over time");
  json rows = json::array();
  std::vector<std::string> sources;
  for (size_t i = 0; i < vs.size(); ++i) {
    const VariantData& v = vs[i];
    if (v.memory.empty()) continue;
    // "order" sorts the rows: a sort list of names would be compiled into a Vega expression.
    for (const auto& [t, b] : downsample(v.memory, 1500))
      rows.push_back({{"variant", v.name}, {"order", i}, {"ms", t}, {"mb", b * 1e-6}});  // decimal, as the Comparison's
    sources.push_back(v.name + ": " + v.memory_source);
  }
  if (rows.empty()) {
    const bool profiled = std::any_of(vs.begin(), vs.end(),
                                      [](const VariantData& v) { return v.summary || !v.trace_file.empty(); });
    pg.note(profiled ? "No memory timeline: neither the summaries nor the traces in this directory hold memory samples "
                       "(they were profiled with --no-profile-memory)."
                     : "No memory timeline: this directory holds no <variant>.summary.json or trace (`attnprof "
                       "profile` or `attnprof compare` writes them).");
    pg.end_section();
    return;
  }
  json color = pg.variant_color();
  color["legend"] = nullptr;
  json spec = {{"data", {{"values", rows}}},
               {"facet", variant_rows_facet()},
               {"spec", {{"width", kWidth - 120}, {"height", 90},
                         {"mark", {{"type", "area"}, {"interpolate", "step-after"}, {"line", true}, {"opacity", 0.5}}},
                         {"encoding", {{"x", {{"field", "ms"}, {"type", "quantitative"}, {"title", "ms since the profile began"}}},
                                       {"y", {{"field", "mb"}, {"type", "quantitative"}, {"title", "live MB"}, {"stack", nullptr}}},
                                       {"color", color},
                                       {"tooltip", {{{"field", "variant"}}, {{"field", "ms"}, {"format", ".3f"}},
                                                    {{"field", "mb"}, {"format", ".2f"}, {"title", "live MB"}}}}}}}},
               {"resolve", {{"scale", {{"x", "shared"}}}}}};
  pg.chart("memory", spec,
           "Live bytes in attnprof's tracked allocator over the profiled steps, one row per variant, on shared axes "
           "(each row's time counts from its own profile's start, so a shorter row finished its steps sooner): "
           "the naive variants allocate the N×N scores every forward, the fused ones only "
           "small per-thread tiles. The inputs are live throughout, so each row stands on them; the Comparison's "
           "peak memory counts only what a forward allocates above them. MB are decimal (10^6 B), as there.");
  std::string src;
  for (const auto& s : sources) src += (src.empty() ? "" : "; ") + s;
  pg.note("Sources: " + src);
  pg.end_section();
}

// --- one forward on the timeline ---
void section_timeline(Page& pg, const std::vector<VariantData>& vs) {
  pg.h2("timeline", "One forward on the timeline");
  json rows = json::array();
  std::vector<std::string> notes;
  for (size_t i = 0; i < vs.size(); ++i) {
    const VariantData& v = vs[i];
    for (json r : v.forward_spans) {
      r["variant"] = v.name;
      r["order"] = i;
      rows.push_back(std::move(r));
    }
    if (!v.forward_note.empty()) notes.push_back(v.name + ": " + v.forward_note);
  }
  if (rows.empty()) {
    // A trace that is there but could not be drawn (cut short, over the size limit) is named with why, not taken
    // for a missing one.
    std::vector<std::string> unread;
    for (const VariantData& v : vs)
      if (v.trace_unreadable) unread.push_back(v.name + ": " + v.forward_note);
    pg.note(unread.empty() ? "No timeline: no trace in this directory holds a forward (run `attnprof compare` or "
                             "`attnprof profile`, which write <variant>.trace.json)."
                           : "No timeline: no trace in this directory could be drawn.");
    for (const std::string& n : unread) pg.note(n);
    pg.end_section();
    return;
  }
  json names = json::array();  // in order of appearance, for the op colours every by-op chart shares
  std::set<std::string> named;
  for (const json& r : rows)
    if (named.insert(r["name"].get<std::string>()).second) names.push_back(r["name"]);
  json spec = {
      {"data", {{"values", rows}}},
      {"facet", variant_rows_facet()},
      {"spec",
       {{"width", kWidth - 260},
        {"height", {{"step", 16}}},
        {"mark", {{"type", "bar"}, {"cornerRadius", 1}, {"stroke", "white"}, {"strokeWidth", 0.5}}},
        {"encoding",
         {{"x", {{"field", "start"}, {"type", "quantitative"}, {"title", "ms since the forward began"}}},
          {"x2", {{"field", "end"}}},
          {"y", {{"field", "lane"}, {"type", "nominal"}, {"title", nullptr},
                 {"sort", {{"field", "lane_order"}, {"op", "min"}}}}},
          {"color", pg.op_color("name", "op / kernel", names, {{"labelLimit", 400}})},
          {"tooltip", {{{"field", "variant"}}, {{"field", "name"}}, {{"field", "what"}}, {{"field", "lane"}},
                       {{"field", "start"}, {"format", ".3f"}, {"title", "start (ms into the forward)"}},
                       {{"field", "ms"}, {"format", ".3f"}}}},
          // A thread's share of a parallel region as a thinner bar in its op's colour: the op it belongs to is
          // the span above it (a lighter shade would read as the op's in-place form, mul_ of mul).
          {"size", {{"condition", {{"test", "datum.share"}, {"value", 6}}}, {"value", 14}}}}}}},
      {"resolve", {{"scale", {{"y", "independent"}}}}}};
  pg.chart("timeline", spec,
           "The recorded forward of each variant closest to its median as the trace shows it (the view Perfetto gives), on one "
           "time axis: a lane per thread or GPU stream and nesting depth. The unfused variants are a sequence "
           "of separate passes over the N×N scores; the fused ones are one span. The thin bars are each thread's "
           "share of an op's own parallel region: on a worker lane, and on the calling thread one level under the "
           "op itself (a share, not a call inside it). matmul's threads are oneDNN's or OpenBLAS's own, and not "
           "seen: its work shows on the calling thread only.");
  // A variant whose drawn forward is not its first: the first was a cold start or disturbed, and the reader who
  // opens the trace in Perfetto sees that one first. Said with both lengths.
  std::vector<std::string> later;
  for (const VariantData& v : vs) {
    const ForwardDrawn& d = v.forward_drawn;
    if (v.forward_spans.empty() || d.index == 0) continue;
    later.push_back(fmt::format("{}'s #{} of {} ({:.3f} ms; the first took {:.3f} ms, the median {:.3f} ms)", v.name,
                                d.index + 1, d.count, d.ms, d.first_ms, d.median_ms));
  }
  if (!later.empty()) {
    std::string list;
    for (size_t i = 0; i < later.size(); ++i) list += (i ? "; " : "") + later[i];
    pg.note("The forward drawn is the one closest to each variant's median, not its first where they differ: " + list +
            ".");
  }
  // How each op's own parallel regions used their threads, from the summaries' thread_balance.
  std::string threads;
  for (const VariantData& v : vs) {
    const json* tb = v.summary ? member(*v.summary, {"thread_balance"}) : nullptr;
    if (!tb || !tb->is_array()) continue;
    for (const json& b : *tb) {
      const double regions = num(b, "regions", NAN), items = num(b, "items", 0);
      threads += "<tr>" + td(v.name) + td(str(b, "name", "?")) + td(fmt_num(regions, 0), true) +
                 td(fmt_num(num(b, "threads", NAN), 0), true) + td(fmt_num(100 * num(b, "busy_share", NAN), 1) + " %", true) +
                 td(fmt_num(num(b, "imbalance", NAN), 2) + "x", true) +
                 td(fmt_num(num(b, "lag_ns", NAN) / regions * 1e-3, 1) + " µs", true) +
                 td(items <= 0                               ? "–"
                    : std::fmod(items, regions) == 0.0 ? fmt_num(items / regions, 0)
                                                       : fmt_num(items / regions, 1),
                    true) +
                 "</tr>\n";
    }
  }
  if (!threads.empty())
    pg.raw("<p>How each op's own OpenMP regions kept their threads working (matmul's oneDNN and OpenBLAS threads "
           "are those libraries' and not seen): working is the threads' shares over each region's wall × team, "
           "slowest/mean the longest share over the mean (2.00x on two threads: one did all the work), and late "
           "start per region how long after the first thread the last one started.</p>\n<table class=\"data\"><thead><tr><th>variant</th>"
           "<th>op</th><th>regions</th><th>threads</th><th>working</th><th>slowest/mean</th><th>late start per "
           "region</th><th>tasks per region</th></tr></thead><tbody>\n" +
           threads + "</tbody></table>\n");
  if (!notes.empty()) {
    std::string n;
    for (const auto& x : notes) n += (n.empty() ? "" : "; ") + x;
    pg.note(n);
  }
  pg.end_section();
}

// --- torch-style tables ---
// A table's text split after its totals: the rows between dashed rules and the "Self CPU time total" (and
// "Self CUDA time total") lines torch prints under them, then attnprof's footnotes (overhead, counters, what
// the FLOPs count...). A text without a closing rule is all table.
std::pair<std::string, std::string> split_table_footnotes(const std::string& text) {
  auto line_end = [&](size_t at) {
    const size_t nl = text.find('\n', at);
    return nl == std::string::npos ? text.size() : nl + 1;
  };
  size_t cut = std::string::npos;  // just past the last dashed rule
  for (size_t at = 0; at < text.size(); at = line_end(at)) {
    const std::string_view l(text.data() + at, line_end(at) - at);
    if (l.find('-') != std::string_view::npos && l.find_first_not_of("- \n") == std::string_view::npos)
      cut = line_end(at);
  }
  if (cut == std::string::npos || cut == text.size()) return {text, ""};
  while (cut < text.size() && (text.compare(cut, 19, "Self CPU time total") == 0 ||
                               text.compare(cut, 20, "Self CUDA time total") == 0))
    cut = line_end(cut);
  return {text.substr(0, cut), text.substr(cut)};
}

// `text` without its "Uneven: " lines.
std::string without_uneven_lines(const std::string& text) {
  std::string out;
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    const size_t end = nl == std::string::npos ? text.size() : nl + 1;
    if (text.compare(at, 8, "Uneven: ") != 0) out.append(text, at, end - at);
    at = end;
  }
  return out;
}

// A summary's rows as an HTML table that sorts on a click of any header (kBootstrap's sorter): each numeric
// cell carries its value in data-v, "" for a figure the row does not have (sorted last). Every row, sorted by
// CPU total as torch's default; the columns of torch's table and attnprof's rates, device and counter columns
// when the summary has them. "" when the summary has no rows.
std::string sortable_op_table(const json& summary) {
  const json* rows = member(summary, {"rows"});
  if (!rows || !rows->is_array() || rows->empty()) return "";
  struct Col {
    const char* head;
    const char* key;  // the row's field; "flops" and friends read the cost
    enum Kind { Pct, Time, Bytes, Count, Rate } kind;
  };
  bool device = false, faults = false, memory = false;
  for (const json& r : *rows) {
    if (!r.is_object()) continue;
    device = device || r.contains("self_cuda_ns");
    faults = faults || (r.contains("page_faults") && r["page_faults"].is_number());
    memory = memory || (r.contains("mem_bytes") && r["mem_bytes"].is_number());
  }
  std::vector<Col> cols = {{"Self CPU %", "self_pct", Col::Pct},    {"Self CPU", "self_ns", Col::Time},
                           {"CPU total", "total_ns", Col::Time},    {"CPU avg", "avg_ns", Col::Time}};
  if (device)
    cols.insert(cols.end(), {{"Self CUDA %", "self_cuda_pct", Col::Pct},
                             {"Self CUDA", "self_cuda_ns", Col::Time},
                             {"CUDA total", "cuda_total_ns", Col::Time}});
  if (memory) cols.insert(cols.end(), {{"CPU Mem", "mem_bytes", Col::Bytes}, {"Self CPU Mem", "self_mem_bytes", Col::Bytes}});
  cols.insert(cols.end(), {{"Calls", "calls", Col::Count},
                           {"GFLOPs", "flops", Col::Rate},
                           {"GFLOP/s", "gflops_per_s", Col::Rate},
                           {"GB/s", "gb_per_s", Col::Rate},
                           {"FLOP/B", "flop_per_byte", Col::Rate}});
  if (faults) cols.insert(cols.end(), {{"Page faults", "page_faults", Col::Count}, {"Self faults", "self_page_faults", Col::Count}});
  // Grouped by input shape: the shapes and types tell apart rows of one name (SDPA math's two `to` rows).
  bool shaped = false;
  for (const json& r : *rows) shaped = shaped || (r.is_object() && !str(r, "input_shapes").empty());
  std::string head = "<tr><th data-sort=\"text\">Name</th>";
  if (shaped) head += "<th data-sort=\"text\">Input Shapes</th><th data-sort=\"text\">Input Types</th>";
  // Sorted as profile prints the table: by CPU total, and a GPU profile by CUDA total, where its time is.
  const char* sort_key = device ? "cuda_total_ns" : "total_ns";
  for (const Col& c : cols)
    head += std::string("<th") + (std::string_view(c.key) == sort_key ? " aria-sort=\"descending\"" : "") + ">" +
            html_escape(c.head) + "</th>";
  head += "</tr>";
  std::vector<const json*> order;
  for (const json& r : *rows)
    if (r.is_object()) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [sort_key](const json* a, const json* b) {
    return num(*a, sort_key, 0) > num(*b, sort_key, 0);
  });
  std::string body;
  for (const json* r : order) {
    const json* cost = member(*r, {"cost"});
    const bool costed = cost && (num(*cost, "flops", 0) > 0 || num(*cost, "bytes", 0) > 0);
    body += "<tr><td>" + html_escape(str(*r, "name", "?")) + "</td>";
    if (shaped) body += "<td>" + html_escape(str(*r, "input_shapes")) + "</td><td>" + html_escape(str(*r, "input_types")) + "</td>";
    for (const Col& c : cols) {
      const std::string_view key = c.key;
      const bool rate = c.kind == Col::Rate;
      double v = key == "flops" ? (cost ? num(*cost, "flops", NAN) * 1e-9 : NAN) : num(*r, key, NAN);
      if (rate && !costed) v = NAN;  // an op without a cost model: "--", as the text table
      std::string text;
      if (!std::isfinite(v)) text = rate ? "--" : "–";
      else if (c.kind == Col::Pct) text = fmt::format("{:.2f} %", v);
      else if (c.kind == Col::Time) text = format_time_ns(v);
      else if (c.kind == Col::Bytes) text = fmt_bytes(v);
      else if (c.kind == Col::Count) text = fmt::format("{:.0f}", v);
      else text = fmt::format("{:.3f}", v);
      body += "<td class=\"num\" data-v=\"" + (std::isfinite(v) ? fmt::format("{}", v) : std::string()) + "\">" +
              html_escape(text) + "</td>";
    }
    body += "</tr>\n";
  }
  return "<table class=\"data sortable ops\"><thead>" + head + "</thead><tbody>\n" + body + "</tbody></table>\n";
}

void section_tables(Page& pg, const std::vector<VariantData>& vs) {
  pg.h2("tables", "Profiler tables");
  bool any = false, any_sortable = false;
  for (const VariantData& v : vs) {
    const std::string sortable = v.summary ? sortable_op_table(*v.summary) : "";
    if (v.table.empty() && sortable.empty()) continue;
    pg.raw("<h3>" + html_escape(v.name) + "</h3>\n" + sortable);
    any_sortable = any_sortable || !sortable.empty();
    if (!v.table_csv.empty())
      pg.raw("<p class=\"note\">Every row as CSV, for a spreadsheet or pandas: <a href=\"" +
             html_escape(href_for_file(v.table_csv)) + "\">" + html_escape(v.table_csv) + "</a></p>\n");
    if (!v.table.empty()) {
      // The table as torch prints it, its totals line included, in a box that scrolls sideways (its rows are as
      // wide as torch's); the footnotes under it wrap, so that no sentence runs out of the box. Folded under the
      // sortable table when there is one, open when it is all there is.
      auto [table, footnotes] = split_table_footnotes(v.table);
      // The table file's Uneven lines (profile and compare write them under the table) are the notes the page
      // shows below, from the summary: once, outside the fold.
      if (!v.uneven.empty()) footnotes = without_uneven_lines(footnotes);
      pg.raw(std::string(sortable.empty() ? "<details open>" : "<details>") +
             "<summary>as torch prints it (" + html_escape(v.name) + ".table.txt)</summary>\n<pre class=\"table\">" +
             html_escape(table) + "</pre>\n");
      if (!footnotes.empty()) pg.raw("<pre class=\"table-notes\">" + html_escape(footnotes) + "</pre>\n");
      pg.raw("</details>\n");
    }
    for (const std::string& line : v.uneven) pg.note(line);
    any = true;
  }
  if (any_sortable)
    pg.note("Click a column's header to sort by it (numbers largest first, names A to Z; again to reverse). Every "
            "op is listed, sorted by CPU total to begin with; GFLOPs, GFLOP/s, GB/s and FLOP/B are the cost model's (-- for an op "
            "without one); the text as torch prints it, with its footnotes, is folded under each table.");
  if (!any)
    pg.note(std::any_of(vs.begin(), vs.end(), [](const VariantData& v) { return v.summary.has_value(); })
                ? "No profiler tables: the summaries in this directory carry no table text."
                : "No profiler tables: this directory holds no <variant>.summary.json (`attnprof profile` or "
                  "`attnprof compare` writes them).");
  pg.end_section();
}

// --- traces ---
void section_traces(Page& pg, const fs::path& dir, const std::vector<VariantData>& vs,
                    const std::set<std::string>& left_out) {
  pg.h2("traces", "Traces and data files");
  std::set<std::string> files;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string n = it->path().filename().string();
    auto ends = [&](std::string_view suf) { return n.size() >= suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0; };
    if (ends(".trace.json") || ends(".trace.json.gz") || ends(".stacks.txt") || ends(".table.csv") ||
        n == "compare.csv" || n == "sweep.csv" || n == "roofline.csv")
      files.insert(n);
  }
  for (const VariantData& v : vs)
    if (!v.trace_file.empty() && fs::is_regular_file(dir / v.trace_file, ec)) files.insert(v.trace_file);
  if (files.empty()) {
    pg.note("No trace or data files in this directory.");
    pg.end_section();
    return;
  }
  pg.raw("<p>Open a trace in <a href=\"https://ui.perfetto.dev\" rel=\"noopener noreferrer\">ui.perfetto.dev</a> "
         "(<i>Open trace file</i>; the trace stays on your machine) or in <code>chrome://tracing</code> "
         "(<i>Load</i>); a <code>.stacks.txt</code> (folded stacks) in "
         "<a href=\"https://www.speedscope.app\" rel=\"noopener noreferrer\">speedscope.app</a> or with "
         "<code>flamegraph.pl</code>; a <code>.csv</code> (a table's rows: <code>&lt;variant&gt;.table.csv</code> the "
         "profiler table's, <code>compare.csv</code>, <code>roofline.csv</code> and <code>sweep.csv</code> the runs') in a spreadsheet or "
         "with <code>pandas.read_csv</code>. The links below point at the files next to this page.</p>\n<ul>\n");
  for (const auto& f : files) {
    const auto size = fs::file_size(dir / f, ec);
    const std::string why = left_out.count(f) ? "; another run's, left out of this page (see its top)" : "";
    pg.raw("<li><a href=\"" + html_escape(href_for_file(f)) + "\">" + html_escape(f) + "</a> <span class=\"note\">(" +
           html_escape((ec ? std::string("?") : fmt_bytes(double(size))) + why) + ")</span></li>\n");
  }
  pg.raw("</ul>\n");
  pg.end_section();
}

constexpr const char* kStyle = R"CSS(
:root { color-scheme: light; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #1d1d1f; background: #fafafa; }
header { background: #1f2d3d; color: #fff; padding: 18px 32px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 0; opacity: .85; font-size: 13px; }
nav { padding: 8px 32px; background: #eef1f5; border-bottom: 1px solid #d9dee5; font-size: 14px; }
nav a { margin-right: 16px; color: #1f4e79; text-decoration: none; white-space: nowrap; display: inline-block; }
main { max-width: 1100px; padding: 8px 32px 48px; }
section { margin-top: 28px; }
h2 { font-size: 19px; border-bottom: 2px solid #d9dee5; padding-bottom: 4px; }
h3 { font-size: 15px; margin-bottom: 4px; }
table.data { border-collapse: collapse; font-size: 13px; margin: 8px 0; background: #fff; display: block; max-width: 100%; overflow-x: auto; }
table.data td:first-child { max-width: 28em; overflow-wrap: anywhere; }
table.data th, table.data td { border: 1px solid #d9dee5; padding: 4px 8px; }
table.data th { background: #eef1f5; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.data td:first-child { white-space: nowrap; }
td.skipped { color: #8a5a00; }
td.far { color: #a33; font-weight: 600; }
figure { margin: 12px 0 20px; background: #fff; border: 1px solid #e3e6ea; padding: 10px; overflow-x: auto; }
figcaption { font-size: 13px; color: #555; margin-top: 6px; }
.note { font-size: 13px; color: #666; }
table.sortable th { cursor: pointer; white-space: nowrap; user-select: none; }
table.sortable th[aria-sort="descending"]::after { content: " ▼"; }
table.sortable th[aria-sort="ascending"]::after { content: " ▲"; }
table.ops { font-size: 12px; }
table.ops th, table.ops td { padding: 3px 6px; }
details > summary { cursor: pointer; color: #444; margin: 4px 0; }
pre.table { font: 11.5px/1.3 ui-monospace, "DejaVu Sans Mono", monospace; background: #fff; border: 1px solid #e3e6ea; padding: 8px; overflow-x: auto; }
pre.table-notes { font: 11.5px/1.3 ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre-wrap; margin: -6px 0 12px; padding: 0 8px; color: #444; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
)CSS";

// Hands each spec to vega-embed and marks the chart's element when it has rendered (the browser test waits
// for data-charts-done, then counts the SVG marks of each chart).
constexpr const char* kBootstrap = R"JS(
(function () {
  var data = JSON.parse(document.getElementById('attnprof-data').textContent);
  var pending = data.charts.map(function (c) {
    var el = document.getElementById(c.id);
    return vegaEmbed(el, c.spec, { renderer: 'svg', actions: false, mode: 'vega-lite' })
      .then(function () { el.setAttribute('data-rendered', 'ok'); })
      .catch(function (e) {
        el.setAttribute('data-rendered', 'error');
        el.textContent = 'This chart could not be drawn: ' + e.message;
        console.error('attnprof report: chart ' + c.id + ' (' + c.kind + '): ' + e.message);
      });
  });
  Promise.all(pending).then(function () {
    document.body.setAttribute('data-charts-done', String(pending.length));
  });
  // Sortable tables: a click on a header sorts the rows by that column, descending first (as torch's sort
  // keys), again to reverse; numbers by their data-v (empty: last either way), names as text.
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (t) {
    var heads = t.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener('click', function () {
        var text = th.getAttribute('data-sort') === 'text';
        var was = th.getAttribute('aria-sort');
        var desc = text ? was === 'ascending' : was !== 'descending';  // names A to Z first, numbers largest first
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', desc ? 'descending' : 'ascending');
        var body = t.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[col], y = b.cells[col];
          if (text) return (desc ? -1 : 1) * x.textContent.localeCompare(y.textContent);
          var u = x.getAttribute('data-v'), v = y.getAttribute('data-v');
          if (u === '' || v === '') return (u === '') - (v === '');
          return (desc ? -1 : 1) * (parseFloat(u) - parseFloat(v));
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
})();
)JS";

// A library script, inlined. The pinned builds contain neither "</script" nor "<!--"; should a future
// version do so, it goes in as a base64 data: URL instead, which no content can break out of.
std::string script_tag(const std::string& js, const std::string& what) {
  std::string lower(js.size(), '\0');
  std::transform(js.begin(), js.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (lower.find("</script") == std::string::npos && lower.find("<!--") == std::string::npos)
    return "<script data-lib=\"" + html_escape(what) + "\">\n" + js + "\n</script>\n";
  static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string enc;
  enc.reserve((js.size() + 2) / 3 * 4);
  for (size_t i = 0; i < js.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(js[i])) << 16;
    if (i + 1 < js.size()) v |= uint32_t(uint8_t(js[i + 1])) << 8;
    if (i + 2 < js.size()) v |= uint32_t(uint8_t(js[i + 2]));
    enc += b64[(v >> 18) & 63];
    enc += b64[(v >> 12) & 63];
    enc += i + 1 < js.size() ? b64[(v >> 6) & 63] : '=';
    enc += i + 2 < js.size() ? b64[v & 63] : '=';
  }
  return "<script data-lib=\"" + html_escape(what) + "\" src=\"data:text/javascript;base64," + enc + "\"></script>\n";
}

std::string executable_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::string package_version(const fs::path& pkg_dir) {
  Input in = read_json(pkg_dir / "package.json");
  return in.doc ? str(*in.doc, "version", "?") : "?";
}

}  // namespace

// ---- the chart library -------------------------------------------------------------------------------------
namespace {
// The directory the user named, --web-dir or else $ATTNPROF_WEB_DIR, and which of the two named it ("" when
// neither did). It is the only one tried: falling back would hide a typo and inline a library the user did not
// ask for.
std::pair<std::string, std::string> named_web_dir(const std::string& web_dir) {
  if (!web_dir.empty()) return {web_dir, "--web-dir"};
  if (const char* env = std::getenv("ATTNPROF_WEB_DIR"); env && *env) return {env, "$ATTNPROF_WEB_DIR"};
  return {};
}
}  // namespace

std::vector<std::string> chart_library_candidates(const std::string& web_dir) {
  if (auto [named, by] = named_web_dir(web_dir); !named.empty()) return {named};
  std::vector<std::string> c;
  if (std::string exe = executable_dir(); !exe.empty()) {
    const fs::path e(exe);
    for (const fs::path& p : {e / "web", e / ".." / "web", e / ".." / ".." / "web", e / ".." / "share" / "attnprof" / "web"})
      c.push_back(p.lexically_normal().string());
  }
#ifdef ATTNPROF_WEB_DIR
  c.push_back(ATTNPROF_WEB_DIR);
#endif
  std::vector<std::string> unique;
  for (auto& s : c)
    if (std::find(unique.begin(), unique.end(), s) == unique.end()) unique.push_back(s);
  return unique;
}

ChartLibrary load_chart_library(const std::string& web_dir) {
  const auto candidates = chart_library_candidates(web_dir);
  for (const std::string& dir : candidates) {
    const fs::path nm = fs::path(dir) / "node_modules";
    std::string why;
    auto vega = read_file(nm / "vega/build/vega.min.js", &why);
    // A file that is there and cannot be used (a directory, a FIFO, too large) is said as such, not as missing.
    if (!vega && !why.empty())
      ATTNPROF_FAIL("report: {} cannot be used: {}; run `npm ci --prefix {}`", (nm / "vega/build/vega.min.js").string(),
                    why, dir);
    if (!vega) continue;
    auto vl = read_file(nm / "vega-lite/build/vega-lite.min.js");
    auto ve = read_file(nm / "vega-embed/build/vega-embed.min.js");
    if (!vl || !ve)
      ATTNPROF_FAIL("report: {} has vega but not vega-lite and vega-embed; run `npm ci --prefix {}`", nm.string(), dir);
    // An empty library (an interrupted install) would give a page that draws no chart.
    for (const auto& [text, name] : {std::pair{&*vega, "vega/build/vega.min.js"},
                                     std::pair{&*vl, "vega-lite/build/vega-lite.min.js"},
                                     std::pair{&*ve, "vega-embed/build/vega-embed.min.js"}})
      if (text->empty())
        ATTNPROF_FAIL("report: {} is empty, not the chart library; run `npm ci --prefix {}`", (nm / name).string(), dir);
    ChartLibrary lib;
    lib.web_dir = dir;
    lib.vega = std::move(*vega);
    lib.vega_lite = std::move(*vl);
    lib.vega_embed = std::move(*ve);
    lib.vega_version = package_version(nm / "vega");
    lib.vega_lite_version = package_version(nm / "vega-lite");
    lib.vega_embed_version = package_version(nm / "vega-embed");
    return lib;
  }
  if (const auto [named, by] = named_web_dir(web_dir); !named.empty())
    ATTNPROF_FAIL("report: the chart library directory '{}' ({}) holds no node_modules/vega/build/vega.min.js; run "
                  "`npm ci --prefix {}` with a copy of web/package.json there, or {}",
                  named, by, named,
                  by == "--web-dir" ? "leave --web-dir out to search $ATTNPROF_WEB_DIR when set, else web/"
                                    : "unset ATTNPROF_WEB_DIR to search web/");
  std::string tried;
  for (const auto& d : candidates) tried += (tried.empty() ? " " : ", ") + d + "/node_modules/vega/build/vega.min.js";
  ATTNPROF_FAIL(
      "report: the chart library (vega, vega-lite, vega-embed from npm) is not installed; looked for{}; "
      "install it with `npm ci --prefix web` in the attnprof source tree (scripts/setup.sh does this), "
      "or point ATTNPROF_WEB_DIR at a directory whose node_modules holds them",
      tried);
}

// ---- the page ----------------------------------------------------------------------------------------------
namespace {

std::string render_page(const fs::path& dir, const html_run::Run& run, const ChartLibrary& lib, const HtmlOptions& opt) {
  const Input& compare = run.compare;
  const Input& sweep = run.sweep;
  const Input& roofline = run.roofline;
  const std::vector<VariantData>& vs = run.variants;
  const std::vector<std::string>& op_notes = run.op_notes;

  Page pg;
  auto add_name = [&](const std::string& n) {
    if (!n.empty() && std::find(pg.variants.begin(), pg.variants.end(), n) == pg.variants.end()) pg.variants.push_back(n);
  };
  for (const VariantData& v : vs) add_name(v.name);
  for (const Input* in : {&sweep, &roofline})
    if (in->doc)
      if (const json* arr = member(*in->doc, {"points", "ops"}); arr && arr->is_array())
        for (const json& p : *arr) add_name(str(p, "variant"));
  pg.order_variants();
  if (!run.notes.empty()) {
    pg.h2("left-out", "Files left out of this page");
    for (const auto& n : run.notes) pg.note(n);
    pg.end_section();
  }
  section_compare(pg, compare);
  section_ops(pg, vs, op_notes);
  section_flame(pg, vs);
  section_changes(pg, vs);
  section_sweep(pg, sweep, compare.doc);
  section_roofline(pg, roofline, compare.doc, vs);
  section_memory(pg, vs);
  section_timeline(pg, vs);
  section_tables(pg, vs);
  section_traces(pg, dir, vs, run.left_out);

  std::string subtitle = "attnprof " ATTNPROF_VERSION;
  if (compare.doc) {
    if (const json* m = member(*compare.doc, {"machine"}); m && !str(*m, "cpu").empty()) subtitle += " · " + str(*m, "cpu");
  }
  subtitle += fmt::format(" · charts: Vega {}, Vega-Lite {}, vega-embed {} (inlined; this page loads nothing from the network)",
                          lib.vega_version, lib.vega_lite_version, lib.vega_embed_version);
  std::string nav;
  for (const auto& [id, title] : pg.toc()) nav += "<a href=\"#" + id + "\">" + html_escape(title) + "</a>";

  json data = {{"generator", "attnprof " ATTNPROF_VERSION}, {"charts", pg.charts()}};
  std::string page;
  page.reserve(lib.vega.size() + lib.vega_lite.size() + lib.vega_embed.size() + pg.html().size() + 65536);
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          // Everything is inline: forbid the page from fetching anything at all.
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline' "
          "'unsafe-eval' data:; style-src 'unsafe-inline'; img-src data:; font-src data:\">\n"
          "<title>" + html_escape(opt.title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  page += "<header><h1>" + html_escape(opt.title) + "</h1><p>" + html_escape(subtitle) + "</p></header>\n";
  page += "<nav>" + nav + "</nav>\n<main>\n" + pg.html() + "</main>\n";
  page += "<script type=\"application/json\" id=\"attnprof-data\">" + script_json(data) + "</script>\n";
  page += script_tag(lib.vega, "vega " + lib.vega_version);
  page += script_tag(lib.vega_lite, "vega-lite " + lib.vega_lite_version);
  page += script_tag(lib.vega_embed, "vega-embed " + lib.vega_embed_version);
  page += std::string("<script>") + kBootstrap + "</script>\n</body>\n</html>\n";
  return page;
}

// "<dir>/<file>: <why>" for each input of `run` that is there but could not be used.
std::vector<std::string> unusable_lines(const std::string& out_dir, const html_run::Run& run) {
  std::vector<std::string> lines;
  for (const auto& [file, why] : run.unusable)
    lines.push_back(fmt::format("{}: {}", file.empty() ? out_dir : (fs::path(out_dir) / file).string(), why));
  return lines;
}

// With HtmlOptions::require_input: NoReportInput when `run` has nothing the page can draw.
void require_input(const std::string& out_dir, const html_run::Run& run) {
  if (run.usable > 0) return;
  std::vector<std::string> problems = unusable_lines(out_dir, run);
  const size_t files = std::count_if(run.unusable.begin(), run.unusable.end(), [](const auto& u) { return !u.first.empty(); });
  if (files == 0)
    throw NoReportInput(fmt::format("report: {} holds no compare.json, sweep.json, roofline.json or "
                                    "<variant>.summary.json, so there is nothing to draw and no report.html was "
                                    "written (run `attnprof compare --out {}` first)",
                                    out_dir, out_dir),
                        std::move(problems));
  throw NoReportInput(files == 1 ? fmt::format("report: the one result file in {} could not be used (named above), "
                                               "so no report.html was written", out_dir)
                                 : fmt::format("report: none of the {} result files in {} could be used (each named "
                                               "above), so no report.html was written", files, out_dir),
                      std::move(problems));
}

}  // namespace

std::string render_html_report(const std::string& out_dir, const ChartLibrary& lib, const HtmlOptions& opt) {
  const fs::path dir(out_dir);
  return render_page(dir, html_run::read_run(dir, kMaxSpans), lib, opt);
}

namespace {

bool is_report_input(const std::string& name) { return name.ends_with(".json") || name.ends_with(".json.gz"); }

// The page is written through a link to its target: a page that is one of the files it is drawn from
// (compare.json, a summary, a trace), or a link to where a run will write one, would replace that file.
void refuse_page_over_input(const std::string& out_dir, const HtmlOptions& opt) {
  std::error_code ec;
  const fs::path path = fs::path(out_dir) / opt.file_name;
  for (auto it = fs::directory_iterator(out_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == opt.file_name || !is_report_input(name)) continue;
    std::error_code same_ec;
    if (fs::equivalent(path, it->path(), same_ec) && !same_ec)
      ATTNPROF_FAIL("report: '{}' is the same file as '{}', which the report reads", path.string(), it->path().string());
  }
  // A link to any other file of the directory, there or not yet (the run writes its tables, texts and CSV there
  // too, and the page written through the link would replace one): follow the links by hand, as
  // weakly_canonical stops at the first name that does not exist. A link to a file outside is the user's choice.
  fs::path target = path;
  std::error_code link_ec;
  for (int hops = 0; hops < 40 && fs::is_symlink(target, link_ec); ++hops) {
    const fs::path next = fs::read_symlink(target, link_ec);
    if (link_ec) return;
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  if (target == path) return;
  target = fs::weakly_canonical(target, link_ec);
  std::error_code dir_ec;
  if (!link_ec && target.parent_path() == fs::weakly_canonical(out_dir, dir_ec) && !dir_ec &&
      target.filename() != opt.file_name)
    ATTNPROF_FAIL("report: '{}' links to '{}', a file of the run's directory that the page would replace",
                  path.string(), target.string());
}

}  // namespace

void check_html_report_possible(const std::string& out_dir, const HtmlOptions& opt) {
  std::error_code ec;
  if (fs::is_directory(out_dir, ec)) {
    refuse_page_over_input(out_dir, opt);
    check_output_file((fs::path(out_dir) / opt.file_name).string());  // a directory, a dangling link, ...
  }
  (void)load_chart_library(opt.web_dir);
}

std::string write_html_report(const std::string& out_dir, const HtmlOptions& opt) {
  std::error_code ec;
  if (!fs::is_directory(out_dir, ec)) ATTNPROF_FAIL("report: {} is not a directory", out_dir);
  refuse_page_over_input(out_dir, opt);
  const std::string path = (fs::path(out_dir) / opt.file_name).string();
  check_output_file(path);  // before the directory is read
  const html_run::Run run = html_run::read_run(out_dir, kMaxSpans);
  if (opt.require_input) require_input(out_dir, run);
  const ChartLibrary lib = load_chart_library(opt.web_dir);
  write_text_atomic(path, render_page(out_dir, run, lib, opt));
  if (opt.unusable) *opt.unusable = unusable_lines(out_dir, run);
  return path;
}

}  // namespace attnprof::report
