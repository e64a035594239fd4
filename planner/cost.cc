// Cost model (see cost.h and docs/cost-model.md).
#include "planner/cost.h"

#include <algorithm>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "planner/comm.h"
#include "planner/error.h"
#include "planner/memory.h"
#include "planner/workload.h"

namespace dockyard {

namespace {

// Unit conversions: GB/s -> bytes per microsecond, TFLOP/s -> FLOP per microsecond.
constexpr double kBytesPerUsPerGbps = 1e3;
constexpr double kFlopsPerUsPerTflops = 1e6;

bool SpansNodes(const std::vector<int64_t>& group, int64_t gpus_per_node) {
  for (int64_t r : group) {
    if (r / gpus_per_node != group.front() / gpus_per_node) return true;
  }
  return false;
}

}  // namespace

double GroupedGemmEfficiency(double rows, const CostOptions& o) {
  if (rows <= 0) return o.gemm_max_efficiency;
  return o.gemm_max_efficiency * rows / (rows + o.gemm_half_rows);
}

double RingCollectiveUs(double bytes, const std::vector<int64_t>& group, const ClusterSpec& c) {
  const double n = static_cast<double>(group.size());
  if (group.size() < 2 || bytes <= 0) return 0.0;
  const bool inter = SpansNodes(group, c.gpus_per_node);
  const double bw = (inter ? c.network_gbps : c.intra_node_gbps) * kBytesPerUsPerGbps;
  const double alpha = inter ? c.network_latency_us : c.intra_node_latency_us;
  return (n - 1) * (alpha + bytes / n / bw);
}

std::vector<double> AllToAllTimesUs(const std::vector<double>& bytes, const std::vector<int64_t>& group,
                                    const ClusterSpec& c) {
  const size_t n = group.size();
  if (bytes.size() != n * n) throw Error(fmt::format("all-to-all matrix has {} cells for a group of {}", bytes.size(), n));
  std::vector<double> times(n, 0.0);
  if (n < 2) return times;
  const double intra = c.intra_node_gbps * kBytesPerUsPerGbps, inter = c.network_gbps * kBytesPerUsPerGbps;
  for (size_t r = 0; r < n; ++r) {
    double send_intra = 0, send_inter = 0, recv_intra = 0, recv_inter = 0;
    bool remote = false;
    for (size_t d = 0; d < n; ++d) {
      if (d == r) continue;
      const bool same = group[r] / c.gpus_per_node == group[d] / c.gpus_per_node;
      remote = remote || !same;
      (same ? send_intra : send_inter) += bytes[r * n + d];
      (same ? recv_intra : recv_inter) += bytes[d * n + r];
    }
    // NVLink and the NIC are separate links: the busiest one decides.
    const double t = std::max({send_intra / intra, recv_intra / intra, send_inter / inter, recv_inter / inter});
    times[r] = (remote ? c.network_latency_us : c.intra_node_latency_us) + t;
  }
  return times;
}

CostBreakdown SimulateStep(const Plan& plan, const ClusterSpec& c, const RoutingResult& routing, const CostOptions& o) {
  const auto& m = plan.model;
  const auto& a = m.attention;
  const auto& d = plan.dims;
  const auto& t = plan.training;
  const Workload w = ComputeWorkload(plan);
  if (d.ep > 1 && (routing.ep != d.ep || routing.num_experts != m.moe.num_experts || routing.layers.empty())) {
    throw Error(fmt::format("routing was sampled for ep {} and {} experts, the plan has ep {} and {} experts", routing.ep,
                            routing.num_experts, d.ep, m.moe.num_experts));
  }
  const double peak = c.dense_bf16_tflops * kFlopsPerUsPerTflops;  // FLOP per microsecond
  const double hbm = c.hbm_gbps * kBytesPerUsPerGbps;
  const double T = static_cast<double>(w.tokens), Tr = static_cast<double>(w.routed_tokens);
  const double D = static_cast<double>(m.hidden_size), ab = static_cast<double>(w.act_bytes);
  const double tp = static_cast<double>(d.tp), k = static_cast<double>(m.moe.top_k);
  const double E = static_cast<double>(m.moe.num_experts);
  CostBreakdown out;

  // Attention: projections from the parameter count of one layer, core from the context.
  double attn_params = 0;
  for (const auto& p : plan.inventory.params) {
    if (p.layer == 0 && RoleGroup(p.role) == std::string("attention")) attn_params += static_cast<double>(p.Numel());
  }
  const double heads_local = a.num_attention_heads / tp;
  const double d_qk = a.kind == AttentionKind::kMla ? a.qk_nope_head_dim + a.qk_rope_head_dim : a.head_dim;
  const double d_v = a.kind == AttentionKind::kMla ? a.v_head_dim : a.head_dim;
  // Causal attention: each of the T local tokens attends on average to half of the sequence.
  const double core_flops = 2.0 * T * (t.seq_len / 2.0) * heads_local * (d_qk + d_v);
  const double attention_us = 2.0 * T * attn_params / tp / (peak * o.dense_efficiency) + core_flops / (peak * o.attention_efficiency);

  // Groups of the slowest ranks.
  const auto tp_group = plan.meshes.dense.GroupOf(0, plan.meshes.dense.AxisIndex("tp"));
  const int ep_axis = plan.meshes.sparse.AxisIndex("ep");
  const auto ep_group = plan.meshes.sparse.GroupOf(0, ep_axis);
  const double tp_collective = RingCollectiveUs(T * D * ab, tp_group, c);

  // FSDP per layer: all-gather of the layer's parameters forward and backward, reduce-scatter of
  // its gradients, overlapped with compute (the layer takes the longer of the two).
  double fsdp_fwd_moe = 0, fsdp_bwd_moe = 0, fsdp_fwd_dense = 0, fsdp_bwd_dense = 0;
  if (*t.dp_sharding == DpSharding::kFsdp) {
    const int64_t param_b = DtypeBytes(t.param_dtype, "param_dtype"), grad_b = DtypeBytes(t.grad_dtype, "grad_dtype");
    auto dp_group = [&](bool sparse) {
      const Mesh& mesh = sparse ? plan.meshes.sparse : plan.meshes.dense;
      std::vector<int64_t> g = {0};
      for (const char* name : sparse ? std::vector<const char*>{"efsdp", "edp"} : std::vector<const char*>{"dp_shard", "dp", "cp"}) {
        const int ax = mesh.AxisIndex(name);
        if (ax < 0) continue;
        std::vector<int64_t> next;
        for (int64_t r : g) for (int64_t x : mesh.GroupOf(r, ax)) next.push_back(x);
        g = next;
      }
      std::sort(g.begin(), g.end());
      g.erase(std::unique(g.begin(), g.end()), g.end());
      return g;
    };
    const auto dense_dp = dp_group(false), sparse_dp = dp_group(true);
    for (int kind = 0; kind < 2; ++kind) {
      const bool moe = kind == 0;
      int64_t layer = -1;
      for (int64_t l = 0; l < m.num_hidden_layers && layer < 0; ++l) if (m.moe_layers[l] == moe) layer = l;
      if (layer < 0) continue;
      double dense_elems = 0, sparse_elems = 0;
      for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
        const auto& p = plan.inventory.params[i];
        if (p.layer != layer) continue;
        // FSDP gathers the model-parallel shard back (rank 0 holds the largest one).
        (plan.placements[i].sparse_mesh ? sparse_elems : dense_elems) += static_cast<double>(ModelParallelNumel(plan, i, 0));
      }
      const double fwd = RingCollectiveUs(dense_elems * param_b, dense_dp, c) + RingCollectiveUs(sparse_elems * param_b, sparse_dp, c);
      const double bwd = fwd + RingCollectiveUs(dense_elems * grad_b, dense_dp, c) + RingCollectiveUs(sparse_elems * grad_b, sparse_dp, c);
      (moe ? fsdp_fwd_moe : fsdp_fwd_dense) = fwd;
      (moe ? fsdp_bwd_moe : fsdp_bwd_dense) = bwd;
    }
  }

