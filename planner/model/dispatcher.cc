// The dispatcher vocabulary (see dispatcher.h).
#include "planner/model/dispatcher.h"

#include <cstring>

#include "planner/base/name_table.h"

namespace dockyard {
namespace {

constexpr NameTable<Dispatcher, 4> kDispatchers{{{{Dispatcher::kAllToAll, "all_to_all"},
                                                  {Dispatcher::kDeredundency, "deredundency"},
                                                  {Dispatcher::kDeepEp, "deepep"},
                                                  {Dispatcher::kAllGather, "allgather"}}}};

constexpr NameTable<FlexBackend, 3> kFlexBackends{
    {{{FlexBackend::kDeepEp, "deepep"}, {FlexBackend::kHybridEp, "hybridep"}, {FlexBackend::kNcclEp, "ncclep"}}}};

}  // namespace

const char* FlexBackendName(FlexBackend b) {
  return kFlexBackends.Name(b);
}

const std::vector<std::string>& FlexBackendNames() {
  static const std::vector<std::string> names = kFlexBackends.Names();
  return names;
}

FlexBackend ParseFlexBackend(const std::string& name, const std::string& field) {
  return kFlexBackends.Parse(name, field, /*suggest=*/true);
}

const char* DispatcherName(Dispatcher d) {
  return kDispatchers.Name(d);
}

const std::vector<std::string>& DispatcherNames() {
  static const std::vector<std::string> names = kDispatchers.Names();
  return names;
}

Dispatcher ParseDispatcher(const std::string& name, const std::string& field) {
  // Megatron's spellings (--moe-token-dispatcher-type alltoall | allgather | flex) name dockyard's.
  if (name == "alltoall") {
    throw Error(field + ": must be \"all_to_all\", \"deredundency\", \"deepep\" or \"allgather\", got \"alltoall\"; Megatron's "
                "--moe-token-dispatcher-type alltoall is dockyard's all_to_all");
  }
  if (name == "flex") {
    throw Error(field + ": must be \"all_to_all\", \"deredundency\", \"deepep\" or \"allgather\", got \"flex\"; Megatron's "
                "--moe-token-dispatcher-type flex is dockyard's deepep, its backend --moe-flex-dispatcher-backend deepep | hybridep | ncclep");
  }
  return kDispatchers.Parse(name, field, /*suggest=*/true);
}

void to_json(Json& j, Dispatcher d) {
  j = DispatcherName(d);
}

}  // namespace dockyard
