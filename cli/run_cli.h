// dockyard-run's command line: parses flags into options, builds the plan, runs one MoE layer
// on a backend, validates and reports.
// Exit codes: 0 success, 1 invalid input, 2 usage error, 3 validation failure (#wrong > 0).
#pragma once

#include <ostream>

namespace dockyard {

int RunRunCli(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace dockyard
