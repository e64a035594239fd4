// dockyard-plan's command line: parses flags into options, makes one library call, prints.
// Exit codes: 0 success, 1 invalid input (message names field, value and rule), 2 usage error.
#pragma once

#include <ostream>

namespace dockyard {

int RunPlanCli(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace dockyard
