// The Megatron flag that reproduces dockyard's even split, and when the note is due.
#include "planner/layout/megatron_split.h"

#include <string>
#include <tuple>
#include <vector>

#include <doctest/doctest.h>

#include "planner/layout/plan.h"
#include "planner/model/pipeline_layout.h"

namespace dockyard {
namespace {

std::vector<int64_t> PerRank(const std::vector<int64_t>& layer_stage, int64_t pp) {
  std::vector<int64_t> n(static_cast<size_t>(pp), 0);
  for (int64_t s : layer_stage) ++n[static_cast<size_t>(s)];
  return n;
}

// The layout string parsed and checked as Megatron does (pipeline_layout.h) puts the same number
// of layers on every rank as EvenLayerSplit, with vpp chunks per rank, the embedding on rank 0 and
// the loss and MTP on rank pp - 1.
void CheckRoundTrip(int64_t num_layers, int64_t pp, int64_t vpp, int64_t mtp) {
  const std::string text = EvenSplitPipelineLayout(num_layers, pp, vpp, mtp);
  const PipelineStages s = ResolvePipelineLayout(ParsePipelineLayout(text, "--pipeline-model-parallel-layout"), pp, num_layers, mtp, text,
                                                 "--pipeline-model-parallel-layout");
  CHECK(s.vpp == vpp);
  CHECK(PerRank(s.layer_stage, pp) == PerRank(EvenLayerSplit(num_layers, pp), pp));
  CHECK(s.embedding_stage == 0);
  CHECK(s.loss_stage == pp - 1);
  CHECK(s.mtp_stage == pp - 1);
}

TEST_CASE("Interleaving numbers the layers in virtual-stage order, by hand") {
  // pp 3, vpp 3, 9 layers per rank: 3 per chunk; virtual stage v x 3 + p is rank p's chunk v, so
  // rank 0 holds 0-2 (chunk 0), 9-11 (chunk 1) and 18-20 (chunk 2).
  const auto [stage, chunk] = InterleavedLayerSplit({9, 9, 9}, 3);
  REQUIRE(stage.size() == 27);
  CHECK(std::vector<int64_t>(stage.begin(), stage.begin() + 12) == std::vector<int64_t>{0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 0, 0});
  CHECK(stage[18] == 0);
  CHECK(stage[26] == 2);
  CHECK(chunk[11] == 1);
  CHECK(chunk[18] == 2);
  // 3 layers per rank over 2 chunks: 3 / 2 = 1, the first chunk one more (2 + 1): layers 0-1
  // rank 0, 2-3 rank 1 (chunk 0), 4 rank 0, 5 rank 1 (chunk 1).
  const auto [s2, c2] = InterleavedLayerSplit({3, 3}, 2);
  CHECK(s2 == std::vector<int64_t>{0, 0, 1, 1, 0, 1});
  CHECK(c2 == std::vector<int64_t>{0, 0, 0, 0, 1, 1});
  CHECK(ChunkLayers(3, 2, 0) == 2);
  CHECK(ChunkLayers(3, 2, 1) == 1);
  // vpp 1: the contiguous split.
  CHECK(InterleavedLayerSplit({2, 1}, 1).first == std::vector<int64_t>{0, 0, 1});
}

TEST_CASE("The even split's layout string and the interleaved split place every layer alike") {
  // Qwen3-235B's 94 layers at pp 8, vpp 4 (Megatron runs this split only as a layout) and 61
  // layers at pp 4, vpp 2: the same rank and chunk for each layer either way (one chunk rule,
  // ChunkLayers).
  for (const auto& [layers, pp, vpp] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{94, 8, 4}, {61, 4, 2}, {27, 3, 3}}) {
    CAPTURE(layers);
    const std::string text = EvenSplitPipelineLayout(layers, pp, vpp, 0);
    const PipelineStages s = ResolvePipelineLayout(ParsePipelineLayout(text, "--pipeline-model-parallel-layout"), pp, layers, 0, text,
                                                   "--pipeline-model-parallel-layout");
    const auto [stage, chunk] = InterleavedLayerSplit(PerRank(EvenLayerSplit(layers, pp), pp), vpp);
    CHECK(s.layer_stage == stage);
    CHECK(s.layer_chunk == chunk);
  }
}

TEST_CASE("The even split's Megatron layout string round-trips through the layout parser") {
  // Qwen3-235B-A22B: 94 layers over pp 8 = 6 stages of 12 and 2 of 11.
  CHECK(EvenSplitPipelineLayout(94, 8, 1, 0) == "Et*12|(t*12|)*5t*11|t*11L");
  CheckRoundTrip(94, 8, 1, 0);
  // vpp 2: rank 0's 12 layers as 6 + 6, rank 6's 11 as 6 + 5; one MTP layer before the loss.
  CheckRoundTrip(94, 8, 2, 1);
  // DeepSeek-V3: 61 layers over pp 16 (13 stages of 4, 3 of 3) with vpp 4: chunks of 1 and empty ones.
  CheckRoundTrip(61, 16, 4, 1);
  // 16 layers over pp 4, vpp 3: 4 per rank as 2 + 1 + 1 (virtual stages 0-3 take 2, the rest 1).
  CHECK(EvenSplitPipelineLayout(16, 4, 3, 0) == "Et*2|(t*2|)*3(t|)*7tL");
  CheckRoundTrip(16, 4, 3, 0);
}

TEST_CASE("The note is due when Megatron would refuse the even split, and names the flag") {
  TrainingConfig t;
  // Not Megatron, pp 1, or an even split: no note.
  CHECK(MegatronEvenSplitNote(t, 94, 8, false).empty());
  CHECK(MegatronEvenSplitNote(t, 94, 1, true).empty());
  CHECK(MegatronEvenSplitNote(t, 64, 4, true).empty());
  // 94 % 8 = 6 extra layers: neither first nor last flag suffices, the layout does.
  const std::string note = MegatronEvenSplitNote(t, 94, 8, true);
  CHECK(note.find("num_hidden_layers (94) is not divisible by pp (8)") != std::string::npos);
  CHECK(note.find("6 stage(s) of 12, 2 of 11") != std::string::npos);
  CHECK(note.find("--pipeline-model-parallel-layout \"Et*12|(t*12|)*5t*11|t*11L\"") != std::string::npos);
  // 61 over pp 2 = 31 + 30: the first stage's count alone reproduces it.
  CHECK(MegatronEvenSplitNote(t, 61, 2, true).find("pass --decoder-first-pipeline-num-layers 31\n") != std::string::npos);
  // 63 over pp 4 = 16 + 16 + 16 + 15: the last stage's count (the middle 48 / 3 = 16 each).
  CHECK(MegatronEvenSplitNote(t, 63, 4, true).find("pass --decoder-last-pipeline-num-layers 15\n") != std::string::npos);
  // 60 over pp 4 = 15 per rank, vpp 2: 15 layers do not split into 2 chunks.
  t.run.vpp = 2;
  const std::string vpp_note = MegatronEvenSplitNote(t, 60, 4, true);
  CHECK(vpp_note.find("the 15 layers of each pipeline rank do not divide into vpp (2) model chunks") != std::string::npos);
  CHECK(vpp_note.find("--pipeline-model-parallel-layout \"Et*8|(t*8|)*3(t*7|)*3t*7L\"") != std::string::npos);
  t.run.vpp = 1;
  // A split given (pp_layer_split, a layout, an account-for flag): Megatron has its flags, no note.
  t.pp_layer_split = {48, 46};
  CHECK(MegatronEvenSplitNote(t, 94, 2, true).empty());
  t.pp_layer_split.clear();
  t.run.account_for_loss = true;
  CHECK(MegatronEvenSplitNote(t, 94, 8, true).empty());
}

}  // namespace
}  // namespace dockyard
