// How far the cost model's step times are from measured ones, and what that means for a ranking
// (docs/fidelity.md, "Prediction intervals").
//
// Two figures from bench_fidelity over testdata/fidelity (the expressible runs, the default
// compute model, the presets' knobs), held to the figures recomputed from that set by
// planner/calibration/prediction_error_test.cc, so a change of the cost model that moves them
// fails there until they are updated here:
//  - kStepLogErrorSd, the root mean square of ln(predicted / measured) over the runs: what an
//    absolute step time is worth;
//  - kPairLogErrorSd, the root mean square of ln(predicted_i / measured_i) - ln(predicted_j /
//    measured_j) over every pair of runs of one group (one source, model and cluster: the same
//    framework stack, layouts and batches apart): what the difference between two layouts is
//    worth. It is about half the absolute figure: most of a prediction's error is shared by the
//    layouts of one model on one cluster.
// A search's rows differ from its best by a ratio; the ratio's 80 % interval is ratio x
// exp(-+z80 x kPairLogErrorSd), and a row whose interval reaches the best (its lower end <= 1) is
// tied with it: the model cannot tell them apart.
#pragma once

#include <utility>

namespace dockyard {

inline constexpr double kStepLogErrorSd = 0.100;
inline constexpr double kPairLogErrorSd = 0.061;
inline constexpr double kZ80 = 1.2815515655446004;  // the 80 % two-sided normal quantile

// A step time's 80 % interval: step x exp(-+z80 x kStepLogErrorSd), in the unit given.
std::pair<double, double> StepInterval80(double step);

// A layout against the best one of its ranking: the predicted ratio step / best_step (>= 1 for a
// row ranked below the best), its 80 % interval ratio x exp(-+z80 x kPairLogErrorSd), and whether
// that interval reaches 1 (tied with the best). The best itself is ratio 1, tied.
struct VersusBest {
  double ratio = 1, low80 = 1, high80 = 1;
  bool tied = true;
};
// Throws nothing; a best_step <= 0 gives ratio 1 (nothing to compare with).
VersusBest VersusBestOf(double best_step, double step);

}  // namespace dockyard
