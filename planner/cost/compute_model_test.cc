// The compute model and its run settings: kernels by default, gemm as the explicit older model,
// CUDA graphs and the fused cross-entropy refused only with gemm.
#include "planner/cost/compute_model.h"

#include <doctest/doctest.h>

#include <string>

#include "planner/base/error.h"

using dockyard::ApplyComputeModel;
using dockyard::ComputeModel;
using dockyard::RunSettings;

namespace {

// `fused`: the run's fused cross-entropy (the training flag --cross-entropy fused).
std::string ErrorOf(const std::string& model, bool graphs, bool fused) {
  ComputeModel m = ComputeModel::kKernels;
  RunSettings run;
  run.fused_cross_entropy = fused;
  try {
    ApplyComputeModel(model, graphs, &m, &run);
  } catch (const dockyard::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("The default compute model is the kernel-level model: the CLI default and a run's defaults") {
  CHECK(std::string(dockyard::kDefaultComputeModel) == "kernels");
  ComputeModel m = ComputeModel::kGemm;
  RunSettings run;
  ApplyComputeModel(dockyard::kDefaultComputeModel, false, &m, &run);
  CHECK(m == ComputeModel::kKernels);
  CHECK_FALSE(RunSettings{}.cuda_graphs);
  CHECK_FALSE(RunSettings{}.fused_cross_entropy);
}

TEST_CASE("kernels accepts CUDA graphs and the fused cross-entropy, and leaves the run's cross-entropy as the training set it") {
  ComputeModel m = ComputeModel::kGemm;
  RunSettings run;
  run.fused_cross_entropy = true;
  ApplyComputeModel("kernels", true, &m, &run);
  CHECK(m == ComputeModel::kKernels);
  CHECK(run.cuda_graphs);
  CHECK(run.fused_cross_entropy);
  ApplyComputeModel("kernels", false, &m, &run);
  CHECK(m == ComputeModel::kKernels);
  CHECK_FALSE(run.cuda_graphs);
  CHECK(run.fused_cross_entropy);
}

TEST_CASE("gemm is the older model: its settings refused, nothing else touched") {
  ComputeModel m = ComputeModel::kKernels;
  RunSettings run;
  run.overlap_shared_experts = false;
  ApplyComputeModel("gemm", false, &m, &run);
  CHECK(m == ComputeModel::kGemm);
  CHECK(run.overlap_shared_experts == false);
  const std::string graphs = ErrorOf("gemm", true, false);
  CHECK(graphs.find("--cuda-graphs") != std::string::npos);
  CHECK(graphs.find("--compute-model gemm") != std::string::npos);
  const std::string ce = ErrorOf("gemm", false, true);
  CHECK(ce.find("--cross-entropy fused") != std::string::npos);
  CHECK(ce.find("--compute-model gemm") != std::string::npos);
  CHECK(ErrorOf("kernels", true, true).empty());
}

TEST_CASE("Unknown values are named") {
  const std::string m = ErrorOf("roofline", false, false);
  CHECK(m.find("--compute-model") != std::string::npos);
  CHECK(m.find("\"roofline\"") != std::string::npos);
}
