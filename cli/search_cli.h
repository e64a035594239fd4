// dockyard-plan search: the search's flags into SearchOptions, one library call
// (planner/report/search_command.h RunSearchCommand), the outputs.
#pragma once

#include <ostream>

#include "cli/plan_flags.h"

namespace dockyard::cli {

// Runs `dockyard-plan search` with the parsed flags `o`: the table (or JSON) on `out`, notes and
// the progress bar on `err`. Returns the exit code: 0, or 1 when no layout is ranked (the counts
// and the reason on `err`, no file written). Throws dockyard::Error for bad input (RunPlanCli
// prints it and exits 1) and cli::UsageError for a usage error (exit 2).
int RunSearch(const PlanCliOptions& o, std::ostream& out, std::ostream& err);

}  // namespace dockyard::cli
