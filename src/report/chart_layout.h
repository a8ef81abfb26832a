// Internal: the layout of the HTML report's charts that the chart library would get wrong by itself: the
// labelled ticks of a linear axis through zero and of a log axis (zero_ticks, log_ticks), and where the
// roofline's point labels go so that none covers another label, point or line (place_labels).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace attnprof::report::detail {

// The labelled values of a linear axis over [lo, hi] that spans zero, zero among them: multiples of one step
// of 1, 2 or 5 times a power of ten, the largest that gives at least `min_ticks` values (a chart library's own
// ticks may put their labels at -150, -50, 50, ... and leave zero, the axis's meaning, unlabelled). Empty when
// the range is not a finite interval.
inline std::vector<double> zero_ticks(double lo, double hi, int min_ticks = 5) {
  std::vector<double> out;
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  if (!std::isfinite(lo) || !std::isfinite(hi) || !std::isfinite(hi - lo) || !(hi > lo) || hi - lo > 1e300)
    return out;
  // The step m · 10^e, from the power of ten above the span down through 5, 2, 1 times each power of ten until
  // the range holds min_ticks of its multiples; each value k · m / 10^-e (or k · m · 10^e), the double nearest it.
  int m = 1, e = int(std::ceil(std::log10(hi - lo)));
  const auto step_of = [](int m, int e) { return e < 0 ? m / std::pow(10.0, -e) : m * std::pow(10.0, e); };
  for (int i = 0; i < 64 && std::ceil(hi / step_of(m, e)) - std::floor(lo / step_of(m, e)) + 1 < min_ticks; ++i) {
    if (m == 1) {
      m = 5;
      --e;
    } else {
      m = m == 5 ? 2 : 1;
    }
  }
  const double k0 = std::floor(lo / step_of(m, e)), k1 = std::ceil(hi / step_of(m, e));
  for (double k = k0; k <= k1; ++k)
    out.push_back(k == 0 ? 0.0 : e < 0 ? k * m / std::pow(10.0, -e) : k * m * std::pow(10.0, e));
  return out;
}

