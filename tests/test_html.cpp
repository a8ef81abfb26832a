// The HTML report: escaping, self-containment, and sections that come and go with their input files.
// The real chart library is not needed here (a stub library stands in for it); tests/browser renders the
// page with the real one in Chromium.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <fstream>
#include <functional>
#include <regex>
#include <map>
#include <set>
#include <random>
#include <tuple>
#include <sys/wait.h>
#include <zlib.h>

#include <fmt/format.h>

#include "attnprof/analysis.h"
#include "attnprof/error.h"
#include "attnprof/html.h"
#include "attnprof/report.h"
#include "device_profile_fixture.h"
#include "io/file.h"
#include "report/chart_layout.h"
#include "report/text_width.h"
#include "report/html_run.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace attnprof::report;

namespace {

const fs::path kFixtures = fs::path(ATTNPROF_SOURCE_DIR) / "tests/fixtures/report";
// The fixture run's files named, copied into `dir` (a test's own run directory, to edit or leave out).
void copy_fixtures(const fs::path& dir, std::initializer_list<const char*> files) {
  for (const char* f : files) fs::copy_file(kFixtures / f, dir / f);
}

ChartLibrary stub_library() {
  ChartLibrary lib;
  lib.web_dir = "(stub)";
  lib.vega = "window.vega = {};";
  lib.vega_lite = "window.vegaLite = {};";
  lib.vega_embed = "window.vegaEmbed = function () { return Promise.resolve(); };";
  lib.vega_version = lib.vega_lite_version = lib.vega_embed_version = "stub";
  return lib;
}

void spit(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

// A fresh directory under the build tree, removed at the end of the test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    path = fs::path(ATTNPROF_BINARY_DIR) / "test-html" / name;
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// The JSON data block, parsed back as the page's script would (JSON.parse reads \u escapes the same way).
json data_block(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"attnprof-data\">";
  const auto a = page.find(open);
  EXPECT_NE(a, std::string::npos);
  const auto b = page.find("</script>", a);
  return json::parse(page.substr(a + open.size(), b - a - open.size()));
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(HtmlEscape, EntitiesForEveryMarkupCharacter) {
  EXPECT_EQ(html_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(html_escape("plain text 1.5 ms"), "plain text 1.5 ms");
  EXPECT_EQ(html_escape(""), "");
}

TEST(ScriptJson, NoMarkupSurvivesAndJsonReadsBack) {
  const std::string evil = "</script><script>alert(1)</script><!-- & \xE2\x80\xA8 \xE2\x80\xA9 >";
  const json j = {{"name", evil}, {"list", {evil, 1.5, true}}};
  const std::string s = script_json(j);
  for (const char* bad : {"<", ">", "&", "\xE2\x80\xA8", "\xE2\x80\xA9"})
    EXPECT_EQ(s.find(bad), std::string::npos) << "found " << bad << " in " << s;
  EXPECT_NE(s.find("\\u003c/script\\u003e"), std::string::npos);
  EXPECT_NE(s.find("\\u2028"), std::string::npos);
  EXPECT_EQ(json::parse(s), j);
}

TEST(ScriptJson, InvalidUtf8DoesNotThrow) {
  const json j = {{"name", std::string("bad \xFF byte")}};
  EXPECT_NO_THROW((void)script_json(j));
}

TEST(HrefForFile, RelativeAndPercentEncoded) {
  EXPECT_EQ(href_for_file("naive.trace.json"), "naive.trace.json");
  EXPECT_EQ(href_for_file("a b\"<&>.json"), "a%20b%22%3C%26%3E.json");
  EXPECT_EQ(href_for_file("javascript:alert(1)"), "javascript%3Aalert%281%29");
}

TEST(FitWidthMiddle, KeepsBothEnds) {
  using attnprof::report::detail::fit_width_middle;
  EXPECT_EQ(fit_width_middle("matmul", 28), "matmul");
  EXPECT_EQ(fit_width_middle("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 11), "sm90_…_tn_n");
  EXPECT_EQ(fit_width_middle("Q·Kᵀ·V·Q·Kᵀ", 5), "Q·…Kᵀ");  // never inside a UTF-8 sequence
  EXPECT_EQ(fit_width_middle("abcdef", 2), "a…");
}

// Labels beside chart points: none covers another label or another point's ring, none leaves the plot, one
// label for points of one name that (nearly) coincide, and a label with no clear place is counted.
TEST(PlaceLabels, ClearOfEachOtherAndOfThePoints) {
  using attnprof::report::detail::LabelPoint;
  using attnprof::report::detail::place_labels;
  std::vector<LabelPoint> pts = {{100, 100, "matmul"}, {104, 102, "matmul"}, {100, 100, "softmax"},
                                 {118, 100, "mul"},    {5, 5, "corner"},     {600, 300, "far"}};
  const auto out = place_labels(pts, 640, 380);
  struct Box { double x0, y0, x1, y1; };
  std::vector<Box> boxes;
  std::set<size_t> labelled;
  for (const auto& l : out.placed) {
    const double w = 6.0 * double(pts[l.point].text.size());
    boxes.push_back({l.right_aligned ? l.x - w : l.x, l.y - 6, l.right_aligned ? l.x : l.x + w, l.y + 6});
    labelled.insert(l.point);
  }
  EXPECT_FALSE(labelled.count(1)) << "the second matmul, 4 px from the first, shares its label";
  EXPECT_TRUE(labelled.count(5));
  EXPECT_EQ(out.placed.size() + out.left_off, 5u);  // six points, one merged
  for (size_t i = 0; i < boxes.size(); ++i) {
    const Box& b = boxes[i];
    EXPECT_TRUE(b.x0 >= 0 && b.x1 <= 640 && b.y0 >= 0 && b.y1 <= 380) << i;
    for (size_t j = 0; j < i; ++j)
      EXPECT_FALSE(b.x0 < boxes[j].x1 && boxes[j].x0 < b.x1 && b.y0 < boxes[j].y1 && boxes[j].y0 < b.y1) << i << " " << j;
    for (const LabelPoint& p : pts)
      EXPECT_FALSE(b.x0 < p.x + 9 && p.x - 9 < b.x1 && b.y0 < p.y + 9 && p.y - 9 < b.y1) << i << " covers " << p.text;
  }
  // A point boxed in on every side keeps no label, and says so.
  std::vector<LabelPoint> crowded = {{50, 50, "a-long-name"}};
  for (int dx = -3; dx <= 3; ++dx)
    for (int dy = -3; dy <= 3; ++dy)
      if (dx || dy) crowded.push_back({50.0 + 17 * dx, 50.0 + 17 * dy, ""});
  const auto none = place_labels(crowded, 640, 380);
  EXPECT_TRUE(none.placed.empty());
  EXPECT_EQ(none.left_off, 1u);
  // A point near one of its text whose label found no place (the corner of a 30 px high plot) gets its own.
  const auto second = place_labels({{3, 3, "ab"}, {23, 13, "ab"}}, 640, 30);
  ASSERT_EQ(second.placed.size(), 1u);
  EXPECT_EQ(second.placed[0].point, 1u);
  EXPECT_EQ(second.left_off, 1u);
  // A chart's line (a roof) right of a point, through where its label would go: the label goes left of it.
  const auto beside = place_labels({{100, 100, "abc"}}, 640, 380, {{105, 97, 300, 97}});
  ASSERT_EQ(beside.placed.size(), 1u);
  EXPECT_TRUE(beside.placed[0].right_aligned);
  EXPECT_FALSE(place_labels({{100, 100, "abc"}}, 640, 380).placed[0].right_aligned);
  // Lines through every place: crossed rather than the label left off, the drops' (level 1) before a roof's.
  // (Horizontal lines through the middle of every place: beside the point, a line above and below, two lines.)
  std::vector<attnprof::report::detail::LabelSegment> fence;
  for (double y : {73.0, 85.0, 100.0, 115.0, 127.0}) fence.push_back({0, y, 640, y});
  EXPECT_EQ(place_labels({{100, 100, "abc"}}, 640, 380, fence).placed.size(), 1u);
  // Drops above and below, a roof through the places beside it: the label crosses a drop, above the point.
  for (auto& s : fence) s.level = s.ay == 100.0 ? 2 : 1;
  const auto over_drop = place_labels({{100, 100, "abc"}}, 640, 380, fence);
  ASSERT_EQ(over_drop.placed.size(), 1u);
  EXPECT_EQ(over_drop.placed[0].y, 85.0);
}

// Leader lines: in crowded clusters (a fixed pseudo-random draw), no leader passes through a label other than its
// own or through another point's ring, checked by walking each line in quarter-pixel steps.
TEST(PlaceLabels, LeaderLinesCrossNoLabelAndNoOtherPoint) {
  using attnprof::report::detail::LabelPoint;
  using attnprof::report::detail::place_labels;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> at(150, 250);
  size_t leaders = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<LabelPoint> pts;
    for (int i = 0; i < 14; ++i) pts.push_back({at(rng), at(rng), "op" + std::to_string(i)});
    const auto out = place_labels(pts, 400, 400);
    struct Box { double x0, y0, x1, y1; };
    std::vector<Box> boxes;
    for (const auto& l : out.placed) {
      const double w = 6.0 * double(pts[l.point].text.size());
      boxes.push_back({l.right_aligned ? l.x - w : l.x, l.y - 6, l.right_aligned ? l.x : l.x + w, l.y + 6});
    }
    const auto inside = [](const Box& b, double x, double y) { return b.x0 < x && x < b.x1 && b.y0 < y && y < b.y1; };
    for (size_t i = 0; i < out.placed.size(); ++i) {
      const auto& l = out.placed[i];
      if (!l.leader) continue;
      ++leaders;
      const LabelPoint& p = pts[l.point];
      const double ex = l.x, ey = l.y < p.y ? l.y + 6 : l.y - 6;  // the text's near edge, as html.cpp draws it
      for (int s = 0; s <= 400; ++s) {
        const double t = s / 400.0, x = p.x + t * (ex - p.x), y = p.y + t * (ey - p.y);
        for (size_t j = 0; j < boxes.size(); ++j)
          EXPECT_FALSE(j != i && inside(boxes[j], x, y)) << "trial " << trial << ": " << p.text << "'s leader crosses "
                                                         << pts[out.placed[j].point].text << "'s label";
        for (const LabelPoint& q : pts)
          if (std::hypot(q.x - p.x, q.y - p.y) > 9)
            EXPECT_FALSE(inside({q.x - 9, q.y - 9, q.x + 9, q.y + 9}, x, y))
                << "trial " << trial << ": " << p.text << "'s leader crosses " << q.text;
      }
    }
  }
  EXPECT_GT(leaders, 0u) << "the draw should need some leader lines";
}

// A linear axis across zero labels zero, in steps of 1, 2 or 5 times a power of ten.
TEST(ZeroTicks, StepsOfOneTwoFiveThroughZero) {
  using attnprof::report::detail::zero_ticks;
  EXPECT_EQ(zero_ticks(-150, 380), (std::vector<double>{-200, -100, 0, 100, 200, 300, 400}));
  EXPECT_EQ(zero_ticks(-0.31, 0.07), (std::vector<double>{-0.4, -0.3, -0.2, -0.1, 0, 0.1}));
  EXPECT_EQ(zero_ticks(2, 9), (std::vector<double>{0, 2, 4, 6, 8, 10}));  // zero joins an all-positive range
  EXPECT_EQ(zero_ticks(-12, -3), (std::vector<double>{-12, -10, -8, -6, -4, -2, 0}));
  EXPECT_TRUE(zero_ticks(0, 0).empty());
  EXPECT_TRUE(zero_ticks(-1, NAN).empty());
  EXPECT_TRUE(zero_ticks(-1e308, 1e308).empty());  // a span past the doubles
}

TEST(LogTicks, OneTwoFivePerDecade) {
  using attnprof::report::detail::log_ticks;
  EXPECT_EQ(log_ticks(0.03, 3.6), (std::vector<double>{0.05, 0.1, 0.2, 0.5, 1, 2}));
  EXPECT_EQ(log_ticks(1, 1000), (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}));
  // Past four decades, the powers of ten alone.
  EXPECT_EQ(log_ticks(0.01, 1e4), (std::vector<double>{0.01, 0.1, 1, 10, 100, 1000, 10000}));
  // Figures no run writes, past the normal doubles: no ticks (the library's own), never an exception.
  EXPECT_TRUE(log_ticks(8e-311, 1).empty());
  EXPECT_TRUE(log_ticks(1, 1e307 * 5).empty());
  EXPECT_EQ(log_ticks(1e-5, 3e-5), (std::vector<double>{1e-5, 2e-5}));
  EXPECT_EQ(log_ticks(3e-5, 7e-5), (std::vector<double>{3e-5, 4e-5, 5e-5, 6e-5, 7e-5}));
  // Too narrow for two of 1-2-5: every digit.
  EXPECT_EQ(log_ticks(0.52, 0.95), (std::vector<double>{0.6, 0.7, 0.8, 0.9}));
  EXPECT_EQ(log_ticks(3, 7), (std::vector<double>{3, 4, 5, 6, 7}));
  // Exactly the decimal figures, not 0.30000000000000004.
  for (double t : log_ticks(0.1, 0.9)) EXPECT_EQ(fmt::format("{}", t).size() <= 3, true) << t;
  EXPECT_EQ(log_ticks(9, 19000, 2), (std::vector<double>{10, 100, 1000, 10000}));  // a narrow axis
  EXPECT_TRUE(log_ticks(0, 10).empty());
  EXPECT_TRUE(log_ticks(5, 5).empty());
  EXPECT_TRUE(log_ticks(NAN, 5).empty());
  EXPECT_TRUE(log_ticks(1, INFINITY).empty());
}

// Every log axis of the page is labelled at 1-2-5 values inside its domain, and its domain holds what is drawn
// on it (the sweep's y range had been the chart library's round decades, 0.01..10 for points of 0.03..3.6).
TEST(HtmlReport, LogAxesLabelledOneTwoFiveAndFitTheirData) {
  const json data = data_block(render_html_report(kFixtures.string(), stub_library()));
  int axes = 0;
  for (const json& c : data["charts"]) {
    const std::string kind = c["kind"];
    if (kind != "sweep-time" && kind != "sweep-memory" && kind != "sweep-rate" && kind != "roofline" &&
        kind != "compare-memory")
      continue;
    const json& layers = c["spec"].contains("layer") ? c["spec"]["layer"] : c["spec"]["spec"]["layer"];
    const json& enc = layers[0]["encoding"];
    for (const char* ch : {"x", "y"}) {
      const json& e = enc[ch];
      if (!e.contains("scale") || e["scale"]["type"] != "log" || (kind.rfind("sweep", 0) == 0 && std::string(ch) == "x"))
        continue;
      ++axes;
      SCOPED_TRACE(kind + " " + ch);
      ASSERT_TRUE(e["scale"].contains("domain"));
      const double lo = e["scale"]["domain"][0], hi = e["scale"]["domain"][1];
      ASSERT_TRUE(e["axis"].contains("values"));
      // (compare-memory's panels are half the page wide: powers of ten alone past two decades.)
      EXPECT_EQ(e["axis"]["values"].get<std::vector<double>>(),
                attnprof::report::detail::log_ticks(lo, hi, kind == "compare-memory" ? 2 : 4));
      EXPECT_GE(e["axis"]["values"].size(), 2u);
      // What the first layer draws on this channel lies in the domain, and fills at least a third of it
      // in log terms (the axis is not far wider than its data).
      const std::string field = e["field"];
      const json& values = kind == "compare-memory" ? c["spec"]["data"]["values"] : layers[0]["data"]["values"];
      double dlo = INFINITY, dhi = 0;
      for (const json& v : values)
        if (v.contains(field) && v[field].is_number() && v[field].get<double>() > 0) {
          dlo = std::min(dlo, v[field].get<double>());
          dhi = std::max(dhi, v[field].get<double>());
        }
      ASSERT_GT(dhi, 0);
      EXPECT_GE(dlo, lo);
      EXPECT_LE(dhi, hi);
      if (kind != "roofline" && kind != "compare-memory") EXPECT_GT(std::log(dhi / dlo), std::log(hi / lo) / 3);
    }
  }
  EXPECT_EQ(axes, 5);  // sweep-time y, sweep-memory y, roofline x and y, compare-memory x
}

// A damaged op_items entry (a field missing, of the wrong type, out of range or at odds with the others) leaves its
// summary out, as any field attnprof would not write does, with a note naming the field (test_diff checks each
// field's message): no tile point and no line, rather than a wrong one; the other summaries still draw.
TEST(HtmlReport, DamagedTileGroupsLeaveTheirSummaryOut) {
  const json good = json::parse(attnprof::io::read_file(kFixtures / "flash.summary.json"));
  auto damaged = [&](const std::function<void(json&)>& edit) {
    json s = good;
    edit(s["op_items"][0]);
    return s;
  };
  const std::vector<std::tuple<std::string, json, std::string>> cases = {
      {"a median past its group's longest", damaged([](json& o) { o["groups"][1]["median_ns"] = 1e9; }),
       "is past its longest"},
      {"slowest in no group", damaged([](json& o) { o["slowest"]["inner"] = 99; }), "the inner count of no group"},
      {"r² of 1.5", damaged([](json& o) { o["fit"]["r2"] = 1.5; }), "field &#39;r2&#39; is 1.5, over 1"},
  };
  for (const auto& [what, summary, why] : cases) {
    TempDir d("damaged-tiles");
    copy_fixtures(d.path, {"compare.json", "naive.summary.json"});
    spit(d.path / "flash.summary.json", summary.dump());
    const std::string page = render_html_report(d.path.string(), stub_library());
    std::set<std::string> kinds;
    const json data = data_block(page);  // kept: a range-for over a temporary's member would dangle
    for (const json& c : data["charts"]) kinds.insert(c["kind"].get<std::string>());
    EXPECT_FALSE(kinds.count("tiles-inside")) << what;
    EXPECT_TRUE(kinds.count("time-by-op")) << what << ": naive's summary drew too";
    EXPECT_NE(page.find("flash.summary.json is left out: flash.summary.json op_items &#39;flash_attention&#39;"),
              std::string::npos)
        << what;
    EXPECT_NE(page.find(why), std::string::npos) << what;
    EXPECT_EQ(page.find("flash&#39;s tasks"), std::string::npos) << what;
  }
}

// Tiles whose summary has no fitted line (under three groups) draw their points and no dashed line.
TEST(HtmlReport, TilesWithoutAFitDrawNoFittedLine) {
  json s = json::parse(attnprof::io::read_file(kFixtures / "flash.summary.json"));
  s["op_items"][0]["fit"] = nullptr;
  TempDir d("tiles-no-fit");
  copy_fixtures(d.path, {"compare.json", "naive.summary.json"});
  spit(d.path / "flash.summary.json", s.dump());
  const json data = data_block(render_html_report(d.path.string(), stub_library()));
  int drawn = 0;
  for (const json& c : data["charts"])
    if (c["kind"] == "tiles-inside") {
      ++drawn;
      ASSERT_EQ(c["spec"]["data"]["values"].size(), 4u);
      for (const json& r : c["spec"]["data"]["values"]) EXPECT_TRUE(r["fit_us"].is_null()) << r;
    }
  EXPECT_EQ(drawn, 1);
}

// The profiler tables keep torch's layout in a box that scrolls sideways; attnprof's footnotes under the totals
// line wrap in a block of their own (the widest of them had set the box's width: 2,128 px against a 1,100 px page).
TEST(HtmlReport, TableFootnotesWrapBelowTheTable) {
  const std::string page = render_html_report(kFixtures.string(), stub_library());
  const std::regex table(R"(<pre class="table">([^<]*)</pre>\n<pre class="table-notes">([^<]*)</pre>)");
  int tables = 0;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), table); it != std::sregex_iterator(); ++it) {
    ++tables;
    const std::string rows = (*it)[1], notes = (*it)[2];
    EXPECT_NE(rows.find("Self CPU time total: "), std::string::npos) << rows;
    EXPECT_EQ(rows.find("Profiler overhead"), std::string::npos) << rows;
    EXPECT_EQ(notes.rfind("Profiler overhead: ", 0), 0u) << notes;
  }
  EXPECT_EQ(tables, 4);  // naive, inplace, sdpa_math, flash
}

TEST(HtmlReport, FixturesGiveEverySectionAndChart) {
  const std::string page = render_html_report(kFixtures.string(), stub_library());
  for (const char* id : {"compare", "ops", "flame", "changes", "sweep", "roofline", "memory", "tables", "traces"})
    EXPECT_NE(page.find(std::string("<section id=\"") + id + "\">"), std::string::npos) << id;
  // The blog's ratios under the table, as compare prints them (fixture: naive 190, inplace 165, sdpa_math 420,
  // flash 62 ms).
  EXPECT_NE(page.find("Speed-up over naive (its ms per forward over each row&#39;s): inplace 1.15x, sdpa_math 0.45x, "
                      "flash 3.06x."),
            std::string::npos);
  // The roofline says why the unfused matmul may sit as high as the fused kernel on a causal problem.
  EXPECT_NE(page.find("On this causal problem the unfused variants&#39; matmul computes every score"), std::string::npos);
  // The comparison's columns are defined under it, as compare's footnotes define them.
  EXPECT_NE(page.find("GFLOP/s counts the attention FLOPs of one forward"), std::string::npos);
  EXPECT_NE(page.find("NMSE the mean squared error over the reference"), std::string::npos);
  const json data = data_block(page);
  std::set<std::string> kinds;
  for (const json& c : data["charts"]) {
    kinds.insert(c["kind"].get<std::string>());
    EXPECT_NE(page.find("id=\"" + c["id"].get<std::string>() + "\""), std::string::npos);
  }
  const std::set<std::string> want = {"compare",      "compare-memory", "time-by-op", "bytes-by-op", "steps-inside",
                                      "tiles-inside", "flame",          "changes",    "sweep-time",  "sweep-memory",
                                      "sweep-rate",   "roofline",       "memory",     "timeline"};
  EXPECT_EQ(kinds, want);
  // Every chart drawn per variant colours its marks by variant, in the page's one variant palette.
  for (const json& c : data["charts"])
    if (c["kind"] == "compare" || c["kind"] == "compare-memory" || c["kind"] == "memory") {
      const std::string spec = c["spec"].dump();
      EXPECT_NE(spec.find(R"("color":{"field":"variant")"), std::string::npos) << c["kind"] << ": " << spec.substr(0, 400);
    }
  // The flame graph from naive.stacks.txt (3 forwards): the threads on top, main's 570.05 ms and the worker's
  // 94.5 ms of softmax shares, per forward; attn_fwd's ops under it in name order, each starting where the
  // previous ended.
  for (const json& c : data["charts"])
    if (c["kind"] == "flame") {
      std::map<std::string, json> by;
      for (const json& r : c["spec"]["data"]["values"]) by[r["name"].get<std::string>() + "@" + r["depth"].dump()] = r;
      ASSERT_TRUE(by.count("main@0") && by.count("worker 1@0") && by.count("copy@3") && by.count("masked_fill@3") &&
                  by.count("softmax@1") && by.count("softmax@3"))
          << c["spec"]["data"]["values"];
      EXPECT_NEAR(by["main@0"]["x1"].get<double>(), 570.05 / 3, 1e-9);
      EXPECT_NEAR(by["worker 1@0"]["x0"].get<double>(), 570.05 / 3, 1e-9);
      EXPECT_NEAR(by["worker 1@0"]["x1"].get<double>(), 664.55 / 3, 1e-9);
      EXPECT_NEAR(by["softmax@1"]["x0"].get<double>(), 570.05 / 3, 1e-9);  // the worker's shares, under it
      EXPECT_NEAR(by["copy@3"]["x0"].get<double>(), 0.0, 1e-12);
      EXPECT_NEAR(by["copy@3"]["x1"].get<double>(), 22.0, 1e-9);
      EXPECT_NEAR(by["masked_fill@3"]["x0"].get<double>(), 22.0, 1e-9);
      EXPECT_NEAR(by["softmax@3"]["x1"].get<double>(), 570.0 / 3, 1e-9);  // attn_fwd's own 0.05 ms is no frame
      EXPECT_NEAR(by["main@0"]["share"].get<double>(), 100.0 * 570.05 / 664.55, 1e-9);
    }
  // Inside the fused kernel: the flash fixture's steps (its 2 threads busy 1.9 × its 61.5 ms per forward, split
  // 10/32/20/30/8 %), each the mean thread's ms per forward; the products' rate per thread in the tooltip.
  for (const json& c : data["charts"])
    if (c["kind"] == "steps-inside") {
      const json& rows = c["spec"]["data"]["values"];
      ASSERT_EQ(rows.size(), 5u);
      EXPECT_EQ(rows[1]["bar"], "flash · flash_attention");
      EXPECT_EQ(rows[1]["step"], "Q·Kᵀ");
      EXPECT_NEAR(rows[1]["ms"].get<double>(), 61.5 * 1.9 * 0.32 / 2, 1e-9);
      EXPECT_NEAR(rows[1]["share"].get<double>(), 32.0, 1e-9);
      EXPECT_EQ(rows[1]["gflops_per_thread"],
                fmt::format("{:.1f}", 2 * 64 * 0.53125 * 1024 * 1024 * 128 / (61.5e6 * 1.9 * 0.32)));
      EXPECT_EQ(rows[2]["gflops_per_thread"], "--");  // the softmax counts no FLOPs: no rate (not NaN)
      double sum = 0;
      for (const json& r : rows) sum += r["ms"].get<double>();
      EXPECT_NEAR(sum, 61.5 * 1.9 / 2, 1e-9);
    }
  // Tile by tile: the flash fixture's four groups of tiles (4 to 16 K/V blocks), each its median in µs, the rate
  // in the tooltip; the line through them and the slowest tile as profile and compare word them.
  for (const json& c : data["charts"])
    if (c["kind"] == "tiles-inside") {
      const json& rows = c["spec"]["data"]["values"];
      ASSERT_EQ(rows.size(), 4u);
      EXPECT_EQ(rows[0]["variant"], "flash");
      EXPECT_EQ(rows[0]["inner"], 4);
      EXPECT_EQ(rows[3]["inner"], 16);
      EXPECT_EQ(rows[3]["count"], 384);
      const double flops16 = 9534976 + 12 * 4194304.0;
      EXPECT_NEAR(rows[3]["median_us"].get<double>(), (14000 + flops16 / 274) * 1e-3, 1e-9);
      EXPECT_EQ(rows[3]["gflops_per_thread"], fmt::format("{:.1f}", flops16 / ((14000 + flops16 / 274) * 1.05)));
      EXPECT_EQ(c["spec"]["layer"][0]["encoding"]["x"]["title"], "K/V blocks each tile visited");
      // The fitted line, dashed, at each group's FLOPs per tile: the fixture's medians lie on it.
      const json& fit = c["spec"]["layer"][0];
      EXPECT_EQ(fit["encoding"]["y"]["field"], "fit_us");
      EXPECT_EQ(fit["mark"]["strokeDash"], json::array({5, 4}));
      EXPECT_EQ(fit["transform"][0]["filter"], "isValid(datum.fit_us)");
      for (const json& r : rows) EXPECT_NEAR(r["fit_us"].get<double>(), r["median_us"].get<double>(), 1e-6) << r;
    }
  EXPECT_NE(page.find("flash&#39;s tasks (flash_attention&#39;s 1536 Q blocks): 14.000us + its FLOPs at 274.0 GFLOP/s "
                      "(r² 1.000); the slowest, Q block 3 (batch 1, head 0) at 4.429ms, "),
            std::string::npos);
  EXPECT_NE(page.find("93 % of it in store O."), std::string::npos);
  // The profiler tables: a sortable table per variant, every row, sorted by CPU total, figures in data-v.
  size_t sortable = 0;
  for (size_t at = page.find("<table class=\"data sortable ops\">"); at != std::string::npos;
       at = page.find("<table class=\"data sortable ops\">", at + 1))
    ++sortable;
  EXPECT_EQ(sortable, 4u);
  EXPECT_NE(page.find("<th aria-sort=\"descending\">CPU total</th>"), std::string::npos);
  // flash's rows by CPU total: the step, the forward annotation, the kernel.
  const size_t flash_table = page.find("<tbody>", page.find("<h3>flash</h3>"));
  ASSERT_NE(flash_table, std::string::npos);
  const std::string first_row = page.substr(flash_table, page.find("</tr>", flash_table) - flash_table);
  EXPECT_NE(first_row.find("<td>ProfilerStep#2</td>"), std::string::npos) << first_row;
  EXPECT_NE(page.find("<td>flash_attention</td><td class=\"num\" data-v=\""), std::string::npos);
  EXPECT_NE(page.find("<details><summary>as torch prints it (flash.table.txt)</summary>"), std::string::npos);
  // The sweep's throughput: a dot per measured point at its GFLOP/s, and the peak it was set against as a rule.
  for (const json& c : data["charts"])
    if (c["kind"] == "sweep-rate") {
      const json& layers = c["spec"]["layer"];
      ASSERT_EQ(layers.size(), 4u);
      EXPECT_EQ(layers[0]["mark"]["type"], "line");  // the points joined per variant, under them
      EXPECT_EQ(layers[1]["data"]["values"].size(), 10u);  // 5 lengths × naive, flash (the skipped point has none)
      EXPECT_EQ(layers[1]["encoding"]["y"]["scale"]["type"], "linear");
      EXPECT_EQ(layers[1]["data"], layers[0]["data"]);
      EXPECT_EQ(layers[1]["encoding"]["tooltip"][2]["title"], "attention GFLOP/s");
      EXPECT_EQ(layers[2]["mark"]["type"], "rule");
      EXPECT_DOUBLE_EQ(layers[2]["data"]["values"][0]["y"].get<double>(), 460.0);
      EXPECT_EQ(layers[3]["data"]["values"][0]["label"], "bf16 dot-product peak 460.0 GFLOP/s");
      double naive_1024 = 0;
      for (const json& v : layers[1]["data"]["values"])
        if (v["variant"] == "naive" && v["seq"] == 1024) naive_1024 = v["y"].get<double>();
      const json sweep = json::parse(attnprof::io::read_file(kFixtures / "sweep.json"));  // outlives the loop
      for (const json& p : sweep["points"])
        if (p["variant"] == "naive" && p["seq"] == 1024) EXPECT_DOUBLE_EQ(naive_1024, p["gflops"].get<double>());
    }
  // No row of the fixture is past 4x its floor (naive 190 ms over 173.5, flash 62 over 37.4): no such line.
  EXPECT_EQ(page.find("Far from the floor"), std::string::npos);
  // The threads table under the timeline: each op's regions from the summaries' thread_balance.
  EXPECT_NE(page.find("<tr><td>flash</td><td>flash_attention</td><td class=\"num\">3</td><td class=\"num\">2</td>"
                      "<td class=\"num\">95.0 %</td><td class=\"num\">1.05x</td><td class=\"num\">4.0 µs</td>"
                      "<td class=\"num\">512</td></tr>"),
            std::string::npos);
  EXPECT_NE(page.find("<tr><td>naive</td><td>softmax</td>"), std::string::npos);
  EXPECT_EQ(page.find("<td>naive</td><td>matmul</td><td class=\"num\">3</td>"), std::string::npos);
  // What each step removes: every variant against naive, as `attnprof diff` computes it.
  EXPECT_NE(page.find("<th>removed</th><th>turned in place</th><th>turned out of place</th><th>added</th>"),
            std::string::npos);
  EXPECT_NE(page.find("<tr><td>naive → inplace</td><td class=\"num\">190.000 → 165.000</td><td>copy</td><td>mul -&gt; mul_"),
            std::string::npos);
  for (const json& c : data["charts"])
    if (c["kind"] == "changes")
      for (const json& r : c["spec"]["data"]["values"])
        if (r["step"] == "naive → inplace" && r["op"] == "copy") {
          EXPECT_EQ(r["change"], "removed");
          EXPECT_LT(r["delta_ms"].get<double>(), 0.0);
        }
  // Summaries without counters: no page-fault fields, no tooltip for them.
  for (const json& c : data["charts"])
    if (c["kind"] == "changes") {
      EXPECT_FALSE(c["spec"]["data"]["values"][0].contains("base_faults"));
      EXPECT_EQ(c["spec"]["spec"]["encoding"]["tooltip"].size(), 8u);
    }
  {
    // With --counters summaries (page faults per op), each op's own faults per forward ride in the tooltips.
    TempDir d("changes-with-faults");
    for (const char* v : {"naive", "inplace"}) {
      json s = json::parse(attnprof::io::read_file(kFixtures / (std::string(v) + ".summary.json")));
      for (json& r : s["rows"]) r["self_page_faults"] = r["name"] == "mul" ? 96 : 0;
      spit(d.path / (std::string(v) + ".summary.json"), s.dump());
    }
    const json dd = data_block(render_html_report(d.path.string(), stub_library()));
    bool seen = false;
    for (const json& c : dd["charts"])
      if (c["kind"] == "changes") {
        EXPECT_EQ(c["spec"]["spec"]["encoding"]["tooltip"].back()["title"], "new page faults");
        for (const json& r : c["spec"]["data"]["values"])
          if (r["op"] == "mul -> mul_") {
            EXPECT_DOUBLE_EQ(r["base_faults"].get<double>(), 96.0 / 3);  // 3 recorded forwards in the fixture
            EXPECT_DOUBLE_EQ(r["new_faults"].get<double>(), 0.0);
            seen = true;
          }
      }
    EXPECT_TRUE(seen);
  }
  // The comparison table has a row per variant, and the skipped backend says why.
  for (const char* v : {"naive", "inplace", "sdpa_math", "flash"}) EXPECT_NE(page.find("<td>" + std::string(v) + "</td>"), std::string::npos) << v;
  EXPECT_NE(page.find("skipped: backend needs CUDA"), std::string::npos);
  // Each row's roofline floor and which side sets it; the bars' ticks are the floors.
  EXPECT_NE(page.find("<td class=\"num\">37.391</td><td class=\"num\">1.7×</td><td>compute (memory 0% of the floor)</td>"),
            std::string::npos);
  EXPECT_NE(page.find("<td class=\"num\">173.545</td><td class=\"num\">1.1×</td><td>mixed (memory 35% of the floor)</td>"),
            std::string::npos);
  for (const json& c : data["charts"])
    if (c["kind"] == "compare") {
      EXPECT_EQ(c["spec"]["layer"][0]["encoding"]["x"]["title"], "ms per forward (bar) and roofline floor (tick)");
      for (const json& r : c["spec"]["data"]["values"])
        if (r["variant"] == "flash") EXPECT_NEAR(r["floor_ms"].get<double>(), 37.391, 1e-3);
    }
  // A compare.json from before the floor was recorded: the ticks fall back to bytes / bandwidth, and say so.
  {
    TempDir d("bytes-only-floor");
    json old = json::parse(attnprof::io::read_file(kFixtures / "compare.json"));
    for (json& v : old["variants"]) {
      v.erase("floor_ms");
      v.erase("floor_memory_share");
    }
    spit(d.path / "compare.json", old.dump());
    const std::string p = render_html_report(d.path.string(), stub_library());
    EXPECT_NE(p.find("(this run&#39;s compare.json has no roofline floor)"), std::string::npos);
    EXPECT_NE(p.find("ms per forward (bar) and bytes / bandwidth (tick)"), std::string::npos);
    // One row without a floor among rows with one: each tick says what it is.
    json mixed = json::parse(attnprof::io::read_file(kFixtures / "compare.json"));
    mixed["variants"][0].erase("floor_ms");
    spit(d.path / "compare.json", mixed.dump());
    const std::string pm = render_html_report(d.path.string(), stub_library());
    EXPECT_NE(pm.find("ms per forward (bar) and roofline floor, else bytes / bandwidth (tick)"), std::string::npos);
    EXPECT_EQ(pm.find("has no roofline floor)"), std::string::npos);
  }
  // Sweep: the fitted exponents label the lines; the point over budget is listed, not drawn.
  EXPECT_NE(page.find("N^2.00"), std::string::npos);
  EXPECT_NE(page.find("N^1.00"), std::string::npos);
  EXPECT_NE(page.find("over the 16 GiB budget"), std::string::npos);
  // Trace links, with the note on how to open them.
  EXPECT_NE(page.find("href=\"naive.trace.json\""), std::string::npos);
  EXPECT_NE(page.find("ui.perfetto.dev"), std::string::npos);
  // The torch-style tables come through as preformatted text.
  EXPECT_NE(page.find("Self CPU time total"), std::string::npos);
}

// The timeline section draws the first forward of each trace: the annotation named by the summary, what
// begins inside it on its thread (nested by depth), and what other threads and GPU streams begin before the
// next forward; times in ms from the forward's start.
TEST(HtmlReport, TimelineShowsTheMedianForwardWithLanesAndDepths) {
  TempDir d("timeline");
  auto x = [](const char* name, const char* cat, int pid, int tid, double ts, double dur) {
    return json{{"ph", "X"}, {"name", name}, {"cat", cat}, {"pid", pid}, {"tid", tid}, {"ts", ts}, {"dur", dur}};
  };
  auto thread = [](int pid, int tid, const char* name) {
    return json{{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
  };
  const json trace = {{"traceEvents",
                       {thread(1, 0, "main"), thread(1, 7, "worker"), thread(2, 3, "stream 3"),
                        x("ProfilerStep#1", "user_annotation", 1, 0, 0, 100), x("attn_fwd", "user_annotation", 1, 0, 10, 80),
                        x("matmul", "cpu_op", 1, 0, 12, 20), x("omp_task (share)", "thread_work", 1, 7, 15, 5),  // drawn as its op
                        x("masked_fill", "cpu_op", 1, 0, 40, 30), x("copy_", "cpu_op", 1, 0, 41, 10),
                        x("gemm_kernel", "kernel", 2, 3, 95, 4),  // after the annotation, before the next one
                        x("ProfilerStep#2", "user_annotation", 1, 0, 100, 100), x("attn_fwd", "user_annotation", 1, 0, 110, 80),
                        x("matmul", "cpu_op", 1, 0, 112, 20)}}};
  spit(d.path / "naive.trace.json", trace.dump());
  spit(d.path / "naive.summary.json",
       json{{"schema", "attnprof.summary/1"},
            {"metadata", {{"annotation", "attn_fwd"}}},
            {"rows", {{{"name", "attn_fwd"}, {"category", "user_annotation"}, {"calls", 2}, {"self_ns", 0},
                       {"cost", json::object()}, {"self_cost", json::object()}}}}}
           .dump());
  const json data = data_block(render_html_report(d.path.string(), stub_library()));
  const json* spans = nullptr;
  for (const json& c : data["charts"])
    if (c["kind"] == "timeline") spans = &c["spec"]["data"]["values"];
  ASSERT_NE(spans, nullptr);
  std::map<std::string, std::tuple<std::string, double, double>> got;  // name -> lane, start, ms
  for (const json& r : *spans)
    got[r["name"].get<std::string>()] = {r["lane"], r["start"].get<double>(), r["ms"].get<double>()};
  const std::map<std::string, std::tuple<std::string, double, double>> want = {
      {"attn_fwd", {"main · 0", 0.0, 0.080}},        {"matmul", {"main · 1", 0.002, 0.020}},
      {"omp_task", {"worker · 0", 0.005, 0.005}},    {"masked_fill", {"main · 1", 0.030, 0.030}},
      {"copy_", {"main · 2", 0.031, 0.010}},         {"gemm_kernel", {"stream 3 · 0", 0.085, 0.004}}};
  ASSERT_EQ(got.size(), want.size()) << spans->dump();
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(std::get<0>(got[name]), std::get<0>(w)) << name;
    EXPECT_NEAR(std::get<1>(got[name]), std::get<1>(w), 1e-12) << name;
    EXPECT_NEAR(std::get<2>(got[name]), std::get<2>(w), 1e-12) << name;
  }
  // A thread's share says it is one (drawn lighter, and its tooltip names whose region it is), an op does not.
  for (const json& r : *spans) {
    const bool share = r["name"] == "omp_task";
    EXPECT_EQ(r["share"].get<bool>(), share) << r["name"];
    if (share) EXPECT_EQ(r["what"], "this thread's share of omp_task's parallel region");
  }
  // Equal forwards: the first is drawn, and nothing is said.
  EXPECT_EQ(render_html_report(d.path.string(), stub_library()).find("The forward drawn is"), std::string::npos);
  // A slow first forward (a cold start): the one closest to the median is drawn, and both lengths are said.
  const json slow = {{"traceEvents",
                      {thread(1, 0, "main"), x("attn_fwd", "user_annotation", 1, 0, 10, 90),
                       x("matmul", "cpu_op", 1, 0, 12, 70), x("attn_fwd", "user_annotation", 1, 0, 110, 40),
                       x("matmul", "cpu_op", 1, 0, 112, 30), x("attn_fwd", "user_annotation", 1, 0, 210, 42),
                       x("matmul", "cpu_op", 1, 0, 212, 31)}}};
  spit(d.path / "naive.trace.json", slow.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("The forward drawn is the one closest to each variant&#39;s median, not its first where they "
                      "differ: naive&#39;s #3 of 3 (0.042 ms; the first took 0.090 ms, the median 0.042 ms)."),
            std::string::npos);
  const json slow_data = data_block(page);
  int matmuls = 0;
  for (const json& c : slow_data["charts"])
    if (c["kind"] == "timeline")
      for (const json& r : c["spec"]["data"]["values"])
        if (r["name"] == "matmul") {
          ++matmuls;
          EXPECT_NEAR(r["ms"].get<double>(), 0.031, 1e-12) << "the third forward's matmul";
        }
  EXPECT_EQ(matmuls, 1);
}

// Per forward, each op's self time, and the forward annotation's own time (what ran between its ops: naive's
// frees of its N×N buffers) as a slice of its own; steps are left out.
TEST(HtmlReport, StackedBarsArePerForwardAndLeaveAnnotationsOut) {
  const json data = data_block(render_html_report(kFixtures.string(), stub_library()));
  for (const json& c : data["charts"]) {
    if (c["kind"] != "time-by-op") continue;
    double naive_ms = 0, between_ms = -1;
    for (const json& row : c["spec"]["data"]["values"]) {
      EXPECT_NE(row["op"], "attn_fwd");
      EXPECT_EQ(row["op"].get<std::string>().rfind("ProfilerStep", 0), std::string::npos);
      if (row["variant"] == "naive") naive_ms += row["ms"].get<double>();
      if (row["variant"] == "naive" && row["op"] == "between ops") between_ms = row["ms"].get<double>();
    }
    // The fixture's ops add up to 190 ms per forward over 3 forwards; attn_fwd's own 50 us over 3 on top.
    EXPECT_NEAR(between_ms, 0.05 / 3, 1e-9);
    EXPECT_NEAR(naive_ms, 190.0 + 0.05 / 3, 1e-6);
    EXPECT_NE(c["spec"]["encoding"]["x"]["title"].get<std::string>().find("per forward"), std::string::npos);
  }
  // A user annotation of one call before the recorded one ("annotation": "attn_fwd", 3 calls) does not count
  // the forwards: they are the recorded annotation's calls, as diff counts them.
  TempDir d("second-annotation");
  for (const auto& e : fs::directory_iterator(kFixtures)) fs::copy_file(e.path(), d.path / e.path().filename());
  json naive = json::parse(attnprof::io::read_file(d.path / "naive.summary.json"));
  json region = naive["rows"][1];
  region["name"] = "setup_region";
  region["calls"] = 1;
  naive["rows"].insert(naive["rows"].begin(), region);
  spit(d.path / "naive.summary.json", naive.dump());
  const json data2 = data_block(render_html_report(d.path.string(), stub_library()));
  bool seen = false;
  for (const json& c : data2["charts"]) {
    if (c["kind"] != "time-by-op") continue;
    double naive_ms = 0;
    for (const json& row : c["spec"]["data"]["values"])
      if (row["variant"] == "naive") naive_ms += row["ms"].get<double>();
    EXPECT_NEAR(naive_ms, 190.0 + 0.05 / 3, 1e-6);
    seen = true;
  }
  EXPECT_TRUE(seen);
}

// The time bars are sums of self time over the recorded forwards divided by their number: the mean forward.
// compare's ms / forward is the median. The caption and axis say which the bars are; where the two part by more
// than 5 %, a note names both, with the forwards' own times.
TEST(HtmlReport, TimeBarsAreTheMeanForwardAndANoteNamesTheMedianWhereTheyPart) {
  TempDir d("mean-median");
  copy_fixtures(d.path, {"compare.json", "naive.summary.json", "flash.summary.json"});
  auto time_chart = [](const json& data) {
    for (const json& c : data["charts"])
      if (c["kind"] == "time-by-op") return c;
    ADD_FAILURE() << "no time-by-op chart";
    return json();
  };
  // The fixture's forwards agree (naive: 190.017 ms of bars against a 190 ms median): the caption, no note.
  const std::string same = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(same.find("Self time by op, the mean per recorded forward"), std::string::npos);
  EXPECT_NE(same.find("so each bar adds up to the mean recorded forward;"), std::string::npos);
  EXPECT_NE(same.find("is the median recorded forward, not the mean"), std::string::npos);
  EXPECT_EQ(same.find("each bar adds up to the forward;"), std::string::npos) << "the old claim, which was false";
  EXPECT_EQ(same.find("its time bar adds up to"), std::string::npos);
  EXPECT_EQ(time_chart(data_block(same))["spec"]["encoding"]["x"]["title"],
            "self time per forward, mean over the recorded forwards (ms)");

  // One slow forward of three: the bars (the mean) stay at 190.017 ms, the median is 150 ms.
  const json forwards = {150.0, 150.0, 270.05};
  json naive = json::parse(attnprof::io::read_file(d.path / "naive.summary.json"));
  naive["run"]["ms_per_forward"] = 150.0;
  naive["run"]["forward_ms"] = forwards;
  spit(d.path / "naive.summary.json", naive.dump());
  json compare = json::parse(attnprof::io::read_file(d.path / "compare.json"));
  for (json& v : compare["variants"])
    if (v["name"] == "naive") {
      v["ms"] = 150.0;
      v["forward_ms"] = forwards;
    }
  spit(d.path / "compare.json", compare.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  double naive_ms = 0;
  const json chart = time_chart(data_block(page));
  for (const json& row : chart["spec"]["data"]["values"])
    if (row["variant"] == "naive") naive_ms += row["ms"].get<double>();
  EXPECT_NEAR(naive_ms, 190.0 + 0.05 / 3, 1e-6) << "the bars are not rescaled to the median";
  EXPECT_NE(page.find("naive: its time bar adds up to 190.017 ms, the mean over its 3 recorded forwards of their ops&#39; "
                      "self times (the profiler&#39;s own cost per zone taken off, as in the tables); they took "
                      "150.000, 150.000, 270.050 ms (mean 190.017), and the Comparison table&#39;s 150.000 ms per "
                      "forward is their median: a forward far slower than the others"),
            std::string::npos)
      << page.substr(page.find("<section id=\"ops\">"), 4000);
  // flash's bar (61.517 ms) is within 5 % of its 62 ms: no note.
  EXPECT_EQ(page.find("flash: its time bar adds up to"), std::string::npos);
  // The note follows the time chart, in its section.
  const auto ops = page.find("<section id=\"ops\">"), end = page.find("</section>", ops);
  const auto note = page.find("naive: its time bar adds up to");
  EXPECT_TRUE(ops < note && note < end);

  // A later profile's summary: its own median (the run the bars are from) is named, by its file.
  naive["run"]["ms_per_forward"] = 140.0;
  naive["run"]["forward_ms"] = {140.0, 140.0, 290.05};  // their median, as a summary holds it
  spit(d.path / "naive.summary.json", naive.dump());
  const std::string later = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(later.find("they took 140.000, 140.000, 290.050 ms (mean 190.017), and naive.summary.json&#39;s 140.000 "
                       "ms per forward is their median"),
            std::string::npos);

  // Many forwards: their range, not a list.
  json many = json::array();
  for (int i = 0; i < 12; ++i) many.push_back(i == 11 ? 1000.0 : 140.0);
  naive["run"]["forward_ms"] = many;
  spit(d.path / "naive.summary.json", naive.dump());
  EXPECT_NE(render_html_report(d.path.string(), stub_library()).find("; they took from 140.000 to 1000.000 ms (mean "),
            std::string::npos);
}

TEST(HtmlReport, SelfContained) {
  const std::string page = render_html_report(kFixtures.string(), stub_library());
  // Nothing is loaded from anywhere: no src/href to another host, no stylesheets, frames or imports.
  EXPECT_FALSE(std::regex_search(page, std::regex(R"(\bsrc\s*=\s*["']?(https?:|//))", std::regex::icase)));
  EXPECT_FALSE(std::regex_search(page, std::regex(R"(<link\b)", std::regex::icase)));
  EXPECT_FALSE(std::regex_search(page, std::regex(R"(<iframe\b)", std::regex::icase)));
  EXPECT_FALSE(std::regex_search(page, std::regex(R"(@import|url\()", std::regex::icase)));
  // The only external addresses are the Perfetto and speedscope links a person may click.
  std::smatch m;
  std::string rest = page;
  while (std::regex_search(rest, m, std::regex(R"(href="(https?:[^"]*))"))) {
    EXPECT_TRUE(m[1].str() == "https://ui.perfetto.dev" || m[1].str() == "https://www.speedscope.app") << m[1];
    rest = m.suffix();
  }
  // A content security policy forbids fetching even if a library tried.
  EXPECT_NE(page.find("default-src 'none'"), std::string::npos);
  // The library is inlined, each piece once.
  EXPECT_EQ(count(page, "window.vegaEmbed = function"), 1u);
  EXPECT_EQ(count(page, "data-lib=\"vega stub\""), 1u);
}

TEST(HtmlReport, HostileNamesCannotBreakThePage) {
  TempDir d("hostile");
  const std::string evil = "x</script><script>alert(1)</script><img src=x onerror=alert(2)>&amp;\"'";
  json compare = json::parse(attnprof::io::read_file(kFixtures / "compare.json"));
  // A variant's name is also the start of its files' names, so compare.json's holds no '/' (refused).
  compare["variants"][0]["name"] = "x<script>alert(1)<img src=x onerror=alert(2)>&amp;\"'";
  compare["variants"][0]["summary"] = "evil.summary.json";
  compare["variants"][0]["trace"] = "e<v>i&l\".trace.json";
  spit(d.path / "compare.json", compare.dump());
  json summary = json::parse(attnprof::io::read_file(kFixtures / "naive.summary.json"));
  summary["rows"][2]["name"] = evil;
  summary["table"] = std::string("Name  ") + evil + "\n";
  spit(d.path / "evil.summary.json", summary.dump());
  spit(d.path / "e<v>i&l\".trace.json", R"({"traceEvents":[]})");
  json sweep = json::parse(attnprof::io::read_file(kFixtures / "sweep.json"));
  sweep["points"][0]["variant"] = evil;
  sweep["fits"][0]["variant"] = evil;
  spit(d.path / "sweep.json", sweep.dump());

  HtmlOptions opt;
  opt.title = "run <b>\"1\"</b>";
  const std::string page = render_html_report(d.path.string(), stub_library(), opt);
  // Exactly the page's own script elements: the data block, three libraries, the bootstrap.
  EXPECT_EQ(count(page, "<script"), 5u);
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_EQ(page.find("<b>\"1\""), std::string::npos);
  EXPECT_NE(page.find("run &lt;b&gt;&quot;1&quot;&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(page.find("<td>x&lt;/script&gt;&lt;script&gt;alert(1)"), std::string::npos);
  EXPECT_NE(page.find("href=\"e%3Cv%3Ei%26l%22.trace.json\""), std::string::npos);
  // The summary compare.json names is not listed a second time under its file name.
  EXPECT_EQ(page.find("<h3>evil</h3>"), std::string::npos);
  // The data block still parses and carries the name unchanged, for Vega to draw as text.
  const json data = data_block(page);
  bool found = false;
  for (const json& c : data["charts"])
    if (c["spec"].dump().find(evil.substr(0, 10)) != std::string::npos) found = true;
  EXPECT_TRUE(found);
}

TEST(HtmlReport, MissingInputsAreNotesNotErrors) {
  TempDir d("empty");
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("compare.json not found"), std::string::npos);
  EXPECT_NE(page.find("sweep.json not found"), std::string::npos);
  EXPECT_NE(page.find("No trace or data files"), std::string::npos);
  EXPECT_TRUE(data_block(page)["charts"].empty());

  // Only a sweep: that section has its charts, the rest say what to run.
  fs::copy_file(kFixtures / "sweep.json", d.path / "sweep.json");
  const json data = data_block(render_html_report(d.path.string(), stub_library()));
  ASSERT_EQ(data["charts"].size(), 3u);
  EXPECT_EQ(data["charts"][0]["kind"], "sweep-time");
  EXPECT_EQ(data["charts"][1]["kind"], "sweep-memory");
  EXPECT_EQ(data["charts"][2]["kind"], "sweep-rate");

  // A corrupt input is a note too.
  spit(d.path / "compare.json", "{not json");
  EXPECT_NE(render_html_report(d.path.string(), stub_library()).find("compare.json could not be parsed"),
            std::string::npos);

  // So is well-formed JSON with a number no attnprof file holds (it would print as nonsense, or be undefined
  // when converted to an integer): the section is left out with the field named.
  json sweep = json::parse(attnprof::io::read_file(kFixtures / "sweep.json"));
  sweep["points"][1]["peak_bytes"] = 1.8446744073709552e19;
  spit(d.path / "sweep.json", sweep.dump());
  const std::string out_of_range = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(out_of_range.find("sweep.json is not a file attnprof wrote: &#39;peak_bytes&#39; = 1.8446744073709552e+19 is out of range"),
            std::string::npos);
  EXPECT_TRUE(data_block(out_of_range)["charts"].empty());
}

TEST(HtmlReport, InputsOverTheSizeLimitAreNotesNamingTheirSize) {
  EXPECT_EQ(input_size_error(kMaxInputBytes), "");
  EXPECT_EQ(input_size_error(kMaxInputBytes + 1),
            "it is 268435457 bytes (256.00 MiB), over the 256 MiB attnprof reads: no file it writes is that large");
  TempDir d("oversized");
  // A plain file is judged by its size before it is read; a gzip-compressed one by its size and by what it
  // inflates to (a few hundred bytes can inflate to gigabytes). The limit is lowered here to keep files small.
  namespace hr = attnprof::report::html_run;
  spit(d.path / "at.json", std::string(1000, ' '));
  spit(d.path / "over.json", std::string(1001, ' '));
  std::string why;
  EXPECT_EQ(hr::read_file(d.path / "at.json", &why, 1000), std::string(1000, ' '));
  EXPECT_EQ(why, "");
  EXPECT_FALSE(hr::read_file(d.path / "over.json", &why, 1000).has_value());
  EXPECT_EQ(why, "it is 1001 bytes (1001 B), over the 1000 bytes attnprof reads: no file it writes is that large");
  const fs::path gz = d.path / "bomb.trace.json.gz";
  {
    gzFile f = gzopen(gz.c_str(), "wb9");
    ASSERT_NE(f, nullptr);
    const std::string zeros(100000, '0');
    ASSERT_EQ(gzwrite(f, zeros.data(), unsigned(zeros.size())), int(zeros.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  }
  ASSERT_LT(fs::file_size(gz), 1000u);
  why.clear();
  EXPECT_FALSE(hr::read_file(gz, &why, 1000).has_value());
  EXPECT_EQ(why, fmt::format("it is {} bytes but inflates to more than the 1000 bytes attnprof reads: no file it "
                             "writes is that large",
                             fs::file_size(gz)));
  EXPECT_EQ(hr::read_file(gz, nullptr, 100000), std::string(100000, '0'));
  // In the page: the section says which file was not read and why (a sparse file: nothing is read).
  spit(d.path / "compare.json", "{");
  fs::resize_file(d.path / "compare.json", uint64_t(3) << 30);
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("compare.json not read: it is 3221225472 bytes (3.00 GiB), over the 256 MiB attnprof reads"),
            std::string::npos);
}

// The variants a chart of `kind` draws data for.
std::set<std::string> chart_variants(const json& data, const std::string& kind) {
  std::set<std::string> out;
  for (const json& c : data["charts"])
    if (c["kind"] == kind)
      for (const json& r : c["spec"]["data"]["values"]) out.insert(r.value("variant", ""));
  return out;
}

// A trace that is there but cannot be read is named with why in the timeline section, not taken for a missing one
// ("run attnprof compare"): cut short, or over the size limit.
TEST(HtmlReport, ATraceThatCannotBeReadIsNamedNotTakenForAMissingOne) {
  TempDir d("bad-trace");
  fs::copy_file(kFixtures / "naive.summary.json", d.path / "naive.summary.json");
  spit(d.path / "naive.trace.json", "{\"traceEvents\":[");
  std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("No timeline: no trace in this directory could be drawn."), std::string::npos);
  EXPECT_NE(page.find("naive: naive.trace.json could not be parsed ("), std::string::npos);
  EXPECT_EQ(page.find("holds a forward (run"), std::string::npos) << "the trace is there: no advice to write one";
  fs::resize_file(d.path / "naive.trace.json", uint64_t(300) << 20);  // sparse: nothing is read
  page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("naive: naive.trace.json not read: it is 314572800 bytes (300.00 MiB), over the 256 MiB"),
            std::string::npos);
  fs::remove(d.path / "naive.trace.json");
  page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("No timeline: no trace in this directory holds a forward (run"), std::string::npos);
  // A summary that names its trace (as compare's and profile's do) whose file is gone: missing, not unreadable.
  json named = json::parse(attnprof::io::read_file(kFixtures / "naive.summary.json"));
  named["trace"] = "naive.trace.json";
  spit(d.path / "naive.summary.json", named.dump());
  page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("No timeline: no trace in this directory holds a forward (run"), std::string::npos);
  EXPECT_EQ(page.find("could be drawn"), std::string::npos);
}

// sweep --peer torch: the page says what ran torch's rows, which have no memory points.
TEST(HtmlReport, TheSweepSaysWhatRanItsPeerRows) {
  TempDir d("sweep-peer");
  json sweep = json::parse(attnprof::io::read_file(kFixtures / "sweep.json"));
  fs::copy_file(kFixtures / "sweep.json", d.path / "sweep.json");
  std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_EQ(page.find("are PyTorch"), std::string::npos) << "no peer, no note";
  sweep["peer"] = {{"kind", "torch"}, {"python", "/usr/bin/python3"}, {"torch_version", "1.13.0a0"}, {"threads", 2}};
  sweep["points"].push_back({{"variant", "torch-sdpa"}, {"seq", 256}, {"source", "torch"}, {"ms", 80.0},
                             {"gflops", 13.4}, {"peak_bytes", nullptr}, {"status", "ok"}, {"note", ""}});
  spit(d.path / "sweep.json", sweep.dump());
  page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("torch-naive and torch-sdpa are PyTorch 1.13.0a0 (&#39;/usr/bin/python3&#39;, 2 threads) on each "
                      "point&#39;s inputs"),
            std::string::npos);
  // The dots (each chart's first layer): torch-sdpa's time is drawn, its memory is not.
  std::map<std::string, std::set<std::string>> drawn;
  const json data = data_block(page);
  for (const json& c : data["charts"])
    if (c["kind"] == "sweep-time" || c["kind"] == "sweep-memory")
      for (const json& v : c["spec"]["layer"][0]["data"]["values"])
        drawn[c["kind"].get<std::string>()].insert(v["variant"].get<std::string>());
  EXPECT_TRUE(drawn["sweep-time"].count("torch-sdpa"));
  // Busy or Noisy points: faded dots, and their many lines folded under one that counts them.
  for (int n : {2048, 4096, 8192, 16384})
    sweep["points"].push_back({{"variant", "torch-naive"}, {"seq", n}, {"source", "torch"}, {"ms", 100.0 * n},
                               {"gflops", 5.0}, {"forward_ms", {50.0 * n, 100.0 * n, 150.0 * n}},
                               {"peak_bytes", nullptr}, {"status", "ok"}, {"note", ""}});
  spit(d.path / "sweep.json", sweep.dump());
  const std::string noisy_page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(noisy_page.find("timed points Busy or Noisy (the faded dots): why, point by point</summary>"),
            std::string::npos);
  EXPECT_NE(noisy_page.find("Noisy: torch-naive at N=2048"), std::string::npos) << "inside the fold";
  const json noisy_data = data_block(noisy_page);
  int faded = 0;
  for (const json& c : noisy_data["charts"])
    if (c["kind"] == "sweep-time") {
      EXPECT_EQ(c["spec"]["layer"][0]["encoding"]["opacity"]["condition"]["test"], "datum.disturbed");
      for (const json& v : c["spec"]["layer"][0]["data"]["values"]) faded += v["disturbed"].get<bool>() ? 1 : 0;
    }
  EXPECT_EQ(faded, 4);
  // Rates spanning more than 10x (torch 1.13's beside flash's) on a log axis, where a linear one flattens the slow.
  for (const json& c : data["charts"])
    if (c["kind"] == "sweep-rate") {
      const json& y = c["spec"]["layer"][1]["encoding"]["y"];  // the dots'
      EXPECT_EQ(y["scale"]["type"], "log");
      EXPECT_NE(y["title"].get<std::string>().find("(log scale)"), std::string::npos);
      // Labelled 1-2-5 over a domain that holds every dot and the peak's rule.
      const double lo = y["scale"]["domain"][0], hi = y["scale"]["domain"][1];
      EXPECT_EQ(y["axis"]["values"].get<std::vector<double>>(), attnprof::report::detail::log_ticks(lo, hi));
      for (const json& v : c["spec"]["layer"][1]["data"]["values"]) {
        EXPECT_GE(v["y"].get<double>(), lo);
        EXPECT_LE(v["y"].get<double>(), hi);
      }
      EXPECT_LE(c["spec"]["layer"][2]["data"]["values"][0]["y"].get<double>(), hi);  // the peak
    }
  // The N axis ends at the data (a few pixels of padding), not at whole octaves around it.
  for (const json& c : data["charts"])
    if (c["kind"] == "sweep-time") EXPECT_EQ(c["spec"]["layer"][0]["encoding"]["x"]["scale"]["nice"], false);
  EXPECT_TRUE(drawn["sweep-memory"].count("naive"));
  EXPECT_FALSE(drawn["sweep-memory"].count("torch-sdpa")) << "its memory is not measured";
}

// Rates and shares under 1 keep two significant digits in the Comparison, where one decimal printed 0.0.
TEST(HtmlReport, SmallRatesKeepTheirDigits) {
  TempDir d("small-rates");
  const json compare = {{"kind", "compare"},
                        {"variants", {{{"name", "naive"}, {"ms", 40.0}, {"gflops", 0.052}, {"pct_peak", 0.0113},
                                       {"status", "ok"}}}}};
  spit(d.path / "compare.json", compare.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("<td class=\"num\">40.000</td><td class=\"num\">0.052</td><td class=\"num\">0.011</td>"),
            std::string::npos);
}

TEST(HtmlReport, FilesOfAnotherProblemAreLeftOutAndNamed) {
  // An earlier run of another shape left its files in the directory: drawing them beside this run's would
  // compare different problems (the step-by-step changes, the roofline, the tables).
  TempDir d("other-problem");
  copy_fixtures(d.path,
                {"compare.json", "naive.summary.json", "inplace.summary.json", "flash.summary.json", "roofline.json"});
  const std::string mine = "B=1 Hq=2 Hkv=2 Nq=128 Nk=128 D=32 bf16 causal", old = "B=1 Hq=2 Hkv=2 Nq=256 Nk=256 D=64 bf16 causal";
  auto set_problem = [&](const std::string& file, const char* where, const std::string& problem) {
    json j = json::parse(attnprof::io::read_file(d.path / file));
    if (*where) j[where]["problem"] = problem;
    else j["problem"] = problem;
    spit(d.path / file, j.dump());
  };
  set_problem("compare.json", "", mine);
  set_problem("naive.summary.json", "metadata", mine);
  set_problem("inplace.summary.json", "run", old);
  set_problem("roofline.json", "", old);
  {  // a summary that records no problem
    json j = json::parse(attnprof::io::read_file(d.path / "flash.summary.json"));
    j["metadata"].erase("problem");
    spit(d.path / "flash.summary.json", j.dump());
  }
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("Files left out of this page"), std::string::npos);
  EXPECT_NE(page.find("inplace.summary.json is left out: it is of " + old + ", not of this run&#39;s problem " + mine +
                      " (compare.json&#39;s)"),
            std::string::npos);
  EXPECT_NE(page.find("roofline.json is left out"), std::string::npos);
  EXPECT_EQ(page.find("naive.summary.json is left out"), std::string::npos);
  EXPECT_EQ(page.find("flash.summary.json is left out"), std::string::npos) << "no problem recorded: kept";
  const json data = data_block(page);
  const std::set<std::string> drawn = chart_variants(data, "time-by-op");
  EXPECT_TRUE(drawn.count("naive") && drawn.count("flash")) << data.dump();
  EXPECT_FALSE(drawn.count("inplace"));

  // Without compare.json the newest file's problem is the run's.
  fs::remove(d.path / "compare.json");
  set_problem("inplace.summary.json", "run", old);  // rewritten last: the newest
  fs::last_write_time(d.path / "inplace.summary.json", fs::file_time_type::clock::now() + std::chrono::seconds(5));
  const std::string page2 = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page2.find("naive.summary.json is left out: it is of " + mine + ", not of this run&#39;s problem " + old +
                       " (the newest file&#39;s (inplace.summary.json))"),
            std::string::npos);
  EXPECT_EQ(page2.find("roofline.json is left out"), std::string::npos);
  const std::set<std::string> drawn2 = chart_variants(data_block(page2), "time-by-op");
  EXPECT_TRUE(drawn2.count("inplace") && !drawn2.count("naive"));

  // A roofline.json that placed no op (an older --peaks-only wrote one, naming the default problem) does not
  // decide the run's problem, however new it is.
  json empty_roof = json::parse(attnprof::io::read_file(d.path / "roofline.json"));
  empty_roof["ops"] = json::array();
  empty_roof["problem"] = "B=8 Hq=16 Hkv=16 Nq=1024 Nk=1024 D=64 bf16 causal";
  spit(d.path / "roofline.json", empty_roof.dump());
  fs::last_write_time(d.path / "roofline.json", fs::file_time_type::clock::now() + std::chrono::seconds(10));
  const std::string page3 = render_html_report(d.path.string(), stub_library());
  EXPECT_EQ(page3.find("inplace.summary.json is left out"), std::string::npos);
  EXPECT_TRUE(chart_variants(data_block(page3), "time-by-op").count("inplace"));
}

TEST(HtmlReport, ARooflineFromACompareRunSaysWhichRunItPlaced) {
  TempDir d("roofline-from");
  copy_fixtures(d.path,
                {"compare.json", "naive.summary.json", "inplace.summary.json", "flash.summary.json", "roofline.json"});
  const std::string live = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(live.find("measured ceilings (from roofline.json). Each point"), std::string::npos);
  json roof = json::parse(attnprof::io::read_file(d.path / "roofline.json"));
  roof["from"] = "/somewhere/<else>/compare.json";
  spit(d.path / "roofline.json", roof.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  // The file's name, not the path of the machine that wrote it.
  EXPECT_NE(page.find("(from roofline.json, which placed the ops of the run in compare.json without running them "
                      "again)"),
            std::string::npos);
  EXPECT_EQ(page.find("somewhere"), std::string::npos);
}

// compare --peer torch's rows: a table of their own under the comparison (escaped), absent without them.
TEST(HtmlReport, PeerRowsAreATableOfTheirOwn) {
  TempDir d("peers");
  copy_fixtures(d.path, {"compare.json", "naive.summary.json", "inplace.summary.json", "flash.summary.json"});
  const std::string without = render_html_report(d.path.string(), stub_library());
  EXPECT_EQ(without.find("PyTorch on the same inputs"), std::string::npos);
  json c = json::parse(attnprof::io::read_file(d.path / "compare.json"));
  c["peers"] = {{"kind", "torch"}, {"python", "/usr/bin/python3"}, {"torch_version", "1.13.0a0"}, {"threads", 2},
                {"timing", "time.perf_counter around each forward, in the peer's process"},
                {"rows", {{{"name", "torch-naive"}, {"call", "matmul, mul, masked_fill, softmax, matmul"},
                           {"status", "ok"}, {"ms", 2443.702}, {"gflops", 7.03}, {"pct_peak", 0.84},
                           {"max_abs_err", 0.0142}, {"forward_ms", {2443.702, 1200.0, 2500.0}},
                           {"cpu_sharing", {{"other_cpus", 1.75}, {"cpus", 2}, {"threads", 2}}}},
                          {{"name", "torch-sdpa<b>"}, {"call", "x"}, {"status", "failed"}, {"ms", 1325.5},
                           {"gflops", 13.0}, {"pct_peak", 1.5}, {"max_abs_err", 0.5}},
                          {{"name", "torch-fp16"}, {"status", "skipped"}, {"note", "torch raised <RuntimeError>"},
                           {"ms", nullptr}}}}};
  spit(d.path / "compare.json", c.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("PyTorch on the same inputs: torch 1.13.0a0 (/usr/bin/python3, 2 threads), each forward timed "
                      "by time.perf_counter around each forward, in the peer&#39;s process"),
            std::string::npos);
  EXPECT_NE(page.find("<td>torch-naive</td><td class=\"num\">2443.702</td>"), std::string::npos);
  EXPECT_NE(page.find("<td>matmul, mul, masked_fill, softmax, matmul</td>"), std::string::npos);
  EXPECT_NE(page.find("<td>torch-sdpa&lt;b&gt;</td>"), std::string::npos);
  EXPECT_NE(page.find("<td>FAIL</td>"), std::string::npos);
  EXPECT_NE(page.find("skipped: torch raised &lt;RuntimeError&gt;"), std::string::npos);
  EXPECT_EQ(page.find("<b>"), std::string::npos);
  // Its timed forwards are judged as the variants' are, as compare prints them: Busy and Noisy lines.
  EXPECT_NE(page.find("Busy: other work used 1.8 of 2 CPUs while torch-naive ran on 2 threads"), std::string::npos);
  EXPECT_NE(page.find("Noisy: torch-naive took 2.444s / 1.200s / 2.500s per forward"), std::string::npos);
  // Not variants: the comparison chart's bars are the variants' only.
  EXPECT_FALSE(chart_variants(data_block(page), "compare").count("torch-naive"));
  // In the page's text, the peer appears in its table and its two notes only (the charts' colour domain names
  // every known row, drawn or not, so that each keeps one colour on every page).
  const std::string text = page.substr(0, page.find("<script type=\"application/json\" id=\"attnprof-data\">"));
  EXPECT_EQ(count(text, "torch-naive"), 3u) << "the peer appears in its table and its two notes only";
}

// A stacks file that is not folded stacks, or an earlier run's, draws no flame graph and says why; the others
// still draw theirs.
// Every colour scale by op in a page's charts: name -> colour (each chart's domain and range, walked through
// layers). A name given two colours on one page is recorded as "" (a failure).
std::map<std::string, std::string> op_colours(const json& data) {
  std::map<std::string, std::string> out;
  std::function<void(const json&)> walk = [&](const json& j) {
    if (j.is_object()) {
      if (j.contains("color") && j["color"].is_object() && j["color"].contains("scale") &&
          j["color"]["scale"].contains("range") && j["color"]["scale"].contains("domain") &&
          j["color"].value("field", "") != "change") {  // the changes chart's own scale is not by op
        const json& s = j["color"]["scale"];
        for (size_t i = 0; i < s["domain"].size() && i < s["range"].size(); ++i) {
          const auto [it, fresh] = out.emplace(s["domain"][i].get<std::string>(), s["range"][i].get<std::string>());
          if (!fresh && it->second != s["range"][i].get<std::string>()) it->second = "";
        }
      }
      for (const auto& [k, v] : j.items()) walk(v);
    } else if (j.is_array()) {
      for (const json& v : j) walk(v);
    }
  };
  for (const json& c : data["charts"]) walk(c["spec"]);
  return out;
}

// An op keeps its colour on every page, whatever the page draws first; no two names share one; the fused kernel
// does not look like the unfused matmul; the structure (steps, annotations, thread roots) is grey.
TEST(HtmlReport, OpsKeepOneColourOnEveryPage) {
  // The fixtures' flash op under today's name.
  const auto copy_with_todays_flash = [](const fs::path& to, const std::vector<std::string>& files) {
    for (const std::string& f : files) {
      std::string text = attnprof::io::read_file(kFixtures / f);
      for (size_t at; (at = text.find("\"name\": \"flash_attention\"")) != std::string::npos;)
        text.replace(at, 25, "\"name\": \"flash_attention_fwd\"");
      spit(to / f, text);
    }
  };
  TempDir every("op-colours-all");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(kFixtures)) files.push_back(e.path().filename().string());
  copy_with_todays_flash(every.path, files);
  const auto all = op_colours(data_block(render_html_report(every.path.string(), stub_library())));
  ASSERT_TRUE(all.count("matmul") && all.count("flash_attention_fwd") && all.count("softmax")) << all.size();
  std::set<std::string> used;
  for (const auto& [name, colour] : all) {
    EXPECT_FALSE(colour.empty()) << name << " has two colours on one page";
    EXPECT_TRUE(used.insert(colour).second) << name << " shares " << colour;
  }
  EXPECT_NE(all.at("matmul"), all.at("flash_attention_fwd"));
  for (const char* grey : {"ProfilerStep*", "main"})
    if (all.count(grey)) {
      const std::string c = all.at(grey);
      ASSERT_EQ(c.size(), 7u) << grey << " " << c;
      EXPECT_TRUE(c.substr(1, 2) == c.substr(3, 2) && c.substr(3, 2) == c.substr(5, 2)) << grey << " " << c;
    }
  // A run of flash and inplace only: its charts meet the names in another order, and keep their colours.
  TempDir d("op-colours");
  copy_with_todays_flash(d.path, {"compare.json", "inplace.summary.json", "flash.summary.json"});
  const auto some = op_colours(data_block(render_html_report(d.path.string(), stub_library())));
  // (A name attnprof does not record, such as the fixtures' "matmul#2", takes the next free colour, which depends
  // on what the page drew before it.)
  size_t shared = 0;
  for (const auto& [name, colour] : some)
    if (all.count(name) && name.find('#') == std::string::npos) {
      ++shared;
      EXPECT_EQ(colour, all.at(name)) << name;
    }
  EXPECT_GE(shared, 4u);
}

// Legends list the variants naive first, as the blog does, whichever file named them first: here the sweep
// names naive, and no summary does.
TEST(HtmlReport, LegendsListTheVariantsInTheirOneOrder) {
  TempDir d("legend-order");
  copy_fixtures(d.path, {"compare.json", "inplace.summary.json", "flash.summary.json", "sweep.json"});
  bool sweep_chart = false;
  const json data = data_block(render_html_report(d.path.string(), stub_library()));
  for (const json& c : data["charts"])
    if (c["kind"] == "sweep-time") {
      sweep_chart = true;
      EXPECT_EQ(c["spec"]["layer"][0]["encoding"]["color"]["legend"]["values"], json({"naive", "flash"}));
    }
  EXPECT_TRUE(sweep_chart);
  // Without naive's summary, the changes are set against inplace, and the page says so.
  EXPECT_NE(render_html_report(d.path.string(), stub_library())
                .find("No summary of naive is on this page (a note above says why): each variant is set against "
                      "inplace instead."),
            std::string::npos);
}

// A sweep point no sweep writes (a length that is not a whole number above 0, no time, a negative peak) is named
// and left out, not dropped without a word or drawn at a length no run had.
TEST(HtmlReport, SweepPointsNoSweepWritesAreNamed) {
  TempDir d("sweep-points");
  json sweep = json::parse(attnprof::io::read_file(kFixtures / "sweep.json"));
  size_t n = 0;  // the points that ran, each drawn once on the time chart
  for (const json& pt : sweep["points"]) n += pt.value("status", "ok") == "ok";
  ASSERT_GE(n, 4u);
  ASSERT_EQ(sweep["points"][0].value("status", "ok"), "ok");
  ASSERT_EQ(sweep["points"][1].value("status", "ok"), "ok");
  ASSERT_EQ(sweep["points"][2].value("status", "ok"), "ok");
  sweep["points"][0]["seq"] = 1.5;
  sweep["points"][1]["ms"] = -2.0;
  sweep["points"][2]["peak_bytes"] = -5.0;
  spit(d.path / "sweep.json", sweep.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  for (const char* why : {"at N=1.500: left out, sweep.json gives it no sequence length",
                          "left out, sweep.json gives it no time", "left out, sweep.json gives it a negative peak memory"})
    EXPECT_NE(page.find(why), std::string::npos) << why;
  size_t drawn = 0;
  const json data = data_block(page);
  for (const json& c : data["charts"])
    if (c["kind"] == "sweep-time")
      for (const json& l : c["spec"]["layer"])
        if (l.contains("data"))
          for (const json& v : l["data"]["values"]) drawn += v.value("kind", "") == "measured";
  EXPECT_EQ(drawn, n - 3);
}

// The Comparison's ratios: the speed-ups over naive, then the blog's headline one (SDPA math against in-place),
// computed from the rows as compare prints it.
TEST(HtmlReport, ComparisonGivesTheBlogsRatio) {
  TempDir d("blog-ratio");
  json cmp = json::parse(attnprof::io::read_file(kFixtures / "compare.json"));
  double math_ms = 0, inplace_ms = 0;
  for (json& v : cmp["variants"]) {
    if (v["name"] == "sdpa_math") v["name"] = "sdpa-math";  // the name compare writes today
    if (v["name"] == "sdpa-math") math_ms = v["ms"].get<double>();
    if (v["name"] == "inplace") inplace_ms = v["ms"].get<double>();
  }
  ASSERT_GT(math_ms, inplace_ms);
  ASSERT_GT(inplace_ms, 0);
  spit(d.path / "compare.json", cmp.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find(fmt::format("Blog&#39;s ratio: sdpa-math {:.2f}x", math_ms / inplace_ms)), std::string::npos);
  EXPECT_NE(page.find("slower than inplace (on its A100: 3.7x slower)."), std::string::npos);
}

// Likewise a fit with no exponent (null, a string, missing) or no positive coefficient: named and left out of
// the table and the chart, never printed as "nan".
TEST(HtmlReport, SweepFitsNoSweepWritesAreNamed) {
  TempDir d("sweep-fits");
  json sweep = json::parse(attnprof::io::read_file(kFixtures / "sweep.json"));
  ASSERT_GE(sweep["fits"].size(), 3u);
  sweep["fits"][0]["exponent"] = nullptr;
  sweep["fits"][1]["exponent"] = "x";
  sweep["fits"][2]["coefficient"] = -1.0;
  const std::string first = sweep["fits"][0]["metric"].get<std::string>() + " fit of " +
                            sweep["fits"][0]["variant"].get<std::string>();
  spit(d.path / "sweep.json", sweep.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(
      page.find("the " + first + ": left out, sweep.json gives it no exponent (attnprof never writes such a fit)"),
      std::string::npos);
  EXPECT_NE(page.find("left out, sweep.json gives it no positive coefficient"), std::string::npos);
  EXPECT_EQ(page.find(">nan<"), std::string::npos);
  EXPECT_EQ(page.find("N^nan"), std::string::npos);
}

// Machine peaks no machine has (a damaged or edited roofline.json) are not drawn: no ridge at 10^32 FLOP/B or at
// infinity, but a note naming the figure, as the peaks cache and roofline --from refuse it.
TEST(HtmlReport, RooflinePeaksNoMachineHasAreNamedNotDrawn) {
  for (const char* file : {"roofline.json", "compare.json"}) {
    TempDir d(std::string("roofline-peaks-") + file);
    copy_fixtures(d.path, {file, "naive.summary.json"});
    const json good = json::parse(attnprof::io::read_file(kFixtures / file));
    for (double bw : {1e-30, 5e-324, 1e9}) {
      SCOPED_TRACE(fmt::format("{} bandwidth_gbs {}", file, bw));
      json r = good;
      r["machine"]["bandwidth_gbs"] = bw;
      if (r.contains("ops")) r["ops"] = json::array();  // no op placed under those peaks, so the file is read
      spit(d.path / file, r.dump());
      const std::string page = render_html_report(d.path.string(), stub_library());
      EXPECT_NE(page.find(fmt::format("{} gives machine peaks no machine has (bandwidth_gbs {:g} is outside "
                                      "0.1..100000 GB/s)",
                                      file, bw)),
                std::string::npos);
      EXPECT_EQ(page.find("ridge inf"), std::string::npos);
      const json data = data_block(page);  // held: a loop over a temporary's member would read freed memory
      for (const json& c : data["charts"]) EXPECT_NE(c["kind"], "roofline");
    }
    // Memory loops that the bandwidth is not the best of, or with a figure missing or implausible: named too,
    // not drawn under a caption that names loops the slope is not or calls it STREAM triad's.
    const double bw = good["machine"]["bandwidth_gbs"];
    for (const auto& [loops, why] : std::vector<std::pair<json, std::string>>{
             {{{"update", bw / 2}, {"copy", bw / 4}, {"triad", bw / 4}},
              fmt::format("bandwidth_gbs {:g} is not the best of bandwidth_loops ({:g})", bw, bw / 2)},
             {{{"update", bw}, {"triad", bw / 4}}, "bandwidth_loops has no number 'copy'"},
             {{{"update", bw}, {"copy", 1e-30}, {"triad", bw / 4}},
              "bandwidth_loops.copy 1e-30 is outside 0.1..100000 GB/s"},
             {json(bw), "bandwidth_loops is not an object"}}) {
      SCOPED_TRACE(loops.dump());
      json r = good;
      r["machine"]["bandwidth_loops"] = loops;
      if (r.contains("ops")) r["ops"] = json::array();
      spit(d.path / file, r.dump());
      const std::string page = render_html_report(d.path.string(), stub_library());
      std::string escaped;  // as the page writes it: an apostrophe is &#39;
      for (const char ch : why) escaped += ch == '\'' ? std::string("&#39;") : std::string(1, ch);
      EXPECT_NE(page.find(fmt::format("{} gives machine peaks no machine has ({})", file, escaped)), std::string::npos);
      const json data = data_block(page);
      for (const json& c : data["charts"]) EXPECT_NE(c["kind"], "roofline");
    }
  }
}

// A roofline.json whose op figures do not add up (an edited rate would sit above its roof) is not drawn: the
// note names the figure, and the section is built from compare.json and the summaries instead.
TEST(HtmlReport, RooflineOpsWhoseFiguresDisagreeAreNotDrawn) {
  TempDir d("roofline-edited");
  for (const auto& e : fs::directory_iterator(kFixtures)) fs::copy_file(e.path(), d.path / e.path().filename());
  const json good = json::parse(attnprof::io::read_file(kFixtures / "roofline.json"));
  ASSERT_EQ(good["ops"][0]["name"], "matmul");
  json r = good;
  r["ops"][0]["flops"] = 4e9;
  r["ops"][0]["bytes"] = 7e7;  // 57.14 FLOP/B, as its intensity
  r["ops"][0]["achieved_gbs"] = 245.7142857142857 / 57.142857142857146;
  r["ops"][0]["fraction_of_attainable"] = 245.7142857142857 / 460;
  spit(d.path / "roofline.json", r.dump());
  EXPECT_EQ(render_html_report(d.path.string(), stub_library()).find("roofline.json is not drawn"), std::string::npos);
  const std::vector<std::pair<std::function<void(json&)>, std::string>> edits = {
      {[](json& op) { op["achieved_gflops"] = 5000.0; },
       "op &#39;matmul&#39; of naive: fields &#39;achieved_gflops&#39; (5000) and &#39;achieved_gbs&#39;"},
      {[](json& op) { op["intensity"] = -3.0; }, "op &#39;matmul&#39; of naive: field &#39;intensity&#39; is -3"},
      {[](json& op) { op["intensity"] = 3.0; },
       "op &#39;matmul&#39; of naive: field &#39;intensity&#39; is 3, not its flops over its bytes"},
      {[](json& op) { op["fraction_of_attainable"] = 5.57; },
       "op &#39;matmul&#39; of naive: field &#39;fraction_of_attainable&#39; is 5.57"}};
  for (const auto& [edit, said] : edits) {
    json bad = r;
    edit(bad["ops"][0]);
    spit(d.path / "roofline.json", bad.dump());
    const std::string page = render_html_report(d.path.string(), stub_library());
    EXPECT_NE(page.find("roofline.json is not drawn: " + said), std::string::npos) << said;
  }
}

// The notes of a section with nothing to draw name what this directory lacks, not a note or a file it lacks too.
TEST(HtmlReport, EmptySectionsSayWhatTheDirectoryLacks) {
  TempDir d("lacks");
  fs::copy_file(kFixtures / "sweep.json", d.path / "sweep.json");
  std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("No profiler tables: this directory holds no &lt;variant&gt;.summary.json"), std::string::npos);
  EXPECT_NE(page.find("No memory timeline: this directory holds no &lt;variant&gt;.summary.json or trace"),
            std::string::npos);
  EXPECT_EQ(page.find("carry no table text"), std::string::npos);
  // One summary: nothing to set it against, said as such.
  fs::copy_file(kFixtures / "flash.summary.json", d.path / "flash.summary.json");
  page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("Needs a second &lt;variant&gt;.summary.json in this directory to set flash against"),
            std::string::npos);
  EXPECT_EQ(page.find("set against flash instead"), std::string::npos);
  // Two, neither naive and no compare.json naming it: no note above to point at.
  fs::copy_file(kFixtures / "inplace.summary.json", d.path / "inplace.summary.json");
  page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("This directory holds no naive.summary.json (<code>attnprof profile naive</code> with the same "
                      "--out writes one): each variant is set against flash instead."),
            std::string::npos);
  EXPECT_EQ(page.find("a note above says why"), std::string::npos);
  // naive alone: the second summary to add is another variant's, not naive's again.
  TempDir n("lacks-naive");
  fs::copy_file(kFixtures / "naive.summary.json", n.path / "naive.summary.json");
  EXPECT_NE(render_html_report(n.path.string(), stub_library())
                .find("to set naive against (<code>attnprof compare</code>, or <code>attnprof profile flash</code>"),
            std::string::npos);
}

TEST(HtmlReport, FlameGraphsOnlyFromThisRunsFoldedStacks) {
  TempDir d("stacks");
  for (const auto& e : fs::directory_iterator(kFixtures)) fs::copy_file(e.path(), d.path / e.path().filename());
  const auto now = fs::file_time_type::clock::now();
  for (const char* bad : {"main;attn_fwd 12x\n", "main;attn_fwd\n", " 12\n", "main;attn_fwd -5\n",
                          "main;attn_fwd 1234567890123456789\n"}) {
    spit(d.path / "naive.stacks.txt", std::string("main;ProfilerStep* 10\n") + bad);
    fs::last_write_time(d.path / "naive.stacks.txt", now + std::chrono::seconds(1));
    const std::string page = render_html_report(d.path.string(), stub_library());
    EXPECT_NE(page.find("naive: line 2 of naive.stacks.txt is not a folded stack"), std::string::npos) << bad;
    EXPECT_EQ(page.find("data-kind=\"flame\""), std::string::npos) << bad;
  }
  // What flamegraph.pl takes is taken too: CRLF line ends, a tab before the count, a fraction; a stack deeper than
  // the graph draws is cut at its depth (a line of 100,000 frames is 16 nodes, not 100,000).
  {
    std::string deep = "main";
    for (int i = 0; i < 100000; ++i) deep += ";f";
    spit(d.path / "naive.stacks.txt", "main;ProfilerStep* 10\r\nmain;attn_fwd\t12.5\r\n" + deep + " 30\n");
    fs::last_write_time(d.path / "naive.stacks.txt", now + std::chrono::seconds(1));
    const json taken = data_block(render_html_report(d.path.string(), stub_library()));
    size_t rows = 0;
    for (const json& c : taken["charts"])
      if (c["kind"] == "flame") rows += c["spec"]["data"]["values"].size();
    EXPECT_EQ(rows, 3u + 15u);  // main, ProfilerStep*, attn_fwd; 15 levels of f under main
  }
  // Well formed but older than the summary: an earlier run's.
  spit(d.path / "naive.stacks.txt", "main;ProfilerStep* 10\n");
  fs::last_write_time(d.path / "naive.stacks.txt", now - std::chrono::seconds(60));
  std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("naive: naive.stacks.txt is older than naive.summary.json (an earlier run&#39;s), so no flame "
                      "graph is drawn from it"),
            std::string::npos);
  EXPECT_EQ(page.find("data-kind=\"flame\""), std::string::npos);
  // flash's own, of this run: drawn, the kernel's steps under its op.
  spit(d.path / "flash.stacks.txt", "main;ProfilerStep*;flash_kernel_fwd;flash_attention 100\n"
                                    "main;ProfilerStep*;flash_kernel_fwd;flash_attention;Q·Kᵀ 300\n");
  fs::last_write_time(d.path / "flash.stacks.txt", now + std::chrono::seconds(1));
  page = render_html_report(d.path.string(), stub_library());
  size_t flames = 0;
  const json data = data_block(page);
  for (const json& c : data["charts"])
    if (c["kind"] == "flame") {
      ++flames;
      EXPECT_EQ(c["spec"]["data"]["values"].size(), 5u);  // main, ProfilerStep*, flash_kernel_fwd, the op, Q·Kᵀ
    }
  EXPECT_EQ(flames, 1u);
  // A frame too narrow for its name is labelled with its first code points and an ellipsis, never half a
  // UTF-8 sequence: 100 three-byte characters in a fifth of the width keep 20 (720 px / 5 / 6.5 px, less one).
  std::string long_name;
  for (int i = 0; i < 100; ++i) long_name += "ᵀ";
  spit(d.path / "flash.stacks.txt", "main;a 400\nmain;" + long_name + " 100\n");
  fs::last_write_time(d.path / "flash.stacks.txt", now + std::chrono::seconds(1));
  const json narrow = data_block(render_html_report(d.path.string(), stub_library()));
  std::string label;
  for (const json& c : narrow["charts"])
    if (c["kind"] == "flame")
      for (const json& r : c["spec"]["data"]["values"])
        if (r["name"] == long_name) label = r["label"].get<std::string>();
  std::string want;
  for (int i = 0; i < 20; ++i) want += "ᵀ";
  EXPECT_EQ(label, want + "…");
  // The table's rows as CSV are linked under its table when of the summary's run, and not when older.
  spit(d.path / "flash.table.csv", "name,calls\nflash_attention_fwd,3\n");
  fs::last_write_time(d.path / "flash.table.csv", now + std::chrono::seconds(1));
  EXPECT_NE(render_html_report(d.path.string(), stub_library())
                .find("Every row as CSV, for a spreadsheet or pandas: <a href=\"flash.table.csv\">flash.table.csv</a>"),
            std::string::npos);
  fs::last_write_time(d.path / "flash.table.csv", now - std::chrono::seconds(60));
  EXPECT_EQ(render_html_report(d.path.string(), stub_library()).find("Every row as CSV"), std::string::npos);
  fs::remove(d.path / "flash.table.csv");
  // Past the palette's twenty chosen colours, every name still gets a colour of its own: 40 frames, 40 colours.
  std::string many;
  for (int i = 0; i < 40; ++i) many += fmt::format("main;op{} 100\n", i);
  spit(d.path / "flash.stacks.txt", many);
  fs::last_write_time(d.path / "flash.stacks.txt", now + std::chrono::seconds(1));
  const json wide = data_block(render_html_report(d.path.string(), stub_library()));
  bool drawn = false;
  for (const json& c : wide["charts"])
    if (c["kind"] == "flame") {
      drawn = true;
      const json& scale = c["spec"]["layer"][0]["encoding"]["color"]["scale"];
      ASSERT_GE(scale["domain"].size(), 41u);  // main and op0..op39, after the names of the charts before
      ASSERT_EQ(scale["range"].size(), scale["domain"].size());
      std::set<std::string> colours;
      for (const json& x : scale["range"]) colours.insert(x.get<std::string>());
      EXPECT_EQ(colours.size(), scale["range"].size()) << scale["range"];
    }
  EXPECT_TRUE(drawn);
}

// An op a slow forward lifted is named once on the page: under its table, from the summary; the same line in the
// table file's footnotes (profile and compare write it there) is not shown again inside the fold.
TEST(HtmlReport, AnUnevenOpIsNamedOnceBesideItsTable) {
  TempDir d("uneven");
  copy_fixtures(d.path, {"compare.json", "naive.summary.json", "inplace.summary.json", "flash.summary.json"});
  json flash = json::parse(attnprof::io::read_file(d.path / "flash.summary.json"));
  for (json& r : flash["rows"])
    if (r["name"] == "flash_attention") r["self_ns_per_step"] = {40e6, 40e6, 104.5e6};  // 184.5 ms in all
  spit(d.path / "flash.summary.json", flash.dump());
  const std::string line = "Uneven: flash_attention's self CPU per forward: median 40.000ms, mean 61.500ms, slowest "
                           "104.500ms (1 of 3 forwards over 1.15x the median); the table's totals and averages include it.";
  spit(d.path / "flash.table.txt", "-----\nTHE TABLE\n-----\nSelf CPU time total: 185.250ms\nA FOOTNOTE\n" + line + "\n");
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(d.path / "flash.table.txt", now + std::chrono::seconds(1));
  const std::string page = render_html_report(d.path.string(), stub_library());
  const std::string shown = "Uneven: flash_attention&#39;s self CPU per forward: median 40.000ms";
  const size_t first = page.find(shown);
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(page.find(shown, first + 1), std::string::npos) << "named twice";
  EXPECT_NE(page.find("A FOOTNOTE"), std::string::npos);  // the rest of the footnotes stay
  EXPECT_NE(page.find("THE TABLE"), std::string::npos);
}

TEST(HtmlReport, AnEarlierRunsFilesBesideThisRunsAreNamedNotMixedIn) {
  TempDir d("earlier-run");
  copy_fixtures(d.path,
                {"compare.json", "naive.summary.json", "inplace.summary.json", "flash.summary.json", "sweep.json"});
  const auto now = fs::file_time_type::clock::now();
  // This run's compare skipped inplace; inplace.summary.json is an earlier run's (older than compare.json).
  json compare = json::parse(attnprof::io::read_file(d.path / "compare.json"));
  for (json& v : compare["variants"])
    if (v["name"] == "inplace") v = {{"name", "inplace"}, {"status", "skipped"}, {"note", "over the memory budget"}};
  spit(d.path / "compare.json", compare.dump());
  spit(d.path / "inplace.trace.json", "{\"traceEvents\": []}");
  fs::last_write_time(d.path / "inplace.summary.json", now - std::chrono::seconds(60));
  // naive's table text is an earlier profile's: older than the summary beside it.
  spit(d.path / "naive.table.txt", "AN EARLIER RUN'S TABLE\n");
  fs::last_write_time(d.path / "naive.table.txt", now - std::chrono::seconds(60));
  // flash's table text is of the same run (written with its summary).
  spit(d.path / "flash.table.txt", "THIS RUN'S FLASH TABLE\n");
  fs::last_write_time(d.path / "flash.table.txt", now + std::chrono::seconds(1));
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("inplace.summary.json is left out: compare.json did not run inplace (skipped: over the memory "
                      "budget), so the file is an earlier run&#39;s in this directory."),
            std::string::npos);
  EXPECT_FALSE(chart_variants(data_block(page), "time-by-op").count("inplace"));
  const size_t trace_at = page.find("inplace.trace.json</a>");
  ASSERT_NE(trace_at, std::string::npos);
  EXPECT_NE(page.substr(trace_at, 200).find("; another run&#39;s, left out of this page (see its top))"),
            std::string::npos) << page.substr(trace_at, 200);
  EXPECT_EQ(page.find("AN EARLIER RUN"), std::string::npos);
  EXPECT_NE(page.find("naive: naive.table.txt is older than naive.summary.json (an earlier run&#39;s), so its table is "
                      "rebuilt from the summary"),
            std::string::npos);
  EXPECT_NE(page.find("THIS RUN&#39;S FLASH TABLE"), std::string::npos);
  // A summary newer than compare.json (a later `profile inplace`) is this directory's latest and is drawn.
  fs::last_write_time(d.path / "inplace.summary.json", now + std::chrono::seconds(5));
  const std::string later = render_html_report(d.path.string(), stub_library());
  EXPECT_EQ(later.find("inplace.summary.json is left out"), std::string::npos);
  EXPECT_TRUE(chart_variants(data_block(later), "time-by-op").count("inplace"));
  // compare --variants naive,flash: compare.json does not name inplace at all. Its older summary is an earlier
  // run's and is left out, named; a later `profile inplace` is drawn.
  json two = compare;
  json kept = json::array();
  for (const json& v : two["variants"])
    if (v["name"] != "inplace") kept.push_back(v);
  two["variants"] = kept;
  spit(d.path / "compare.json", two.dump());
  fs::last_write_time(d.path / "inplace.summary.json", now - std::chrono::seconds(60));
  const std::string unnamed = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(unnamed.find("inplace.summary.json is left out: it is older than compare.json, which did not run inplace, "
                         "so it is an earlier run&#39;s in this directory."),
            std::string::npos);
  EXPECT_FALSE(chart_variants(data_block(unnamed), "time-by-op").count("inplace"));
  EXPECT_TRUE(chart_variants(data_block(unnamed), "time-by-op").count("naive"));
  fs::last_write_time(d.path / "inplace.summary.json", fs::file_time_type::clock::now() + std::chrono::seconds(5));
  const std::string profiled_after = render_html_report(d.path.string(), stub_library());
  EXPECT_EQ(profiled_after.find("inplace.summary.json is left out"), std::string::npos);
  EXPECT_TRUE(chart_variants(data_block(profiled_after), "time-by-op").count("inplace"));
}

