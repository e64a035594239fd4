// Training precision (see precision.h).
#include "planner/model/precision.h"

#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {
namespace {
constexpr double kScaleBytes = 4.0;       // fp32 scales
constexpr double kTile = 128.0;           // activation tile 1 x 128
constexpr double kBlock = 128.0 * 128.0;  // weight block 128 x 128
}  // namespace

// string_view comparisons check the length first: these run per layout in a search.
bool Fp8Gemms(const TrainingConfig& t) {
  return std::string_view(t.precision) == "fp8";
}
bool Fp8Blockwise(const TrainingConfig& t) {
  return Fp8Gemms(t) && std::string_view(t.fp8_recipe) == "blockwise";
}

bool Fp8GemmGroup(std::string_view g) {
  return g == "attention" || g == "routed_experts" || g == "shared_experts" || g == "dense_mlp";
}

double Fp8WeightBytesPerElement(const TrainingConfig& t) {
  if (!Fp8Gemms(t)) return 0.0;
  return 1.0 + (Fp8Blockwise(t) ? kScaleBytes / kBlock : 0.0);
}

double Fp8WeightCopyBytesPerElement(const TrainingConfig& t) {
  return 2.0 * Fp8WeightBytesPerElement(t);  // row-wise + column-wise copies
}

double Fp8QuantizeBytesPerElement(bool blockwise, double ab) {
  return blockwise ? ab + 1.0 + kScaleBytes / kTile : 2.0 * ab + 1.0;
}

double DispatchRowBytes(double hidden, double act_bytes, bool fp8) {
  return fp8 ? hidden + kScaleBytes * std::ceil(hidden / kTile) : hidden * act_bytes;
}

double DispatchBytesPerElement(const TrainingConfig& t, double hidden, double ab) {
  return DispatchRowBytes(hidden, ab, t.fp8_dispatch) / hidden;  // the row rule, per element
}

void ValidatePrecision(const TrainingConfig& t, const std::string& origin) {
  const bool flags = origin == "--";
  auto name = [&](const char* flag, const char* key) { return origin + (flags ? flag : key); };
  if (t.precision != "bf16" && t.precision != "fp8") {
    throw Error(fmt::format("{}: must be \"bf16\" or \"fp8\", got \"{}\"", name("precision", "precision"), t.precision));
  }
  if (t.fp8_recipe != "tensorwise" && t.fp8_recipe != "blockwise") {
    throw Error(fmt::format("{}: must be \"tensorwise\" or \"blockwise\", got \"{}\"", name("fp8-recipe", "fp8_recipe"), t.fp8_recipe));
  }
  if (t.fp8_recipe != "tensorwise" && t.precision != "fp8") {
    throw Error(
        fmt::format("{}: \"{}\" needs precision fp8, precision is \"{}\"", name("fp8-recipe", "fp8_recipe"), t.fp8_recipe, t.precision));
  }
  if (t.fp8_param_gather && t.precision != "fp8") {
    throw Error(fmt::format("{}: FP8 parameter all-gather needs precision fp8, precision is \"{}\"",
                            name("fp8-param-gather", "fp8_param_gather"), t.precision));
  }
  if (t.optimizer_states_dtype != "float32" && t.optimizer_states_dtype != "bfloat16") {
    throw Error(fmt::format("{}: must be \"float32\" or \"bfloat16\", got \"{}\"", name("optimizer-states-dtype", "optimizer_states_dtype"),
                            t.optimizer_states_dtype));
  }
}

void ValidateFp8ParamGather(const TrainingConfig& t, bool megatron) {
  if (!t.fp8_param_gather || !t.dp_sharding) return;
  const DpSharding s = *t.dp_sharding;
  if (s == DpSharding::kFsdp || (s == DpSharding::kZero1 && megatron)) return;
  throw Error(
      fmt::format("fp8_param_gather: the FP8 parameter all-gather is modelled for dp_sharding fsdp and, with convention megatron, zero1 "
                  "(Megatron: --fp8-param-gather needs the distributed optimizer or FSDP), dp_sharding is \"{}\"{}",
                  DpShardingName(s), s == DpSharding::kZero1 ? " under convention torchtitan" : ""));
}

}  // namespace dockyard