  // `us` is the phase time; `per_rank` (routing-dependent phases) is shown per EP rank.
  auto add = [&](const std::string& name, const std::string& kind, const std::string& dir, double us,
                 std::vector<double> per_rank = {}) {
    PhaseCost p;
    p.name = name;
    p.layer_kind = kind;
    p.direction = dir;
    p.time_us = us;
    if (!per_rank.empty()) {
      auto it = std::max_element(per_rank.begin(), per_rank.end());
      p.slowest_ep_rank = it - per_rank.begin();
      p.per_ep_rank_us = std::move(per_rank);
    }
    out.phases.push_back(std::move(p));
    return out.phases.back().time_us;
  };

  // --- MoE layer over the sampled routing layers. Every layer is a synchronization point, so a
  // phase's time is the mean over layers of that layer's slowest rank; per-rank figures are the
  // per-rank means (for display).
  const int64_t ep = d.ep;
  const int64_t nle = m.moe.num_experts / ep;
  const double f_local = static_cast<double>(w.expert_f_local);
  const bool deredundency = ep > 1 && t.dispatcher == "deredundency";
  const int64_t oep = deredundency ? routing.oep : 1;
  const int64_t iep = ep / std::max<int64_t>(1, oep);
  if (deredundency && routing.oep != DeredundencyOep(plan)) {
    throw Error(fmt::format("routing was sampled for oep {}, the plan's deredundency dispatcher uses oep {}", routing.oep,
                            DeredundencyOep(plan)));
  }
  std::vector<double> permute(ep, 0), dispatch(ep, 0), gemm(ep, 0), combine(ep, 0);
  double permute_max = 0, dispatch_max = 0, gemm_max = 0, combine_max = 0;
  double imbalance = 1.0;
  const size_t nlayers = std::max<size_t>(1, routing.layers.size());
  for (size_t li = 0; li < nlayers; ++li) {
    std::vector<double> rows(nle * ep, 0.0), received(ep, 0.0);
    std::vector<double> dt(ep, 0.0), ct(ep, 0.0);
    if (ep > 1) {
      const auto& L = routing.layers[li];
      for (int64_t i = 0; i < ep * nle; ++i) rows[i] = static_cast<double>(L.rows_per_local_expert[i]);
      for (int64_t r = 0; r < ep; ++r) received[r] = static_cast<double>(L.received[r]);
      imbalance = std::max(imbalance, L.imbalance);
      if (!deredundency) {
        std::vector<double> dbytes(ep * ep), cbytes(ep * ep);
        for (int64_t src = 0; src < ep; ++src) {
          for (int64_t dst = 0; dst < ep; ++dst) {
            dbytes[src * ep + dst] = static_cast<double>(L.dispatch[src * ep + dst]) * D * ab;
            cbytes[dst * ep + src] = dbytes[src * ep + dst];  // combine returns what dispatch sent
          }
        }
        dt = AllToAllTimesUs(dbytes, ep_group, c);
        ct = AllToAllTimesUs(cbytes, ep_group, c);
      } else {
        // Deredundency (ep = oep x iep, inner index fastest): all-gather of every rank's T_r*k
        // routed rows over its oep group, then an all-to-all inside its iep group (iep_dispatch
        // matrix); combine mirrors it with a reduce-scatter over oep.
        for (int64_t o = 0; o < oep; ++o) {
          std::vector<int64_t> iep_ranks;
          std::vector<double> bytes(iep * iep);
          for (int64_t i = 0; i < iep; ++i) iep_ranks.push_back(ep_group[o * iep + i]);
          for (int64_t i = 0; i < iep; ++i) {
            for (int64_t j = 0; j < iep; ++j) {
              bytes[i * iep + j] = static_cast<double>(L.iep_dispatch[(o * iep + i) * iep + j]) * D * ab;
            }
          }
          std::vector<double> back(iep * iep);
          for (int64_t i = 0; i < iep; ++i) for (int64_t j = 0; j < iep; ++j) back[j * iep + i] = bytes[i * iep + j];
          const auto a2a = AllToAllTimesUs(bytes, iep_ranks, c);
          const auto a2a_back = AllToAllTimesUs(back, iep_ranks, c);
          for (int64_t i = 0; i < iep; ++i) {
            std::vector<int64_t> oep_ranks;
            for (int64_t x = 0; x < oep; ++x) oep_ranks.push_back(ep_group[x * iep + i]);
            const double gathered = static_cast<double>(oep) * Tr * k * D * ab;
            const double ring = RingCollectiveUs(gathered, oep_ranks, c);
            dt[o * iep + i] = ring + a2a[i];
            ct[o * iep + i] = a2a_back[i] + ring;
          }
        }
      }
    } else {
      // EP off: every rank computes all experts on its own T_r tokens, spread evenly.
      for (int64_t e = 0; e < nle; ++e) rows[e] = Tr * k / E;
      received[0] = Tr * k;
    }
    double pm = 0, dm = 0, gm = 0, cm = 0;
    for (int64_t r = 0; r < ep; ++r) {
      double g = 0;
      for (int64_t e = 0; e < nle; ++e) {
        const double M = rows[r * nle + e];
        g += 6.0 * M * D * f_local / (peak * GroupedGemmEfficiency(M, o));
      }
      const double pr = 2.0 * (Tr * k + received[r]) * D * ab / hbm + o.memory_floor_us;
      gemm[r] += g / nlayers;
      permute[r] += pr / nlayers;
      dispatch[r] += dt[r] / nlayers;
      combine[r] += ct[r] / nlayers;
      gm = std::max(gm, g);
      pm = std::max(pm, pr);
      dm = std::max(dm, dt[r]);
      cm = std::max(cm, ct[r]);
    }
    permute_max += pm / nlayers;
    dispatch_max += dm / nlayers;
    gemm_max += gm / nlayers;
    combine_max += cm / nlayers;
  }
  out.routing_imbalance = imbalance;
  const double router_us = std::max(2.0 * Tr * D * E / (peak * o.dense_efficiency), o.memory_floor_us);
  const double shared_us = m.moe.num_shared_experts > 0
                               ? 6.0 * T * D * m.moe.shared_expert_intermediate_size / tp / (peak * o.dense_efficiency)
                               : 0.0;
  // Backward computes input and weight gradients (2x the forward FLOPs); with full
  // recomputation it first re-runs the forward, communication included (3x compute, 2x comm).
  const bool full_recompute = t.recompute == Recompute::kFull;
  const double bwd_compute = full_recompute ? 3.0 : 2.0, bwd_comm = full_recompute ? 2.0 : 1.0;
  double moe_fwd = 0, moe_bwd = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const std::string dir = pass == 0 ? "forward" : "backward";
    const double mult = pass == 0 ? 1.0 : bwd_compute;
    const double cmult = pass == 0 ? 1.0 : bwd_comm;
    auto scaled = [](std::vector<double> v, double f) { for (auto& x : v) x *= f; return v; };
    double sum = 0;
    sum += add("attention", "moe", dir, attention_us * mult);
    sum += add("tp_comm", "moe", dir, 4 * tp_collective * cmult);
    sum += add("router", "moe", dir, router_us * mult);
    sum += add("permute", "moe", dir, permute_max * cmult, scaled(permute, cmult));
    sum += add("dispatch", "moe", dir, dispatch_max * cmult, scaled(dispatch, cmult));
    sum += add("grouped_gemm", "moe", dir, gemm_max * mult, scaled(gemm, mult));
    sum += add("unpermute", "moe", dir, permute_max * cmult, scaled(permute, cmult));
    const double comb = add("combine", "moe", dir, combine_max * cmult, scaled(combine, cmult));
    const double shared = add("shared_experts", "moe", dir, shared_us * mult);
    sum += o.overlap_shared_experts ? std::max(comb, shared) : comb + shared;
    const double fsdp = add("fsdp_comm", "moe", dir, pass == 0 ? fsdp_fwd_moe : fsdp_bwd_moe);
    (pass == 0 ? moe_fwd : moe_bwd) = std::max(sum, fsdp);
  }
  out.moe_layer_us = moe_fwd + moe_bwd;

  // --- Dense layer.
  const double dense_mlp_us = m.intermediate_size > 0 ? 6.0 * T * D * m.intermediate_size / tp / (peak * o.dense_efficiency) : 0.0;
  const bool has_dense = m.NumMoeLayers() < m.num_hidden_layers;
  double dense_fwd = 0, dense_bwd = 0;
  if (has_dense) {
    for (int pass = 0; pass < 2; ++pass) {
      const std::string dir = pass == 0 ? "forward" : "backward";
      const double mult = pass == 0 ? 1.0 : bwd_compute;
      const double cmult = pass == 0 ? 1.0 : bwd_comm;
      double sum = add("attention", "dense", dir, attention_us * mult) + add("tp_comm", "dense", dir, 4 * tp_collective * cmult) +
                   add("dense_mlp", "dense", dir, dense_mlp_us * mult);
      const double fsdp = add("fsdp_comm", "dense", dir, pass == 0 ? fsdp_fwd_dense : fsdp_bwd_dense);
      (pass == 0 ? dense_fwd : dense_bwd) = std::max(sum, fsdp);
    }
  }
  out.dense_layer_us = dense_fwd + dense_bwd;

  // --- Stages, pipeline, data-parallel step communication, optimizer.
  const double lm_head_us = 3.0 * 2.0 * T * D * m.vocab_size / tp / (peak * o.dense_efficiency);
  double worst_stage = 0;
  int64_t slowest_stage = 0;
  for (int64_t s = 0; s < d.pp; ++s) {
    double stage = s == d.pp - 1 ? lm_head_us : 0.0;
    for (int64_t l = 0; l < m.num_hidden_layers; ++l) {
      if (plan.layer_stage[l] == s) stage += m.moe_layers[l] ? out.moe_layer_us : out.dense_layer_us;
    }
    if (stage > worst_stage) {
      worst_stage = stage;
      slowest_stage = s;
    }
  }
  const double M = static_cast<double>(t.num_microbatches.value_or(d.pp));
  out.stage_microbatch_us = worst_stage;
  out.pipeline_bubble_us = (d.pp - 1) * worst_stage;
  const CommReport comm = ComputeComm(plan, 0);
  for (const auto& e : comm.entries) {
    if (e.phase != "step") continue;
    // Step-end collectives are not overlapped with compute in this model.
    const double bw = (e.cross_node_bytes > 0 ? c.network_gbps : c.intra_node_gbps) * kBytesPerUsPerGbps;
    out.dp_step_comm_us += static_cast<double>(e.wire_bytes) / bw +
                           (e.cross_node_bytes > 0 ? c.network_latency_us : c.intra_node_latency_us) * (e.group_size - 1);
  }
  const MemoryBreakdown mem = StaticMemoryOnRank(plan, 0);
  out.optimizer_us = 2.0 * static_cast<double>(mem.params_bytes + mem.grads_bytes + mem.optimizer_bytes) / hbm;
  out.step_time_us = (M + d.pp - 1) * worst_stage + out.dp_step_comm_us + out.optimizer_us;

  const double global_tokens = M * t.micro_batch_size * t.seq_len * d.dp_replicate * d.dp_shard;
  out.tokens_per_s_per_gpu = global_tokens / (out.step_time_us * 1e-6) / d.world_size;
  const auto& tot = plan.inventory.totals;
  const double active_no_embed = static_cast<double>(tot.active_params_excluding_embedding);
  const double attn_core_per_token = 3.0 * 2.0 * (t.seq_len / 2.0) * a.num_attention_heads * (d_qk + d_v) * m.num_hidden_layers;
  const double model_flops = global_tokens * (6.0 * active_no_embed + attn_core_per_token);
  out.mfu = model_flops / (out.step_time_us * 1e-6 * d.world_size * c.dense_bf16_tflops * 1e12);

  // Critical path: every contributor to the step by its share of it. Layer phases count once per
  // layer of the slowest stage per pipeline slot (M + pp - 1 slots); then the step-end terms.
  std::map<std::string, double> share;
  int64_t moe_count = 0, dense_count = 0;
  for (int64_t l = 0; l < m.num_hidden_layers; ++l) {
    if (plan.layer_stage[l] != slowest_stage) continue;
    (m.moe_layers[l] ? moe_count : dense_count)++;
  }
  const double slots = M + d.pp - 1;
  for (const auto& p : out.phases) {
    share[p.name] += p.time_us * static_cast<double>(p.layer_kind == "moe" ? moe_count : dense_count) * slots;
  }
  if (slowest_stage == d.pp - 1) share["lm_head"] += lm_head_us * slots;
  share["dp_step_comm"] += out.dp_step_comm_us;
  share["optimizer"] += out.optimizer_us;
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [n, v] : share) ranked.push_back({v, n});
  std::sort(ranked.rbegin(), ranked.rend());
  for (const auto& [v, n] : ranked) if (v > 0) out.critical_path.push_back(n);
  out.dominant_phase = out.critical_path.empty() ? "" : out.critical_path.front();
  return out;
}

