// The unstamped build information (see build_info.h): "unknown", replaced at link time by the
// strong definition of //planner/base:build_info_stamped where a binary links it.
#include "planner/base/build_info.h"

namespace dockyard {

__attribute__((weak)) const char* BuildGitCommit() { return "unknown"; }

}  // namespace dockyard
