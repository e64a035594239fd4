// The deepep (flex) dispatcher's node dedup and link matrices on a hand-made routing, its times,
// and the allgather dispatcher.
#include "planner/cost/deepep.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/accounting/memory.h"
#include "planner/accounting/workload.h"
#include "planner/routing/flex_counts.h"

using namespace dockyard;

namespace {

// 2 nodes x 4 GPUs: EP members 0..7 are global ranks 0..7, one expert each.
FlexCounts HandRouting() {
  FlexCounts c = MakeFlexCounts({0, 1, 2, 3, 4, 5, 6, 7}, 4);
  // Source 0 (node 0): token A -> experts 4, 5 (both on node 1); token B -> experts 1, 6.
  const int32_t src0[] = {4, 5, 1, 6};
  AddFlexTokens(c, 0, src0, 2, 2, 1);
  // Source 5 (node 1, local index 1): one token -> experts 2, 3 (node 0).
  const int32_t src5[] = {2, 3};
  AddFlexTokens(c, 5, src5, 1, 2, 1);
  return c;
}

}  // namespace

TEST_CASE("node dedup: a token crosses the network once per destination node, then fans out over NVLink") {
  const FlexCounts c = HandRouting();
  CHECK(c.num_nodes == 2);
  // Tokens per (source, node): source 0 reaches node 1 with both tokens, node 0 with token B.
  CHECK(c.node_tokens[0 * 2 + 1] == 2);
  CHECK(c.node_tokens[0 * 2 + 0] == 1);
  CHECK(c.node_tokens[5 * 2 + 0] == 1);
  CHECK(RailPeer(c, 0, 1) == 4);  // local index 0 on node 1
  CHECK(RailPeer(c, 5, 0) == 1);  // local index 1 on node 0
  const double b = 7168 * 2;      // one BF16 row of hidden 7168
  const LinkBytes m = FlexDispatchBytes(c, b);
  // Network: 0 -> 4 carries tokens A and B once each (2 rows; the per-expert all-to-all sends 3
  // rows across: 4, 5 and 6); 5 -> 1 carries its token once (the all-to-all: 2 rows).
  double network_total = 0;
  for (double v : m.network) network_total += v;
  CHECK(m.network[0 * 8 + 4] == 2 * b);
  CHECK(m.network[5 * 8 + 1] == 1 * b);
  CHECK(network_total == 3 * b);
  // NVLink: 0 -> 1 direct (token B, expert 1); rank 4 forwards A to 5 and B to 6 (it holds expert
  // 4 itself: no copy); rank 1 forwards source 5's token to 2 and 3 (it received it by RDMA).
  double nvlink_total = 0;
  for (double v : m.nvlink) nvlink_total += v;
  CHECK(m.nvlink[0 * 8 + 1] == b);
  CHECK(m.nvlink[4 * 8 + 5] == b);
  CHECK(m.nvlink[4 * 8 + 6] == b);
  CHECK(m.nvlink[1 * 8 + 2] == b);
  CHECK(m.nvlink[1 * 8 + 3] == b);
  CHECK(nvlink_total == 5 * b);
  // FP8 rows: 7168 bytes + 56 fp32 scales (one per 128 elements) = 7392.
  CHECK(FlexTokenBytes(7168, 2, true) == 7392);
  CHECK(FlexTokenBytes(7168, 2, false) == 14336);
}

