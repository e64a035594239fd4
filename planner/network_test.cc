// Collective bandwidth from the group's shape (network.h) on hand-computed cases.
#include "planner/network.h"

#include <doctest/doctest.h>

#include "planner/cost.h"
#include "planner/error.h"

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
