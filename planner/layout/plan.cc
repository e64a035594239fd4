// BuildPlan (see plan.h).
#include "planner/layout/plan.h"

#include "planner/layout/megatron_split.h"
#include "planner/layout/torchtitan_split.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"
#include "planner/model/flex_backend_limits.h"
#include "planner/model/mtp.h"
#include "planner/model/muon.h"
#include "planner/model/precision.h"
#include "planner/model/recompute.h"
#include "planner/model/seq_len.h"
#include "planner/model/training_json.h"
#include "planner/model/vocab_padding.h"
#include "planner/model/pipeline_schedule.h"

namespace dockyard {

int64_t ModelParallelNumel(const Plan& plan, size_t i, int64_t rank) {
  return GatheredNumelOnRank(plan.inventory.params[i], plan.placements[i], plan.MeshOf(i), rank);
}

std::vector<int64_t> ResolveLayerSplit(const TrainingConfig& training, int64_t num_layers, int64_t pp) {
  const auto& split = training.pp_layer_split;
  if (split.empty()) return EvenLayerSplit(num_layers, pp);
  int64_t total = 0;
  for (int64_t n : split) {
    if (n < 1) throw Error(fmt::format("training.pp_layer_split: every stage needs >= 1 layer, got {}", n));
    if (n > num_layers) {
      throw Error(fmt::format("training.pp_layer_split: a stage of {} layers exceeds num_hidden_layers ({})", n, num_layers));
    }
    total += n;  // each <= num_hidden_layers <= 100000 and split.size() is checked below
  }
  if (static_cast<int64_t>(split.size()) != pp || total != num_layers) {
    throw Error(
        fmt::format("training.pp_layer_split {} has {} stages summing to {} layers; need pp ({}) stages summing "
                    "to num_hidden_layers ({})",
                    fmt::format("[{}]", fmt::join(split, ",")), split.size(), total, pp, num_layers));
  }
  std::vector<int64_t> stage_of;
  for (int64_t s = 0; s < pp; ++s) {
    for (int64_t i = 0; i < split[s]; ++i) stage_of.push_back(s);
  }
  return stage_of;
}

namespace {

// The first virtual stage other than the first and the last with no decoder layer (v x pp + p is
// rank p's chunk v), -1 when none or at vpp 1.
int64_t EmptyMiddleChunk(const PipelineStages& stages, int64_t pp) {
  if (stages.vpp <= 1 || stages.layer_chunk.empty()) return -1;
  const int64_t count = pp * stages.vpp;
  const std::vector<int64_t> layers = LayersPerVirtualStage(stages.layer_stage, stages.layer_chunk, pp, stages.vpp);
  for (int64_t s = 1; s + 1 < count; ++s) {
    if (layers[static_cast<size_t>(s)] == 0) return s;
  }
  return -1;
}

// torchtitan builds an optimizer for each model chunk and raises for one whose parameter groups
// match no parameter (torchtitan/components/optimizer/optimizer.py OptimizersContainer: "Optimizer
// param_groups pattern ... matched no parameters"), so every virtual stage needs a module: a decoder
// layer, or the embedding (the first stage) or the norm and output (the last). `source` names the
// setting that placed the layers.
void RequireTorchtitanChunkModules(const PipelineStages& stages, int64_t pp, const std::string& source) {
  const int64_t s = EmptyMiddleChunk(stages, pp);
  if (s < 0) return;
  throw Error(fmt::format(
      "{}: pipeline rank {}'s model chunk {} (virtual stage {} of {}) holds no decoder layer, and torchtitan refuses a model "
      "chunk without parameters (its optimizer per chunk raises \"matched no parameters\", torchtitan/components/optimizer/optimizer.py); "
      "only the first stage (the embedding) and the last (the norm and output) may hold none",
      source, s % pp, s / pp, s, pp * stages.vpp));
}

}  // namespace

PipelineStages ResolvePipelineStages(const TrainingConfig& training, int64_t num_layers, int64_t pp, bool megatron) {
  const RunSettings& run = training.run;
  const bool account = run.account_for_embedding || run.account_for_loss;
  PipelineStages out;
  if (run.pipeline_layout.empty() && !account) {
    // Megatron runs an even split it refuses without a flag as the layout that reproduces it
    // (megatron_split.h); at vpp > 1 that layout's model chunks are unequal, and they are counted so.
    if (const auto flag = MegatronEvenSplitFlag(training, num_layers, pp, megatron);
        flag && flag->key == "--pipeline-model-parallel-layout") {
      return ResolvePipelineLayout(ParsePipelineLayout(flag->value, flag->key), pp, num_layers, training.mtp_layers, flag->value, flag->key);
    }
    out.embedding_stage = 0;
    out.loss_stage = out.mtp_stage = pp - 1;
    out.vpp = run.vpp;
    if (IsVirtualStageSplit(training.pp_layer_split, pp, run.vpp)) {
      // One entry per virtual stage (torchtitan's split, ParseLayerSplit): placed as listed.
      const auto& split = training.pp_layer_split;
      int64_t total = 0;
      for (int64_t n : split) {
        if (n < 0 || n > num_layers) {
          throw Error(fmt::format("training.pp_layer_split: a virtual stage of {} layers is outside [0, num_hidden_layers ({})]", n, num_layers));
        }
        total += n;
      }
      if (total != num_layers) {
        throw Error(fmt::format("training.pp_layer_split [{}]: {} virtual stages summing to {} layers; need num_hidden_layers ({})",
                                fmt::join(split, ","), split.size(), total, num_layers));
      }
      std::tie(out.layer_stage, out.layer_chunk) = VirtualStageLayerSplit(split, pp);
      const std::vector<int64_t> per_rank = LayersPerRank(out.layer_stage, pp);
      for (int64_t p = 0; p < pp; ++p) {
        if (per_rank[static_cast<size_t>(p)] < 1) throw Error(fmt::format("training.pp_layer_split: pipeline rank {} holds no decoder layer", p));
      }
    } else {
      out.layer_stage = ResolveLayerSplit(training, num_layers, pp);
      if (run.vpp > 1) {
        // Interleaved: each rank's layers in vpp chunks, numbered in virtual-stage order, so a
        // rank's layers are not contiguous (megatron_split.h InterleavedLayerSplit).
        std::tie(out.layer_stage, out.layer_chunk) = InterleavedLayerSplit(LayersPerRank(out.layer_stage, pp), run.vpp);
        if (!megatron && training.pp_layer_split.empty() && EmptyMiddleChunk(out, pp) >= 0) {
          // A rank with fewer layers than chunks leaves one empty, which torchtitan cannot run:
          // torchtitan's own split then, at its default weights (the embedding and the output one
          // layer each: pipeline_parallel_first/last_stage_less_layers 1), which fills every middle
          // stage where pp x vpp <= layers + 2 (past it the generator refuses, and ValidateVppChunks
          // below says so).
          std::string error;
          const std::vector<int64_t> stage_layers = TorchtitanStageLayers(pp * run.vpp, num_layers, 1, 1, &error);
          if (!stage_layers.empty()) std::tie(out.layer_stage, out.layer_chunk) = VirtualStageLayerSplit(stage_layers, pp);
        }
      }
    }
    if (!megatron) {
      ValidateVppChunks(pp, run.vpp, num_layers);
      RequireTorchtitanChunkModules(out, pp, training.pp_layer_split.empty() ? fmt::format("--vpp {}", run.vpp)
                                                                             : fmt::format("training.pp_layer_split [{}]", fmt::join(training.pp_layer_split, ",")));
    }
    return out;
  }
  const char* kLayout = "--pipeline-model-parallel-layout";
  if (!run.pipeline_layout.empty() && account) {
    throw Error(
        fmt::format("{} \"{}\" cannot be set with other pipeline layout arguments (--account-for-embedding-in-pipeline-split, "
                    "--account-for-loss-in-pipeline-split; Megatron transformer_config.py)",
                    kLayout, run.pipeline_layout));
  }
  if (!training.pp_layer_split.empty()) {
    throw Error(fmt::format("{} cannot be set with training.pp_layer_split / --pp-layer-split (both fix the layers per stage)",
                            account ? "--account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split" : kLayout));
  }
  if (account) {
    const VirtualStages stages =
        AccountForLayout(num_layers, pp, run.vpp, run.account_for_embedding, run.account_for_loss, training.mtp_layers);
    return ResolvePipelineLayout(stages, pp, num_layers, training.mtp_layers, "", "--account-for-embedding-in-pipeline-split");
  }
  out = ResolvePipelineLayout(ParsePipelineLayout(run.pipeline_layout, kLayout), pp, num_layers, training.mtp_layers, run.pipeline_layout,
                              kLayout);
  if (run.vpp != 1 && run.vpp != out.vpp) {
    throw Error(fmt::format("{} \"{}\": {} stages over pp {} is vpp {}, but --vpp is {} (the layout lists pp x vpp stages)", kLayout,
                            run.pipeline_layout, out.vpp * pp, pp, out.vpp, run.vpp));
  }
  return out;
}

std::string DeredundencyOepError(const TrainingConfig& training, int64_t ep) {
  if (training.dispatcher != Dispatcher::kDeredundency || !training.oep || ep % *training.oep == 0) return "";
  return fmt::format("oep ({}) must divide ep ({}) for the deredundency dispatcher (ep = oep x iep)", *training.oep, ep);
}

Plan BuildPlan(const ModelSpec& model, const ParallelDimsOptions& options, const TrainingConfig& training, const Machine& machine) {
  return BuildPlan(model, BuildInventory(model), options, training, machine);
}

Plan BuildPlan(const ModelSpec& model, const ParamInventory& inventory, const ParallelDimsOptions& options, const TrainingConfig& training,
               const Machine& machine) {
  Plan plan;
  plan.model = model;
  // The plan carries its training settings once, resolved, in plan.training, and its machine once
  // in plan.machine: the model spec's training block was only the default the caller resolved them from.
  plan.model.training.reset();
  plan.model.machine = Machine{};
  plan.dims = ParallelDims::Build(options);
  ValidateDimsForModel(plan.dims, model);
  plan.training = training;
  ValidateTraining(plan.training, "training.");
  // Megatron-LM builds the embedding and the output layer with the padded vocabulary
  // (vocab_padding.h); every figure of the plan reads plan.model.vocab_size.
  plan.unpadded_vocab_size = model.vocab_size;
  plan.model.vocab_size =
      PaddedVocabSize(model.vocab_size, VocabDivisor(plan.training, plan.dims.convention == Convention::kMegatron), plan.dims.tp);
  plan.machine = machine;
  ValidateMachine(plan.machine, "training.");
  plan.defaults_applied = ApplyConventionDefaults(plan.dims.convention, &plan.training);
  plan.defaults_applied.etp = plan.dims.etp_default;
  if (!plan.training.num_microbatches) plan.training.num_microbatches = plan.dims.pp;
  const PipelineStages stages =
      ResolvePipelineStages(plan.training, model.num_hidden_layers, plan.dims.pp, plan.dims.convention == Convention::kMegatron);
  plan.training.run.vpp = stages.vpp;
  ValidateFp8ParamGather(plan.training, plan.dims.convention == Convention::kMegatron);
  ValidateMuon(plan.training, plan.dims.convention == Convention::kMegatron);
  ValidateRunSettings(plan.training.run, static_cast<int>(*plan.training.dp_sharding), plan.dims.pp);
  ValidateSchedule(plan.training.run, plan.dims.pp, *plan.training.num_microbatches);
  const bool megatron = plan.dims.convention == Convention::kMegatron;
  ValidateSingleStageMicrobatches(plan.training.run, plan.dims.pp, *plan.training.num_microbatches, megatron);
  ValidateInterleavedMicrobatches(plan.training.run, plan.dims.pp, *plan.training.num_microbatches, megatron);
  ValidateSelectiveAcConvention(plan.training, IsTorchtitan(plan.dims.convention));
  ValidateSeqLenForModel(plan.training.seq_len, plan.model, "--seq-len");
  ValidateSeqLenSplits(plan.training.seq_len, plan.dims.cp, plan.dims.tp, megatron);
  ValidateOpSac(plan.training, plan.model);
  ValidateRecomputeModulesForModel(plan.training, plan.model);
  ValidateEpOverlap(plan.training, plan.dims.pp, plan.dims.ep);
  ValidateGraphsAndPadding(plan.training, megatron);
  ValidateFlexDispatcherNumSms(plan.training, megatron);
  ValidateSharedExpertOverlap(plan.training, megatron, model.moe.num_shared_experts > 0);
  const std::string oep_error = DeredundencyOepError(plan.training, plan.dims.ep);
  if (!oep_error.empty()) throw Error(oep_error);
  // The deepep (flex) dispatcher's backend limits (model/flex_backend_limits.h), on the machine's node.
  const std::string backend_error = FlexBackendLimitError(plan.training, plan.dims.ep, plan.dims.etp, plan.machine, megatron);
  if (!backend_error.empty()) throw Error(backend_error);
  plan.inventory = plan.model.vocab_size == model.vocab_size ? inventory : BuildInventory(plan.model);
  // With tied embeddings and several pipeline stages, the last stage keeps its own copy of the
  // embedding matrix as lm_head (gradients are all-reduced between the two stages). The copy is
  // placed and counted in bytes per rank, not in the model totals.
  if (model.tie_word_embeddings && plan.dims.pp > 1) {
    ParamInfo copy = plan.inventory.params.front();
    copy.fqn = "lm_head.weight";
    copy.role = Role::kLmHead;
    copy.tied_to = plan.inventory.params.front().fqn;
    plan.inventory.params.push_back(std::move(copy));
  }
  plan.meshes = BuildMeshes(plan.dims);
  plan.layer_stage = stages.layer_stage;
  plan.layer_chunk = stages.layer_chunk;  // a layout's (given, or the one Megatron needs for the even split)
  plan.embedding_stage = stages.embedding_stage;
  plan.loss_stage = stages.loss_stage;
  plan.mtp_stage = stages.mtp_stage;
  // A layout may leave a model chunk empty (Megatron allows empty stages); the even split may not.
  if (plan.training.run.pipeline_layout.empty()) ValidateVppChunks(plan.dims.pp, plan.training.run.vpp, model.num_hidden_layers);

  plan.experts.num_experts = model.moe.num_experts;
  plan.experts.ep = plan.dims.ep;
  plan.experts.num_local_experts = model.moe.num_experts / plan.dims.ep;

  const auto& params = plan.inventory.params;
  plan.placements.reserve(params.size());
  for (const auto& p : params) {
    const bool fsdp = *plan.training.dp_sharding == DpSharding::kFsdp;
    if (fsdp) {
      const ShardCuts cuts = ShardCutsOf(p.routed_expert, p.tp_dim, plan.dims, model.moe.num_experts, true);
      const UnevenFsdpCut uneven = FindUnevenFsdpCut(p.shape, cuts);
      if (uneven.cut >= 0) throw Error(UnevenFsdpMessage(p.fqn, cuts.cuts[uneven.cut], uneven.size));
    }
    ParamPlacement pl = PlaceParam(p, plan.dims, plan.meshes, model.moe.num_experts, fsdp);
    if (p.layer >= 0)
      pl.stage = plan.layer_stage[p.layer];
    else
      pl.stage = p.role == Role::kEmbedding ? plan.embedding_stage : plan.loss_stage;
    ComputeLocalShapes(p, pl.sparse_mesh ? plan.meshes.sparse : plan.meshes.dense, pl);
    plan.placements.push_back(std::move(pl));
  }
  return plan;
}

void ForEachMtpParam(const Plan& plan, const std::function<void(const ParamInfo&, const ParamPlacement&, const Mesh&)>& f) {
  const int64_t last = plan.model.num_hidden_layers - 1;
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    if (plan.inventory.params[i].layer == last) f(plan.inventory.params[i], plan.placements[i], plan.MeshOf(i));
  }
  const bool fsdp = *plan.training.dp_sharding == DpSharding::kFsdp;
  for (const ParamInfo& p : MtpExtraParams(plan.model, plan.dims.pp)) {
    const ParamPlacement pl = PlaceParam(p, plan.dims, plan.meshes, plan.model.moe.num_experts, fsdp);
    f(p, pl, pl.sparse_mesh ? plan.meshes.sparse : plan.meshes.dense);
  }
}