TEST_CASE("deepep times: NVLink and RDMA at their calibrated fractions, the busiest direction decides") {
  const FlexCounts c = HandRouting();
  const double b = 7168 * 2;
  // The rows per member are the row and column sums of the link matrices (in rows: bytes 1).
  const FlexLinkRows rows = FlexDispatchRows(c);
  const LinkBytes m = FlexDispatchBytes(c, 1.0);
  for (int64_t r = 0; r < 8; ++r) {
    double nvl_send = 0, nvl_recv = 0, net_send = 0, net_recv = 0;
    for (int64_t d = 0; d < 8; ++d) {
      nvl_send += m.nvlink[r * 8 + d];
      nvl_recv += m.nvlink[d * 8 + r];
      net_send += m.network[r * 8 + d];
      net_recv += m.network[d * 8 + r];
    }
    CHECK(rows.nvlink_send[r] == nvl_send);
    CHECK(rows.nvlink_recv[r] == nvl_recv);
    CHECK(rows.network_send[r] == net_send);
    CHECK(rows.network_recv[r] == net_recv);
  }
  // Rank 4 (the hand routing above): forwards A to 5 and B to 6, receives both by RDMA from 0.
  CHECK(rows.nvlink_send[4] == 2);
  CHECK(rows.network_recv[4] == 2);
  CHECK(rows.network_send[0] == 2);
  ClusterSpec cl;  // h100-sxm defaults: 370 GB/s NVLink, 48 GB/s network, 4 GPUs per node here
  cl.gpus_per_node = 4;
  cl.knobs.links.intra_node_gbps = 370;
  cl.knobs.links.network_gbps = 48;
  cl.knobs.links.network_latency_us = 8;
  cl.knobs.links.intra_node_latency_us = 3;
  // The h100-sxm knobs: deepep nvlink_efficiency 0.362, network_efficiency 0.852.
  const std::vector<double> t = FlexTimesUs(rows, b, false, {0, 1, 2, 3, 4, 5, 6, 7}, cl);
  // Rank 4: NVLink send 2b = 28672 B at 370 x 0.362 = 133.94 GB/s -> 0.21407 us; RDMA receive
  // 2b at 48 x 0.852 = 40.896 GB/s -> 0.70110 us; + 8 us latency (the group spans 2 nodes).
  CHECK(t[4] == doctest::Approx(8.0 + 28672.0 / 40896.0).epsilon(1e-12));
  // Rank 7: nothing sent or received: latency only.
  CHECK(t[7] == doctest::Approx(8.0));
  // The combine (transposed matrices) of rank 4: RDMA send 2b, NVLink receive 2b: the same.
  const std::vector<double> back = FlexTimesUs(rows, b, true, {0, 1, 2, 3, 4, 5, 6, 7}, cl);
  CHECK(back[4] == doctest::Approx(t[4]).epsilon(1e-12));
  // On fewer SMs than its full-rate figure (--moe-flex-dispatcher-num-sms; FlexSmBandwidthScale):
  // DeepEP on 10 SMs, 10 / 20 = 0.5 of the NVLink bandwidth: rank 4's NVLink send 28672 B at
  // 66.97 GB/s = 0.42814 us, still under its RDMA receive (0.70110 us, the NIC's rate kept); rank 2,
  // which receives 1 token (14336 B) over NVLink from rank 1 and nothing by RDMA, 8 + 0.10703 x 2 =
  // 8.21407 us.
  CHECK(FlexSmBandwidthScale(FlexBackend::kDeepEp, 10) == doctest::Approx(0.5));
  CHECK(FlexSmBandwidthScale(FlexBackend::kDeepEp, 20) == 1.0);
  CHECK(FlexSmBandwidthScale(FlexBackend::kHybridEp, 8) == doctest::Approx(0.5));
  CHECK(FlexSmBandwidthScale(FlexBackend::kHybridEp, 32) == 1.0);
  CHECK(FlexSmBandwidthScale(FlexBackend::kNcclEp, 4) == 1.0);
  CHECK(FlexSmBandwidthScale(FlexBackend::kDeepEp, 0) == 1.0);  // the backend's default
  const std::vector<double> slow = FlexTimesUs(rows, b, false, {0, 1, 2, 3, 4, 5, 6, 7}, cl, 0.5);
  CHECK(slow[4] == doctest::Approx(t[4]).epsilon(1e-12));
  CHECK(t[2] == doctest::Approx(8.0 + 14336.0 / 133940.0).epsilon(1e-12));
  CHECK(slow[2] == doctest::Approx(8.0 + 2.0 * 14336.0 / 133940.0).epsilon(1e-12));
  // allgather: ring of 8 x 100 tokens x 7168 x 2 B over 2 nodes with 4 group members on each:
  // one ring per rail, min(4 x 48, 370) = 192 GB/s (network.h RingBusGbps):
  // 7 x (8 + 11468800 / 8 / 192000) = 7 x (8 + 7.46667) = 108.2667 us.
  CHECK(AllGatherDispatchUs(8, 100, 7168, 2, {0, 1, 2, 3, 4, 5, 6, 7}, cl) == doctest::Approx(108.2666667).epsilon(1e-9));
}

TEST_CASE("deepep counts from the sampler: every token counted once per node it reaches") {
  const RoutingModel model = PrepareRouting(ParseRoutingSpec("uniform"), 64, 8, 1, GroupLimit{8, 4, true});
  // ep 16 on 2 nodes of 8: groups of 8 experts = 2 members, all on one node.
  std::vector<int64_t> group;
  for (int64_t r = 0; r < 16; ++r) group.push_back(r);
  const FlexCounts c = SampleFlexCounts(model, 0, group, 8, 1000);
  for (int64_t s = 0; s < 16; ++s) {
    // Each token reaches 1 or 2 nodes: per source between 1000 and 2000 node visits.
    const int64_t visits = c.node_tokens[s * 2] + c.node_tokens[s * 2 + 1];
    CHECK(visits >= 1000);
    CHECK(visits <= 2000);
    int64_t ranks = 0;
    for (int64_t d = 0; d < 16; ++d) ranks += c.rank_tokens[s * 16 + d];
    CHECK(ranks >= visits);    // a node visit reaches >= 1 member
    CHECK(ranks <= 1000 * 8);  // at most top_k members per token
  }
}