TEST(HtmlReport, FiguresAttnprofNeverWritesAreNamedNotDrawn) {
  TempDir d("corrupt-figures");
  copy_fixtures(d.path, {"compare.json", "naive.summary.json", "inplace.summary.json", "flash.summary.json"});
  json naive = json::parse(attnprof::io::read_file(d.path / "naive.summary.json"));
  for (json& r : naive["rows"])
    if (r["name"] != "attn_fwd" && r.value("category", "") != "user_annotation") {
      r["total_ns"] = "oops";
      break;
    }
  spit(d.path / "naive.summary.json", naive.dump());
  json inplace = json::parse(attnprof::io::read_file(d.path / "inplace.summary.json"));
  inplace["rows"][1] = nullptr;
  spit(d.path / "inplace.summary.json", inplace.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("naive.summary.json is left out: naive.summary.json row"), std::string::npos);
  EXPECT_NE(page.find("field &#39;total_ns&#39; is not a number (attnprof does not write such a file)."), std::string::npos);
  EXPECT_NE(page.find("inplace.summary.json is left out: inplace.summary.json: a row without a &quot;name&quot;"),
            std::string::npos);
  const std::set<std::string> drawn = chart_variants(data_block(page), "time-by-op");
  EXPECT_TRUE(drawn.count("flash") && !drawn.count("naive") && !drawn.count("inplace"));

  // compare.json: a time as a string, a negative byte count; and the figures of its table and charts
  // (bytes moved, GFLOP/s, % of peak, the floor), which would otherwise be drawn as they stand.
  for (const auto& [field, value, why] : {std::tuple<const char*, json, const char*>{"ms", "8.157", "field &#39;ms&#39; is not a number"},
                                          {"peak_bytes", -5, "field &#39;peak_bytes&#39; is -5, out of range"},
                                          {"bytes", -5, "field &#39;bytes&#39; is -5, out of range"},
                                          {"bytes", "x", "field &#39;bytes&#39; is not a number"},
                                          {"gflops", -5, "field &#39;gflops&#39; is -5, out of range"},
                                          {"pct_peak", -5, "field &#39;pct_peak&#39; is -5, out of range"},
                                          {"floor_ms", -5, "field &#39;floor_ms&#39; is -5, out of range"}}) {
    json compare = json::parse(attnprof::io::read_file(kFixtures / "compare.json"));
    compare["variants"][0][field] = value;
    spit(d.path / "compare.json", compare.dump());
    const std::string p2 = render_html_report(d.path.string(), stub_library());
    EXPECT_NE(p2.find(std::string("compare.json variant &#39;naive&#39;: ") + why), std::string::npos) << field;
    EXPECT_NE(p2.find("(not drawn: attnprof does not write such a file)"), std::string::npos) << field;
    EXPECT_EQ(p2.find("<td>-5 B</td>"), std::string::npos);
  }
}

