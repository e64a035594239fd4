// torchtitan's pipeline layer split (torchtitan/distributed/pipeline_parallel.py at the commit
// planner/frameworks/torchtitan_config.h pins): its stage generator, and which rank runs each
// stage. Read by the plan (the split of an interleaved torchtitan pipeline whose even split leaves a
// model chunk empty) and by the torchtitan job-config reader and writer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dockyard {

// torchtitan's split of `layers` decoder layers over `stages` pipeline stages
// (_generate_llm_fqn_per_model_part): the embedding weighs `first_less` layers on the first stage,
// the norm and output `last_less` on the last, and the layers plus those weights are spread evenly,
// the first stages one more. The layers of each stage; empty, with `error` set, where torchtitan
// raises (more stages than effective layers, a weight above the smallest stage). E.g. (4, 6, 1, 1):
// 8 effective layers, 2 a stage: {1, 2, 2, 1}.
std::vector<int64_t> TorchtitanStageLayers(int64_t stages, int64_t layers, int64_t first_less, int64_t last_less, std::string* error);

// The layers of each of `pp` ranks: virtual stage s runs on rank s % pp (torchtitan's "loop" style,
// Interleaved1F1B; _get_pp_rank_to_stage_indices_mapping).
std::vector<int64_t> TorchtitanRankLayers(const std::vector<int64_t>& stage_layers, int64_t pp);

// torchtitan's top-level module names, as its stage generator lists them
// (_generate_llm_fqn_per_model_part): the embedding, the final norm, the output projection
// ("lm_head"; "output" at the TOML-era commit), and decoder layer i as "layers.i".
inline constexpr const char* kTorchtitanEmbedding = "tok_embeddings";
inline constexpr const char* kTorchtitanNorm = "norm";
inline const char* TorchtitanOutputModule(bool toml_era) { return toml_era ? "output" : "lm_head"; }

}  // namespace dockyard
