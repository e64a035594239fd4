// dockyard-run: execute one MoE layer of a plan for real and validate it. See `dockyard-run --help`.
#include <iostream>

#include "cli/run_cli.h"

int main(int argc, char** argv) {
  int code = dockyard::RunRunCli(argc, argv, std::cout, std::cerr);
  std::cout.flush();
  if (!std::cout) {
    std::cerr << "dockyard-run: error: writing to standard output failed\n";
    return code == 0 ? 1 : code;
  }
  return code;
}
