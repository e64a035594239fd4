// End-to-end (issue 31 items 7-9): the search takes every vpp the chunk rule allows and
// --recompute-modules without --recompute; --explain of an unranked layout prints each rule's
// message and each peak against the limit; simulate --redundant-experts holds the peak after the
// replicas to the budget less the reserve and exits 3 as check does.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>

#include <doctest/doctest.h>

#include "tests/run_command.h"

namespace {

using Result = dockyard::testing::CommandResult;

// Runs dockyard-plan with `args`; stdout and stderr apart.
Result Plan(const std::string& args) {
  return dockyard::testing::RunCommand("cli/dockyard-plan " + args, dockyard::testing::StderrTo::kApart);
}

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("search takes vpp 3 (and up to the chunk rule's 6 at pp 8 for 48 layers): --explain vpp=3 ranks") {
  // Qwen3-30B-A3B: 48 layers, so at pp 8 vpp 1..(48 + 2) / 8 = 6 are searched; vpp 3 was "not searched".
  const Result r = Plan("search --model testdata/hf/qwen3-30b-a3b.json --world-size 64 --pp 8 --top 3 --explain vpp=3");
  CHECK(r.code == 0);
  CHECK_FALSE(Has(r.out + r.err, "is not searched"));
  CHECK(Has(r.out, "Explain    \"vpp=3\": rank "));
  // A vpp past the rule at the query's pp names it: 8 x 7 = 56 chunks > 48 + 2.
  const Result past = Plan("search --model testdata/hf/qwen3-30b-a3b.json --world-size 64 --top 3 --explain pp=8,vpp=7");
  CHECK(past.code == 1);
  CHECK(Has(past.err, "--explain \"pp=8,vpp=7\": vpp=7 is not searched at pp=8 (the search takes vpp 1..6): --vpp 7: pp x vpp = 56 "
                      "model chunks, more than num_hidden_layers (48) + 2"));
}

TEST_CASE("search --recompute-modules without --recompute applies the list to the selective candidates") {
  const Result r = Plan("search --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --recompute-modules layernorm,moe_act --top 200");
  CHECK(r.code == 0);
  CHECK_FALSE(Has(r.err, "recompute is none"));
  // Recompute is still searched: rows of all three kinds.
  CHECK(Has(r.out, " selective "));
  CHECK(Has(r.out, " full "));
  CHECK(Has(r.out, " none "));
}

TEST_CASE("--explain of an unranked layout prints each rule's message and each peak against the limit") {
  // Megatron, ep 8, recompute full: with EP overlap the candidate breaks Megatron's rule; without
  // it, its peak (39.12 GiB) is over the 20 GiB budget less the 2 GiB reserve = 18 GiB.
  const Result r = Plan(
      "search --model testdata/hf/qwen3-30b-a3b.json --convention megatron --world-size 64 --global-batch-size 256 "
      "--gpu-memory-gib 20 --top 3 --explain pp=1,tp=1,cp=1,ep=8,recompute=full,mbs=1,dp_sharding=zero1,dp_replicate=1");
  CHECK(r.code == 0);
  CHECK(Has(r.out, "2 matching candidates: 1 invalid by rule, 1 over the budget, 0 global batch not divisible"));
  CHECK(Has(r.out, "  invalid by rule (1 candidate): --overlap-moe-expert-parallel-comm: disable full recomputation (--recompute full)\n"
                   "    e.g. pp=1,dp_replicate=1,dp_shard=64,cp=1,tp=1,ep=8,etp=1,vpp=1,mbs=1,recompute=full,dp_sharding=zero1,"
                   "dispatcher=all_to_all,overlap=on\n"));
  CHECK(Has(r.out, "  over the budget: peak 39.12 GiB > 18.00 GiB (20.00 GiB budget less the 2.00 GiB reserve) by 21.12 GiB: "
                   "pp=1,dp_replicate=1,dp_shard=64,cp=1,tp=1,ep=8,etp=1,vpp=1,mbs=1,recompute=full,dp_sharding=zero1,"
                   "dispatcher=all_to_all,overlap=off\n"));
}

TEST_CASE("simulate --redundant-experts: a peak after over the budget less the reserve exits 3 and says the limit") {
  // Qwen3-30B-A3B on 8 GPUs, ep 8, uniform routing, 8 redundant experts: peak 97.21 GiB before,
  // 100.55 GiB after (the extra 8/128 of the routed experts: params 0.84 + grads 0.84 + AdamW 1.69 =
  // 3.37 GiB, less 0.03 GiB of activations: 33,011 rows received after instead of 33,088, 77 rows x
  // (h 2048 x 2 B fc1 input + 4 x F 768 x 2 B eager SwiGLU) x 48 layers = 0.035 GiB);
  // --gpu-memory-gib 101 less the default 2 GiB reserve = 99 GiB: before fits, after does not.
  const std::string uniform = "simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --routing uniform --cluster h200-sxm";
  const Result r = Plan(uniform + " --redundant-experts 8 --gpu-memory-gib 101");
  CHECK(r.code == 3);  // as check exits for a rank over (README "Exit codes")
  CHECK(Has(r.out, "  OVER BUDGET after: peak 100.55 GiB exceeds the 99.00 GiB limit (101.00 GiB budget less the 2.00 GiB reserve)\n"));
  CHECK_FALSE(Has(r.out, "exceeds the 101.00 GiB budget"));
  CHECK(Has(r.err, "dockyard-plan simulate: with 8 redundant experts the worst rank needs 100.55 GiB, over the 99.00 GiB limit "
                   "(101.00 GiB budget less the 2.00 GiB reserve) by 1.55 GiB\n"));
  // The same without the replicas fits: exit 0.
  CHECK(Plan(uniform + " --gpu-memory-gib 101").code == 0);
  // zipf 1.2: rank 0 receives 79,745 rows before and 33,058 after (imbalance 2.43 -> 1.01); the
  // peak after holds the rows received over the replicas (issue 31 new-user check: it kept the
  // 79,745), 118.75 GiB -> 100.57 GiB, within 130 GiB less the reserve: 46,687 rows fewer x
  // (4,096 B fc1 input + 6,144 B SwiGLU) x 48 layers = 21.37 GiB of activations, less the 3.37 GiB
  // of replicas, and the all-to-all buffers the rows size.
  const Result zipf = Plan(
      "simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --routing zipf:1.2 --redundant-experts 8 "
      "--cluster h200-sxm --gpu-memory-gib 130");
  CHECK(zipf.code == 0);
  CHECK(Has(zipf.out, "  before       2.434         79745         79745"));
  CHECK(Has(zipf.out, "  after        1.009         33058         33058"));
  CHECK(Has(zipf.out, "118.75 GiB\n"));
  CHECK(Has(zipf.out, "100.57 GiB\n"));
  // The converse: at 110 GiB (108 GiB limit) the plan without replicas is over (exit 3, as check),
  // and the replicas' peak is within: said beside the overage (issue 31 new-user check).
  const Result within = Plan(
      "simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --routing zipf:1.2 --redundant-experts 8 "
      "--cluster h200-sxm --gpu-memory-gib 110");
  CHECK(within.code == 3);
  CHECK(Has(within.err, "dockyard-plan simulate: with 8 redundant experts the worst rank needs 100.57 GiB, within the 108.00 GiB limit "
                        "(110.00 GiB budget less the 2.00 GiB reserve; 118.75 GiB without them)\n"));
}

TEST_CASE("simulate names the dispatcher that priced the MoE layer, and deepep's backend (issue 31 item 2: every report)") {
  // Qwen3-30B-A3B, 8 H100, ep 8: one node of 8 NVLink peers, which DeepEP's intranode mode runs.
  const std::string base = "simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --cluster h100-sxm --num-microbatches 1";
  const Result hybridep = Plan(base + " --dispatcher deepep --moe-flex-dispatcher-backend hybridep");
  REQUIRE(hybridep.code == 0);
  CHECK(Has(hybridep.out, "Dispatcher deepep (backend hybridep): deepep, hybridep and ncclep move their bytes alike"));
  const Result deepep = Plan(base + " --dispatcher deepep");
  REQUIRE(deepep.code == 0);
  CHECK(Has(deepep.out, "Dispatcher deepep (backend deepep)"));  // unset: Megatron's default backend
  const Result a2a = Plan(base);
  REQUIRE(a2a.code == 0);
  CHECK(Has(a2a.out, "Dispatcher all_to_all\n"));
  // One micro-batch is said in the singular; the imbalance with at most 4 significant digits.
  CHECK(Has(a2a.out, ", 1 micro-batch, recompute none, imbalance 1)"));
  // ep 1: no token leaves its rank, no Dispatcher line.
  const Result ep1 = Plan("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --cluster h100-sxm");
  REQUIRE(ep1.code == 0);
  CHECK(!Has(ep1.out, "Dispatcher "));
}