// What attnprof itself writes past 2^53 is read back: errors whose scale is the data's (values of 1e24 give a max
// error of 3e17 inside the tolerance) and the cost model of a row too large to run (1.4e17 bytes).
TEST(HtmlReport, LargeErrorsAndTheCostsOfSkippedRowsAreFiguresAttnprofWrites) {
  TempDir d("large-figures");
  copy_fixtures(d.path, {"compare.json", "naive.summary.json", "inplace.summary.json", "flash.summary.json"});
  json compare = json::parse(attnprof::io::read_file(d.path / "compare.json"));
  compare["variants"][0]["max_abs_err"] = 3.22e17;
  compare["variants"][0]["nmse"] = 1e20;
  compare["variants"][1]["status"] = "skipped";
  compare["variants"][1]["ms"] = nullptr;
  compare["variants"][1]["note"] = "over the memory budget";
  compare["variants"][1]["bytes"] = 1.377e17;
  compare["attention_flops"] = 1.62e16;
  for (json& v : compare["variants"])  // each rate as the FLOPs make it
    if (v["ms"].is_number()) v["gflops"] = 1.62e16 / (v["ms"].get<double>() * 1e6);
  spit(d.path / "compare.json", compare.dump());
  json naive = json::parse(attnprof::io::read_file(d.path / "naive.summary.json"));
  naive["run"]["max_abs_err"] = 2.16e17;
  spit(d.path / "naive.summary.json", naive.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_EQ(page.find("not a file attnprof wrote"), std::string::npos);
  EXPECT_NE(page.find("3.22e+17"), std::string::npos);
  EXPECT_TRUE(chart_variants(data_block(page), "time-by-op").count("naive"));
  // The rule is still there for the figures readers convert to integers.
  compare["variants"][0]["peak_bytes"] = 1.8e19;
  spit(d.path / "compare.json", compare.dump());
  EXPECT_NE(render_html_report(d.path.string(), stub_library()).find("&#39;peak_bytes&#39; = 1.8e+19 is out of range"),
            std::string::npos);
}

// A summary of another variant under this one's name (a copy, or compare.json naming another's file) is left out
// and named: it would put flash's ops in naive's bars and step panels. The other variant keeps its own.
TEST(HtmlReport, AnotherVariantsSummaryIsLeftOutNotDrawnUnderThisName) {
  TempDir d("variant-copy");
  copy_fixtures(d.path, {"compare.json", "inplace.summary.json", "flash.summary.json"});
  fs::copy_file(kFixtures / "flash.summary.json", d.path / "naive.summary.json");
  std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("naive.summary.json is left out: it is variant &#39;flash&#39;s summary, not &#39;naive&#39;s"),
            std::string::npos);
  std::set<std::string> drawn = chart_variants(data_block(page), "time-by-op");
  EXPECT_TRUE(drawn.count("flash") && drawn.count("inplace") && !drawn.count("naive"));
  // compare.json naming flash's file for naive: naive reads its own file; flash keeps its profile.
  fs::copy_file(kFixtures / "naive.summary.json", d.path / "naive.summary.json", fs::copy_options::overwrite_existing);
  json compare = json::parse(attnprof::io::read_file(d.path / "compare.json"));
  compare["variants"][0]["summary"] = "flash.summary.json";
  compare["variants"][0]["trace"] = "flash.trace.json";  // and its trace: read from naive.trace.json
  spit(d.path / "compare.json", compare.dump());
  fs::copy_file(kFixtures / "naive.trace.json", d.path / "naive.trace.json");
  page = render_html_report(d.path.string(), stub_library());
  drawn = chart_variants(data_block(page), "time-by-op");
  EXPECT_TRUE(drawn.count("flash") && drawn.count("naive"));
  EXPECT_TRUE(chart_variants(data_block(page), "timeline").count("naive"));
}

