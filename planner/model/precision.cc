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
bool Fp8Mxfp8(const TrainingConfig& t) {
  return Fp8Gemms(t) && std::string_view(t.fp8_recipe) == "mxfp8";
}

Fp8Scaling Fp8ScalingOf(const TrainingConfig& t) {
  if (!Fp8Gemms(t)) return Fp8Scaling::kNone;
  if (std::string_view(t.fp8_recipe) == "blockwise") return Fp8Scaling::kBlockwise;
  return Fp8Mxfp8(t) ? Fp8Scaling::kMxfp8 : Fp8Scaling::kTensorwise;
}

void NormalizeMxfp8Precision(TrainingConfig* t, const std::string& origin, bool recipe_given) {
  if (t->precision != "mxfp8") return;
  if (t->fp8_recipe != "mxfp8" && (recipe_given || t->fp8_recipe != "tensorwise")) {
    const bool flags = origin == "--";
    throw Error(fmt::format("{}: precision \"mxfp8\" is the mxfp8 recipe, fp8_recipe is \"{}\" (use --precision fp8 --fp8-recipe {})",
                            origin + (flags ? "fp8-recipe" : "fp8_recipe"), t->fp8_recipe, t->fp8_recipe));
  }
  t->precision = "fp8";
  t->fp8_recipe = "mxfp8";
}

bool Fp8GemmGroup(std::string_view g) {
  return g == "attention" || g == "routed_experts" || g == "shared_experts" || g == "dense_mlp";
}

double Fp8WeightBytesPerElement(const TrainingConfig& t) {
  switch (Fp8ScalingOf(t)) {
    case Fp8Scaling::kNone:
      return 0.0;
    case Fp8Scaling::kTensorwise:
      return 1.0;
    case Fp8Scaling::kBlockwise:
      return 1.0 + kScaleBytes / kBlock;
    case Fp8Scaling::kMxfp8:
      return 1.0 + 1.0 / kMxfp8BlockElements;
  }
  return 0.0;
}

double Fp8ParamGatherBytesPerElement(const TrainingConfig& t, double param_bytes) {
  return Fp8Mxfp8(t) ? param_bytes : Fp8WeightBytesPerElement(t);
}

double Fp8WeightCopyBytesPerElement(const TrainingConfig& t) {
  return 2.0 * Fp8WeightBytesPerElement(t);  // row-wise + column-wise copies
}

double Fp8QuantizeBytesPerElement(Fp8Scaling scaling, double ab) {
  switch (scaling) {
    case Fp8Scaling::kNone:
      return 0.0;
    case Fp8Scaling::kTensorwise:
      return 2.0 * ab + 1.0;
    case Fp8Scaling::kBlockwise:
      return ab + 1.0 + kScaleBytes / kTile;
    case Fp8Scaling::kMxfp8:
      return ab + 2.0 * (1.0 + 1.0 / kMxfp8BlockElements);
  }
  return 0.0;
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
    throw Error(fmt::format("{}: must be \"bf16\", \"fp8\" or \"mxfp8\", got \"{}\"", name("precision", "precision"), t.precision));
  }
  if (t.fp8_recipe != "tensorwise" && t.fp8_recipe != "blockwise" && t.fp8_recipe != "mxfp8") {
    throw Error(fmt::format("{}: must be \"tensorwise\", \"blockwise\" or \"mxfp8\", got \"{}\"", name("fp8-recipe", "fp8_recipe"),
                            t.fp8_recipe));
  }
  if (t.fp8_recipe != "tensorwise" && t.precision != "fp8") {
    throw Error(
        fmt::format("{}: \"{}\" needs precision fp8, precision is \"{}\"", name("fp8-recipe", "fp8_recipe"), t.fp8_recipe, t.precision));
  }
  if (t.fp8_param_gather && t.precision != "fp8") {
    throw Error(fmt::format("{}: FP8 parameter all-gather needs precision fp8, precision is \"{}\"",
                            name("fp8-param-gather", "fp8_param_gather"), t.precision));
  }
  if (t.fp8_dot_product_attention && t.precision != "fp8") {
    throw Error(fmt::format("{}: FP8 attention needs precision fp8 (TransformerEngine runs it inside its FP8 autocast), precision is \"{}\"",
                            name("fp8-dot-product-attention", "fp8_dot_product_attention"), t.precision));
  }
  if (t.optimizer_states_dtype != "float32" && t.optimizer_states_dtype != "bfloat16") {
    throw Error(fmt::format("{}: must be \"float32\" or \"bfloat16\", got \"{}\"", name("optimizer-states-dtype", "optimizer_states_dtype"),
                            t.optimizer_states_dtype));
  }
}

void ValidateFp8ParamGather(const TrainingConfig& t, bool megatron) {
  if (!t.fp8_param_gather || !t.dp_sharding) return;
  const DpSharding s = *t.dp_sharding;
  if (Fp8Mxfp8(t) && s == DpSharding::kFsdp) {
    throw Error(
        "fp8_param_gather: with fp8_recipe mxfp8 the parameter all-gather is modelled for Megatron's distributed optimizer only "
        "(dp_sharding zero1, convention megatron: BF16 gathered into the gradient buffer, param_and_grad_buffer.py); under FSDP "
        "torchao's MX converters have no MXFP8 all-gather and Megatron-FSDP's MXFP8 buffers are not modelled, dp_sharding is \"fsdp\"");
  }
  if (s == DpSharding::kFsdp || (s == DpSharding::kZero1 && megatron)) return;
  throw Error(
      fmt::format("fp8_param_gather: the FP8 parameter all-gather is modelled for dp_sharding fsdp and, with convention megatron, zero1 "
                  "(Megatron: --fp8-param-gather needs the distributed optimizer or FSDP), dp_sharding is \"{}\"{}",
                  DpShardingName(s), s == DpSharding::kZero1 ? " under convention torchtitan" : ""));
}

void ValidateFp8RecipeOnGpu(const TrainingConfig& t, const std::string& cluster_name, bool mxfp8_tensor_cores) {
  if (!Fp8Mxfp8(t) || mxfp8_tensor_cores) return;
  throw Error(fmt::format("fp8_recipe: \"mxfp8\" needs Blackwell tensor cores (TransformerEngine MXFP8BlockScaling: SM100+), cluster \"{}\" "
                          "has none (h100-sxm is the default without --cluster; presets with them: b200, gb200-nvl72, b300, gb300-nvl72, a cluster file "
                          "inheriting its base's)",
                          cluster_name));
}

}  // namespace dockyard
