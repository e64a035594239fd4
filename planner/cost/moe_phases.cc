// The routing-dependent MoE phases (see moe_phases.h and docs/cost-model.md).
#include "planner/cost/moe_phases.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/cost/deepep.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/cost/kernels_model.h"
#include "planner/cost/network.h"
#include "planner/routing/flex_counts.h"
#include "planner/cost/units.h"

namespace dockyard {

namespace {

constexpr double kFlopsPerUsPerTflops = 1e6;

// The dispatch (dt) and combine (ct) all-to-all times of one sampled layer without the O(ep^2)
// floating-point sums, when that changes no bit. Every cell of the byte matrices is
// count * D * ab with integer factors; if every row and column total of counts times D * ab is
// below 2^53, every cell and every partial sum AllToAllTimesUs forms is an exact integer, so its
// four sums per rank equal (integer sum of counts) * D * ab in any order: the same-node part is a
// short sum over the rank's node block (members are sorted, so a node's members are
// consecutive), the other-node part the row (column) total minus it and the diagonal. Returns
// false, computing nothing, when the bound or the ordering does not hold.
bool BlockAllToAll(const LayerRouting& L, const std::vector<int64_t>& node, double D, double ab, const ClusterSpec& c, double* dt,
                   double* ct) {
  const size_t n = node.size();
  for (size_t r = 1; r < n; ++r) {
    if (node[r] < node[r - 1]) return false;
  }
  std::vector<int64_t> row_total(n, 0);
  int64_t largest = 0;
  for (size_t r = 0; r < n; ++r) {
    int64_t sum = 0;
    for (size_t d = 0; d < n; ++d) sum += L.dispatch[r * n + d];  // counts: each <= T_r * top_k
    row_total[r] = sum;
    largest = std::max({largest, sum, L.received[r]});
  }
  if (!(static_cast<double>(largest) * D * ab < 9007199254740992.0)) return false;  // 2^53
  const double intra = IntraNodeAllToAllGbps(c) * kBytesPerUsPerGbps, inter = c.knobs.links.network_gbps * kBytesPerUsPerGbps;
  auto bytes = [&](int64_t count) { return static_cast<double>(count) * D * ab; };
  size_t begin = 0;
  for (size_t r = 0; r < n; ++r) {
    if (node[r] != node[begin]) begin = r;
    size_t end = r + 1;
    while (end < n && node[end] == node[r]) ++end;
    int64_t send_same = 0, recv_same = 0;
    for (size_t d = begin; d < end; ++d) {
      if (d == r) continue;
      send_same += L.dispatch[r * n + d];
      recv_same += L.dispatch[d * n + r];
    }
    const int64_t self = L.dispatch[r * n + r];
    const int64_t send_other = row_total[r] - send_same - self, recv_other = L.received[r] - recv_same - self;
    const bool remote = end - begin < n;
    const double latency = LinkLatencyUs(remote, c);
    // NVLink and the NIC are separate links: the busiest one decides (AllToAllTimesUs).
    dt[r] = latency + std::max({bytes(send_same) / intra, bytes(recv_same) / intra, bytes(send_other) / inter, bytes(recv_other) / inter});
    // Combine sends what dispatch received and receives what it sent.
    ct[r] = latency + std::max({bytes(recv_same) / intra, bytes(send_same) / intra, bytes(recv_other) / inter, bytes(send_other) / inter});
  }
  return true;
}

// The bytes per hidden element each direction of the EP all-to-all carries (bytes per element) and
// the deredundency dispatcher's split ep = oep x iep (ranks).
struct MoeWire {
  double Td = 0;           // tokens a rank sends (dispatch_tokens, else T_r)
  double sent_ab = 0;      // bytes per element the combine sends (and a BF16 dispatch)
  double dispatch_ab = 0;  // bytes per element the forward dispatch sends (FP8 with --fp8-dispatch)
  int64_t oep = 1, iep = 1;
};
MoeWire MoeWireOf(const RoutingResult& routing, const MoePhaseShape& s) {
  const double Tr = s.routed_tokens, ab = s.act_bytes;
  MoeWire wire;
  // The routing sample draws T_r tokens per rank, the rows an expert rank computes. Under
  // megatron a rank sends only its own dispatch_tokens = T_r / etp of them (the expert-TP
  // all-gather adds the rest), so the all-to-all bytes are scaled by dispatch_tokens / T_r.
  wire.Td = s.dispatch_tokens > 0 ? s.dispatch_tokens : Tr;
  wire.sent_ab = wire.Td == Tr ? ab : ab * wire.Td / Tr;
  // FP8 dispatch (precision.h): the dispatch sends dispatch_act_bytes per element, combine stays at ab.
  wire.dispatch_ab = s.dispatch_act_bytes > 0 ? wire.sent_ab * s.dispatch_act_bytes / ab : wire.sent_ab;
  wire.oep = s.deredundency ? routing.oep : 1;
  wire.iep = s.ep / std::max<int64_t>(1, wire.oep);
  return wire;
}

// The dispatch (dt), combine (ct) and, with FP8 dispatch, backward-dispatch (dtb) all-to-all times
// (us per EP rank) of one sampled layer from its full byte matrices (AllToAllTimesUs of each,
// reading rows of both); `dbytes` and `cbytes` are scratch of ep x ep. Returns whether dtb was written.
bool MatrixAllToAllUs(const LayerRouting& L, const std::vector<int64_t>& ep_nodes, int64_t ep, double D, const MoeWire& wire,
                      const ClusterSpec& c, std::vector<double>& dbytes, std::vector<double>& cbytes, double* dt, double* ct, double* dtb) {
  // dispatch matrix and its transpose, the combine matrix (combine returns what dispatch
  // sent): AllToAllTimesUs of each, reading rows of both.
  dbytes.resize(ep * ep);
  cbytes.resize(ep * ep);
  for (int64_t src = 0; src < ep; ++src) {
    for (int64_t dst = 0; dst < ep; ++dst) {
      dbytes[src * ep + dst] = static_cast<double>(L.dispatch[src * ep + dst]) * D * wire.dispatch_ab;
      cbytes[dst * ep + src] = static_cast<double>(L.dispatch[src * ep + dst]) * D * wire.sent_ab;
    }
  }
  if (ep >= 2 && wire.dispatch_ab == wire.sent_ab) {
    AllToAllTimesFromRows(dbytes.data(), cbytes.data(), ep_nodes.data(), ep, c, dt);
    AllToAllTimesFromRows(cbytes.data(), dbytes.data(), ep_nodes.data(), ep, c, ct);
  } else if (ep >= 2) {
    // FP8 dispatch: the two directions carry different bytes; each needs its own transpose.
    std::vector<double> drecv(ep * ep), crecv(ep * ep);
    for (int64_t src = 0; src < ep; ++src) {
      for (int64_t dst = 0; dst < ep; ++dst) {
        drecv[dst * ep + src] = dbytes[src * ep + dst];
        crecv[src * ep + dst] = cbytes[dst * ep + src];
      }
    }
    AllToAllTimesFromRows(dbytes.data(), drecv.data(), ep_nodes.data(), ep, c, dt);
    AllToAllTimesFromRows(cbytes.data(), crecv.data(), ep_nodes.data(), ep, c, ct);
    // The backward dispatch: the dispatch matrix in BF16 (crecv, rows = senders), its
    // transpose cbytes.
    AllToAllTimesFromRows(crecv.data(), cbytes.data(), ep_nodes.data(), ep, c, dtb);
    return true;
  }
  return false;
}

// The deredundency dispatcher's dispatch (dt) and combine (ct) times (us per EP rank) of one
// sampled layer: ep = oep x iep (inner index fastest), an all-gather of every rank's T_r*k routed
// rows over its oep group, then an all-to-all inside its iep group (iep_dispatch matrix); combine
// mirrors it with a reduce-scatter over oep.
void DeredundencyAllToAllUs(const LayerRouting& L, const std::vector<int64_t>& ep_group, const MoePhaseShape& s, const MoeWire& wire,
                            const ClusterSpec& c, double* dt, double* ct) {
  const int64_t oep = wire.oep, iep = wire.iep;
  const std::vector<int64_t>& iep_dispatch = IepDispatchOf(L);
  const double k = s.top_k, D = s.hidden, ab = s.act_bytes;
  // The all-gather / reduce-scatter ring of inner index i spans {i, iep + i, ...}: the same for every o.
  const double gathered = static_cast<double>(oep) * wire.Td * k * D * ab;
  std::vector<int64_t> iep_ranks(static_cast<size_t>(iep)), oep_ranks(static_cast<size_t>(oep));
  std::vector<double> ring(static_cast<size_t>(iep));
  for (int64_t i = 0; i < iep; ++i) {
    for (int64_t x = 0; x < oep; ++x) oep_ranks[static_cast<size_t>(x)] = ep_group[x * iep + i];
    ring[static_cast<size_t>(i)] = RingCollectiveUs(gathered, oep_ranks, c);
  }
  for (int64_t o = 0; o < oep; ++o) {
    std::vector<double> bytes(iep * iep);
    for (int64_t i = 0; i < iep; ++i) iep_ranks[static_cast<size_t>(i)] = ep_group[o * iep + i];
    for (int64_t i = 0; i < iep; ++i) {
      for (int64_t j = 0; j < iep; ++j) {
        bytes[i * iep + j] = static_cast<double>(iep_dispatch[(o * iep + i) * iep + j]) * D * wire.sent_ab;
      }
    }
    std::vector<double> back(iep * iep);
    for (int64_t i = 0; i < iep; ++i)
      for (int64_t j = 0; j < iep; ++j) back[j * iep + i] = bytes[i * iep + j];
    std::vector<double> a2a(iep, 0.0), a2a_back(iep, 0.0);
    if (iep >= 2) {
      const std::vector<int64_t> iep_nodes = NodesOf(iep_ranks, NvlinkDomainGpus(c));
      AllToAllTimesFromRows(bytes.data(), back.data(), iep_nodes.data(), iep, c, a2a.data());
      AllToAllTimesFromRows(back.data(), bytes.data(), iep_nodes.data(), iep, c, a2a_back.data());
    }
    for (int64_t i = 0; i < iep; ++i) {
      dt[o * iep + i] = ring[static_cast<size_t>(i)] + a2a[i];
      ct[o * iep + i] = a2a_back[i] + ring[static_cast<size_t>(i)];
    }
  }
}

// One sampled layer's dispatch (dt), combine (ct) and backward-dispatch (dtb) times (us per EP
// rank, ep > 1) by the dispatcher: deepep / allgather (deepep.h), integer block sums
// (BlockAllToAll), the full matrices, or deredundency. `flex`: the layer's deepep links (FlexLinksOf).
// Returns whether dtb was written (else dtb = dt).
bool LayerAllToAllUs(const LayerRouting& L, const FlexLinks* flex, const std::vector<int64_t>& ep_group,
                     const std::vector<int64_t>& ep_nodes, const MoePhaseShape& s, const MoeWire& wire, const ClusterSpec& c,
                     std::vector<double>& dbytes, std::vector<double>& cbytes, double* dt, double* ct, double* dtb) {
  const int64_t ep = s.ep;
  const double D = s.hidden, ab = s.act_bytes;
  if (FlexOrAllGatherTimesUs(flex, ep_group, s, wire.sent_ab, c, dt, ct, dtb)) return true;  // deepep / allgather dispatcher (deepep.h).
  if (!s.deredundency && s.integer_sums && ep >= 2 && wire.sent_ab == ab && wire.dispatch_ab == ab &&
      BlockAllToAll(L, ep_nodes, D, ab, c, dt, ct)) {
    return false;  // Same values from integer block sums (see BlockAllToAll).
  }
  if (!s.deredundency) return MatrixAllToAllUs(L, ep_nodes, ep, D, wire, c, dbytes, cbytes, dt, ct, dtb);
  DeredundencyAllToAllUs(L, ep_group, s, wire, c, dt, ct);
  return false;
}

// Adds one sampled layer (of `nlayers`) to `out`: each EP rank's grouped GEMM (from its rows per
// local expert) and permute (from the rows it sends and receives) times, its dispatch (dt),
// combine (ct) and backward-dispatch (dtb) times, each divided by nlayers (us), and the slowest
// rank's of each likewise.
void AddSampledLayer(const std::vector<double>& rows, const std::vector<double>& received, const std::vector<double>& dt,
                     const std::vector<double>& ct, const std::vector<double>& dtb, const MoePhaseShape& s, double Td, size_t nlayers,
                     const ClusterSpec& c, ComputeModel model, MoePhaseTimes& out) {
  const ComputeKnobs& kn = c.knobs.compute;
  const bool kernels = model == ComputeModel::kKernels;
  const double peak = c.dense_bf16_tflops * kFlopsPerUsPerTflops;  // FLOP per microsecond
  const double hbm = c.hbm_gbps * kBytesPerUsPerGbps;
  const int64_t ep = s.ep;
  const int64_t nle = s.num_experts / ep;
  const double k = s.top_k, D = s.hidden, ab = s.act_bytes, f_local = s.f_local;
  double pm = 0, dm = 0, gm = 0, cm = 0, dbm = 0;
  for (int64_t r = 0; r < ep; ++r) {
    double g = 0;
    for (int64_t e = 0; e < nle; ++e) {
      const double M = rows[r * nle + e];
      g += kernels ? ExpertMlpForwardUs(M, D, f_local, c.dense_bf16_tflops, kn, s.gemm_precision, c.hbm_gbps)  // by shape (gemm_efficiency.h)
                            : 6.0 * M * D * f_local / (peak * GroupedGemmEfficiency(M, kn) * Fp8GemmSpeedup(kn, s.gemm_precision));
    }
    // Kernel-level model: the SwiGLU of the rank's received rows (kernels_model.h).
    if (kernels)
      g += MemoryBoundUs(SwigluKernel(received[r], f_local, ab, false), c.hbm_gbps, kn.memory_bound.hbm_efficiency, kn.memory_bound.floor_us);
    const double pr = 2.0 * (Td * k + received[r]) * D * ab / hbm + kn.memory_bound.floor_us;
    out.gemm[r] += g / nlayers;
    out.permute[r] += pr / nlayers;
    out.dispatch[r] += dt[r] / nlayers;
    out.combine[r] += ct[r] / nlayers;
    out.dispatch_bwd[r] += dtb[r] / nlayers;
    dbm = std::max(dbm, dtb[r]);
    gm = std::max(gm, g);
    pm = std::max(pm, pr);
    dm = std::max(dm, dt[r]);
    cm = std::max(cm, ct[r]);
  }
  out.permute_max += pm / nlayers;
  out.dispatch_max += dm / nlayers;
  out.dispatch_bwd_max += dbm / nlayers;
  out.gemm_max += gm / nlayers;
  out.combine_max += cm / nlayers;
}

}  // namespace

MoePhaseTimes SimulateMoePhases(const RoutingResult& routing, const std::vector<int64_t>& ep_group, const MoePhaseShape& s,
                                const ClusterSpec& c, ComputeModel model,
                                const std::vector<std::shared_ptr<const FlexLinks>>* flex_layers) {
  if (flex_layers != nullptr && flex_layers->size() != routing.layers.size()) {
    throw Error(fmt::format("MoE phases: {} layers of deepep counts for a routing sample of {} layers", flex_layers->size(),
                            routing.layers.size()));
  }
  const int64_t ep = s.ep;
  const int64_t nle = s.num_experts / ep;
  const double Tr = s.routed_tokens, k = s.top_k, E = static_cast<double>(s.num_experts);
  const MoeWire wire = MoeWireOf(routing, s);
  MoePhaseTimes out;
  out.permute.assign(ep, 0);
  out.dispatch.assign(ep, 0);
  out.gemm.assign(ep, 0);
  out.combine.assign(ep, 0);
  out.dispatch_bwd.assign(ep, 0);
  double imbalance = 1.0;
  const size_t nlayers = std::max<size_t>(1, routing.layers.size());
  std::vector<double> dbytes, cbytes;
  const std::vector<int64_t> ep_nodes = NodesOf(ep_group, NvlinkDomainGpus(c));
  out.spans_domains = ep > 1 && SpansNodes(ep_group, NvlinkDomainGpus(c));
  for (size_t li = 0; li < nlayers; ++li) {
    std::vector<double> rows(nle * ep, 0.0), received(ep, 0.0);
    std::vector<double> dt(ep, 0.0), ct(ep, 0.0);
    std::vector<double> dtb(ep, 0.0);  // the backward dispatch (BF16 rows; differs from dt with FP8 dispatch)
    bool own_bwd = false;              // dtb written by the dispatcher's branch; else dtb = dt
    if (ep > 1) {
      const auto& L = routing.layers[li];
      for (int64_t i = 0; i < ep * nle; ++i) rows[i] = static_cast<double>(L.rows_per_local_expert[i]);
      for (int64_t r = 0; r < ep; ++r) received[r] = static_cast<double>(L.received[r]);
      imbalance = std::max(imbalance, L.imbalance);
      std::optional<FlexLinks> own_links;  // the plan path: from the layer's own counts
      const FlexLinks* flex = nullptr;
      if (flex_layers != nullptr) {
        flex = (*flex_layers)[li].get();
      } else if (L.flex) {
        own_links = FlexLinksOf(*L.flex);
        flex = &*own_links;
      }
      own_bwd = LayerAllToAllUs(L, flex, ep_group, ep_nodes, s, wire, c, dbytes, cbytes, dt.data(), ct.data(), dtb.data());
    } else {
      // EP off: every rank computes all experts on its own T_r tokens, spread evenly.
      for (int64_t e = 0; e < nle; ++e) rows[e] = Tr * k / E;
      received[0] = Tr * k;
    }
    if (!own_bwd) dtb = dt;
    AddSampledLayer(rows, received, dt, ct, dtb, s, wire.Td, nlayers, c, model, out);
  }
  out.imbalance = imbalance;
  return out;
}

}  // namespace dockyard
