// Internal: machine_peaks() in two parts, the cache (which entry is this machine's, when one is measured again)
// and the timed measurement, so the cache's rules can be tested without timing the machine at every step.
#pragma once

#include <functional>

#include "attnprof/analysis.h"
#include "attnprof/isa.h"

namespace attnprof::analysis::detail {

// The timed figures of one measurement at `threads` threads with our kernels at `isa`: fp32_gflops,
// bf16_gflops, bandwidth_gbs with its bandwidth_loops, sgemm_gflops and the library_* peaks (the CPU's best ISA).
// The other fields are the cache's to fill.
MachinePeaks measure_peak_figures(int threads, Isa isa);

using PeakMeasurement = std::function<MachinePeaks(int threads, Isa isa)>;

// The other work the cache judges a machine busy by (CPUs' worth, NaN unknown): `beside` around a measurement
// (given what `measure` returned, as the wall time it took is the window), `now` over a short sample. Both
// read /proc/stat unless a test gives figures of its own, so the cache's rules do not turn on what else the
// machine runs while the test does.
struct OtherWorkProbe {
  std::function<double()> now;                  // other work right now (a quarter-second sample)
  std::function<double(double seconds)> beside;  // other work over the last `seconds`, those of the measurement
};

// machine_peaks(threads, force_measure, notes) with `measure` in place of measure_peak_figures, and `probe`
// (when given) in place of /proc/stat.
MachinePeaks machine_peaks(int threads, bool force_measure, const PeakMeasurement& measure,
                           std::vector<std::string>* notes = nullptr, const OtherWorkProbe* probe = nullptr);

}  // namespace attnprof::analysis::detail
