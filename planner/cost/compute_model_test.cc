// The compute model and its run settings: kernels by default, gemm as the explicit older model,
// CUDA graphs and the fused cross-entropy refused only with gemm.
#include "planner/cost/compute_model.h"

#include <doctest/doctest.h>

#include <string>

#include "planner/base/error.h"

using dockyard::ApplyComputeModel;
using dockyard::CostOptions;

namespace {

std::string ErrorOf(const std::string& model, bool graphs, const std::string& ce) {
  CostOptions o;
  try {
    ApplyComputeModel(model, graphs, ce, &o);
  } catch (const dockyard::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("The default compute model is the kernel-level model, in CostOptions and the CLI default") {
  CHECK(std::string(dockyard::kDefaultComputeModel) == "kernels");
  CHECK(CostOptions{}.kernel_compute);
  CHECK_FALSE(CostOptions{}.cuda_graphs);
  CHECK_FALSE(CostOptions{}.fused_cross_entropy);
}

TEST_CASE("kernels accepts CUDA graphs and the fused cross-entropy") {
  CostOptions o;
  o.kernel_compute = false;
  ApplyComputeModel("kernels", true, "fused", &o);
  CHECK(o.kernel_compute);
  CHECK(o.cuda_graphs);
  CHECK(o.fused_cross_entropy);
  ApplyComputeModel("kernels", false, "unfused", &o);
  CHECK(o.kernel_compute);
  CHECK_FALSE(o.cuda_graphs);
  CHECK_FALSE(o.fused_cross_entropy);
}

TEST_CASE("gemm is the older model: its settings refused, nothing else touched") {
  CostOptions o;
  o.dense_efficiency = 0.61;
  ApplyComputeModel("gemm", false, "unfused", &o);
  CHECK_FALSE(o.kernel_compute);
  CHECK(o.dense_efficiency == 0.61);
  const std::string graphs = ErrorOf("gemm", true, "unfused");
  CHECK(graphs.find("--cuda-graphs") != std::string::npos);
  CHECK(graphs.find("--compute-model gemm") != std::string::npos);
  const std::string ce = ErrorOf("gemm", false, "fused");
  CHECK(ce.find("--cross-entropy fused") != std::string::npos);
  CHECK(ce.find("--compute-model gemm") != std::string::npos);
  CHECK(ErrorOf("kernels", true, "fused").empty());
}

TEST_CASE("Unknown values are named") {
  const std::string m = ErrorOf("roofline", false, "unfused");
  CHECK(m.find("--compute-model") != std::string::npos);
  CHECK(m.find("\"roofline\"") != std::string::npos);
  const std::string ce = ErrorOf("kernels", false, "chunked");
  CHECK(ce.find("--cross-entropy") != std::string::npos);
  CHECK(ce.find("\"chunked\"") != std::string::npos);
}
