// Collective bandwidth from the group's shape (network.h) on hand-computed cases.
#include "planner/cost/network.h"

#include <doctest/doctest.h>

#include "planner/cost/cost.h"
#include "planner/base/error.h"

using dockyard::ClusterPreset;
using dockyard::ClusterSpec;
using doctest::Approx;

TEST_CASE("Members per NVLink domain of a group") {
  CHECK(dockyard::MembersPerDomain({0, 8, 16, 24}, 8) == 1);
  CHECK(dockyard::MembersPerDomain({0, 4, 8, 12}, 8) == 2);
  CHECK(dockyard::MembersPerDomain({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 8) == 8);
  CHECK(dockyard::MembersPerDomainStrided(16, 8, 8) == 1);
  CHECK(dockyard::MembersPerDomainStrided(16, 4, 8) == 2);
  CHECK(dockyard::MembersPerDomainStrided(16, 1, 8) == 8);
  CHECK(dockyard::MembersPerDomainStrided(3, 1, 8) == 3);   // the whole group in one node
  CHECK(dockyard::MembersPerDomainStrided(16, 3, 8) == 3);  // 0, 3, 6 on node 0
}

TEST_CASE("Ring over nodes: bandwidth grows with the members per node (rails), capped by NVLink") {
  const ClusterSpec c = ClusterPreset("h100-sxm");  // 48 GB/s per GPU's NIC, 370 GB/s NVLink, 8 us
  // 16 MB all-gather over 16 ranks: (n - 1) x (8 us + 1 MB / bw).
  // 1 member per node ({0, 8, ..., 120}): one NIC, 48 GB/s: 15 x (8 + 1e6 / 48e3) = 15 x 28.8333 = 432.5 us.
  CHECK(dockyard::RingBusGbps(c, 1, true) == Approx(48.0));
  CHECK(dockyard::RingTimeUs(16e6, 16, 1, true, c) == Approx(432.5));
  // 2 members per node ({0, 4, ..., 60}): two rails, 96 GB/s: 15 x (8 + 1e6 / 96e3) = 15 x 18.41667 = 276.25 us.
  CHECK(dockyard::RingBusGbps(c, 2, true) == Approx(96.0));
  CHECK(dockyard::RingTimeUs(16e6, 16, 2, true, c) == Approx(276.25));
  // 8 members per node ({0, ..., 15}): 8 x 48 = 384 GB/s, capped by NVLink's 370:
  // 15 x (8 + 1e6 / 370e3) = 15 x 10.7027 = 160.541 us.
  CHECK(dockyard::RingBusGbps(c, 8, true) == Approx(370.0));
  CHECK(dockyard::RingTimeUs(16e6, 16, 8, true, c) == Approx(160.5405).epsilon(1e-6));
  // Inside one node: NVLink and its 3 us latency whatever k.
  CHECK(dockyard::RingTimeUs(8e6, 8, 8, false, c) == Approx(7 * (3.0 + 1e6 / 370e3)));
  // The cost model's group form reads the shape from the ranks: {0, 4, ..., 60} is the 2-rail case.
  std::vector<int64_t> g;
  for (int64_t r = 0; r < 64; r += 4) g.push_back(r);
  CHECK(dockyard::RingCollectiveUs(16e6, g, c) == Approx(276.25));
  CHECK_THROWS_AS(dockyard::RingBusGbps(c, 0, true), dockyard::Error);
}

TEST_CASE("One NIC per node: sibling groups share it, a group alone drives all of it") {
  const ClusterSpec c = ClusterPreset("h100-pcie-400g");  // 1 NIC of ~48 GB/s per 8 GPUs: 6 GB/s per GPU, PCIe 50 GB/s
  CHECK(c.nics_per_node == 1);
  // Every GPU of the node runs its own group's ring: each of the 8 one-member groups gets 48 / 8 = 6 GB/s.
  CHECK(dockyard::RingBusGbps(c, 1, true) == Approx(6.0));
  // A group with all 8 GPUs of each node: the whole NIC, 8 x 6 = 48 GB/s (below PCIe's 50).
  CHECK(dockyard::RingBusGbps(c, 8, true) == Approx(48.0));
  // One member per node with the node otherwise idle: ceil(1 x 1 / 8) = 1 NIC of 6 x 8 / 1 = 48 GB/s.
  CHECK(dockyard::RingBusGbps(c, 1, true, /*nodes_shared=*/false) == Approx(48.0));
  // h100-sxm alone: 2 members drive ceil(2 x 8 / 8) = 2 NICs of 48 GB/s = 96 GB/s, as when shared.
  CHECK(dockyard::RingBusGbps(ClusterPreset("h100-sxm"), 2, true, false) == Approx(96.0));
}

TEST_CASE("NVLink domain larger than a node: the domain is the locality unit") {
  ClusterSpec c = ClusterPreset("h100-sxm");
  c.gpus_per_node = 4;
  c.nvlink_domain_gpus = 72;
  CHECK(dockyard::NvlinkDomainGpus(c) == 72);
  // 16 ranks over 4 nodes of one domain: NVLink, 3 us: 15 x (3 + 1e6 / 370e3) = 85.5405 us.
  std::vector<int64_t> g;
  for (int64_t r = 0; r < 16; ++r) g.push_back(r);
  CHECK(dockyard::RingCollectiveUs(16e6, g, c) == Approx(15 * (3.0 + 1e6 / 370e3)));
  // Default: one node is the domain.
  CHECK(dockyard::NvlinkDomainGpus(ClusterPreset("h100-sxm")) == 8);
}

TEST_CASE("Step-end collective from its wire bytes, rails included") {
  const ClusterSpec c = ClusterPreset("h100-sxm");
  // All-reduce of 64 MB over 16 ranks with 8 per node: wire 2 x 64e6 x 15/16 = 120e6 B at 370 GB/s
  // = 324.324 us, plus 15 x 8 us = 120 us: 444.324 us.
  CHECK(dockyard::StepCollectiveUs(120e6, 16, 8, true, c) == Approx(444.3243).epsilon(1e-6));
  // One member per node: 120e6 / 48e3 = 2500 us + 120 us.
  CHECK(dockyard::StepCollectiveUs(120e6, 16, 1, true, c) == Approx(2620.0));
}

TEST_CASE("Concurrent collectives of different groups share the NICs") {
  // FSDP ring 100 us and EP all-to-all 60 us, both over the network: 160 us of NIC time.
  CHECK(dockyard::SharedNicUs(100, true, 60, true) == Approx(160.0));
  // The all-to-all inside the node: separate links, the longer decides.
  CHECK(dockyard::SharedNicUs(100, true, 60, false) == Approx(100.0));
  CHECK(dockyard::NicContentionUs(60, true, true) == Approx(60.0));
  CHECK(dockyard::NicContentionUs(60, true, false) == Approx(0.0));
}

TEST_CASE("Pipeline send/recv on the link it crosses") {
  const ClusterSpec c = ClusterPreset("h100-sxm");
  // 48 MB across nodes: 8 us + 48e6 / 48e3 = 1008 us; inside a node: 3 + 48e6 / 370e3 = 132.73 us.
  CHECK(dockyard::P2pUs(48e6, true, c) == Approx(1008.0));
  CHECK(dockyard::P2pUs(48e6, false, c) == Approx(3.0 + 48e6 / 370e3));
  CHECK(dockyard::P2pUs(0, true, c) == 0.0);
}

TEST_CASE("Context-parallel K/V exchange: bytes and time, ring and all-to-all") {
  const ClusterSpec c = ClusterPreset("h100-sxm");
  // GQA with 8 KV heads of 128 at tp 1: 2 x 8 x 128 = 2048 elements per token; cp 4 of a 8192
  // sequence: 2048 local tokens x 2048 x 2 B = 8,388,608 B per K/V block.
  const double kv = 2048.0 * 2048 * 2;
  CHECK(kv == 8388608.0);
  // Ring in one node, attention core 40 us (10 us per block): 3 transfers of
  // 3 + 8388608 / 370e3 = 25.672 us, each hiding 10 us: 3 x 15.672 = 47.016 us exposed.
  CHECK(dockyard::CpRingExposedUs(kv, 40.0, 4, false, c) == Approx(3 * (3.0 + kv / 370e3 - 10.0)));
  CHECK(dockyard::CpRingExposedUs(kv, 40.0, 4, false, c) == Approx(47.0160).epsilon(1e-4));
  // Across nodes: 8 + 8388608 / 48e3 = 182.76 us per transfer: 3 x 172.76 = 518.29 us.
  CHECK(dockyard::CpRingExposedUs(kv, 40.0, 4, true, c) == Approx(518.288).epsilon(1e-5));
  // A core long enough hides the ring: 4 x 25.672 < 400 us.
  CHECK(dockyard::CpRingExposedUs(kv, 400.0, 4, false, c) == 0.0);
  // All-to-all of 16 MB (Q, K, V, O) over cp 4 in one node: 3/4 leaves the rank:
  // 3 + 12e6 / 370e3 = 35.432 us.
  CHECK(dockyard::CpAllToAllUs(16e6, 4, false, c) == Approx(3.0 + 12e6 / 370e3));
  CHECK(dockyard::CpAllToAllUs(16e6, 1, false, c) == 0.0);
}

TEST_CASE("Presets: gb200-nvl72 keeps 72 GPUs on NVLink, h800-sxm's NVLink caps its rails") {
  const ClusterSpec g = ClusterPreset("gb200-nvl72");
  CHECK(g.gpus_per_node == 4);
  CHECK(dockyard::NvlinkDomainGpus(g) == 72);
  // A 64-GPU ring spans 16 trays of 4 but one NVLink domain: 606.6 GB/s, 3 us per step:
  // 63 x (3 + 64e6 / 64 / 606.6e3) = 63 x 4.64853 = 292.857 us for 64 MB.
  std::vector<int64_t> ring;
  for (int64_t r = 0; r < 64; ++r) ring.push_back(r);
  CHECK(dockyard::RingCollectiveUs(64e6, ring, g) == Approx(63 * (3.0 + 1e6 / 606.6e3)));
  // h800-sxm: 8 rails of 48 GB/s = 384, capped by its 160 GB/s NVLink; 2 rails: 96.
  const ClusterSpec h = ClusterPreset("h800-sxm");
  CHECK(dockyard::RingBusGbps(h, 8, true) == Approx(160.0));
  CHECK(dockyard::RingBusGbps(h, 2, true) == Approx(96.0));
  // b200: 8 x 48 = 384 below NVLink5's 606.6.
  CHECK(dockyard::RingBusGbps(ClusterPreset("b200"), 8, true) == Approx(384.0));
}

TEST_CASE("MachineOf: a plan on a cluster takes its NVLink domain as the node size and the budget given") {
  // gb200-nvl72: trays of 4 GPUs in one 72-GPU NVLink domain; h100-sxm: 8-GPU nodes, no larger domain.
  const dockyard::Machine g = dockyard::MachineOf(ClusterPreset("gb200-nvl72"), 0);
  CHECK(g.gpus_per_node == 72);
  CHECK(g.gpu_memory_gib == 0.0);
  const dockyard::Machine h = dockyard::MachineOf(ClusterPreset("h100-sxm"), 60);
  CHECK(h.gpus_per_node == 8);
  CHECK(h.gpu_memory_gib == 60.0);
}