TEST(HtmlReport, AVariantNameThatIsNotAFileNameReadsNothingOutsideTheDirectory) {
  // compare.json names each variant's files: "../secret" would have the report read and embed files beside
  // the run's directory. compare.json is left out instead, saying why.
  TempDir d("variant-name-escape");
  const fs::path run = d.path / "run";
  fs::create_directories(run);
  copy_fixtures(run, {"compare.json", "naive.summary.json", "inplace.summary.json", "flash.summary.json"});
  json compare = json::parse(attnprof::io::read_file(run / "compare.json"));
  compare["variants"][0]["name"] = "../secret";
  compare["variants"][0]["summary"] = nullptr;
  spit(run / "compare.json", compare.dump());
  fs::copy_file(kFixtures / "naive.summary.json", d.path / "secret.summary.json");
  spit(d.path / "secret.table.txt", "SECRET-MARKER");
  const std::string page = render_html_report(run.string(), stub_library());
  EXPECT_EQ(page.find("SECRET-MARKER"), std::string::npos);
  EXPECT_NE(page.find("field &#39;name&#39; of a variant is &#39;../secret&#39;, not a plain file name"), std::string::npos);
}

TEST(HtmlReport, TheSweepSaysWhatItRanAndWhenItIsAnotherProblem) {
  TempDir d("sweep-problem");
  copy_fixtures(d.path, {"compare.json", "sweep.json"});
  json sweep = json::parse(attnprof::io::read_file(d.path / "sweep.json"));
  json compare = json::parse(attnprof::io::read_file(d.path / "compare.json"));
  compare["shape"] = {{"B", 8}, {"Hq", 16}, {"Hkv", 16}, {"Nq", 1024}, {"Nk", 1024}, {"D", 64}};
  compare["dtype"] = "bf16";
  compare["causal"] = true;
  spit(d.path / "compare.json", compare.dump());
  sweep["shape"] = {{"B", 8}, {"Hq", 16}, {"Hkv", 4}, {"D", 64}};
  sweep["dtype"] = "bf16";
  sweep["causal"] = true;
  sweep["threads"] = 1;
  sweep["flash_block"] = {128, 64};  // --flash-block: said beside the threads
  sweep["machine"] = {{"memory_reclaim", "this VM hands freed memory back"}};
  // Two points for one variant: a line through both, no error estimate.
  json pts = json::array();
  for (const json& p : sweep["points"])
    if (p["variant"] == "flash" && pts.size() < 2) pts.push_back(p);
  ASSERT_EQ(pts.size(), 2u);
  pts[1]["forward_ms"] = {10.0, 30.0, 12.0};  // noisy
  sweep["points"] = pts;
  sweep["fits"] = {{{"variant", "flash"}, {"metric", "time"}, {"exponent", 1.823}, {"coefficient", 3.98e-5},
                    {"r2", 1.0}, {"stderr", 0.0}, {"points", 2}}};
  spit(d.path / "sweep.json", sweep.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("Every point: B=8 Hq=16 Hkv=4 D=64 · bf16 · causal · 1 thread · flash blocks 128×64 · N = the "
                      "point&#39;s length"),
            std::string::npos);
  EXPECT_NE(page.find("This sweep is of B=8 Hq=16 Hkv=4 D=64 bf16 causal at every N, not of the comparison&#39;s "
                      "B=8 Hq=16 Hkv=16 D=64 bf16 causal"),
            std::string::npos);
  EXPECT_NE(page.find("<td class=\"num\">1.823</td><td class=\"num\">–</td>"), std::string::npos);
  EXPECT_EQ(page.find("<td class=\"num\">1.0000</td>"), std::string::npos);
  EXPECT_NE(page.find("this VM hands freed memory back"), std::string::npos);
  EXPECT_EQ(page.find("weak: no power law"), std::string::npos);
  // A sweep a Ctrl-C stopped says so, with its count of points.
  sweep["interrupted"] = {{"points", 2}, {"planned", 6}};
  spit(d.path / "sweep.json", sweep.dump());
  EXPECT_NE(render_html_report(d.path.string(), stub_library())
                .find("This sweep was interrupted (Ctrl-C) after 2 of its 6 points: the 2 below are those that finished."),
            std::string::npos);
  sweep.erase("interrupted");
  // The same problem: no note.
  sweep["shape"]["Hkv"] = 16;
  spit(d.path / "sweep.json", sweep.dump());
  EXPECT_EQ(render_html_report(d.path.string(), stub_library()).find("This sweep is of"), std::string::npos);
  // A weak fit is marked in the table as sweep prints it, not only on the chart's label.
  sweep["fits"][0]["points"] = 4;
  sweep["fits"][0]["stderr"] = 0.487;
  sweep["fits"][0]["weak"] = true;
  spit(d.path / "sweep.json", sweep.dump());
  const std::string weak = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(weak.find("<td class=\"num\">4</td><td>weak: no power law</td>"), std::string::npos);
  EXPECT_NE(weak.find("so that exponent is no scaling law"), std::string::npos);
  EXPECT_EQ(weak.find("implausible"), std::string::npos);
  // A time exponent no attention forward has, as sweep flags it: in the row, the label and a note.
  sweep["fits"][0]["implausible"] = true;
  spit(d.path / "sweep.json", sweep.dump());
  const std::string implausible = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(implausible.find("<td>weak: no power law; implausible: disturbed timings</td>"), std::string::npos);
  EXPECT_NE(implausible.find("a time exponent outside 0..3, which no attention forward has"), std::string::npos);
  // A straight fit through points most of which were Busy or Noisy (sweep.json's disturbed_points): not "a power
  // law", in the row, on the chart's label and in a note.
  sweep["fits"][0]["weak"] = false;
  sweep["fits"][0]["implausible"] = false;
  sweep["fits"][0]["points"] = 3;
  sweep["fits"][0]["disturbed_points"] = 2;
  spit(d.path / "sweep.json", sweep.dump());
  const std::string disturbed = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(disturbed.find("<td>disturbed: 2 of 3 points Busy or Noisy</td>"), std::string::npos);
  EXPECT_NE(disturbed.find("N^1.82 (disturbed)"), std::string::npos);
  EXPECT_NE(disturbed.find("disturbed: half the fit&#39;s points or more were Busy or Noisy"), std::string::npos);
  sweep["fits"][0]["disturbed_points"] = 1;  // one of three: the fit stands
  spit(d.path / "sweep.json", sweep.dump());
  EXPECT_EQ(render_html_report(d.path.string(), stub_library()).find("disturbed: "), std::string::npos);
  sweep["fits"][0]["points"] = 4;  // two of four, half: disturbed
  sweep["fits"][0]["disturbed_points"] = 2;
  spit(d.path / "sweep.json", sweep.dump());
  EXPECT_NE(render_html_report(d.path.string(), stub_library()).find("disturbed: 2 of 4 points Busy or Noisy"),
            std::string::npos);
  // A time exponent under 1 (sweep.json's fixed_costs): per-forward fixed costs, not yet the N² work, in the
  // row, on the chart's label and in a note.
  sweep["fits"][0]["disturbed_points"] = 0;
  sweep["fits"][0]["fixed_costs"] = true;
  spit(d.path / "sweep.json", sweep.dump());
  const std::string fixed = render_html_report(d.path.string(), stub_library());
  for (const char* said : {"<td>fixed costs: not yet N²</td>", "(fixed costs)",
                           "fixed costs: a time exponent below 1 while the work grows as N²"})
    EXPECT_NE(fixed.find(said), std::string::npos) << said;
  sweep["fits"][0]["fixed_costs"] = false;
  sweep["fits"][0]["points"] = 3;
  // An exponent that 3 decimals (the label's 2) would round to -0.000 is shown in full, as sweep prints it.
  sweep["fits"][0]["exponent"] = -1.2e-4;
  sweep["fits"][0]["implausible"] = true;
  spit(d.path / "sweep.json", sweep.dump());
  const std::string tiny = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(tiny.find("<td class=\"num\">-1.2e-04</td>"), std::string::npos);
  EXPECT_NE(tiny.find("N^-1.2e-04 (implausible)"), std::string::npos);
  EXPECT_EQ(tiny.find(">-0.000<"), std::string::npos);
  EXPECT_EQ(tiny.find("N^-0.00 "), std::string::npos);
}

