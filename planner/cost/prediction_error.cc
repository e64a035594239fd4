// Prediction intervals of step times and of differences between layouts (see prediction_error.h).
#include "planner/cost/prediction_error.h"

#include <cmath>

namespace dockyard {

std::pair<double, double> StepInterval80(double step) {
  const double f = std::exp(kZ80 * kStepLogErrorSd);
  return {step / f, step * f};
}

VersusBest VersusBestOf(double best_step, double step) {
  VersusBest v;
  if (!(best_step > 0) || !(step > 0)) return v;
  const double f = std::exp(kZ80 * kPairLogErrorSd);
  v.ratio = step / best_step;
  v.low80 = v.ratio / f;
  v.high80 = v.ratio * f;
  v.tied = v.low80 <= 1.0;
  return v;
}

}  // namespace dockyard
