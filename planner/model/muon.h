// Muon (Megatron-LM --optimizer muon, the emerging_optimizers package; Kimi-K2 and Moonlight train
// with it): the 2-D weight matrices are updated by momentum SGD whose update is orthogonalized by
// a few Newton-Schulz iterations; every other parameter (embeddings, the output layer, norms,
// biases) by the scalar optimizer, Adam (--muon-scalar-optimizer adam, the default).
//
//  - Which parameters: megatron/core/optimizer/layer_wise_optimizer.py
//    is_managed_by_layer_wise_optimizer: 2-D, not embedding or output. dockyard's role groups
//    (inventory.h RoleGroup) attention, dense_mlp, router, routed_experts, shared_experts and the
//    MTP modules' (mtp) are Muon's; embedding, lm_head and norm are Adam's (the few 1-D tensors
//    inside the Muon groups -- q/k norms, biases -- are counted with them).
//  - State: one momentum buffer per Muon element (--muon-momentum 0.9) in the optimizer-state
//    dtype (fp32, or bf16 with --optimizer-states-dtype bfloat16), beside the fp32 master as
//    for Adam; Adam's two moments for the rest (workload.h TrainingBytes).
//  - Work: --muon-num-ns-steps (5) Newton-Schulz steps per matrix X (m x n, m <= n after a
//    transpose): A = X X^T (2 m^2 n FLOP), B = b A + c A A (2 m^3), X = a X + B X (2 m^2 n), with
//    matmuls at BF16 speed (--muon-fp32-matmul-prec medium). Under the distributed optimizer the
//    layer-wise optimizer gives each data-parallel rank whole matrices, about its share of them;
//    with tensor parallelism each TP rank orthogonalizes the whole matrix (--muon-tp-mode
//    duplicated, the default). Fused QKV is split into q, k, v (--muon-split-qkv, the default);
//    the experts' fc1 (gate | up) is one [2F, D] matrix per expert.
#pragma once

#include <string_view>
#include <vector>

#include "planner/model/model_spec.h"
#include "planner/model/training.h"

namespace dockyard {

// Megatron's default --muon-num-ns-steps.
constexpr int kMuonNewtonSchulzSteps = 5;

// Whether the parameters of role group `group` are Muon's (above).
bool MuonManagedGroup(std::string_view group);

// One kind of Muon matrix of the model, unsharded: `rows` x `cols` elements, `count` of them.
struct MuonMatrix {
  double rows = 0, cols = 0, count = 0;
};
// Every Muon matrix of `model` (decoder layers, dense and MoE, and its MTP modules): attention
// (GQA: q [H hd, D], k and v [KV hd, D], o [D, H hd]; MLA: q_a [q_lora, D] and q_b [H (dn + dr),
// q_lora] or q [H (dn + dr), D], kv_a [kv_lora + dr, D], kv_b [H (dn + dv), kv_lora], o [D, H dv]),
// dense MLP [2F, D] and [D, F], router [E, D], routed experts E x ([2f, D], [D, f]), shared
// experts [2 fs, D] and [D, fs]; each MTP module adds eh_proj [D, 2D] and a copy of the last layer's.
std::vector<MuonMatrix> MuonMatrices(const ModelSpec& model, int64_t mtp_layers);

// Newton-Schulz FLOPs of one such matrix for `steps` steps: steps x (4 m^2 n + 2 m^3), m = min.
double NewtonSchulzFlops(const MuonMatrix& matrix, int steps);

// Checks the optimizer against the run: Muon under --convention megatron only (torchtitan's
// optimizers are Adam / AdamW) and not under FSDP (Megatron-FSDP's Muon is not modelled). Throws
// dockyard::Error naming "optimizer", the value and the rule.
void ValidateMuon(const TrainingConfig& training, bool megatron);

}  // namespace dockyard