// A row past 4x its roofline floor: its × floor cell marked, and one line naming every such row with why.
TEST(HtmlReport, RowsFarFromTheFloorAreMarkedInTheTable) {
  TempDir d("far-floor");
  json c = json::parse(attnprof::io::read_file(kFixtures / "compare.json"));
  for (json& v : c["variants"])
    if (v["name"] == "naive") v["ms"] = 4.5 * v["floor_ms"].get<double>();
  spit(d.path / "compare.json", c.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("<td class=\"num\">173.545</td><td class=\"num far\">4.5×</td>"), std::string::npos);
  EXPECT_NE(page.find("Far from the floor (past 4x its roofline floor, the × floor column): naive 4.5x. Its time went "
                      "where the cost model does not look"),
            std::string::npos);
  EXPECT_EQ(page.find("<td class=\"num far\">1.7×</td>"), std::string::npos) << "flash is within 4x";
}

// The roofline's causal note says by how much the unfused matmul's FLOPs exceed the attention's, from the run's
// shape: twice with as many keys as queries, 4x with twice the keys; an older file without them says "more".
TEST(HtmlReport, TheCausalNoteCountsTheMatmulsExtraFlopsFromTheShape) {
  TempDir d("causal-note");
  for (const fs::directory_entry& e : fs::directory_iterator(kFixtures)) fs::copy_file(e.path(), d.path / e.path().filename());
  json c = json::parse(attnprof::io::read_file(kFixtures / "compare.json"));
  EXPECT_NE(render_html_report(d.path.string(), stub_library()).find("while doing more FLOPs than the attention needs"),
            std::string::npos);
  for (const auto& [nk, flops, words] : {std::tuple{1024, 4.0 * 8 * 16 * 64 * 1024 * 1024 / 2, "twice the FLOPs"},
                                         {2048, 4.0 * 8 * 16 * 64 * 1024 * 1024 / 2, "4.00x the FLOPs"}}) {
    c["shape"] = {{"B", 8}, {"Hq", 16}, {"Hkv", 16}, {"Nq", 1024}, {"Nk", nk}, {"D", 64}};
    c["attention_flops"] = flops;
    spit(d.path / "compare.json", c.dump());
    EXPECT_NE(render_html_report(d.path.string(), stub_library())
                  .find(std::string("while doing ") + words + " the attention needs"),
              std::string::npos)
        << words;
  }
}

