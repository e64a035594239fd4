// dockyard-plan: a dry run of an MoE sharding layout. See `dockyard-plan --help`.
#include <iostream>

#include "cli/plan_cli.h"

int main(int argc, char** argv) {
  int code = dockyard::RunPlanCli(argc, argv, std::cout, std::cerr);
  std::cout.flush();
  if (!std::cout) {
    std::cerr << "dockyard-plan: error: writing to standard output failed\n";
    return code == 0 ? 1 : code;
  }
  return code;
}
