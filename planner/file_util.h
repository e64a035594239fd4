// Atomic output files: content goes to a temporary file in the same directory, is flushed and
// then renamed over the destination, so a reader never sees a half-written file and a failure
// leaves no partial output behind. A symlink is followed (its target is replaced); an existing
// device or FIFO (e.g. /dev/null) is written through, never replaced. Errors throw
// dockyard::Error naming the path.
#pragma once

#include <string>

namespace dockyard {

void WriteFileAtomically(const std::string& path, const std::string& content);

}  // namespace dockyard
