// Runs a command line through the shell for the end-to-end tests (the built binaries are in their
// runfiles: "cli/dockyard-plan ..."), collecting its exit status and output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <doctest/doctest.h>

namespace dockyard::testing {

struct CommandResult {
  int code = -1;    // the exit status; -1 when the command did not exit normally
  std::string out;  // stdout (with stderr when run with StderrTo::kOut)
  std::string err;  // stderr when run with StderrTo::kApart
};

enum class StderrTo { kOut, kDiscard, kApart };

// Runs `cmd` with popen; stderr joins stdout, is discarded, or is collected apart (through a file
// in $TEST_TMPDIR, else /tmp).
inline CommandResult RunCommand(const std::string& cmd, StderrTo stderr_to = StderrTo::kOut) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string err_path = std::string(tmp ? tmp : "/tmp") + "/stderr.txt";
  const std::string redirect = stderr_to == StderrTo::kOut ? " 2>&1" : stderr_to == StderrTo::kDiscard ? " 2>/dev/null" : " 2>" + err_path;
  CommandResult r;
  FILE* pipe = popen((cmd + redirect).c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (stderr_to == StderrTo::kApart) {
    if (FILE* e = fopen(err_path.c_str(), "r")) {
      while ((n = fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
      fclose(e);
    }
  }
  return r;
}

}  // namespace dockyard::testing
