// Megatron and dockyard's even layer split. Without a split flag Megatron-LM refuses to start when
// the decoder layers do not divide evenly:
//  - over pp: megatron/training/arguments.py validate_args asserts "Number of layers should be
//    divisible by the pipeline-model-parallel size" (no --decoder-first/last-pipeline-num-layers,
//    no --account-for-*-in-pipeline-split, no --pipeline-model-parallel-layout);
//  - over vpp: each rank's layers must divide into its vpp model chunks
//    (megatron/core/transformer/transformer_block.py get_num_layers_to_build asserts
//    num_layers_per_pipeline_rank % vp_size == 0).
// dockyard plans such layouts with EvenLayerSplit (plan.h: the first num_layers % pp stages one layer
// more), as the published fidelity runs need; this file says so and gives the Megatron flag that
// reproduces that split.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "planner/model/training.h"

namespace dockyard {

// Pipeline split: layers spread evenly, the first (L % pp) stages taking one extra layer;
// embedding on the first stage, final norm and lm_head on the last. The stage of each layer.
std::vector<int64_t> EvenLayerSplit(int64_t num_layers, int64_t pp);

// The decoder layers each of `pp` ranks holds, from each layer's rank (`layer_stage`, entries in [0, pp)).
std::vector<int64_t> LayersPerRank(const std::vector<int64_t>& layer_stage, int64_t pp);

// The decoder layers each of the pp x vpp virtual stages holds (v x pp + p: rank p's chunk v), from
// each layer's rank and model chunk (`layer_chunk` empty: every layer in chunk 0, vpp 1).
std::vector<int64_t> LayersPerVirtualStage(const std::vector<int64_t>& layer_stage, const std::vector<int64_t>& layer_chunk, int64_t pp,
                                           int64_t vpp);

// Decoder layers of model chunk `chunk` of a rank holding `rank_layers` layers in `vpp` chunks:
// rank_layers / vpp, the first rank_layers % vpp chunks one more (Megatron-Core
// transformer_block.py get_num_layers_to_build: num_layers_per_pipeline_rank / vp_size, which
// Megatron requires to divide; torchtitan's split differs only where that division leaves a
// remainder). Requires vpp >= 1, 0 <= chunk < vpp.
int64_t ChunkLayers(int64_t rank_layers, int64_t vpp, int64_t chunk);

// The interleaved placement of `rank_layers` ([pp]: each pipeline rank's decoder layers) in vpp
// model chunks per rank: virtual stage v x pp + p is rank p's chunk v with ChunkLayers(n_p, vpp, v)
// layers, and the layers are numbered in virtual-stage order (Megatron-Core
// get_transformer_layer_offset; torchtitan's "loop" stage style, stage s on rank s % pp). So at
// pp 3, vpp 3 and 9 layers per rank, rank 0 holds layers 0-2, 9-11 and 18-20. Each decoder
// layer's rank ([0]) and chunk ([1]), [num_layers] each; vpp 1 gives the contiguous split.
// Requires every entry >= 0 and vpp >= 1.
std::pair<std::vector<int64_t>, std::vector<int64_t>> InterleavedLayerSplit(const std::vector<int64_t>& rank_layers, int64_t vpp);

// The decoder layers of each of the pp x vpp virtual stages of `rank_layers` in vpp chunks
// (ChunkLayers), in virtual-stage order.
std::vector<int64_t> VirtualStageLayers(const std::vector<int64_t>& rank_layers, int64_t vpp);

// The placement of `stage_layers` ([pp x vpp]: each virtual stage's decoder layers, in
// virtual-stage order; a torchtitan split or VirtualStageLayers): each layer's rank ([0], virtual
// stage % pp) and chunk ([1], virtual stage / pp), layers numbered in virtual-stage order.
// Requires pp >= 1 dividing the entries' count, every entry >= 0.
std::pair<std::vector<int64_t>, std::vector<int64_t>> VirtualStageLayerSplit(const std::vector<int64_t>& stage_layers, int64_t pp);

// The --pipeline-model-parallel-layout string (pipeline_layout.h grammar) of `rank_layers` ([pp]:
// each pipeline rank's decoder layers) with vpp model chunks per rank: rank p's chunk v gets
// ChunkLayers(n_p, vpp, v) layers; virtual stage v x pp + p is rank p's chunk v (Megatron's order,
// InterleavedLayerSplit), so the layout places every layer where dockyard's plan of the split
// does. The embedding opens virtual stage 0; the MTP modules (mtp_layers) and the loss close the
// last one. Runs of equal stages are written "(S|)*N". E.g. ({12, 12, 12, 12, 12, 12, 11, 11}, 1,
// 0): "Et*12|(t*12|)*5t*11|t*11L". Requires pp >= 1, every entry >= 0, vpp >= 1.
std::string SplitPipelineLayout(const std::vector<int64_t>& rank_layers, int64_t vpp, int64_t mtp_layers);

// The layout string of `stage_layers` ([pp x vpp] virtual stages' decoder layers, in
// virtual-stage order): the embedding opens the first, the MTP modules and the loss close the
// last, runs of equal stages as "(S|)*N". SplitPipelineLayout is this of VirtualStageLayers.
std::string VirtualStagesPipelineLayout(const std::vector<int64_t>& stage_layers, int64_t mtp_layers);

// SplitPipelineLayout of EvenLayerSplit(num_layers, pp). E.g. (94, 8, 1, 0):
// "Et*12|(t*12|)*5t*11|t*11L". Requires num_layers >= 1, pp >= 1, vpp >= 1.
std::string EvenSplitPipelineLayout(int64_t num_layers, int64_t pp, int64_t vpp, int64_t mtp_layers);

// The Megatron flag that reproduces dockyard's even split where Megatron would refuse the layout
// without one (the layouts MegatronEvenSplitNote names; nullopt otherwise):
// --decoder-first-pipeline-num-layers N (vpp 1, one extra layer on the first stage),
// --decoder-last-pipeline-num-layers N (vpp 1, one layer fewer on the last stage), else
// --pipeline-model-parallel-layout EvenSplitPipelineLayout(...). The value is unquoted.
struct MegatronSplitFlag {
  std::string key, value;
};
std::optional<MegatronSplitFlag> MegatronEvenSplitFlag(const TrainingConfig& training, int64_t num_layers, int64_t pp, bool megatron);

// A note ("Note       ...", ending in '\n'; "" when none) for a Megatron-convention layout whose split Megatron would
// refuse without a split flag: pp > 1, no pp_layer_split, no pipeline_layout, no account-for flag,
// and num_layers % pp != 0 or (vpp > 1 and some rank's layers % vpp != 0). It names the rule and
// the flag that reproduces dockyard's split: --decoder-first-pipeline-num-layers N (vpp 1, one extra
// layer on the first stage) or --decoder-last-pipeline-num-layers N (vpp 1, one layer fewer on the
// last stage), else --pipeline-model-parallel-layout (EvenSplitPipelineLayout).
std::string MegatronEvenSplitNote(const TrainingConfig& training, int64_t num_layers, int64_t pp, bool megatron);
// The note's sentence alone (no "Note" column, no newline; "" when none), for reports that place it.
std::string MegatronEvenSplitReason(const TrainingConfig& training, int64_t num_layers, int64_t pp, bool megatron);

}  // namespace dockyard
