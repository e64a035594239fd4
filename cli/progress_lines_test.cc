// Plain progress lines (progress_lines.h) on a fake clock: at most one per interval, the last count
// and the seconds since the start, none for a search that ends sooner.
#include "cli/progress_lines.h"

#include <atomic>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include <doctest/doctest.h>

using dockyard::cli::ProgressLines;

TEST_CASE("ProgressLines: one line per interval of the injected clock, with the last count and the elapsed seconds") {
  double now = 100.0;  // the search starts at 100 s
  std::ostringstream err;
  ProgressLines lines(err, 10.0, [&now] { return now; });
  now = 101.0;
  lines.Update(1, 1536);
  now = 109.9;
  lines.Update(64, 1536);
  CHECK(err.str().empty());  // 9.9 s < 10 s: nothing yet
  now = 110.0;
  lines.Update(128, 1536);  // 10 s since the start
  CHECK(err.str() == "dockyard-plan search: 128/1536 layout groups, 10 s elapsed\n");
  now = 119.0;
  lines.Update(192, 1536);  // 9 s since the last line: none
  lines.Tick();
  CHECK(err.str() == "dockyard-plan search: 128/1536 layout groups, 10 s elapsed\n");
  now = 125.5;
  lines.Tick();  // no update since, 15.5 s after the last line: the last count again, 25 s in
  CHECK(err.str() ==
        "dockyard-plan search: 128/1536 layout groups, 10 s elapsed\n"
        "dockyard-plan search: 192/1536 layout groups, 25 s elapsed\n");
}

TEST_CASE("ProgressLines: a tick before the first update prints nothing; interval 0 prints every update") {
  double now = 0.0;
  std::ostringstream err;
  ProgressLines lines(err, 0.0, [&now] { return now; });
  lines.Tick();
  CHECK(err.str().empty());
  lines.Update(1, 3);
  now = 2.0;
  lines.Update(3, 3);
  CHECK(err.str() ==
        "dockyard-plan search: 1/3 layout groups, 0 s elapsed\n"
        "dockyard-plan search: 3/3 layout groups, 2 s elapsed\n");
}

TEST_CASE("ProgressTicker: ticks while the caller is busy, stops when destroyed") {
  std::ostringstream err;
  std::atomic<int> readings{0};
  // A clock that advances 10 s per reading: every tick is due.
  ProgressLines lines(err, 10.0, [&readings] { return 10.0 * readings++; });
  lines.Update(5, 7);  // read at 10 s: the first line
  {
    dockyard::cli::ProgressTicker ticker(&lines, 0.001);
    // The caller is busy (no update); wait, up to 10 s, for the ticker's two lines at 20 and 30 s.
    for (int i = 0; i < 10000 && readings.load() < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const int after = readings.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(readings.load() == after);  // destroyed: no more ticks
  const std::string text = err.str();
  CHECK(text.rfind("dockyard-plan search: 5/7 layout groups, 10 s elapsed\n"
                   "dockyard-plan search: 5/7 layout groups, 20 s elapsed\n"
                   "dockyard-plan search: 5/7 layout groups, 30 s elapsed\n",
                   0) == 0);
}
