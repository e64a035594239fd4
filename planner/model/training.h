// Training settings that decide memory and traffic: dtypes, optimizer, batch geometry,
// activation recomputation, the data-parallel sharding strategy and the pipeline layer split.
// Set by CLI flags or by the `training` block of a dockyard model spec (docs/memory-model.md).
//
// Defaults (said in `dockyard-plan --help` and docs/memory-model.md): param dtype bfloat16, grad
// (reduce) dtype float32, AdamW (fp32 master weights + two fp32 moments), seq_len 4096,
// micro_batch_size 1, num_microbatches 1 (pp when pp > 1), recompute none, dp_sharding fsdp with
// the torchtitan convention and zero1 with the megatron convention, imbalance 1.0 (balanced
// routing). The node size and the memory budget are not training settings: they are the machine's
// (machine.h Machine), read from the same `training` block of a spec for compatibility.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/base/json_util.h"
#include "planner/model/dispatcher.h"
#include "planner/model/machine.h"
#include "planner/model/run_settings.h"

namespace dockyard {

enum class DpSharding { kFsdp, kZero1, kDdp };
enum class Optimizer { kAdamW, kSgd, kMuon };  // kMuon: muon.h
enum class Recompute { kNone, kSelective, kFull };

// "fsdp", "zero1", "ddp"; "adamw", "sgd", "muon"; "none", "selective", "full": the spellings of JSON, flags
// and reports, one table each (training.cc).
const char* DpShardingName(DpSharding s);
const char* OptimizerName(Optimizer o);
const char* RecomputeName(Recompute r);
// The enumerator spelled `name`, else throws dockyard::Error "{field}: must be \"fsdp\", \"zero1\" or
// \"ddp\", got \"x\"" (likewise for the others).
DpSharding ParseDpSharding(const std::string& name, const std::string& field);
Optimizer ParseOptimizer(const std::string& name, const std::string& field);
Recompute ParseRecompute(const std::string& name, const std::string& field);
// Every spelling, in table order (CLI11 IsMember checks).
const std::vector<std::string>& DpShardingNames();
const std::vector<std::string>& OptimizerNames();
const std::vector<std::string>& RecomputeNames();

struct TrainingConfig {
  std::optional<DpSharding> dp_sharding;  // unset: fsdp (torchtitan) / zero1 (megatron)
  std::string param_dtype = "bfloat16";   // compute / all-gather dtype
  std::string grad_dtype = "float32";     // gradient storage and reduction dtype
  Optimizer optimizer = Optimizer::kAdamW;
  int64_t seq_len = 4096;                   // tokens per sequence
  int64_t micro_batch_size = 1;             // sequences per micro-batch (per data-parallel rank)
  std::optional<int64_t> num_microbatches;  // unset: pp (1F1B needs >= pp to fill the pipe)
  Recompute recompute = Recompute::kNone;
  // With recompute selective: Megatron --recompute-modules names (planner/model/recompute.h); empty = the
  // default set (norms and SwiGLU activations).
  std::vector<std::string> recompute_modules;
  // With recompute selective and --convention torchtitan: torchtitan's activation_checkpoint.selective_ac_option
  // (planner/model/recompute.h LayerSacEvery); empty = unset (the module set above applies).
  std::string selective_ac_option;
  // Precision (planner/model/precision.h), all opt-in.
  std::string precision = "bf16";                  // "bf16" | "fp8": GEMMs in FP8 (--precision)
  std::string fp8_recipe = "tensorwise";           // "tensorwise" | "blockwise" (--fp8-recipe)
  bool fp8_dispatch = false;                       // FP8 dispatch all-to-all, BF16 combine (--fp8-dispatch)
  bool fp8_param_gather = false;                   // FSDP / zero1 all-gather FP8 GEMM weights in FP8 (--fp8-param-gather)
  // TransformerEngine's FP8 dot-product attention (Megatron-Core TransformerConfig
  // fp8_dot_product_attention, --fp8-dot-product-attention): the flash core in FP8, only with FP8
  // GEMMs (TE runs it inside its FP8 autocast); priced at compute.flash.fp8_speedup.
  bool fp8_dot_product_attention = false;
  std::string optimizer_states_dtype = "float32";  // AdamW moments: "float32" | "bfloat16"
  int64_t mtp_layers = 0;                          // MTP modules trained (--mtp-layers, Megatron --mtp-num-layers; mtp.h)
  // Megatron-LM --make-vocab-size-divisible-by: the vocabulary is padded to a multiple of it x tp
  // (vocab_padding.h); unset = 128 under --convention megatron, 1 (no padding) under torchtitan.
  std::optional<int64_t> make_vocab_size_divisible_by;
  std::vector<int64_t> pp_layer_split;             // layers per stage; empty = even split
  // GiB of the budget (machine.h Machine::gpu_memory_gib) held back for what the model does not count (CUDA context, NCCL buffers,
  // allocator fragmentation); unset = none here, the CLI applies kDefaultMemoryReserveGib
  // (planner/accounting/memory.h). The budget rule is memory.h OverBudget.
  std::optional<double> memory_reserve_gib;
  double imbalance = 1.0;  // max / mean tokens received per rank (>= 1)
  // Token dispatcher (dispatcher.h): all_to_all, deredundency, deepep (Megatron flex with DeepEP /
  // HybridEP: once per destination node over the network, then NVLink; planner/cost/deepep.h) or
  // allgather (Megatron MoEAllGatherTokenDispatcher).
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  // The deepep (Megatron flex) dispatcher's backend (dispatcher.h FlexBackend; Megatron
  // --moe-flex-dispatcher-backend, JSON `moe_flex_dispatcher_backend`); unset = "deepep", Megatron's
  // default. Set with another dispatcher it is refused (ValidateTraining); its rank limits:
  // flex_backend_limits.h FlexBackendLimitError.
  std::optional<FlexBackend> moe_flex_dispatcher_backend;
  std::optional<int64_t> oep;  // deredundency outer EP size; unset = nodes spanned by ep
  std::string refit_dtype;     // empty = param_dtype
  RunSettings run;             // framework schedule settings (pipeline_schedule.h; flags only)
};

// Parses a layer split: "7,6,6,6" (layers per stage) or "7+6" (first stage 7, then 6 per stage).
// The result must have `pp` entries, each >= 1, summing to `num_layers`; or, with `vpp` > 1 and
// commas, pp x vpp entries, one per virtual stage in virtual-stage order (virtual stage v x pp + p
// is rank p's model chunk v, as torchtitan's per-stage split and Megatron's layouts list them),
// each >= 0 (torchtitan's first stage may hold only the embedding), every rank's sum >= 1,
// summing to `num_layers` (IsVirtualStageSplit). Throws dockyard::Error naming `field` (e.g.
// "--pp-layer-split").
std::vector<int64_t> ParseLayerSplit(const std::string& text, int64_t pp, int64_t num_layers, const std::string& field, int64_t vpp = 1);
// Whether `split` lists virtual stages (pp x vpp entries, vpp > 1) rather than pipeline ranks.
bool IsVirtualStageSplit(const std::vector<int64_t>& split, int64_t pp, int64_t vpp);

}  // namespace dockyard
