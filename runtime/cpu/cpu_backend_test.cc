// The CPU backend (cpu_backend.h): collectives between rank threads, their checks, rank-order
// reductions, the collective log and failure propagation.
#include "runtime/cpu/cpu_backend.h"

#include <atomic>
#include <vector>

#include <doctest/doctest.h>

#include "planner/base/error.h"

using namespace dockyard::runtime;
using dockyard::runtime::cpu::CpuBackend;

namespace {

std::vector<RankSpec> OneGroup(int64_t n, const std::string& label = "ep") {
  std::vector<int64_t> ranks;
  for (int64_t r = 0; r < n; ++r) ranks.push_back(r);
  std::vector<RankSpec> specs;
  for (int64_t r = 0; r < n; ++r) specs.push_back({r, {{label, ranks}}});
  return specs;
}

}  // namespace

TEST_CASE("all_to_all_single moves uneven splits, including a rank that sends and receives nothing") {
  // Rank r sends p rows to rank p, except rank 0, which sends nothing. Rank 0 therefore receives
  // 0 rows from everyone (p = 0). A row holds (src, dst, i).
  const int64_t n = 3;
  std::vector<std::vector<float>> received(n);
  CpuBackend backend;
  backend.RunRanks(OneGroup(n), [&](RankContext& ctx) {
    const int64_t r = ctx.rank();
    std::vector<int64_t> send_splits(n), recv_splits(n);
    std::vector<float> send;
    for (int64_t p = 0; p < n; ++p) {
      send_splits[static_cast<size_t>(p)] = r == 0 ? 0 : p;
      recv_splits[static_cast<size_t>(p)] = p == 0 ? 0 : r;
      for (int64_t i = 0; i < send_splits[static_cast<size_t>(p)]; ++i) {
        send.insert(send.end(), {static_cast<float>(r), static_cast<float>(p), static_cast<float>(i)});
      }
    }
    std::vector<float> recv(static_cast<size_t>(3 * (r * (n - 1))));
    ctx.group("ep").AllToAllSingle(send.data(), send_splits, recv.data(), recv_splits, 3);
    received[static_cast<size_t>(r)] = recv;
  });
  CHECK(received[0].empty());
  // Rank 2 receives 2 rows from rank 1 then 2 rows from rank 2, each (src, 2, i).
  REQUIRE(received[2].size() == 12);
  const std::vector<float> want = {1, 2, 0, 1, 2, 1, 2, 2, 0, 2, 2, 1};
  CHECK(received[2] == want);
}

TEST_CASE("all_to_all_single rejects split sizes that do not match the sender's") {
  CpuBackend backend;
  CHECK_THROWS_WITH_AS(
      backend.RunRanks(OneGroup(2),
                       [&](RankContext& ctx) {
                         std::vector<float> buf(8);
                         // Rank 0 says it sends 1 row to rank 1; rank 1 expects 2.
                         const std::vector<int64_t> send = {1, 1};
                         const std::vector<int64_t> recv = ctx.rank() == 1 ? std::vector<int64_t>{2, 1} : std::vector<int64_t>{1, 1};
                         ctx.group("ep").AllToAllSingle(buf.data(), send, buf.data() + 4, recv, 1);
                       }),
      doctest::Contains("sends 1 rows to rank 1, which expects 2"), dockyard::Error);
}

TEST_CASE("all_reduce and reduce_scatter sum in rank order on every rank") {
  // fp32: (1e8 + 1) - 1e8 = 0, because 1e8 + 1 rounds to 1e8; any other order gives 1 or 0.
  // Rank order (0, 1, 2) with values (1e8, 1, -1e8) must give exactly 0 everywhere.
  const float values[] = {1e8f, 1.0f, -1e8f};
  std::vector<float> reduced(3), scattered(6);
  CpuBackend backend;
  backend.RunRanks(OneGroup(3), [&](RankContext& ctx) {
    const int64_t r = ctx.rank();
    float x = values[r];
    ctx.group("ep").AllReduce(&x, 1);
    reduced[static_cast<size_t>(r)] = x;
    // reduce_scatter: rank r receives sum over members of their send[r * 2 .. r * 2 + 2).
    std::vector<float> send(6, values[r]);
    send[static_cast<size_t>(2 * r)] = 7.0f * static_cast<float>(r);
    ctx.group("ep").ReduceScatter(send.data(), scattered.data() + 0, 0);  // count 0 is allowed
    float out[2];
    ctx.group("ep").ReduceScatter(send.data(), out, 2);
    scattered[static_cast<size_t>(2 * r)] = out[0];
    scattered[static_cast<size_t>(2 * r + 1)] = out[1];
  });
  for (float x : reduced) CHECK(x == 0.0f);
  // Element 2r of the reduce-scatter: rank r contributed 7r, the others their value.
  CHECK(scattered[0] == (0.0f + 1.0f) + -1e8f);  // (0 + 1) - 1e8
  CHECK(scattered[1] == 0.0f);                   // (1e8 + 1) - 1e8
  CHECK(scattered[2] == (1e8f + 7.0f) + -1e8f);  // 1e8 + 7 = 100000008 exactly, minus 1e8 = 8
  CHECK(scattered[2] == 8.0f);
}

