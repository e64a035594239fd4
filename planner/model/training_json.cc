// The training settings' validation and JSON block (see training_json.h).
#include "planner/model/training_json.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/model/precision.h"
#include "planner/model/recompute.h"
#include "planner/model/vocab_padding.h"

namespace dockyard {

void ValidateTraining(const TrainingConfig& t, const std::string& origin) {
  // Flags spell fields with dashes (--seq-len), JSON with underscores (/training/seq_len).
  auto fail = [&](std::string field, const std::string& rule) {
    if (origin == "--") std::replace(field.begin(), field.end(), '_', '-');
    throw Error(fmt::format("{}{}: {}", origin, field, rule));
  };
  const bool flags = origin == "--";
  DtypeBytes(t.param_dtype, origin + (flags ? "param-dtype" : "param_dtype"));
  DtypeBytes(t.grad_dtype, origin + (flags ? "grad-dtype" : "grad_dtype"));
  if (!t.refit_dtype.empty()) DtypeBytes(t.refit_dtype, origin + (flags ? "refit-dtype" : "refit_dtype"));
  if (t.seq_len < 1) fail("seq_len", fmt::format("must be >= 1, got {}", t.seq_len));
  if (t.micro_batch_size < 1) fail("micro_batch_size", fmt::format("must be >= 1, got {}", t.micro_batch_size));
  if (t.num_microbatches && *t.num_microbatches < 1) {
    fail("num_microbatches", fmt::format("must be >= 1, got {}", *t.num_microbatches));
  }
  // tokens per micro-batch = seq_len * micro_batch_size; keep it far from overflow when
  // multiplied by hidden sizes and top_k (<= 2^40 each side is checked in the models).
  constexpr int64_t kMaxTokens = int64_t{1} << 31;
  if (t.seq_len > kMaxTokens) fail("seq_len", fmt::format("{} exceeds 2^31", t.seq_len));
  if (t.micro_batch_size > kMaxTokens / t.seq_len) {
    fail("micro_batch_size",
         fmt::format("seq_len ({}) * micro_batch_size ({}) exceeds 2^31 tokens per micro-batch", t.seq_len, t.micro_batch_size));
  }
  if (t.num_microbatches && *t.num_microbatches > (int64_t{1} << 24)) {
    fail("num_microbatches", fmt::format("{} exceeds 2^24", *t.num_microbatches));
  }
  if (t.memory_reserve_gib && (!std::isfinite(*t.memory_reserve_gib) || *t.memory_reserve_gib < 0 || *t.memory_reserve_gib > 1e6)) {
    fail("memory_reserve_gib", fmt::format("must be a finite number in [0, 1e6] GiB, got {}", *t.memory_reserve_gib));
  }
  if (!std::isfinite(t.imbalance) || t.imbalance < 1.0 || t.imbalance > 1e6) {
    fail("imbalance", fmt::format("must be a finite factor in [1, 1e6] (max / mean tokens received), got {}", t.imbalance));
  }
  if (t.oep && *t.oep < 1) fail("oep", fmt::format("must be >= 1, got {}", *t.oep));
  if (t.fp8_dispatch && t.dispatcher != Dispatcher::kAllToAll && t.dispatcher != Dispatcher::kDeepEp) {
    fail(flags ? "fp8-dispatch" : "fp8_dispatch",
         fmt::format("FP8 dispatch applies to the all_to_all and deepep dispatchers (Megatron's FP8 all-to-all, DeepEP use_fp8), "
                     "the dispatcher is \"{}\"",
                     DispatcherName(t.dispatcher)));
  }
  ValidateRecomputeModules(t, origin + (flags ? "recompute-modules" : "recompute_modules"));
  ValidateSelectiveAcOption(t, origin + (flags ? "selective-ac-option" : "selective_ac_option"));
  ValidatePrecision(t, origin);
  if (t.mtp_layers < 0 || t.mtp_layers > 64) fail("mtp_layers", fmt::format("must be in [0, 64], got {}", t.mtp_layers));
  // Its range here; the convention it applies under in BuildPlan (VocabDivisor, the one rule).
  const std::string divisor = origin + (flags ? "make-vocab-size-divisible-by" : "make_vocab_size_divisible_by");
  VocabDivisor(t, true, divisor.c_str());
  if (t.moe_flex_dispatcher_backend && t.dispatcher != Dispatcher::kDeepEp) {
    fail(flags ? "moe-flex-dispatcher-backend" : "moe_flex_dispatcher_backend",
         fmt::format("\"{}\" is set, but the backend only applies to the deepep dispatcher (Megatron's flex dispatcher, "
                     "transformer_config.py moe_flex_dispatcher_backend; the dispatcher is \"{}\")",
                     FlexBackendName(*t.moe_flex_dispatcher_backend), DispatcherName(t.dispatcher)));
  }
  if (t.oep && t.dispatcher != Dispatcher::kDeredundency) {
    fail("oep", fmt::format("{} is set, but oep only applies to the deredundency dispatcher (dispatcher is \"{}\")", *t.oep,
                            DispatcherName(t.dispatcher)));
  }
}

namespace {

// An optional true / false key of the training block: `*out` keeps its value when absent.
void ReadBool(const JsonView& v, const char* key, bool* out) {
  if (!v.value().contains(key)) return;  // null is not a setting: refused below
  if (!v.value().at(key).is_boolean()) v.Fail(key, fmt::format("must be true or false, got {}", JsonValueText(v.value().at(key))));
  *out = v.value().at(key).get<bool>();
}

}  // namespace

TrainingConfig TrainingFromJson(const JsonView& v) {
  // clang-format off
  v.RejectUnknownKeys({"dp_sharding",       "param_dtype",      "grad_dtype", "optimizer",      "seq_len",
                       "micro_batch_size",  "num_microbatches", "recompute",  "pp_layer_split", "gpu_memory_gib",
                       "imbalance",         "gpus_per_node",    "oep",        "refit_dtype",    "dispatcher",
                       "recompute_modules", "precision",        "fp8_recipe", "fp8_dispatch",   "optimizer_states_dtype",
                       "mtp_layers",        "fp8_param_gather", "memory_reserve_gib", "fp8_dot_product_attention",
                       "selective_ac_option", "make_vocab_size_divisible_by", "moe_flex_dispatcher_backend",
                       // Run settings a report writes (TrainingToJson), read back so that a plan file round-trips.
                       "vpp", "megatron_core_version", "cross_entropy_loss_fusion", "cross_entropy_fusion_impl",
                       "clip_grad", "check_for_nan_in_grad", "overlap_p2p_comm", "tp_comm_overlap",
                       "use_transformer_engine_op_fuser", "moe_flex_dispatcher_num_sms", "cuda_device_max_connections"});
  // clang-format on
  TrainingConfig t;
  if (v.Has("dp_sharding")) t.dp_sharding = ParseDpSharding(v.String("dp_sharding"), v.Where("dp_sharding"));
  t.param_dtype = CanonicalDtype(v.StringOr("param_dtype", t.param_dtype));
  DtypeBytes(t.param_dtype, v.Where("param_dtype"));
  t.grad_dtype = CanonicalDtype(v.StringOr("grad_dtype", t.grad_dtype));
  DtypeBytes(t.grad_dtype, v.Where("grad_dtype"));
  t.optimizer = ParseOptimizer(v.StringOr("optimizer", "adamw"), v.Where("optimizer"));
  t.seq_len = v.IntOr("seq_len", t.seq_len);
  t.micro_batch_size = v.IntOr("micro_batch_size", t.micro_batch_size);
  if (v.Has("num_microbatches")) t.num_microbatches = v.Int("num_microbatches");
  t.recompute = ParseRecompute(v.StringOr("recompute", "none"), v.Where("recompute"));
  t.selective_ac_option = v.StringOr("selective_ac_option", "");
  if (v.Has("recompute_modules")) {
    const Json& list = v.value().at("recompute_modules");
    if (!list.is_array()) v.Fail("recompute_modules", "must be an array of module names");
    for (const auto& x : list) {
      if (!x.is_string()) v.Fail("recompute_modules", "must be an array of module names");
      t.recompute_modules.push_back(x.get<std::string>());
    }
  }
  if (v.Has("pp_layer_split")) {
    // >= 0: a virtual-stage split (pp x vpp entries) may list an empty stage; a per-rank split's
    // entries >= 1 are held where the split is resolved (plan.h ResolveLayerSplit).
    t.pp_layer_split = v.IntList("pp_layer_split", 0);
    if (t.pp_layer_split.empty()) v.Fail("pp_layer_split", "must list the layers of every stage, got an empty array");
  }
  if (v.Has("memory_reserve_gib")) t.memory_reserve_gib = v.NumberOr("memory_reserve_gib", 0);
  t.imbalance = v.NumberOr("imbalance", 1.0);
  if (v.Has("oep")) t.oep = v.Int("oep");
  t.refit_dtype = v.StringOr("refit_dtype", "");
  if (!t.refit_dtype.empty()) t.refit_dtype = CanonicalDtype(t.refit_dtype);
  if (v.Has("dispatcher")) t.dispatcher = ParseDispatcher(v.String("dispatcher"), v.Where("dispatcher"));
  if (v.Has("moe_flex_dispatcher_backend")) {
    t.moe_flex_dispatcher_backend =
        ParseFlexBackend(v.String("moe_flex_dispatcher_backend"), v.Where("moe_flex_dispatcher_backend"));
  }
  t.mtp_layers = v.IntOr("mtp_layers", 0);
  if (v.Has("make_vocab_size_divisible_by")) t.make_vocab_size_divisible_by = v.Int("make_vocab_size_divisible_by");
  t.precision = v.StringOr("precision", t.precision);
  t.fp8_recipe = v.StringOr("fp8_recipe", t.fp8_recipe);
  ReadBool(v, "fp8_dispatch", &t.fp8_dispatch);
  ReadBool(v, "fp8_param_gather", &t.fp8_param_gather);
  ReadBool(v, "fp8_dot_product_attention", &t.fp8_dot_product_attention);
  t.optimizer_states_dtype = CanonicalDtype(v.StringOr("optimizer_states_dtype", t.optimizer_states_dtype));
  t.run.vpp = v.IntOr("vpp", t.run.vpp, 1);
  t.run.megatron_core_version = v.StringOr("megatron_core_version", "");
  ValidateMegatronCoreVersion(t.run.megatron_core_version, v.Where("megatron_core_version"));
  ReadBool(v, "cross_entropy_loss_fusion", &t.run.fused_cross_entropy);
  t.run.cross_entropy_fusion_impl = v.StringOr("cross_entropy_fusion_impl", t.run.cross_entropy_fusion_impl);
  ValidateCrossEntropyFusionImpl(t.run, v.Where("cross_entropy_fusion_impl"), v.Where("cross_entropy_loss_fusion"),
                                 v.Where("megatron_core_version"));
  t.run.clip_grad = v.NumberOr("clip_grad", t.run.clip_grad);
  ValidateClipGrad(t.run.clip_grad, v.Where("clip_grad"));
  ReadBool(v, "check_for_nan_in_grad", &t.run.check_for_nan_in_grad);
  ReadBool(v, "overlap_p2p_comm", &t.run.overlap_p2p_comm);
  ReadBool(v, "tp_comm_overlap", &t.run.tp_comm_overlap);
  ReadBool(v, "use_transformer_engine_op_fuser", &t.run.use_transformer_engine_op_fuser);
  ValidateTeOpFuser(t.run, v.Where("use_transformer_engine_op_fuser"), v.Where("megatron_core_version"));
  // The flex dispatcher's SMs (absent: the backend's default) and CUDA_DEVICE_MAX_CONNECTIONS (absent: CUDA's 8).
  t.run.moe_flex_dispatcher_num_sms = v.IntOr("moe_flex_dispatcher_num_sms", 0, 1);
  if (t.run.moe_flex_dispatcher_num_sms > kMaxFlexDispatcherNumSms) {
    v.Fail("moe_flex_dispatcher_num_sms", fmt::format("must be a number of SMs in [1, {}] (Megatron --moe-flex-dispatcher-num-sms), got {}",
                                                      kMaxFlexDispatcherNumSms, t.run.moe_flex_dispatcher_num_sms));
  }
  t.run.cuda_device_max_connections = v.IntOr("cuda_device_max_connections", kCudaDefaultMaxConnections, 1);
  if (t.run.cuda_device_max_connections > kMaxCudaDeviceMaxConnections) {
    v.Fail("cuda_device_max_connections", fmt::format("CUDA_DEVICE_MAX_CONNECTIONS is in [1, {}], got {}", kMaxCudaDeviceMaxConnections,
                                                      t.run.cuda_device_max_connections));
  }
  NormalizeMxfp8Precision(&t, v.Where() + "/", v.Has("fp8_recipe"));
  ValidateTraining(t, v.Where() + "/");
  return t;
}

Json TrainingToJson(const TrainingConfig& t, const Machine& machine) {
  Json j = {{"param_dtype", t.param_dtype},
            {"grad_dtype", t.grad_dtype},
            {"optimizer", OptimizerName(t.optimizer)},
            {"seq_len", t.seq_len},
            {"micro_batch_size", t.micro_batch_size},
            {"recompute", RecomputeName(t.recompute)},
            {"imbalance", t.imbalance},
            {"dispatcher", DispatcherName(t.dispatcher)}};
  if (t.dp_sharding) j["dp_sharding"] = DpShardingName(*t.dp_sharding);
  if (t.num_microbatches) j["num_microbatches"] = *t.num_microbatches;
  if (!t.pp_layer_split.empty()) j["pp_layer_split"] = t.pp_layer_split;
  // The deepep (flex) dispatcher names its backend, Megatron's default when unset (dispatcher.h).
  if (t.dispatcher == Dispatcher::kDeepEp) {
    j["moe_flex_dispatcher_backend"] = FlexBackendName(t.moe_flex_dispatcher_backend.value_or(FlexBackend::kDeepEp));
  }
  if (t.oep) j["oep"] = *t.oep;
  if (t.make_vocab_size_divisible_by) j["make_vocab_size_divisible_by"] = *t.make_vocab_size_divisible_by;
  if (t.memory_reserve_gib) j["memory_reserve_gib"] = *t.memory_reserve_gib;
  if (!t.refit_dtype.empty()) j["refit_dtype"] = t.refit_dtype;
  if (!t.recompute_modules.empty()) j["recompute_modules"] = t.recompute_modules;
  if (!t.selective_ac_option.empty()) j["selective_ac_option"] = t.selective_ac_option;
  // Precision keys only when not the default, so default reports do not change.
  if (t.precision != "bf16") j["precision"] = t.precision;
  if (t.fp8_recipe != "tensorwise") j["fp8_recipe"] = t.fp8_recipe;
  if (t.fp8_dispatch) j["fp8_dispatch"] = true;
  if (t.fp8_param_gather) j["fp8_param_gather"] = true;
  if (t.fp8_dot_product_attention) j["fp8_dot_product_attention"] = true;
  if (t.optimizer_states_dtype != "float32") j["optimizer_states_dtype"] = t.optimizer_states_dtype;
  if (t.mtp_layers > 0) j["mtp_layers"] = t.mtp_layers;
  if (t.run.vpp > 1) j["vpp"] = t.run.vpp;  // interleaved 1F1B (the HTML pipeline figure draws it)
  if (!t.run.megatron_core_version.empty()) j["megatron_core_version"] = t.run.megatron_core_version;
  // The fused cross-entropy by Megatron's names (run_settings.h), only when on: default reports do not change.
  if (t.run.fused_cross_entropy) {
    j["cross_entropy_loss_fusion"] = true;
    j["cross_entropy_fusion_impl"] = t.run.cross_entropy_fusion_impl;
  }
  // The step end's settings (run_settings.h), only when not the default.
  if (t.run.clip_grad != 1.0) j["clip_grad"] = t.run.clip_grad;
  if (!t.run.check_for_nan_in_grad) j["check_for_nan_in_grad"] = false;
  // Only where it can matter: without interleaving Megatron turns the P2P overlap off (P2pOverlapped).
  if (!t.run.overlap_p2p_comm && t.run.vpp > 1) j["overlap_p2p_comm"] = false;
  if (t.run.tp_comm_overlap) j["tp_comm_overlap"] = true;
  // Megatron-Core's TransformerEngine op fuser for the experts (it moves memory and time: expert_eager.h).
  if (t.run.use_transformer_engine_op_fuser) j["use_transformer_engine_op_fuser"] = true;
  // The flex dispatcher's SMs and the job's hardware queues (run_settings.h), only when set / not CUDA's default.
  if (t.run.moe_flex_dispatcher_num_sms > 0) j["moe_flex_dispatcher_num_sms"] = t.run.moe_flex_dispatcher_num_sms;
  if (t.run.cuda_device_max_connections != kCudaDefaultMaxConnections) j["cuda_device_max_connections"] = t.run.cuda_device_max_connections;
  AddMachineToTrainingJson(machine, &j);
  return j;
}

}  // namespace dockyard
