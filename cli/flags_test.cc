// The shared flag definitions: training flags into typed overrides, degree flags into search pins,
// the settings a search's flags pin.
#include "cli/flags.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "planner/base/error.h"

using dockyard::cli::DegreeFlags;
using dockyard::cli::TrainingFlags;
using dockyard::cli::UsageError;

TEST_CASE("Training flags parse into typed overrides; flags not given stay unset") {
  TrainingFlags f;
  const dockyard::TrainingOverrides none = f.Parse();
  CHECK_FALSE(none.seq_len.has_value());
  CHECK_FALSE(none.dp_sharding.has_value());
  CHECK_FALSE(none.recompute_modules.has_value());
  CHECK_FALSE(none.fp8_dispatch);

  f.dp_sharding = "zero1";
  f.optimizer = "sgd";
  f.recompute = "selective";
  f.recompute_modules = "core_attn,moe_act";
  f.seq_len = "8192";
  f.gpu_memory_gib = "80";
  f.fsdp_reshard = "never";
  f.vpp = "2";
  f.fp8_dispatch = true;
  f.pp_layer_split = "7+6";
  const dockyard::TrainingOverrides o = f.Parse();
  CHECK(o.dp_sharding == dockyard::DpSharding::kZero1);
  CHECK(o.optimizer == dockyard::Optimizer::kSgd);
  CHECK(o.recompute == dockyard::Recompute::kSelective);
  CHECK(*o.recompute_modules == std::vector<std::string>{"core_attn", "moe_act"});
  CHECK(o.seq_len == 8192);
  CHECK(o.gpu_memory_gib == 80.0);
  CHECK(o.reshard_after_forward == dockyard::ReshardPolicy::kNever);
  CHECK(o.vpp == 2);
  CHECK(o.fp8_dispatch);
  CHECK(o.pp_layer_split == "7+6");  // parsed against pp and the model by ApplyTrainingOverrides

  f.seq_len = "0x10";
  CHECK_THROWS_WITH_AS(f.Parse(), "--seq-len \"0x10\": expected a decimal integer", UsageError);
}

TEST_CASE("Degree flags given to search pin their degree; 0 is refused, not read as searched") {
  DegreeFlags d;
  const dockyard::DegreePins none = d.ParsePins();
  CHECK(none.tp == 0);
  CHECK(none.pp == 0);
  d.tp = "2";
  d.pp = "8";
  const dockyard::DegreePins pins = d.ParsePins();
  CHECK(pins.tp == 2);
  CHECK(pins.pp == 8);
  CHECK(pins.ep == 0);  // searched
  d.ep = "0";
  CHECK_THROWS_WITH_AS(d.ParsePins(), "--ep: a pinned degree must be >= 1, got 0", dockyard::Error);  // out of range: exit 1
}

TEST_CASE("A search's training flags pin the settings they name") {
  TrainingFlags f;
  const dockyard::SearchSettingsPinned none = f.SearchPinned();
  CHECK_FALSE(none.micro_batch_size);
  CHECK_FALSE(none.recompute);
  CHECK_FALSE(none.dispatcher.has_value());
  f.micro_batch_size = "2";
  f.dispatcher = "deepep";
  f.overlap_moe_ep_comm_pinned = true;  // given on or off: pinned either way
  const dockyard::SearchSettingsPinned p = f.SearchPinned();
  CHECK(p.micro_batch_size);
  CHECK_FALSE(p.vpp);
  CHECK(p.ep_overlap);
  CHECK(p.dispatcher == dockyard::Dispatcher::kDeepEp);
}