// A directory of profiles (no compare.json, no roofline.json) is drawn on the roofline under the peaks its
// summaries recorded, when they are one machine's; summaries of two machines' peaks draw none, as roofline
// --from refuses them.
TEST(HtmlReport, RooflineFromTheProfilesPeaksWhenNoCompareOrRooflineJson) {
  TempDir d("profiles-roofline");
  const json compare = json::parse(attnprof::io::read_file(kFixtures / "compare.json"));
  for (const char* v : {"naive", "flash"}) {
    json s = json::parse(attnprof::io::read_file(kFixtures / (std::string(v) + ".summary.json")));
    s["machine"] = compare["machine"];
    if (std::string(v) == "flash") s["machine"]["from_cache"] = true;  // the same peaks, read back from the cache
    spit(d.path / (std::string(v) + ".summary.json"), s.dump());
  }
  std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("the machine peaks the profiles recorded in their summaries"), std::string::npos);
  json data = data_block(page);
  const json charts = data["charts"];
  EXPECT_TRUE(std::any_of(charts.begin(), charts.end(), [](const json& c) { return c["kind"] == "roofline"; }));
  json flash = json::parse(attnprof::io::read_file(d.path / "flash.summary.json"));
  flash["machine"]["bandwidth_gbs"] = 2 * flash["machine"]["bandwidth_gbs"].get<double>();
  spit(d.path / "flash.summary.json", flash.dump());
  page = render_html_report(d.path.string(), stub_library());
  EXPECT_EQ(page.find("the machine peaks the profiles recorded in their summaries"), std::string::npos);
  data = data_block(page);
  const json other = data["charts"];
  EXPECT_FALSE(std::any_of(other.begin(), other.end(), [](const json& c) { return c["kind"] == "roofline"; }));
}

