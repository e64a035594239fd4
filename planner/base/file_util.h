// Atomic output files: content goes to a temporary file in the same directory, is flushed and
// then renamed over the destination, so a reader never sees a half-written file and a failure
// leaves no partial output behind. A symlink is followed (its target is replaced, or created when the link dangles); an existing
// device or FIFO (e.g. /dev/null) is written through, never replaced. Errors throw
// dockyard::Error naming the path.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace dockyard {

// A file a command read, and the flag that named it ("--model", "--routing trace:", "--plan"), so
// that an error about the file names the flag too.
struct InputFile {
  std::string flag;
  std::string path;
  bool operator==(const InputFile& o) const { return flag == o.flag && path == o.path; }
};

// The directory part of `path` ("." when none, "/" for the root) and its last component:
// ("a/b/c.json") -> ("a/b", "c.json"), ("c.json") -> (".", "c.json"). A program's name is
// SplitPath(argv[0]).second (argv[0] is a Bazel cache path under `bazel run`).
std::pair<std::string, std::string> SplitPath(const std::string& path);

void WriteFileAtomically(const std::string& path, const std::string& content);

// Writes several files all-or-nothing: every regular file goes to a temporary file first and
// is renamed into place only when all of them were written; on any failure the temporaries are
// removed and no destination changes. Devices and FIFOs are written through before any rename, so
// a failing one (e.g. /dev/full) leaves no regular file behind.
void WriteFilesAtomically(const std::vector<std::pair<std::string, std::string>>& files);

// Refuses an output that is one of the run's inputs (the same file, also through another path
// or a link): throws dockyard::Error "<flag> '<output>' is the input '<input>': refusing to
// overwrite it". "-" (stdout), outputs that do not exist yet and devices are fine; inputs that
// are not files (preset names, "<embedded ...>") are skipped.
void RejectOutputOverInputs(const std::string& output, const std::string& flag, const std::vector<std::string>& inputs);

// Whether two output paths name the same file, also through another spelling ("./x", an absolute
// path, a symlinked directory), a symlink or a hard link, whether or not the file exists yet:
// std::filesystem::equivalent when both exist, else their weakly_canonical absolute paths after
// following symlink chains (relative targets from the link's directory, at most 40 hops), so a
// dangling symlink names the file it will create. "-" equals only "-".
bool SameOutputPath(const std::string& a, const std::string& b);

// Checks before any work that `path` can be written: its directory exists and is a directory,
// and `path` itself is not a directory. Throws dockyard::Error "<flag> '<path>': ..." naming the
// flag. "-" passes.
void CheckOutputPath(const std::string& path, const std::string& flag);

}  // namespace dockyard
