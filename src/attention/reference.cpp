// The oracle: attention in fp64 straight from its definition, one query row at a time.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "attnprof/attention.h"
#include "attnprof/error.h"

namespace attnprof {

double reference_bytes(const AttnProblem& p) {
  const double out = double(p.B) * double(p.Hq) * double(p.Nq) * (double(p.D) + 1.0);  // output and logsumexp
  const double kv = 2.0 * double(p.B) * double(p.Hkv) * double(p.Nk) * double(p.D);
  return 8.0 * (out + kv);
}

Reference reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnOptions& o) {
  const AttnProblem p = AttnProblem::from(q, k, v, o);
  // A NaN would vanish in the row maximum (std::max drops it) and turn the row into a "fully masked" row of
  // zeros: an oracle that agreed with a wrong output. Non-finite inputs have no reference.
  for (const auto& [t, name] : {std::pair<const Tensor*, const char*>{&q, "q"}, {&k, "k"}, {&v, "v"}})
    if (const std::string bad = nonfinite_summary(*t); !bad.empty())
      ATTNPROF_FAIL("{} holds non-finite values ({}): attention of NaN or Inf inputs has no reference to validate "
                    "against",
                    name, bad);
  if (p.mask == MaskKind::Additive)
    if (const std::string bad = nonfinite_summary(o.attn_mask, /*allow_neg_inf=*/true); !bad.empty())
      ATTNPROF_FAIL("the additive attn_mask holds values other than finite numbers and -inf ({})", bad);
  const double scale = p.effective_scale();
  const int64_t group = p.Hq / p.Hkv;
  Reference r;
  r.shape = {p.B, p.Hq, p.Nq, p.D};
  r.out.assign(size_t(p.B * p.Hq * p.Nq * p.D), 0.0);
  r.lse.assign(size_t(p.B * p.Hq * p.Nq), -std::numeric_limits<double>::infinity());
  Tensor mask;
  if (o.attn_mask.defined()) mask = o.attn_mask.expand({p.B, p.Hq, p.Nq, p.Nk});
  const double ninf = -std::numeric_limits<double>::infinity();
  const int64_t D = p.D, Nk = p.Nk;
  // K of every (b, kv-head) in fp64 and transposed, [d][j], so that one query's scores are D sweeps along a row
  // of keys (s[j] += q[d]·K[d][j]): each score is still summed over d in order, as the definition reads, bit for
  // bit what a dot product per key gives, but the sweeps vectorise across keys where a dot product per key waits
  // on its own additions. V in fp64 as it is, [j][d].
  std::vector<double> kt(size_t(p.B * p.Hkv * Nk * D)), vd(kt.size());
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hkv; ++h) {
      const size_t head = size_t((b * p.Hkv + h) * Nk * D);
      for (int64_t j = 0; j < Nk; ++j)
        for (int64_t d = 0; d < D; ++d) {
          kt[head + size_t(d * Nk + j)] = k.get(b, h, j, d);
          vd[head + size_t(j * D + d)] = v.get(b, h, j, d);
        }
    }
  // Each thread's scores row and q row, allocated here: an allocation that fails inside the parallel region
  // could not be reported.
  std::vector<double> rows(size_t(omp_get_max_threads()) * size_t(Nk + D));
  std::vector<double> max_abs(size_t(omp_get_max_threads()), 0.0);  // each thread's largest |score|