TEST(HtmlReport, RooflineFromCompareWhenNoRooflineJson) {
  TempDir d("no-roofline");
  copy_fixtures(d.path, {"compare.json", "naive.summary.json", "flash.summary.json"});
  const std::string page = render_html_report(d.path.string(), stub_library());
  const json data = data_block(page);
  bool roof = false;
  for (const json& c : data["charts"])
    if (c["kind"] == "roofline") {
      roof = true;
      // ceilings, the ridges and their labels, a line from each point up to its own roof, the points' labels
      // (left-aligned and right-aligned), the leader lines to labels a line away, and the points on top
      ASSERT_EQ(c["spec"]["layer"].size(), 8u);
      EXPECT_EQ(c["spec"]["layer"][6]["mark"]["type"], "rule");
      EXPECT_EQ(c["spec"]["layer"][7]["mark"]["type"], "point");
      // Only the points answer a hover: a line over a point's centre would take it.
      for (size_t l = 0; l < 7; ++l) EXPECT_FALSE(c["spec"]["layer"][l]["encoding"].contains("tooltip")) << l;
      EXPECT_TRUE(c["spec"]["layer"][7]["encoding"].contains("tooltip"));
      std::set<std::string> labelled, placed_ops;
      for (int l : {4, 5}) {
        EXPECT_EQ(c["spec"]["layer"][l]["mark"]["type"], "text");
        for (const json& t : c["spec"]["layer"][l]["data"]["values"]) labelled.insert(t["label"].get<std::string>());
      }
      for (const json& p : c["spec"]["layer"].back()["data"]["values"]) placed_ops.insert(p["op"].get<std::string>());
      EXPECT_EQ(labelled, placed_ops) << "each op drawn is named on the chart";
      EXPECT_EQ(c["spec"]["layer"][1]["mark"]["type"], "rule");
      EXPECT_EQ(c["spec"]["layer"][1]["data"]["values"].size(), c["spec"]["layer"][2]["data"]["values"].size());
      for (const json& r : c["spec"]["layer"][2]["data"]["values"]) {  // each ridge named by its ceiling
        const std::string label = r["label"];
        EXPECT_TRUE(label.rfind("FP32 ridge ", 0) == 0 || label.rfind("BF16 ridge ", 0) == 0) << label;
      }
      EXPECT_FALSE(c["spec"]["layer"].back()["data"]["values"].empty());
      EXPECT_EQ(c["spec"]["layer"][3]["mark"]["type"], "rule");
      EXPECT_EQ(c["spec"]["layer"][3]["encoding"]["y2"]["field"], "attainable");
      EXPECT_EQ(c["spec"]["layer"][3]["data"]["values"], c["spec"]["layer"].back()["data"]["values"]);
      for (const json& p : c["spec"]["layer"].back()["data"]["values"]) {
        EXPECT_NE(p["op"], "copy");
        // Named by the ceiling its compute peak is (this fixture: FP32 230, BF16 460 GFLOP/s).
        const double peak = p["peak"];
        EXPECT_EQ(p["ceiling"], std::abs(peak - 460.0) < 1e-6 ? "BF16" : std::abs(peak - 230.0) < 1e-6 ? "FP32" : "?")
            << p.dump();
      }
    }
  EXPECT_TRUE(roof);
  // naive's copy moves bytes and computes nothing: not a point, a row of the bandwidth table under the chart.
  EXPECT_NE(page.find("Ops that move bytes and compute nothing"), std::string::npos);
  EXPECT_NE(page.find("<tr><td>naive</td><td>copy</td>"), std::string::npos);
  EXPECT_NE(page.find("A point above the sloped line moved its bytes faster"), std::string::npos);
  // The slope is STREAM triad in a file from before the memory loops (an in-place op beats it), the best loop where
  // the file names them.
  json compare = json::parse(attnprof::io::read_file(d.path / "compare.json"));
  ASSERT_FALSE(compare["machine"].contains("bandwidth_loops"));
  EXPECT_NE(page.find("bandwidth (STREAM triad), which counts the bytes triad asks for"), std::string::npos);
  const double bw = compare["machine"]["bandwidth_gbs"];
  compare["machine"]["bandwidth_loops"] = {{"update", bw}, {"copy", 0.75 * bw}, {"triad", 0.5 * bw}};
  spit(d.path / "compare.json", compare.dump());
  const std::string with_loops = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(with_loops.find(fmt::format("faster than the measured bandwidth, the best of three memory loops over 128 "
                                        "MB arrays (in-place update {:.1f}, copy {:.1f}, STREAM triad {:.1f} GB/s): "
                                        "its data stayed in cache, or the machine",
                                        bw, 0.75 * bw, 0.5 * bw)),
            std::string::npos);
  EXPECT_EQ(with_loops.find("which counts the bytes triad asks for"), std::string::npos);
  // The two loops under the roof are thin slopes of their own, from the chart's left edge up to the highest
  // compute ceiling (the fixture's BF16 460 GFLOP/s), named in their own legend; the roof's loop is not drawn again.
  // The points stay the last layer.
  EXPECT_NE(with_loops.find("The thin dashed slopes under it are the other loops"), std::string::npos);
  {
    const json data = data_block(with_loops);
    int charts = 0;
    for (const json& c : data["charts"]) {
      if (c["kind"] != "roofline") continue;
      ++charts;
      const json& layers = c["spec"]["layer"];
      const json* slopes = nullptr;
      for (const json& l : layers)
        if (l["encoding"].contains("strokeDash") && l["encoding"]["strokeDash"]["field"] == "loop") slopes = &l;
      ASSERT_NE(slopes, nullptr) << layers.dump();
      EXPECT_EQ(layers.back()["mark"]["type"], "point");
      std::map<std::string, std::vector<std::pair<double, double>>> lines;
      for (const json& v : (*slopes)["data"]["values"])
        lines[v["loop"].get<std::string>()].push_back({v["intensity"].get<double>(), v["gflops"].get<double>()});
      ASSERT_EQ(lines.size(), 2u) << (*slopes).dump();
      for (const auto& [loop, gbs] : {std::pair{fmt::format("copy {:.1f} GB/s", 0.75 * bw), 0.75 * bw},
                                      std::pair{fmt::format("STREAM triad {:.1f} GB/s", 0.5 * bw), 0.5 * bw}}) {
        ASSERT_EQ(lines[loop].size(), 2u) << loop;
        const auto [x0, y0] = lines[loop][0];
        const auto [x1, y1] = lines[loop][1];
        EXPECT_NEAR(y0, x0 * gbs, 1e-9 * y0) << loop;  // on its slope at the left edge
        EXPECT_NEAR(x1, 460.0 / gbs, 1e-9 * x1) << loop;  // meeting the top ceiling
        EXPECT_NEAR(y1, 460.0, 1e-9) << loop;
      }
    }
    EXPECT_EQ(charts, 1);
  }
  // Peaks measured on a busy machine: the caption says so, as roofline --from and compare's footer do.
  compare["machine"]["measured_busy"] = "other work used 1.0 of 2 CPUs";
  spit(d.path / "compare.json", compare.dump());
  EXPECT_NE(render_html_report(d.path.string(), stub_library())
                .find("on a busy machine (other work used 1.0 of 2 CPUs), so they may be low"),
            std::string::npos);
}

// The bytes-only table holds exactly the ops with bytes and no FLOPs (copies, casts, triu); a mask fill has
// 1 FLOP per element in the cost model, so it is a point on the chart, and the caption and note say so.
// roofline.json is a run of its own: an op it timed more than 20 % apart from the summaries beside it is named
// with both speeds, and a variant of the summaries it did not place is named as not on the chart.
TEST(HtmlReport, RooflineJsonThatDisagreesWithTheSummariesIsSaid) {
  TempDir d("roofline-apart");
  copy_fixtures(d.path, {"compare.json", "naive.summary.json", "inplace.summary.json", "sdpa_math.summary.json",
                         "flash.summary.json", "roofline.json"});
  const std::string agreeing = render_html_report(d.path.string(), stub_library());
  EXPECT_EQ(agreeing.find("ran more than 20 % faster or slower"), std::string::npos);
  EXPECT_EQ(agreeing.find("Not on the chart"), std::string::npos);
  json roof = json::parse(attnprof::io::read_file(d.path / "roofline.json"));
  json kept = json::array();
  for (json& o : roof["ops"]) {
    if (o["variant"] == "flash") continue;
    if (o["variant"] == "naive" && o["name"] == "softmax") o["achieved_gflops"] = 3.0 * o["achieved_gflops"].get<double>();
    kept.push_back(o);
  }
  roof["ops"] = kept;
  spit(d.path / "roofline.json", roof.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  const size_t at = page.find("1 of its ops ran more than 20 % faster or slower there than in this directory");
  ASSERT_NE(at, std::string::npos) << page.substr(page.find("id=\"roofline\""), 6000);
  EXPECT_NE(page.find("naive softmax 57.4 against 19.1", at), std::string::npos) << page.substr(at, 600);
  EXPECT_NE(page.find("Not on the chart: flash (roofline.json did not place it)."), std::string::npos);
  // The commands a note quotes in backticks are set as code, not printed with their backticks.
  EXPECT_NE(page.find("Re-run <code>attnprof roofline</code>, or place the summaries&#39; ops with <code>attnprof "
                      "roofline --from DIR</code>."),
            std::string::npos)
      << page.substr(at, 900);
  // Variants named otherwise than in the summaries (a backtick in one): which are missing cannot be told, so no
  // "Not on the chart"; the backtick of a name stays a backtick, and the command beside it is still code.
  for (json& o : roof["ops"])
    if (o["variant"] == "naive") o["variant"] = "na`ive";
  spit(d.path / "roofline.json", roof.dump());
  const std::string renamed = render_html_report(d.path.string(), stub_library());
  EXPECT_EQ(renamed.find("Not on the chart"), std::string::npos);
  EXPECT_EQ(renamed.find("naive softmax"), std::string::npos);
  // A roofline.json that roofline --from wrote placed the summaries' own ops: nothing to set against them.
  roof["from"] = "elsewhere/compare.json";
  for (json& o : roof["ops"])
    if (o["variant"] == "na`ive") o["variant"] = "naive";
  spit(d.path / "roofline.json", roof.dump());
  const std::string from = render_html_report(d.path.string(), stub_library());
  EXPECT_EQ(from.find("ran more than 20 % faster or slower"), std::string::npos);
  EXPECT_EQ(from.find("Not on the chart"), std::string::npos);
}

// Notes quote commands in backticks, set as code; a backtick in a name read from a file stays one, and does not
// pair with the command's.
TEST(HtmlReport, OnlyQuotedCommandsBecomeCode) {
  TempDir d("backticks");
  json compare = json::parse(attnprof::io::read_file(kFixtures / "compare.json"));
  compare["variants"][0]["name"] = "na`ive";
  compare["variants"][0]["forward_ms"] = {100.0, 190.0, 150.0};  // noisy: a Noisy line and its advice
  compare["variants"][0]["ms"] = 150.0;                           // their median, as compare writes it
  compare["variants"][0].erase("summary");
  compare["variants"][0].erase("trace");
  spit(d.path / "compare.json", compare.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("Noisy: na`ive took"), std::string::npos);
  EXPECT_NE(page.find("<code>attnprof profile --counters</code>"), std::string::npos);
  EXPECT_EQ(page.find("na<code>"), std::string::npos);
}

TEST(HtmlReport, MaskFillsArePlacedAndOnlyOpsThatComputeNothingAreTabled) {
  TempDir d("bytes-only");
  copy_fixtures(d.path, {"compare.json", "naive.summary.json", "inplace.summary.json", "sdpa_math.summary.json",
                         "roofline.json"});
  // A row with neither FLOPs nor bytes (a view) is in neither the chart nor the table.
  json naive = json::parse(attnprof::io::read_file(d.path / "naive.summary.json"));
  json view = naive["rows"][4];
  view["name"] = "transpose";
  for (const char* k : {"cost", "self_cost"})
    view[k] = {{"flops", 0.0}, {"bytes_read", 0.0}, {"bytes_written", 0.0}, {"bytes", 0.0}};
  naive["rows"].push_back(view);
  spit(d.path / "naive.summary.json", naive.dump());
  auto check = [](const std::string& page, const std::set<std::pair<std::string, std::string>>& tabled,
                  const std::string& here) {
    const json data = data_block(page);
    std::set<std::pair<std::string, std::string>> placed;
    for (const json& c : data["charts"])
      if (c["kind"] == "roofline")
        for (const json& p : c["spec"]["layer"].back()["data"]["values"])
          placed.insert({p["variant"].get<std::string>(), p["op"].get<std::string>()});
    EXPECT_TRUE(placed.count({"inplace", "masked_fill_"})) << "a mask fill computes: 1 FLOP per element";
    std::set<std::pair<std::string, std::string>> rows;
    const auto roof = page.find("<section id=\"roofline\">");
    const std::string sec = page.substr(roof, page.find("</section>", roof) - roof);
    const std::regex row(R"(<tr><td>([^<]*)</td><td>([^<]*)</td><td class="num">)");
    for (auto it = std::sregex_iterator(sec.begin(), sec.end(), row); it != std::sregex_iterator(); ++it)
      rows.insert({(*it)[1].str(), (*it)[2].str()});
    EXPECT_EQ(rows, tabled);
    for (const auto& r : rows) EXPECT_FALSE(placed.count(r)) << r.first << " " << r.second;
    EXPECT_FALSE(placed.count({"naive", "transpose"}));
    EXPECT_FALSE(rows.count({"naive", "transpose"}));
    EXPECT_NE(sec.find("Mask fills (masked_fill_) are placed: the cost model counts their compare and select as 1 "
                       "FLOP per element."),
              std::string::npos);
    EXPECT_NE(sec.find("Ops that move bytes and compute nothing in the cost model (copies, casts, where&#39;s additive "
                       "mask, and triu, whose causal mask is index arithmetic; here " + here +
                       ") have no place on a FLOP/s axis"),
              std::string::npos)
        << sec;
    EXPECT_EQ(sec.find("(mask fills, at 1 FLOP per element"), std::string::npos) << "said once, in the caption";
    EXPECT_NE(sec.find("bandwidth ceiling instead:"), std::string::npos) << sec;
    EXPECT_EQ(page.find("mask fills) have no place"), std::string::npos) << "the old caption, which was false";
  };
  // From compare.json and the summaries (roofline.json older than compare.json is left out).
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(d.path / "roofline.json", now - std::chrono::seconds(60));
  fs::last_write_time(d.path / "compare.json", now);
  check(render_html_report(d.path.string(), stub_library()),
        {{"naive", "copy"}, {"sdpa_math", "to_fp32"}, {"sdpa_math", "triu"}, {"sdpa_math", "to_bf16"}},
        "copy, to_fp32, triu, to_bf16");
  // From roofline.json's points, by the same rule: flops == 0 and bytes > 0.
  json roof = json::parse(attnprof::io::read_file(d.path / "roofline.json"));
  roof["ops"].push_back({{"variant", "naive"}, {"name", "copy_"}, {"flops", 0.0}, {"bytes", 1.6e9},
                                   {"self_ns", 2.2e7}, {"intensity", 0.0}, {"achieved_gflops", 0.0}});
  roof["ops"].push_back({{"variant", "naive"}, {"name", "transpose"}, {"flops", 0.0}, {"bytes", 0.0},
                                   {"self_ns", 1e3}, {"intensity", 0.0}, {"achieved_gflops", 0.0}});
  spit(d.path / "roofline.json", roof.dump());
  fs::last_write_time(d.path / "roofline.json", now + std::chrono::seconds(5));
  check(render_html_report(d.path.string(), stub_library()), {{"naive", "copy_"}}, "copy_");
}

// A roofline.json older than compare.json placed an earlier run's ops (roofline --from before the last compare):
// left out and named, the chart built from compare.json; a newer one (roofline --from after it) is drawn.
TEST(HtmlReport, AnOlderRooflineJsonIsAnEarlierRunsAndIsLeftOut) {
  TempDir d("stale-roofline");
  copy_fixtures(d.path, {"compare.json", "naive.summary.json", "flash.summary.json", "roofline.json"});
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(d.path / "roofline.json", now - std::chrono::seconds(60));
  fs::last_write_time(d.path / "compare.json", now);
  const std::string stale = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(stale.find("roofline.json is left out: it is older than compare.json, so it placed an earlier run&#39;s ops."),
            std::string::npos);
  bool roof = false;  // still drawn, from compare.json and the summaries
  const json data = data_block(stale);
  for (const json& c : data["charts"])
    if (c["kind"] == "roofline") roof = true;
  EXPECT_TRUE(roof);
  fs::last_write_time(d.path / "roofline.json", now + std::chrono::seconds(5));
  EXPECT_EQ(render_html_report(d.path.string(), stub_library()).find("roofline.json is left out"), std::string::npos);
}

// A summary of a variant compare.json ran, replaced by a later `profile`: drawn (the directory's latest) and
// said so, since its time is not the Comparison table's. The summary compare wrote itself gets no note.
TEST(HtmlReport, ALaterProfilesSummaryIsDrawnAndNamed) {
  TempDir d("later-profile");
  copy_fixtures(d.path, {"compare.json", "naive.summary.json", "flash.summary.json"});
  EXPECT_EQ(render_html_report(d.path.string(), stub_library()).find("from a later run"), std::string::npos);
  json naive = json::parse(attnprof::io::read_file(d.path / "naive.summary.json"));
  naive["run"]["ms_per_forward"] = 150.0;
  spit(d.path / "naive.summary.json", naive.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("naive: naive.summary.json is from a later run than compare.json (150.000 ms per forward against "
                      "the 190.000 in the Comparison table)"),
            std::string::npos);
  EXPECT_TRUE(chart_variants(data_block(page), "time-by-op").count("naive"));
}

// Under ATTNPROF_ISA below the CPU's best, compare.json's machine has the libraries' peaks beside the dispatched
// ISA's and the summaries say which FLOPs ran in OpenBLAS / oneDNN: the report places matmul under the
// libraries' ceiling, as `attnprof roofline` does. Files from before (neither recorded) place every op under
// the dispatched ISA's peaks, as they always did.
TEST(HtmlReport, RooflineFromCompareBillsLibraryFlopsAtTheLibrarysPeaks) {
  TempDir d("library-peaks");
  json compare = json::parse(attnprof::io::read_file(kFixtures / "compare.json"));
  compare["machine"].update({{"isa", "scalar"}, {"fp32_gflops", 10.0}, {"bf16_gflops", 0.0}});
  const json summary = json::parse(attnprof::io::read_file(kFixtures / "naive.summary.json"));
  // Each op's attainable GFLOP/s on the page, and the ceilings drawn.
  auto roofline = [&](const json& compare_json, const json& summary_json) {
    spit(d.path / "compare.json", compare_json.dump());
    spit(d.path / "naive.summary.json", summary_json.dump());
    const std::string page = render_html_report(d.path.string(), stub_library());
    std::map<std::string, double> attainable;
    std::set<std::string> ceilings;
    const json data = data_block(page);
    for (const json& c : data["charts"])
      if (c["kind"] == "roofline") {
        for (const json& p : c["spec"]["layer"][0]["data"]["values"]) ceilings.insert(p["ceiling"].get<std::string>());
        for (const json& p : c["spec"]["layer"].back()["data"]["values"])
          attainable[p["op"].get<std::string>()] = p["attainable"].get<double>();
      }
    return std::tuple{attainable, ceilings, page};
  };
  // The fixture's matmul: 57 FLOP/B, far right of every ridge at 35 GB/s; mul 0.24 FLOP/B, under the slope.
  const auto [before, before_ceilings, before_page] = roofline(compare, summary);
  EXPECT_DOUBLE_EQ(before.at("matmul"), 10.0);
  EXPECT_NEAR(before.at("mul"), 0.39e9 / 1.611e9 * 35.0, 1e-9);
  EXPECT_EQ(before_ceilings.size(), 1u);
  compare["machine"].update(
      {{"library_isa", "avx512"}, {"library_fp32_gflops", 230.0}, {"library_bf16_gflops", 460.0}});
  json with_library = summary;
  for (json& row : with_library["rows"])
    if (row["name"] == "matmul") {
      const double flops = row["self_cost"]["flops"].get<double>();
      row["self_cost"].update({{"bf16_flops", flops}, {"library_flops", flops}, {"library_bf16_flops", flops}});
    }
  const auto [after, after_ceilings, after_page] = roofline(compare, with_library);
  EXPECT_DOUBLE_EQ(after.at("matmul"), 460.0) << "oneDNN's bf16 matmul at the avx512 bf16 peak";
  EXPECT_DOUBLE_EQ(after.at("mul"), before.at("mul"));
  EXPECT_EQ(after_ceilings.size(), 3u) << "the scalar FMA peak and the libraries' fp32 and bf16 peaks";
  EXPECT_EQ(std::count_if(after_ceilings.begin(), after_ceilings.end(),
                          [](const std::string& c) { return c.find("(avx512)") != std::string::npos; }),
            2);
  EXPECT_NE(after_page.find("matmul (OpenBLAS/oneDNN) under the avx512 ones"), std::string::npos);
  EXPECT_EQ(before_page.find("OpenBLAS/oneDNN"), std::string::npos);
}

TEST(HtmlReport, NoisyRowsAreNamedWithTheMachinesMemoryNote) {
  TempDir d("noisy");
  json c = json::parse(attnprof::io::read_file(kFixtures / "compare.json"));
  c["variants"][0]["forward_ms"] = {10.0, 20.0, 11.0};  // spread 2.0: flagged
  c["variants"][1]["forward_ms"] = {10.0, 11.0, 11.4};  // spread 1.14: not flagged
  c["variants"][0]["ms"] = c["variants"][1]["ms"] = 11.0;  // their medians, as compare writes them
  c["machine"]["memory_reclaim"] = "this VM gives freed memory back to its hypervisor";
  spit(d.path / "compare.json", c.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("Noisy: naive took 10.000ms / 20.000ms / 11.000ms per forward (slowest 2.00x the fastest)"),
            std::string::npos);
  EXPECT_EQ(page.find("Noisy: inplace"), std::string::npos);
  EXPECT_NE(page.find("Note: this VM gives freed memory back to its hypervisor."), std::string::npos);
  // The GEMM under the unfused variants' bf16 matmul is named when compare recorded it for a bf16 run.
  EXPECT_EQ(page.find("bf16 matmul (naive, inplace)"), std::string::npos);  // the fixture does not record it
  for (const char* key : {"onednn", "fp32-widened-sgemm"}) {
    json g = c;
    g["dtype"] = "bf16";
    g["machine"]["bf16_matmul"] = key;
    spit(d.path / "compare.json", g.dump());
    const std::string with_gemm = render_html_report(d.path.string(), stub_library());
    EXPECT_NE(with_gemm.find(html_escape("bf16 matmul (naive, inplace): " + attnprof::report::describe_bf16_matmul(key))), std::string::npos)
        << key;
  }
  {  // an fp16 CPU run: always the widened GEMM, whatever the bf16 one was
    json g = c;
    g["dtype"] = "fp16";
    g["machine"]["bf16_matmul"] = "onednn";
    spit(d.path / "compare.json", g.dump());
    const std::string fp16 = render_html_report(d.path.string(), stub_library());
    EXPECT_NE(fp16.find(html_escape(attnprof::report::unfused_matmul_note("fp16", "onednn"))), std::string::npos);
    EXPECT_NE(fp16.find("fp16 matmul (naive, inplace): fp16 widened to fp32 for OpenBLAS sgemm"), std::string::npos);
    EXPECT_EQ(fp16.find("bf16 matmul (naive, inplace)"), std::string::npos);
  }
  {  // the note names the unfused rows the run has, and is left out without them
    json g = c;
    g["dtype"] = "bf16";
    g["machine"]["bf16_matmul"] = "onednn";
    for (const char* gone : {"inplace", "naive"}) {
      json kept = json::array();
      for (const json& v : g["variants"])
        if (v["name"] != gone) kept.push_back(v);
      g["variants"] = kept;
      spit(d.path / "compare.json", g.dump());
      const std::string page_without = render_html_report(d.path.string(), stub_library());
      EXPECT_EQ(page_without.find("bf16 matmul (naive): ") != std::string::npos, std::string(gone) == "inplace") << gone;
      EXPECT_EQ(page_without.find("inplace): oneDNN"), std::string::npos) << gone;
    }
  }
  spit(d.path / "compare.json", c.dump());

  // A sweep point is named by its variant and length; sweep.json carries no machine note.
  json sweep = json::parse(attnprof::io::read_file(kFixtures / "sweep.json"));
  sweep["points"][0]["forward_ms"] = {4.0, 6.0};
  spit(d.path / "sweep.json", sweep.dump());
  const std::string with_sweep = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(with_sweep.find(fmt::format("Noisy: {} at N={} took 4.000ms / 6.000ms per forward (slowest 1.50x",
                                        sweep["points"][0]["variant"].get<std::string>(),
                                        sweep["points"][0]["seq"].get<int>())),
            std::string::npos);
  fs::remove(d.path / "sweep.json");

  // No noisy row: the memory note has nothing to explain and stays out.
  c["variants"][0]["forward_ms"] = {10.0, 10.5};
  spit(d.path / "compare.json", c.dump());
  const std::string quiet = render_html_report(d.path.string(), stub_library());
  EXPECT_EQ(quiet.find("Noisy:"), std::string::npos);
  EXPECT_EQ(quiet.find("Note: this VM"), std::string::npos);
}

TEST(HtmlReport, MemoryTimelineFromTraceCounters) {
  TempDir d("trace-memory");
  json s = json::parse(attnprof::io::read_file(kFixtures / "naive.summary.json"));
  s.erase("memory");
  spit(d.path / "naive.summary.json", s.dump());
  fs::copy_file(kFixtures / "naive.trace.json", d.path / "naive.trace.json");
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("naive.trace.json (counter events)"), std::string::npos);
}

