#include "planner/cost/compute_model.h"

#include "planner/base/error.h"

namespace dockyard {

void ApplyComputeModel(const std::string& model, bool cuda_graphs, ComputeModel* out, RunSettings* run, bool full_iteration_cuda_graph) {
  if (model != "kernels" && model != "gemm") {
    throw Error(
        "--compute-model: must be kernels (GEMMs by shape, memory-bound kernels, launch gaps) or gemm (fixed GEMM "
        "efficiencies), got \"" +
        model + "\"");
  }
  // The launch-gap and cross-entropy kernels exist only in the kernel-level compute model: refuse
  // them elsewhere rather than ignore them.
  if (model == "gemm" && full_iteration_cuda_graph) {
    throw Error(
        "--full-iteration-cuda-graph: a whole-iteration CUDA graph removes the launch gaps and host synchronizations of "
        "--compute-model kernels; with --compute-model gemm there are none to remove (drop --compute-model gemm)");
  }
  if (model == "gemm" && cuda_graphs) {
    throw Error(
        "--cuda-graphs: CUDA graphs shorten the kernel launch gaps of --compute-model kernels; with --compute-model gemm "
        "there are none to shorten (drop --compute-model gemm)");
  }
  if (model == "gemm" && run->fused_cross_entropy) {
    throw Error(
        "--cross-entropy fused: the cross-entropy kernels are priced by --compute-model kernels only; with --compute-model "
        "gemm it changes no time (drop --compute-model gemm; plan and check take it for memory)");
  }
  if (model == "gemm" && run->use_transformer_engine_op_fuser) {
    throw Error(
        "--use-transformer-engine-op-fuser: the eager expert ops it removes are priced by --compute-model kernels only; with "
        "--compute-model gemm it changes no time (drop --compute-model gemm; plan and check take it for memory)");
  }
  *out = model == "kernels" ? ComputeModel::kKernels : ComputeModel::kGemm;
  run->cuda_graphs = cuda_graphs || full_iteration_cuda_graph;
  run->full_iteration_cuda_graph = full_iteration_cuda_graph;
}

Json ComputeModelToJson(ComputeModel model, const TrainingConfig& training, double attention_fp8_speedup, double rope_attention_factor) {
  const RunSettings& run = training.run;
  // The GEMMs' precision as the cost model prices them: bf16, or fp8 with its recipe (precision.h).
  const std::string gemms = training.precision == "fp8" ? "fp8 " + training.fp8_recipe : training.precision;
  Json j{{"model", model == ComputeModel::kKernels ? "kernels" : "gemm"},
         {"gemm_precision", gemms},
         {"attention_precision", training.fp8_dot_product_attention ? "fp8" : "bf16"},  // the flash core (gemm_efficiency.h FlashCoreSpeedup)
         {"cuda_graphs", run.cuda_graphs},
         {"cross_entropy", run.fused_cross_entropy ? "fused" : "unfused"}};
  if (run.fused_cross_entropy) j["cross_entropy_fusion_impl"] = run.cross_entropy_fusion_impl;  // native | te
  if (training.fp8_dot_product_attention) j["attention_fp8_speedup"] = attention_fp8_speedup;
  if (model == ComputeModel::kKernels && rope_attention_factor > 0) {
    j["rotary"] = "unfused";
    j["rope_attention_factor"] = rope_attention_factor;
  }
  // The whole iteration in one CUDA graph (no host synchronization in the MoE layers) and expert
  // inputs padded to capacity (static splits, none either): kernels_model.h MoeSyncIdleUs.
  if (run.full_iteration_cuda_graph) j["full_iteration_cuda_graph"] = true;
  if (run.moe_pad_expert_input_to_capacity) j["moe_pad_expert_input_to_capacity"] = true;
  // TransformerEngine's TP-communication overlap (run_settings.h TpCommOverlapped: where tp > 1).
  if (run.tp_comm_overlap) j["tp_comm_overlap"] = true;
  // Megatron's EP overlap (combined 1F1B) and its delayed expert weight gradients (ep_overlap.h).
  if (run.overlap_moe_ep_comm) j["ep_overlap"] = true;
  if (run.delay_wgrad_compute) j["delay_wgrad_compute"] = true;
  // The flex dispatcher's SMs (ep_overlap.h FlexDispatcherSmShare) and the job's hardware queues
  // (PairedLayerUs one_queue), only when given / not CUDA's default.
  if (run.moe_flex_dispatcher_num_sms > 0) j["moe_flex_dispatcher_num_sms"] = run.moe_flex_dispatcher_num_sms;
  if (run.cuda_device_max_connections != kCudaDefaultMaxConnections) j["cuda_device_max_connections"] = run.cuda_device_max_connections;
  // Megatron's weight-gradient accumulation outside the GEMMs (--no-gradient-accumulation-fusion,
  // kernels_model.h MainGradBytesPerElement); read under the megatron convention only.
  if (!run.gradient_accumulation_fusion) j["gradient_accumulation_fusion"] = false;
  // Megatron-Core's TransformerEngine op fuser for the routed experts (kernels_model.h ExpertEagerKernels).
  if (run.use_transformer_engine_op_fuser) j["use_transformer_engine_op_fuser"] = true;
  // Megatron-Core DDP's overlapped gradient reduce / parameter gather and how its buckets run
  // (param_gather.h): the bucket given (null: Megatron-LM's default max(40M, 1M x dp x cp)).
  if (run.overlap_grad_reduce || run.overlap_param_gather) {
    j["dp_overlap"] = Json{{"grad_reduce", run.overlap_grad_reduce},
                           {"param_gather", run.overlap_param_gather},
                           {"aligned_param_gather", ParamGatherAligned(run)},
                           {"param_gather_with_optimizer_step", run.overlap_param_gather_with_optimizer_step},
                           {"ddp_bucket_size", run.ddp_bucket_size > 0 ? Json(run.ddp_bucket_size) : Json(nullptr)}};
  }
  return j;
}

}  // namespace dockyard