std::vector<int64_t> ParamBytesPerRank(const Plan& plan) {
  const auto& params = plan.inventory.params;
  const int64_t world = plan.dims.world_size;
  std::vector<int64_t> own(world, 0);
  std::vector<int64_t> dtype_bytes(params.size());
  for (size_t i = 0; i < params.size(); ++i) dtype_bytes[i] = DtypeBytes(params[i].dtype, params[i].fqn);
  for (int64_t rank = 0; rank < world; ++rank) {
    const int64_t stage = plan.meshes.dense.Coord(rank, 0);
    int64_t bytes = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& pl = plan.placements[i];
      if (pl.stage != stage) continue;
      const int64_t numel = LocalNumelOnRank(params[i], pl, plan.MeshOf(i), rank);
      bytes = CheckedAdd(bytes, CheckedMul(numel, dtype_bytes[i], params[i].fqn), "parameter bytes per rank");
    }
    if (plan.training.mtp_layers > 0 && stage == plan.mtp_stage) {
      int64_t module = 0;
      ForEachMtpParam(plan, [&](const ParamInfo& p, const ParamPlacement& pl, const Mesh& mesh) {
        module = CheckedAdd(module, CheckedMul(LocalNumelOnRank(p, pl, mesh, rank), DtypeBytes(p.dtype, p.fqn), p.fqn), "MTP bytes");
      });
      bytes = CheckedAdd(bytes, CheckedMul(module, plan.training.mtp_layers, "MTP bytes"), "parameter bytes per rank");
    }
    own[rank] = bytes;
  }
  if (!IsDualPipe(plan.training.run)) return own;
  std::vector<int64_t> out(world, 0);
  for (int64_t rank = 0; rank < world; ++rank) {
    const int64_t stage = plan.meshes.dense.Coord(rank, 0);
    const int64_t mirror = rank + (DualPipeMirrorStage(plan.dims.pp, stage) - stage) * plan.dims.stage_size();
    out[rank] = mirror == rank ? own[rank] : CheckedAdd(own[rank], own[mirror], "parameter bytes per rank");
  }
  return out;
}