Json CostToJson(const CostBreakdown& cost) {
  Json phases = Json::array();
  for (const auto& p : cost.phases) {
    Json j = {{"name", p.name}, {"layer_kind", p.layer_kind}, {"direction", p.direction}, {"time_us", p.time_us}};
    if (!p.per_ep_rank_us.empty()) {
      j["slowest_ep_rank"] = p.slowest_ep_rank;
      j["per_ep_rank_us"] = p.per_ep_rank_us;
    }
    phases.push_back(std::move(j));
  }
  return Json{{"kind", "predicted"},
              {"phases", phases},
              {"moe_layer_us", cost.moe_layer_us},
              {"dense_layer_us", cost.dense_layer_us},
              {"stage_microbatch_us", cost.stage_microbatch_us},
              {"pipeline_bubble_us", cost.pipeline_bubble_us},
              {"dp_step_comm_us", cost.dp_step_comm_us},
              {"optimizer_us", cost.optimizer_us},
              {"step_time_us", cost.step_time_us},
              {"tokens_per_s_per_gpu", cost.tokens_per_s_per_gpu},
              {"mfu", cost.mfu},
              {"routing_imbalance", cost.routing_imbalance},
              {"critical_path", cost.critical_path},
              {"dominant_phase", cost.dominant_phase}};
}

