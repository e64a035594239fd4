// Muon's parameters and Newton-Schulz work (see muon.h).
#include "planner/model/muon.h"

#include <algorithm>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

bool MuonManagedGroup(std::string_view g) {
  return g == "attention" || g == "dense_mlp" || g == "router" || g == "routed_experts" || g == "shared_experts" || g == "mtp";
}

namespace {

// The Muon matrices of one decoder layer (dense or MoE), appended to `out` `times` times.
void AddLayer(const ModelSpec& m, bool moe, double times, std::vector<MuonMatrix>& out) {
  const auto& a = m.attention;
  const double D = static_cast<double>(m.hidden_size), H = static_cast<double>(a.num_attention_heads);
  auto add = [&](double rows, double cols, double count) {
    if (rows > 0 && cols > 0 && count > 0) out.push_back({rows, cols, count * times});
  };
  if (a.kind == AttentionKind::kMla) {
    const double dn = static_cast<double>(a.qk_nope_head_dim), dr = static_cast<double>(a.qk_rope_head_dim);
    const double dv = static_cast<double>(a.v_head_dim), ql = static_cast<double>(a.q_lora_rank);
    const double kvl = static_cast<double>(a.kv_lora_rank);
    if (a.q_lora_rank > 0) {
      add(ql, D, 1);
      add(H * (dn + dr), ql, 1);
    } else {
      add(H * (dn + dr), D, 1);
    }
    add(kvl + dr, D, 1);
    add(H * (dn + dv), kvl, 1);
    add(D, H * dv, 1);
  } else {
    const double hd = static_cast<double>(a.head_dim), kv = static_cast<double>(a.num_key_value_heads);
    add(H * hd, D, 1);
    add(kv * hd, D, 2);
    add(D, H * hd, 1);
  }
  if (!moe) {
    const double F = static_cast<double>(m.intermediate_size);
    add(2 * F, D, 1);
    add(D, F, 1);
    return;
  }
  const double E = static_cast<double>(m.moe.num_experts), f = static_cast<double>(m.moe.moe_intermediate_size);
  add(E, D, 1);
  add(2 * f, D, E);
  add(D, f, E);
  if (m.moe.num_shared_experts > 0) {
    const double fs = static_cast<double>(m.moe.shared_expert_intermediate_size);
    add(2 * fs, D, 1);
    add(D, fs, 1);
  }
}

}  // namespace

std::vector<MuonMatrix> MuonMatrices(const ModelSpec& m, int64_t mtp_layers) {
  std::vector<MuonMatrix> out;
  int64_t moe_layers = 0;
  for (bool moe : m.moe_layers) moe_layers += moe ? 1 : 0;
  const int64_t dense_layers = m.num_hidden_layers - moe_layers;
  if (dense_layers > 0) AddLayer(m, false, static_cast<double>(dense_layers), out);
  if (moe_layers > 0) AddLayer(m, true, static_cast<double>(moe_layers), out);
  if (mtp_layers > 0) {
    const double D = static_cast<double>(m.hidden_size);
    out.push_back({D, 2 * D, static_cast<double>(mtp_layers)});  // eh_proj
    AddLayer(m, !m.moe_layers.empty() && m.moe_layers.back(), static_cast<double>(mtp_layers), out);
  }
  return out;
}

double NewtonSchulzFlops(const MuonMatrix& x, int steps) {
  const double mm = std::min(x.rows, x.cols), n = std::max(x.rows, x.cols);
  return static_cast<double>(steps) * (4.0 * mm * mm * n + 2.0 * mm * mm * mm);
}

void ValidateMuon(const TrainingConfig& t, bool megatron) {
  if (t.optimizer != Optimizer::kMuon) return;
  if (!megatron) {
    throw Error("optimizer: \"muon\" is Megatron-LM's (--optimizer muon); torchtitan's optimizers are Adam / AdamW (use --convention megatron)");
  }
  if (t.dp_sharding && *t.dp_sharding == DpSharding::kFsdp) {
    throw Error(
        "optimizer: \"muon\" with dp_sharding fsdp: Megatron-FSDP's Muon is not modelled; Muon runs under the distributed optimizer "
        "(dp_sharding zero1, Megatron's layer-wise optimizer) or ddp");
  }
}

}  // namespace dockyard