TEST_CASE("all_gather concatenates every member's buffer in group order") {
  std::vector<std::vector<int64_t>> got(4);
  CpuBackend backend;
  backend.RunRanks(OneGroup(4), [&](RankContext& ctx) {
    const int64_t mine[2] = {ctx.rank(), 10 * ctx.rank()};
    std::vector<int64_t> all(8);
    ctx.group("ep").AllGather(mine, 2, all.data());
    got[static_cast<size_t>(ctx.rank())] = all;
  });
  const std::vector<int64_t> want = {0, 0, 1, 10, 2, 20, 3, 30};
  for (const auto& g : got) CHECK(g == want);
}

TEST_CASE("A collective issued differently by two members fails with both names instead of hanging") {
  CpuBackend backend;
  CHECK_THROWS_WITH_AS(backend.RunRanks(OneGroup(2),
                                        [&](RankContext& ctx) {
                                          float x[2] = {};
                                          if (ctx.rank() == 0) {
                                            ctx.group("ep").AllReduce(x, 1);
                                          } else {
                                            ctx.group("ep").AllGather(x, 1, x);
                                          }
                                        }),
                       doctest::Contains("collective mismatch on group ep"), dockyard::Error);
}

TEST_CASE("An error on one rank releases the ranks waiting in a collective and names the rank") {
  CpuBackend backend;
  std::atomic<int> released{0};
  CHECK_THROWS_WITH_AS(backend.RunRanks(OneGroup(4),
                                        [&](RankContext& ctx) {
                                          if (ctx.rank() == 2) throw dockyard::Error("bad input");
                                          float x = 0;
                                          try {
                                            ctx.group("ep").AllReduce(&x, 1);
                                          } catch (...) {
                                            ++released;
                                            throw;
                                          }
                                        }),
                       doctest::Contains("rank 2: bad input"), dockyard::Error);
  CHECK(released == 3);
}

TEST_CASE("The collective log records op, group, dtype and sizes") {
  std::vector<std::vector<CollectiveRecord>> logs(2);
  CpuBackend backend;
  backend.RunRanks(OneGroup(2, "iep"), [&](RankContext& ctx) {
    Communicator& c = ctx.group("iep");
    c.set_log(&logs[static_cast<size_t>(ctx.rank())]);
    float x[4] = {1, 2, 3, 4};
    c.AllReduce(x, 4);
    c.Barrier();
    c.set_log(nullptr);
    c.Barrier();  // not logged
  });
  for (const auto& log : logs) {
    REQUIRE(log.size() == 2);
    CHECK(log[0].op == "all_reduce");
    CHECK(log[0].group == "iep");
    CHECK(log[0].dtype == "float32");
    CHECK(log[0].group_size == 2);
    CHECK(log[0].send_elems == 4);
    CHECK(log[1].op == "barrier");
  }
}

TEST_CASE("A rank asking for a group it does not belong to gets an error") {
  CpuBackend backend;
  CHECK_THROWS_WITH_AS(backend.RunRanks({{0, {{"ep", {1, 2}}}}}, [](RankContext&) {}),
                       doctest::Contains("rank 0 is not a member of its group \"ep\""), dockyard::Error);
  CHECK_THROWS_WITH_AS(backend.RunRanks(OneGroup(1), [](RankContext& ctx) { ctx.group("tp"); }),
                       doctest::Contains("no communicator for group \"tp\""), dockyard::Error);
}
