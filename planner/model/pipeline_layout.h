// Megatron-Core pipeline layer layouts: which pipeline rank holds each decoder layer, the
// embedding, the loss (final norm + lm_head + cross-entropy) and the MTP modules, from
//  - a layout string, Megatron --pipeline-model-parallel-layout (e.g. "Et|(tt|)*30mL"), with the
//    grammar of PipelineParallelLayerLayout.parse_str_to_list and the checks of its __init__ and
//    validate_layer_layout (NVIDIA/Megatron-LM megatron/core/transformer/pipeline_parallel_layer_layout.py);
//  - the even split with the embedding and / or the loss counted as one layer each, Megatron
//    --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split
//    (megatron/core/transformer/transformer_block.py get_num_layers_to_build and the divisibility
//    checks of transformer_config.py __post_init__).
// Both give a list of pp x vpp virtual stages; virtual stage k runs on pipeline rank k % pp as its
// model chunk k / pp (Megatron: layout[pp_rank][vpp_rank] = stages[vpp_rank * pp + pp_rank]), and
// layers are numbered in virtual-stage order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dockyard {

// One entry of a layout string: E embedding, t decoder ("transformer") layer, m MTP layer, L loss.
enum class PipeLayer : char { kEmbedding = 'E', kDecoder = 't', kMtp = 'm', kLoss = 'L' };

struct LayoutToken {
  PipeLayer layer = PipeLayer::kDecoder;
  int64_t position = 0;  // 0-based character of the flag's string it came from (-1: not from a string)
};
using VirtualStages = std::vector<std::vector<LayoutToken>>;  // [pp x vpp][layers of that stage]

// Megatron's parse_str_to_list: commas are dropped (cosmetic); "(X)*N" repeats X (one or more
// characters other than ')') N times, then "c*N" repeats the single character c N times, both
// left to right without nesting; '|' separates stages (empty stages allowed); every other
// character must be E, t, m or L. The unrolled string is limited to 1,000,000 characters (a bound
// of dockyard's, not Megatron's). Throws dockyard::Error naming `flag`, the string, the
// 0-based position of the offending character and the rule.
VirtualStages ParsePipelineLayout(const std::string& text, const std::string& flag);

// Where the layers of a pipeline sit, per physical pipeline rank.
struct PipelineStages {
  std::vector<int64_t> layer_stage;  // [num_hidden_layers]: pipeline rank of each decoder layer
  int64_t embedding_stage = 0;       // rank holding the word embedding
  int64_t loss_stage = 0;            // rank holding the final norm, lm_head and the loss
  int64_t mtp_stage = 0;             // rank holding the MTP modules (loss_stage when there are none)
  int64_t vpp = 1;                   // model chunks per rank: virtual stages / pp
  // [num_hidden_layers]: the model chunk on its rank of each decoder layer (virtual stage / pp);
  // filled from a layout's virtual stages or an interleaved split (vpp > 1), empty at vpp 1.
  std::vector<int64_t> layer_chunk;
};

// Checks `stages` (from ParsePipelineLayout of `text`) as Megatron does and places the layers:
//  - the number of stages is a multiple of pp (PipelineParallelLayerLayout.__init__);
//  - the first layer is E and the last is L, each exactly once; exactly num_layers t and
//    mtp_layers m; no t after the first m; m only in the last model chunk of a rank and all m in
//    one virtual stage (validate_layer_layout; its "not in the first pp rank" check looks at the
//    chunks before the last only, which the first rule already covers).
// Throws dockyard::Error naming `flag`, the string, the position where there is one and the rule.
PipelineStages ResolvePipelineLayout(const VirtualStages& stages, int64_t pp, int64_t num_layers, int64_t mtp_layers,
                                     const std::string& text, const std::string& flag);

// The virtual stages of Megatron's even split with --account-for-embedding-in-pipeline-split
// (`embedding`) and / or --account-for-loss-in-pipeline-split (`loss`): num_layers + embedding +
// loss units must be divisible by pp and the units per rank by vpp; every one of the pp x vpp
// virtual stages gets (num_layers + embedding + loss) / (pp vpp) units, the first stage's first
// unit being the embedding and the last stage's last unit the loss when counted. An uncounted
// embedding (loss) rides on the first (last) stage; MTP modules on the last stage
// (transformer_block.py get_num_layers_to_build, transformer_config.py __post_init__).
// Throws dockyard::Error naming the flags and the divisibility rule broken.
VirtualStages AccountForLayout(int64_t num_layers, int64_t pp, int64_t vpp, bool embedding, bool loss, int64_t mtp_layers);

}  // namespace dockyard
