// dockyard-plan: a dry run of an MoE sharding layout. See `dockyard-plan --help`.
#include <iostream>

#include "cli/plan_cli.h"

int main(int argc, char** argv) { return dockyard::RunPlanCli(argc, argv, std::cout, std::cerr); }