std::string CostToText(const CostBreakdown& cost) {
  std::ostringstream out;
  out << fmt::format("Predicted  step {:.1f} ms, {:.0f} tokens/s per GPU, MFU {:.1f}%, dominant phase: {} (routing imbalance {:.2f})\n",
                     cost.step_time_us / 1e3, cost.tokens_per_s_per_gpu, 100.0 * cost.mfu, cost.dominant_phase,
                     cost.routing_imbalance);
  out << fmt::format("  per layer and micro-batch, slowest rank (us)\n  {:<16} {:<6} {:>12} {:>12}\n", "phase", "layer",
                     "forward", "backward");
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> rows;
  std::vector<std::pair<std::string, std::string>> order;
  for (const auto& p : cost.phases) {
    auto key = std::make_pair(p.layer_kind, p.name);
    if (!rows.count(key)) order.push_back(key);
    (p.direction == "forward" ? rows[key].first : rows[key].second) = p.time_us;
  }
  for (const auto& key : order) {
    out << fmt::format("  {:<16} {:<6} {:>12.1f} {:>12.1f}\n", key.second, key.first, rows[key].first, rows[key].second);
  }
  out << fmt::format("  MoE layer {:.1f} us, dense layer {:.1f} us (fwd+bwd); slowest stage {:.1f} us per micro-batch; "
                     "bubble {:.1f} us; step-end DP comm {:.1f} us; optimizer {:.1f} us\n",
                     cost.moe_layer_us, cost.dense_layer_us, cost.stage_microbatch_us, cost.pipeline_bubble_us,
                     cost.dp_step_comm_us, cost.optimizer_us);
  return out.str();
}

}  // namespace dockyard
