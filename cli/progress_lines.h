// Progress of a long search when stderr is not a terminal (a CI log, a file, a pipe), where the
// bar redrawn in place with '\r' (search_cli.cc) would pile up or say nothing until the end: a
// plain line "dockyard-plan search: 128/1536 layout groups, 20 s elapsed" at most once per
// interval, none for a search that ends sooner. A layout group is one (degrees, dispatcher, dp
// sharding) with its settings (micro-batch size, recompute, vpp, EP overlap); SearchOptions::progress
// counts them (planner/search/search.h). stdout and the --json / --html documents are not touched.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <ostream>
#include <thread>

namespace dockyard::cli {

// The default seconds between two progress lines (--progress-interval).
constexpr double kDefaultProgressIntervalS = 10.0;

// Seconds on std::chrono::steady_clock (monotonic): the clock ProgressLines reads by default.
double SteadySeconds();

// Writes progress lines to `err`, at most one per `interval_s` seconds of `clock` (0: one per
// update or tick), the first once `interval_s` has passed since construction (the search's start).
// Thread-safe: the search's callback and a ProgressTicker may call it at the same time.
class ProgressLines {
 public:
  ProgressLines(std::ostream& err, double interval_s, std::function<double()> clock = SteadySeconds);
  // The search's callback (SearchOptions::progress): records `done` of `total` layout groups and
  // prints a line when one is due.
  void Update(int64_t done, int64_t total);
  // Prints a line for the last recorded count when one is due (nothing before the first Update):
  // a ticker calls it so that a line still comes while one group takes long (the first routing
  // samples of a long sequence).
  void Tick();

 private:
  void PrintIfDue();  // with mu_ held

  std::mutex mu_;
  std::ostream& err_;
  double interval_s_;
  std::function<double()> clock_;
  double start_ = 0, last_ = 0;
  int64_t done_ = 0, total_ = 0;
  bool updated_ = false;
};

// Calls lines->Tick() every `period_s` seconds on its own thread until destroyed.
class ProgressTicker {
 public:
  ProgressTicker(ProgressLines* lines, double period_s);
  ~ProgressTicker();
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dockyard::cli