TEST(HtmlReport, WritesWholeFileAndNamesWhatToInstall) {
  TempDir d("write");
  fs::copy_file(kFixtures / "sweep.json", d.path / "sweep.json");
  // A web dir with the three builds (stubs) is accepted; the page lands as report.html.
  const fs::path web = d.path / "web";
  for (const char* pkg : {"vega", "vega-lite", "vega-embed"}) {
    fs::create_directories(web / "node_modules" / pkg / "build");
    spit(web / "node_modules" / pkg / "package.json", R"({"version":"9.9.9"})");
    spit(web / "node_modules" / pkg / "build" / (std::string(pkg) + ".min.js"), "/* stub */");
  }
  HtmlOptions opt;
  opt.web_dir = web.string();
  const std::string path = write_html_report(d.path.string(), opt);
  EXPECT_EQ(fs::path(path).filename(), "report.html");
  const std::string page = attnprof::io::read_file(path);
  EXPECT_NE(page.find("Vega 9.9.9"), std::string::npos);
  EXPECT_NE(page.rfind("</html>\n"), std::string::npos);

  // A library that would break out of its <script> goes in as a data: URL instead.
  spit(web / "node_modules/vega/build/vega.min.js", "var s = '</script><!--';");
  const std::string page2 = render_html_report(d.path.string(), load_chart_library(web.string()));
  EXPECT_EQ(page2.find("'</script>"), std::string::npos);
  EXPECT_NE(page2.find("src=\"data:text/javascript;base64,"), std::string::npos);

  // A library file that is there but unusable is said as such, not as missing: empty, or not a regular file.
  auto refused = [&](const std::string& expect) {
    try {
      (void)load_chart_library(web.string());
      ADD_FAILURE() << "accepted; expected: " << expect;
    } catch (const attnprof::Error& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  const fs::path embed = web / "node_modules/vega-embed/build/vega-embed.min.js";
  const std::string embed_text = attnprof::io::read_file(embed);
  spit(embed, "");
  refused(embed.string() + " is empty, not the chart library; run `npm ci --prefix " + web.string() + "`");
  spit(embed, embed_text);
  const fs::path vega_js = web / "node_modules/vega/build/vega.min.js";
  const std::string vega_text = attnprof::io::read_file(vega_js);
  fs::remove(vega_js);
  fs::create_directory(vega_js);
  refused(vega_js.string() + " cannot be used: it is a directory; run `npm ci --prefix " + web.string() + "`");
  fs::remove(vega_js);
  spit(vega_js, vega_text);
  EXPECT_NO_THROW((void)load_chart_library(web.string()));

  // A named directory without the library is an error naming it, even where the search would find a copy.
  const std::string missing = (d.path / "nothing-here").string();
  EXPECT_EQ(chart_library_candidates(missing), std::vector<std::string>{missing});
  try {
    (void)load_chart_library(missing);
    ADD_FAILURE() << "no error for a --web-dir without the library";
  } catch (const attnprof::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + missing + "' (--web-dir) holds no node_modules/vega"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("npm ci --prefix " + missing), std::string::npos) << e.what();
  }

  // $ATTNPROF_WEB_DIR, as --web-dir, is the only place tried: a wrong one is an error naming it, not a silent
  // fall-back to the build tree's copy.
  const std::string nowhere = (d.path / "nowhere").string();
  ::setenv("ATTNPROF_WEB_DIR", nowhere.c_str(), 1);
  EXPECT_EQ(chart_library_candidates(), std::vector<std::string>{nowhere});
  try {
    (void)load_chart_library();
    ADD_FAILURE() << "no error for an ATTNPROF_WEB_DIR without the library";
  } catch (const attnprof::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + nowhere + "' ($ATTNPROF_WEB_DIR) holds no node_modules/vega"),
              std::string::npos) << e.what();
  }
  ::unsetenv("ATTNPROF_WEB_DIR");
  // With no library anywhere the search's error says what to install.
  const std::vector<std::string> searched = chart_library_candidates();
  if (std::none_of(searched.begin(), searched.end(), [](const std::string& c) {
        return fs::exists(fs::path(c) / "node_modules/vega/build/vega.min.js");
      })) {
    try {
      (void)load_chart_library();
      ADD_FAILURE() << "no error without a library";
    } catch (const attnprof::Error& e) {
      EXPECT_NE(std::string(e.what()).find("npm ci --prefix web"), std::string::npos) << e.what();
    }
  }
}

TEST(HtmlReport, NotADirectoryIsAnError) {
  EXPECT_THROW(write_html_report((kFixtures / "compare.json").string()), attnprof::Error);
}

// `attnprof report` end to end: a page from the fixtures, exit 0 and its path on stdout; a missing --out
// directory is exit 2 with one "attnprof: error:" line and nothing written.
TEST(HtmlReportCli, WritesThePageAndRejectsAMissingDirectory) {
  const fs::path bin = fs::path(ATTNPROF_BINARY_DIR) / "tools/attnprof";
  if (!fs::exists(bin)) GTEST_SKIP() << bin << " is not built";
  TempDir d("cli");
  for (const auto& e : fs::directory_iterator(kFixtures))
    if (e.path().extension() == ".json") fs::copy_file(e.path(), d.path / e.path().filename());
  const std::string log = (d.path / "log.txt").string();
  const int rc = std::system((bin.string() + " report --out " + d.path.string() + " >" + log + " 2>&1").c_str());
  const std::string out = attnprof::io::read_file(log);
  if (WEXITSTATUS(rc) == 2 && out.find("npm ci --prefix web") != std::string::npos)
    GTEST_SKIP() << "chart library not installed: " << out;
  ASSERT_EQ(WEXITSTATUS(rc), 0) << out;
  EXPECT_NE(out.find("report.html"), std::string::npos);
  EXPECT_TRUE(fs::exists(d.path / "report.html"));
  EXPECT_GT(fs::file_size(d.path / "report.html"), 500000u);  // the chart library is inlined

  const fs::path missing = d.path / "no-such-dir";
  const int rc2 = std::system((bin.string() + " report --out " + missing.string() + " >" + log + " 2>&1").c_str());
  EXPECT_EQ(WEXITSTATUS(rc2), 2);
  const std::string err = attnprof::io::read_file(log);
  EXPECT_EQ(err.rfind("attnprof: error: report: --out", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
  EXPECT_FALSE(fs::exists(missing));
  // A loop of symbolic links is named as one, not as a directory to run compare into.
  fs::create_symlink(d.path / "loop-b", d.path / "loop-a");
  fs::create_symlink(d.path / "loop-a", d.path / "loop-b");
  for (const std::string cmd : {" report --out ", " roofline --from "}) {
    const int rc3 = std::system((bin.string() + cmd + (d.path / "loop-a").string() + " >" + log + " 2>&1").c_str());
    EXPECT_EQ(WEXITSTATUS(rc3), 2) << cmd;
    const std::string loop = attnprof::io::read_file(log);
    EXPECT_NE(loop.find("loop-a"), std::string::npos) << cmd << loop;
    EXPECT_NE(loop.find(": Too many levels of symbolic links"), std::string::npos) << cmd << loop;
  }
}

TEST(HtmlReport, DeviceSummariesAreDrawnInDeviceTime) {
  // A CUDA compare: the summary of a profile with device activity (synthetic capture, no GPU needed).
  TempDir d("device");
  attnprof::prof::ProfileResult r = attnprof::testing_device::synthetic_profile();
  attnprof::cuda::attach_device_capture(r, attnprof::testing_device::synthetic_capture());
  spit(d.path / "naive.summary.json", summary_json(r, attnprof::analysis::key_averages(r)).dump());
  const json compare = {{"kind", "compare"},
                        {"device", "cuda"},
                        {"gpu", "Test GPU"},
                        {"machine", {{"cpu", "Test GPU"}, {"isa", "sm_90"}, {"threads", 1}, {"fp32_gflops", 60000.0},
                                     {"bf16_gflops", 900000.0}, {"bandwidth_gbs", 4000.0}, {"sgemm_gflops", 60000.0}}},
                        {"variants", {{{"name", "naive"}, {"ms", 0.0002}, {"ok", true}, {"status", "ok"},
                                       {"summary", "naive.summary.json"}}}}};
  spit(d.path / "compare.json", compare.dump());
  const std::string page = render_html_report(d.path.string(), stub_library());
  EXPECT_NE(page.find("Self CUDA time total: 0.180us"), std::string::npos) << "the torch table with CUDA columns";
  // Each variant keeps its colour on every page: the colour domain is one fixed order of the known names, whether
  // the run has them or not (this run has naive only, which is first; flash would be fifth here as on a CPU page).
  bool compare_chart = false;
  for (const json& c : data_block(page)["charts"].get<std::vector<json>>())
    if (c["kind"] == "compare") {
      compare_chart = true;
      const json& domain = c["spec"]["layer"][0]["encoding"]["color"]["scale"]["domain"];
      ASSERT_GE(domain.size(), 5u) << domain;
      EXPECT_EQ(domain[0], "naive");
      EXPECT_EQ(domain[4], "flash");
    }
  EXPECT_TRUE(compare_chart);
  // The sortable table of a GPU profile is sorted by CUDA total, where its time is.
  EXPECT_NE(page.find("<th aria-sort=\"descending\">CUDA total</th>"), std::string::npos);
  EXPECT_EQ(page.find("<th aria-sort=\"descending\">CPU total</th>"), std::string::npos);
  EXPECT_NE(page.find("on Test GPU"), std::string::npos);
  EXPECT_NE(page.find("timed with CUDA events"), std::string::npos);
  const json data = data_block(page);
  bool time_chart = false, roof = false;
  for (const json& c : data["charts"]) {
    if (c["kind"] == "time-by-op") {
      time_chart = true;
      std::set<std::string> ops;
      double ms = 0;
      for (const json& row : c["spec"]["data"]["values"]) {
        ops.insert(row["op"].get<std::string>());
        ms += row["ms"].get<double>();
      }
      // Kernel, copy and fill rows carry the time; the host ops that launched them do not count it again.
      EXPECT_TRUE(ops.count("ampere_bf16_gemm")) << c.dump();
      EXPECT_FALSE(ops.count("matmul")) << c.dump();
      EXPECT_NEAR(ms, 180e-6, 1e-12);
    }
    if (c["kind"] == "roofline") {
      roof = true;
      // One shape per verdict whichever are present (this page has memory-bound points only): memory is a square.
      EXPECT_EQ(c["spec"]["layer"].back()["encoding"]["shape"]["scale"]["range"], json::array({"circle", "square"}));
      std::set<std::string> ops;
      for (const json& p : c["spec"]["layer"].back()["data"]["values"]) ops.insert(p["op"].get<std::string>());
      EXPECT_TRUE(ops.count("ampere_bf16_gemm")) << c.dump();
      EXPECT_FALSE(ops.count("matmul")) << "each kernel placed once, not again as its launching op";
      EXPECT_NE(c.dump().find("BF16 tensor-core peak 900 TFLOP/s / DRAM 4000.0 GB/s"), std::string::npos)
          << "the GPU's ceilings, named as such, in TFLOP/s";
      // The GPU's chart is drawn in TFLOP/s: its axis, its points and its roofs (the fixture's 900000 GFLOP/s).
      const json& layers = c["spec"]["layer"];
      EXPECT_EQ(layers.back()["encoding"]["y"]["title"], "TFLOP/s (log scale)");
      double roof_top = 0;
      for (const json& r : layers[0]["data"]["values"]) roof_top = std::max(roof_top, r["gflops"].get<double>());
      EXPECT_DOUBLE_EQ(roof_top, 900.0);
      for (const json& p : layers.back()["data"]["values"]) EXPECT_LE(p["attainable"].get<double>(), 900.0) << p.dump();
    }
  }
  EXPECT_TRUE(time_chart);
  EXPECT_TRUE(roof);
  EXPECT_NE(page.find("naive.summary.json (device memory)"), std::string::npos) << "the memory chart shows the GPU's";
}