// The labelled values of a log axis over [lo, hi]: 1, 2 and 5 times each power of ten, so that every decade
// reads alike (a chart library's own choice labels 1, 2, 3, 10, 20 and skips 5 and 50). Ranges of more than
// `decades_125` decades (four; fewer for a narrow axis) keep the powers of ten alone; ranges too narrow to hold two of 1-2-5 take every digit (0.5,
// 0.6, ...). Empty when the range is not a positive interval.
inline std::vector<double> log_ticks(double lo, double hi, double decades_125 = 4) {
  std::vector<double> out;
  // Past 1e±300 the ticks' powers of ten leave the normal doubles (no figure attnprof writes is there).
  if (!(lo >= 1e-300) || !(hi > lo) || !(hi <= 1e300)) return out;
  const double decades = std::log10(hi / lo);
  const std::vector<std::vector<double>> sets = {{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  size_t pick = decades > decades_125 ? 0 : 1;
  for (; pick < sets.size(); ++pick) {
    out.clear();
    const int k0 = static_cast<int>(std::floor(std::log10(lo))), k1 = static_cast<int>(std::ceil(std::log10(hi)));
    for (int k = k0; k <= k1; ++k)
      for (double m : sets[pick]) {
        // m * 10^k as the double nearest it: m / 10^-k for k < 0 (a correctly rounded division of exact
        // numbers), so that 3e-1 is 0.3, not 0.1 * 3 = 0.30000000000000004.
        const double v = k < 0 ? m / std::pow(10.0, -k) : m * std::pow(10.0, k);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push_back(v);
      }
    if (out.size() >= 2) break;
  }
  return out;
}

// Labels beside the points of a chart, placed in pixels so that none covers another or another point: each
// label takes the first of ten places (right of its point, left, then above and below on either side, then a
// line further up or down) that stays inside the plot and clear of every point's ring and of the labels placed
// before it, and crossing none of `lines`; a label with no clear place is left off (the point's tooltip still
// names it). A label a line
// away gets a leader line from its point to the text's near edge; that line, too, crosses no other label and
// no other point's ring, and no later label covers it. A point within `merge` pixels of one of the same text
// whose label was placed shares that label.
struct LabelPoint {
  double x, y;       // the point, in pixels from the plot's top left
  std::string text;  // what the label says; its width is `char_w` per code point
};
struct PlacedLabel {
  size_t point;  // index into the points
  double x, y;   // the text's anchor: its vertical middle, at its left end (right_aligned: its right end)
  bool right_aligned;
  bool leader = false;  // a line further up or down: a leader line from the point to it says whose it is
};
struct PlacedLabels {
  std::vector<PlacedLabel> placed;
  size_t left_off = 0;  // labels with no clear place (merged ones are not counted)
};
// A line of the chart that labels should not cross (a roof, a point's drop to its roof), in pixels. A label
// with no place clear of every line takes one that crosses only lines of `level` 1 (a thin dotted drop), then
// one that crosses any line (a roof), rather than none: a label over a line still names its point.
struct LabelSegment {
  double ax, ay, bx, by;
  int level = 2;
};
inline PlacedLabels place_labels(const std::vector<LabelPoint>& pts, double width, double height,
                                 const std::vector<LabelSegment>& lines = {}, double char_w = 6.0,
                                 double line_h = 12.0, double ring = 9.0, double merge = 24.0) {
  using Segment = LabelSegment;
  struct Box {
    double x0, y0, x1, y1;
    bool hits(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
    // Whether the segment passes through the box's inside (Liang-Barsky clipping; touching an edge is clear).
    bool crossed_by(const Segment& s) const {
      double t0 = 0, t1 = 1;
      const double dx = s.bx - s.ax, dy = s.by - s.ay;
      for (const auto& [p, q] : {std::pair{-dx, s.ax - x0}, std::pair{dx, x1 - s.ax}, std::pair{-dy, s.ay - y0},
                                 std::pair{dy, y1 - s.ay}}) {
        if (p == 0) {
          if (q <= 0) return false;  // parallel to this edge and outside (or on) it
          continue;
        }
        const double r = q / p;
        if (p < 0) t0 = std::max(t0, r);
        else t1 = std::min(t1, r);
        if (t0 >= t1) return false;
      }
      return true;
    }
  };
  std::vector<Box> taken;        // the labels placed so far
  std::vector<Segment> leaders;  // and their leader lines
  PlacedLabels out;
  for (size_t i = 0; i < pts.size(); ++i) {
    const LabelPoint& p = pts[i];
    if (p.text.empty() || !std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    bool merged = false;
    for (const PlacedLabel& l : out.placed)
      merged = merged || (pts[l.point].text == p.text && std::hypot(pts[l.point].x - p.x, pts[l.point].y - p.y) <= merge);
    if (merged) continue;
    double w = 0;
    for (char c : p.text) w += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? char_w : 0.0;
    const double h = line_h, lift = ring + h / 2, far = lift + h;  // above or below: clear of the point's ring
    // (left end or right end, vertical middle, right-aligned)
    const struct { double x, y; bool right; } places[] = {
        {p.x + ring, p.y, false},           {p.x - ring, p.y, true},
        {p.x + ring / 2, p.y - lift, false}, {p.x - ring / 2, p.y - lift, true},
        {p.x + ring / 2, p.y + lift, false}, {p.x - ring / 2, p.y + lift, true},
        {p.x + ring / 2, p.y - far, false},  {p.x - ring / 2, p.y - far, true},
        {p.x + ring / 2, p.y + far, false},  {p.x - ring / 2, p.y + far, true}};
    bool found = false;
    // Each place clear of every line first; then, before leaving the label off, crossing lines of a level up to
    // the pass's.
    for (int pass = 0; pass < 3 && !found; ++pass) {
      for (const auto& c : places) {
        const Box b = {c.right ? c.x - w : c.x, c.y - h / 2, c.right ? c.x : c.x + w, c.y + h / 2};
        if (b.x0 < 0 || b.x1 > width || b.y0 < 0 || b.y1 > height) continue;
        bool clear = true;
        for (const Box& t : taken) clear = clear && !t.hits(b);
        for (const Segment& s : leaders) clear = clear && !b.crossed_by(s);
        for (const Segment& s : lines) clear = clear && (s.level <= pass || !b.crossed_by(s));
        for (const LabelPoint& q : pts)
          clear = clear && !Box{q.x - ring, q.y - ring, q.x + ring, q.y + ring}.hits(b);
        const bool leader = std::abs(c.y - p.y) > lift;
        // The leader: from the point to the text's near edge, clear of the labels and of the rings of points
        // away from this one (a point within a ring of it shares the line's start).
        const Segment line{p.x, p.y, c.x, c.y < p.y ? c.y + h / 2 : c.y - h / 2};
        if (clear && leader) {
          for (const Box& t : taken) clear = clear && !t.crossed_by(line);
          for (const LabelPoint& q : pts)
            if (std::hypot(q.x - p.x, q.y - p.y) > ring)
              clear = clear && !Box{q.x - ring, q.y - ring, q.x + ring, q.y + ring}.crossed_by(line);
        }
        if (!clear) continue;
        taken.push_back(b);
        if (leader) leaders.push_back(line);
        out.placed.push_back({i, c.x, c.y, c.right, leader});
        found = true;
        break;
      }
    }
    if (!found) ++out.left_off;
  }
  return out;
}

}  // namespace attnprof::report::detail
