// Scaling fits (google/benchmark's ComputeBigO, made a power law): least squares of log y on log x; and the median
// every timing report takes of its timed forwards.
#include <algorithm>
#include <cmath>

#include "attnprof/analysis.h"
#include "attnprof/error.h"

namespace attnprof::analysis {

PowerFit fit_power_law(const std::vector<double>& x, const std::vector<double>& y) {
  ATTNPROF_CHECK(x.size() == y.size(), "fit_power_law: {} x values but {} y values", x.size(), y.size());
  ATTNPROF_CHECK(x.size() >= 2, "fit_power_law needs at least 2 points, got {}", x.size());
  const size_t n = x.size();
  std::vector<double> lx(n), ly(n);
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    ATTNPROF_CHECK(x[i] > 0 && y[i] > 0 && std::isfinite(x[i]) && std::isfinite(y[i]),
                   "fit_power_law needs positive finite values, got x={} y={}", x[i], y[i]);
    lx[i] = std::log(x[i]);
    ly[i] = std::log(y[i]);
    mx += lx[i];
    my += ly[i];
  }
  mx /= double(n);
  my /= double(n);
  double sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += (lx[i] - mx) * (lx[i] - mx);
    sxy += (lx[i] - mx) * (ly[i] - my);
    syy += (ly[i] - my) * (ly[i] - my);
  }
  ATTNPROF_CHECK(sxx > 0, "fit_power_law needs at least two distinct x values");
  PowerFit f;
  f.points = n;
  f.exponent = sxy / sxx;
  const double intercept = my - f.exponent * mx;
  f.coefficient = std::exp(intercept);
  double ssr = 0;
  for (size_t i = 0; i < n; ++i) {
    const double r = ly[i] - (intercept + f.exponent * lx[i]);
    ssr += r * r;
  }
  f.r2 = syy > 0 ? 1.0 - ssr / syy : 1.0;
  f.rms_log_error = std::sqrt(ssr / double(n));
  // Standard error of the slope; undefined with two points (a line always fits), reported as 0.
  f.exponent_stderr = n > 2 ? std::sqrt(ssr / double(n - 2) / sxx) : 0.0;
  return f;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace attnprof::analysis