std::vector<StageSummary> SummarizeStages(const Plan& plan, const std::vector<int64_t>& param_bytes_per_rank) {
  std::vector<StageSummary> stages;
  for (int64_t s = 0; s < plan.dims.pp; ++s) {
    StageSummary st;
    st.stage = s;
    // DualPipe: the rank holds its mirror stage too.
    const int64_t mirror = IsDualPipe(plan.training.run) ? DualPipeMirrorStage(plan.dims.pp, s) : s;
    st.first_layer = st.last_layer = -1;  // a layout's stage without decoder layers
    for (int64_t l = 0; l < static_cast<int64_t>(plan.layer_stage.size()); ++l) {
      if (plan.layer_stage[l] != s && plan.layer_stage[l] != mirror) continue;
      if (st.first_layer < 0) st.first_layer = l;
      st.last_layer = l;
      if (!st.layer_runs.empty() && st.layer_runs.back().second == l - 1) {
        st.layer_runs.back().second = l;
      } else {
        st.layer_runs.emplace_back(l, l);
      }
    }
    const int64_t stage_size = plan.dims.stage_size();
    st.max_param_bytes = -1;
    st.min_param_bytes = INT64_MAX;
    for (int64_t r = s * stage_size; r < (s + 1) * stage_size; ++r) {
      const int64_t b = param_bytes_per_rank[r];
      if (b > st.max_param_bytes) {
        st.max_param_bytes = b;
        st.worst_rank = r;
      }
      st.min_param_bytes = std::min(st.min_param_bytes, b);
    }
    stages.push_back(st);
  }
  return stages;
}

}  // namespace dockyard
