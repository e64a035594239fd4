// `dockyard-plan calibrate`: fits a calibration file to runs files and dockyard-run reports
// (planner/calibration/calibrate.h; docs/calibration.md, "Fitting").
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace dockyard {

struct CalibrateOptions {
  std::vector<std::string> runs;  // runs files (testdata/fidelity/runs.json format) or dockyard-run --json reports
  std::string out;                // the calibration JSON to write (atomically, only when everything succeeded)
  std::string preset;             // hardware preset calibrated (default: --from's, else h100-sxm)
  std::string from;               // calibration the priors come from (default: DefaultCalibration(preset))
  std::string cluster;            // preset or cluster JSON the dockyard-run reports ran on (default: the preset)
  std::string name;               // the written calibration's name (default "<preset>-fitted", with --cluster "<cluster name>-fitted")
  std::string compute_model = "kernels";  // the compute model the rows are predicted under (planner/cost/compute_model.h)
};

// Prints the fit (rows before / after, knobs, undetermined knobs, group-held-out error) to `out`
// and writes o.out. Throws dockyard::Error naming the file, the row and the field for bad input;
// nothing is written then.
int RunCalibrate(const CalibrateOptions& o, std::ostream& out);

}  // namespace dockyard