TEST_CASE("deepep buffers replace the all-to-all buffers: RDMA rows per other node plus NVLink rows") {
  Workload w;
  w.tokens = w.routed_tokens = w.dispatch_tokens = 4096;
  w.received_rows = 4096 * 8;
  w.mean_received_rows = 4096 * 8;
  w.act_bytes = 2;
  ParallelDims d;
  d.ep = 16;  // 2 nodes of 8
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.dispatcher = Dispatcher::kDeepEp;
  const TrainingBytes tb;
  const dockyard::Machine machine;  // 8 GPUs per node
  const StageBufferBytes b = StageBuffers(0, true, w, d, t, machine, tb, 1, 7168, 0);
  // RDMA: 1 other node x 4096 tokens x 7168 x 2 B = 58,720,256; NVLink: 32768 rows x 7168 x 2 B
  // = 469,762,048; total 528,482,304.
  CHECK(b.present[static_cast<int>(BufferUse::kDeepEp)]);
  CHECK_FALSE(b.present[static_cast<int>(BufferUse::kAllToAll)]);
  CHECK(b.bytes[static_cast<int>(BufferUse::kDeepEp)] == 528482304);
  // FP8 dispatch: RDMA rows of 7168 + 56 x 4 = 7392 B: 4096 x 7392 = 30,277,632 + 469,762,048.
  t.fp8_dispatch = true;
  CHECK(StageBuffers(0, true, w, d, t, machine, tb, 1, 7168, 0).bytes[static_cast<int>(BufferUse::kDeepEp)] == 500039680);
  // all_to_all: (T_r k + R_max) rows x 7168 x 2 B = 65536 x 14336 = 939,524,096.
  t.fp8_dispatch = false;
  t.dispatcher = Dispatcher::kAllToAll;
  CHECK(StageBuffers(0, true, w, d, t, machine, tb, 1, 7168, 0).bytes[static_cast<int>(BufferUse::kAllToAll)] == 939524096);
}

TEST_CASE("the simulate report's link rows: per-member sends and receives of each link level") {
  RoutingResult routing;
  routing.layers.resize(1);
  CHECK(FlexLinksToJson(routing, 1.0).is_null());  // no flex counts: no block
  routing.layers[0].flex = std::make_shared<const FlexCounts>(HandRouting());
  const Json j = FlexLinksToJson(routing, 100.0);
  const Json& l = j["layers"][0];
  // Hand routing above, 100 B per token: network 0 -> 4 (2 tokens), 5 -> 1 (1 token).
  CHECK(l["network_send"][0].get<double>() == 200);
  CHECK(l["network_recv"][4].get<double>() == 200);
  CHECK(l["network_send"][5].get<double>() == 100);
  CHECK(l["network_recv"][1].get<double>() == 100);
  // NVLink: rank 4 forwards 2 tokens, rank 1 forwards 2, rank 0 sends 1 directly.
  CHECK(l["nvlink_send"][4].get<double>() == 200);
  CHECK(l["nvlink_send"][1].get<double>() == 200);
  CHECK(l["nvlink_send"][0].get<double>() == 100);
  CHECK(l["nvlink_recv"][6].get<double>() == 100);
  CHECK(l["nvlink"][1 * 8 + 3].get<double>() == 100);
}

TEST_CASE("deepep with --gpus-per-node other than the cluster's NVLink domain: the error names the flag, its value and the fix") {
  // EP 16 counted on nodes of 16 (one node) on a cluster whose NVLink domain is 8 GPUs: rank 8
  // is on node 0 by the flag but in the second NVLink domain.
  std::vector<int64_t> group;
  for (int64_t r = 0; r < 16; ++r) group.push_back(r);
  const FlexLinks links = FlexLinksOf(MakeFlexCounts(group, 16));
  MoePhaseShape s;
  s.ep = 16;
  s.hidden = 64;
  s.act_bytes = 2;
  s.flex = true;
  ClusterSpec cl = ClusterPreset("h800-sxm");  // 8 GPUs per node, NVLink domain = node
  std::vector<double> dt(16), ct(16);
  const auto call = [&] { FlexOrAllGatherTimesUs(&links, group, s, 2, cl, dt.data(), ct.data()); };
  CHECK_THROWS_WITH_AS(call(),
                       "--gpus-per-node (training.gpus_per_node) is 16, but cluster h800-sxm's NVLink domain is 8 GPUs: the deepep "
                       "dispatcher forwards over NVLink only inside one NVLink domain, so a node must be exactly one domain; give "
                       "--gpus-per-node 8",
                       Error);
}
