// Plain progress lines for a stderr that is not a terminal (see progress_lines.h).
#include "cli/progress_lines.h"

#include <chrono>
#include <cmath>

#include <fmt/format.h>

namespace dockyard::cli {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ProgressLines::ProgressLines(std::ostream& err, double interval_s, std::function<double()> clock)
    : err_(err), interval_s_(interval_s), clock_(std::move(clock)) {
  start_ = last_ = clock_();
}

void ProgressLines::Update(int64_t done, int64_t total) {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = done;
  total_ = total;
  updated_ = true;
  PrintIfDue();
}

void ProgressLines::Tick() {
  std::lock_guard<std::mutex> lock(mu_);
  if (updated_) PrintIfDue();
}

void ProgressLines::PrintIfDue() {
  const double now = clock_();
  if (now - last_ < interval_s_) return;
  last_ = now;
  err_ << fmt::format("dockyard-plan search: {}/{} layout groups, {:.0f} s elapsed\n", done_, total_, std::floor(now - start_))
       << std::flush;
}

ProgressTicker::ProgressTicker(ProgressLines* lines, double period_s)
    : thread_([this, lines, period_s] {
        std::unique_lock<std::mutex> lock(mu_);
        while (!stop_cv_.wait_for(lock, std::chrono::duration<double>(period_s), [this] { return stop_; })) lines->Tick();
      }) {}

ProgressTicker::~ProgressTicker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_one();
  thread_.join();
}

}  // namespace dockyard::cli
