// The dispatcher and training-setting name tables (dispatcher.h, training.h, planner/base/name_table.h).
#include "planner/model/dispatcher.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/model/training.h"
#include "planner/model/training_json.h"

namespace dockyard {

TEST_CASE("every dispatcher's name parses back to it, in the table's order") {
  CHECK(DispatcherNames() == std::vector<std::string>{"all_to_all", "deredundency", "deepep", "allgather"});
  for (Dispatcher d : {Dispatcher::kAllToAll, Dispatcher::kDeredundency, Dispatcher::kDeepEp, Dispatcher::kAllGather}) {
    CHECK(ParseDispatcher(DispatcherName(d), "--dispatcher") == d);
  }
  CHECK(std::string(DispatcherName(Dispatcher::kDeepEp)) == "deepep");
}

TEST_CASE("an unknown dispatcher names the field, the value, the allowed names and the closest") {
  CHECK_THROWS_WITH_AS(ParseDispatcher("all_to_al", "--dispatcher"),
                       "--dispatcher: must be \"all_to_all\", \"deredundency\", \"deepep\" or \"allgather\", got \"all_to_al\"; "
                       "did you mean 'all_to_all'?",
                       Error);
  // Megatron's spellings (--moe-token-dispatcher-type alltoall | flex) are named as dockyard's.
  CHECK_THROWS_WITH_AS(ParseDispatcher("alltoall", "--dispatcher"),
                       "--dispatcher: must be \"all_to_all\", \"deredundency\", \"deepep\" or \"allgather\", got \"alltoall\"; "
                       "Megatron's --moe-token-dispatcher-type alltoall is dockyard's all_to_all",
                       Error);
  CHECK_THROWS_WITH_AS(ParseDispatcher("flex", "/training/dispatcher"),
                       doctest::Contains("Megatron's --moe-token-dispatcher-type flex is dockyard's deepep, its backend "
                                         "--moe-flex-dispatcher-backend deepep | hybridep | ncclep"),
                       Error);
  // dockyard-run once parsed the plan's name itself; "nccl" is no dispatcher and nothing is close to it.
  CHECK_THROWS_WITH_AS(ParseDispatcher("nccl", "dispatcher"),
                       "dispatcher: must be \"all_to_all\", \"deredundency\", \"deepep\" or \"allgather\", got \"nccl\"", Error);
}

TEST_CASE("JSON writes a dispatcher's name, not its ordinal") {
  const Json j = {{"dispatcher", Dispatcher::kAllGather}};
  CHECK(j.dump() == "{\"dispatcher\":\"allgather\"}");
  TrainingConfig t;
  t.dispatcher = Dispatcher::kDeredundency;
  CHECK(TrainingToJson(t, dockyard::Machine{}).at("dispatcher") == "deredundency");
}

TEST_CASE("the training settings' tables: three names read 'a, b or c'; no suggestion") {
  CHECK(ParseOptimizer("sgd", "--optimizer") == Optimizer::kSgd);
  CHECK_THROWS_WITH_AS(ParseOptimizer("adam", "--optimizer"), "--optimizer: must be \"adamw\", \"sgd\" or \"muon\", got \"adam\"", Error);
  CHECK(ParseDpSharding("zero1", "x") == DpSharding::kZero1);
  CHECK_THROWS_WITH_AS(ParseDpSharding("zero3", "/training/dp_sharding"),
                       "/training/dp_sharding: must be \"fsdp\", \"zero1\" or \"ddp\", got \"zero3\"", Error);
  CHECK(ParseRecompute("selective", "--recompute") == Recompute::kSelective);
  CHECK(std::string(RecomputeName(Recompute::kFull)) == "full");
  CHECK(RecomputeNames() == std::vector<std::string>{"none", "selective", "full"});
}

}  // namespace dockyard