#pragma omp parallel
  {
    double* const s = rows.data() + size_t(omp_get_thread_num()) * size_t(Nk + D);
    double thread_max_abs = 0.0;  // a local, written out once: the shared vector's neighbours share a cache line
    double* const qrow = s + Nk;
#pragma omp for schedule(dynamic) collapse(2)
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t h = 0; h < p.Hq; ++h) {
        const double* Kt = &kt[size_t((b * p.Hkv + h / group) * Nk * D)];
        const double* V = &vd[size_t((b * p.Hkv + h / group) * Nk * D)];
        for (int64_t i = 0; i < p.Nq; ++i) {
          for (int64_t d = 0; d < D; ++d) qrow[size_t(d)] = q.get(b, h, i, d);
          // Under the causal mask keys past i are -inf whatever their product: only keys 0..i are multiplied.
          const int64_t seen = p.mask == MaskKind::Causal ? std::min(Nk, i + 1) : Nk;
          std::fill(s, s + seen, 0.0);
          int64_t d = 0;
          for (; d + 4 <= D; d += 4) {  // four terms per pass over s, added in the same order
            const double q0 = qrow[size_t(d)], q1 = qrow[size_t(d + 1)], q2 = qrow[size_t(d + 2)],
                         q3 = qrow[size_t(d + 3)];
            const double *k0 = Kt + d * Nk, *k1 = k0 + Nk, *k2 = k1 + Nk, *k3 = k2 + Nk;
            for (int64_t j = 0; j < seen; ++j)
              s[size_t(j)] = (((s[size_t(j)] + q0 * k0[j]) + q1 * k1[j]) + q2 * k2[j]) + q3 * k3[j];
          }
          for (; d < D; ++d) {
            const double qd = qrow[size_t(d)];
            const double* kr = Kt + d * Nk;
            for (int64_t j = 0; j < seen; ++j) s[size_t(j)] += qd * kr[j];
          }
          double mx = ninf;
          for (int64_t j = 0; j < seen; ++j) {
            double acc = s[size_t(j)] * scale;
            if (p.mask == MaskKind::Bool && mask.get(b, h, i, j) == 0.0f) acc = ninf;
            if (p.mask == MaskKind::Additive) acc += double(mask.get(b, h, i, j));
            s[size_t(j)] = acc;
            mx = std::max(mx, acc);
            if (acc != ninf) thread_max_abs = std::max(thread_max_abs, std::abs(acc));
          }
          const size_t row = size_t((b * p.Hq + h) * p.Nq + i);
          if (mx == ninf) continue;  // no visible key: zeros, lse = -inf
          double sum = 0.0;
          for (int64_t j = 0; j < seen; ++j) {
            s[size_t(j)] = std::exp(s[size_t(j)] - mx);
            sum += s[size_t(j)];
          }
          r.lse[row] = mx + std::log(sum);
          double* out = &r.out[row * size_t(D)];
          const double inv = 1.0 / sum;
          // out[d] += w_j·V[j][d] over the keys in order, four keys per pass over out (a weight that
          // underflowed to 0 adds ±0, which leaves every sum as it was: out starts at +0 and never becomes -0).
          int64_t j = 0;
          for (; j + 4 <= seen; j += 4) {
            const double w0 = s[size_t(j)] * inv, w1 = s[size_t(j + 1)] * inv, w2 = s[size_t(j + 2)] * inv,
                         w3 = s[size_t(j + 3)] * inv;
            const double *v0 = V + j * D, *v1 = v0 + D, *v2 = v1 + D, *v3 = v2 + D;
            for (int64_t d = 0; d < D; ++d) out[d] = (((out[d] + w0 * v0[d]) + w1 * v1[d]) + w2 * v2[d]) + w3 * v3[d];
          }
          for (; j < seen; ++j) {
            const double w = s[size_t(j)] * inv;
            const double* vr = V + j * D;
            for (int64_t d = 0; d < D; ++d) out[d] += w * vr[d];
          }
        }
      }
    max_abs[size_t(omp_get_thread_num())] = thread_max_abs;
  }
  r.max_abs_score = *std::max_element(max_abs.begin(), max_abs.end());
  return r;
}

ErrorStats compare_to_reference(const Tensor& out, const Reference& ref, const Tolerance& tol) {
  ATTNPROF_CHECK(out.defined() && out.shape() == ref.shape, "output shape {} does not match the reference {}",
                 out.defined() ? shape_str(out.shape()) : "(none)", shape_str(ref.shape));
  ErrorStats e;
  double num = 0.0, den = 0.0;
  size_t idx = 0;
  for (int64_t b = 0; b < ref.shape[0]; ++b)
    for (int64_t h = 0; h < ref.shape[1]; ++h)
      for (int64_t i = 0; i < ref.shape[2]; ++i)
        for (int64_t d = 0; d < ref.shape[3]; ++d, ++idx) {
          const double x = out.get(b, h, i, d), y = ref.out[idx];
          const double diff = std::fabs(x - y);
          if (!std::isfinite(x)) {  // no figure over the finite rest stands for such an output
            ++e.violations;
            ++e.non_finite;
            continue;
          }
          e.max_abs = std::max(e.max_abs, diff);
          e.max_rel = std::max(e.max_rel, diff / std::max(std::fabs(y), 1e-6));
          const double bound = tol.atol + tol.rtol * std::fabs(y);
          e.tol_used = std::max(e.tol_used, bound > 0 ? diff / bound : diff > 0 ? HUGE_VAL : 0.0);
          if (diff > bound) ++e.violations;
          num += diff * diff;
          den += y * y;
        }
  e.count = int64_t(idx);
  e.nmse = den > 0 ? num / den : num;
  if (e.non_finite > 0) e.max_abs = e.max_rel = e.tol_used = e.nmse = std::numeric_limits<double>::infinity();
  return e;
}

ErrorStats compare_lse(const Tensor& lse, const Reference& ref, const Tolerance& tol) {
  ATTNPROF_CHECK(lse.defined() && lse.numel() == int64_t(ref.lse.size()), "logsumexp size does not match");
  ErrorStats e;
  size_t idx = 0;
  for (int64_t b = 0; b < lse.shape(0); ++b)
    for (int64_t h = 0; h < lse.shape(1); ++h)
      for (int64_t i = 0; i < lse.shape(2); ++i, ++idx) {
        const double x = lse.get(b, h, i, 0), y = ref.lse[idx];
        if (std::isinf(y) && y < 0) {
          if (!(std::isinf(x) && x < 0)) ++e.violations;
          continue;
        }
        const double diff = std::fabs(x - y);
        if (!std::isfinite(x) || diff > tol.atol + tol.rtol * std::fabs(y)) ++e.violations;
        if (std::isfinite(x)) e.max_abs = std::max(e.max_abs, diff);
      }
  e.count = int64_t(idx);
  return e;
}

}  // namespace attnprof
