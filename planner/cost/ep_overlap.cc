// EP overlap as two streams (see ep_overlap.h).
#include "planner/cost/ep_overlap.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/model/pipeline_schedule.h"

namespace dockyard {
namespace {

struct Op {
  int stream = 0;       // 0 compute, 1 communication
  double work = 0;      // us at full speed
  int after[2] = {-1, -1};  // operations whose data it needs (-1: none)
};

// Runs the operations, each stream in its own order, and returns when the last one ends (us).
// `one_queue`: both streams in one hardware queue, in the operations' (issue) order: an operation
// starts only once every earlier one has left the queue (ep_overlap.h PairedLayerUs).
double RunStreams(const std::vector<Op>& ops, const EpOverlapContention& c, bool one_queue) {
  std::array<std::vector<int>, 2> order;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) order[ops[i].stream].push_back(i);
  std::vector<double> done(ops.size(), -1.0);
  std::vector<bool> started(ops.size(), false);
  std::array<size_t, 2> next = {0, 0};
  std::array<int, 2> running = {-1, -1};
  std::array<double, 2> left = {0, 0};
  size_t queue_head = 0;  // one_queue: the first operation that has not left the queue
  auto advance_head = [&]() {
    while (queue_head < ops.size() && (ops[queue_head].stream == 1 ? started[queue_head] : done[queue_head] >= 0)) ++queue_head;
  };
  double now = 0;
  for (;;) {
    // Start what may start; with one queue a start can let the next operation out, so repeat.
    for (bool started_one = true; started_one;) {
      started_one = false;
      for (int s = 0; s < 2; ++s) {
        if (running[s] >= 0 || next[s] == order[s].size()) continue;
        const int i = order[s][next[s]];
        const Op& op = ops[i];
        const bool ready = std::all_of(std::begin(op.after), std::end(op.after), [&](int a) { return a < 0 || done[a] >= 0; });
        if (!ready) continue;
        if (one_queue && static_cast<size_t>(i) != queue_head) continue;
        running[s] = i;
        ++next[s];
        started[i] = true;
        left[s] = op.work;
        started_one = true;
        advance_head();
      }
    }
    if (running[0] < 0 && running[1] < 0) {
      if (next[0] == order[0].size() && next[1] == order[1].size()) return now;
      throw Error("internal: the EP-overlap streams wait on each other (ep_overlap.cc)");
    }
    // Compute beside a communication kernel runs on the SMs it leaves; the communication kernel
    // beside compute at what the contention leaves it.
    const double rate[2] = {running[1] >= 0 ? 1.0 - c.sm_share : 1.0, running[0] >= 0 ? c.comm_rate : 1.0};
    double step = std::numeric_limits<double>::infinity();
    for (int s = 0; s < 2; ++s) {
      if (running[s] >= 0) step = std::min(step, left[s] / rate[s]);
    }
    now += step;
    for (int s = 0; s < 2; ++s) {
      if (running[s] < 0) continue;
      left[s] -= step * rate[s];
      if (left[s] <= 1e-9 * std::max(1.0, ops[running[s]].work)) {
        done[running[s]] = now;
        running[s] = -1;
      }
    }
    advance_head();
  }
}

}  // namespace

double PairedLayerUs(const EpOverlapLayer& l, int64_t layers, const EpOverlapContention& contention, bool delay_wgrad, bool one_queue) {
  if (layers < 1) throw Error(fmt::format("internal: EP-overlap layers per chunk must be >= 1, got {}", layers));
  if (!(contention.sm_share >= 0 && contention.sm_share < 1)) {
    throw Error(fmt::format("internal: EP-overlap SM share must be in [0, 1), got {}", contention.sm_share));
  }
  if (!(contention.comm_rate > 0 && contention.comm_rate <= 1)) {
    throw Error(fmt::format("internal: EP-overlap communication rate must be in (0, 1], got {}", contention.comm_rate));
  }
  for (const double* v : {l.pre, l.mlp, l.dispatch, l.combine}) {
    if (!(v[0] >= 0) || !(v[1] >= 0)) throw Error("internal: EP-overlap layer times must be >= 0");
  }
  std::vector<Op> ops;
  ops.reserve(static_cast<size_t>(layers) * 9);
  int prev_combine_fwd = -1, prev_pre_bwd = -1;
  auto add = [&ops](int stream, double work, int a, int b) {
    Op op;
    op.stream = stream;
    op.work = work;
    op.after[0] = a;
    op.after[1] = b;
    ops.push_back(op);
    return static_cast<int>(ops.size()) - 1;
  };
  for (int64_t k = 0; k < layers; ++k) {
    // In the order model_chunk_schedule_plan.py issues them; stream order does the rest.
    const int combine_bwd = add(1, l.combine[1], prev_pre_bwd, -1);
    const int pre_fwd = add(0, l.pre[0], prev_combine_fwd, -1);
    // The MLP backward: with delay_wgrad_compute its input gradient, the weight gradient (as many
    // FLOPs) issued after the forward dispatch; without, both in one node.
    const int mlp_bwd = add(0, delay_wgrad ? l.mlp[1] / 2 : l.mlp[1], combine_bwd, -1);
    const int dispatch_fwd = add(1, l.dispatch[0], pre_fwd, -1);
    if (delay_wgrad) add(0, l.mlp[1] / 2, -1, -1);  // mlp_bwd_dw
    const int dispatch_bwd = add(1, l.dispatch[1], mlp_bwd, -1);
    const int mlp_fwd = add(0, l.mlp[0], dispatch_fwd, -1);
    prev_combine_fwd = add(1, l.combine[0], mlp_fwd, -1);
    prev_pre_bwd = add(0, l.pre[1], dispatch_bwd, -1);
  }
  return RunStreams(ops, contention, one_queue) / static_cast<double>(layers);
}

double FlexDispatcherSmShare(int64_t num_sms, int64_t sm_count, const std::string& cluster) {
  if (num_sms < 1 || num_sms >= sm_count) {
    throw Error(fmt::format("--moe-flex-dispatcher-num-sms {}: the dispatcher's kernels would hold {} of the {} SMs of {}'s GPU; it must "
                            "leave the compute at least one (in [1, {}])",
                            num_sms, num_sms < 1 ? "none" : "all", sm_count, cluster, sm_count - 1));
  }
  return static_cast<double>(num_sms) / static_cast<double>(sm_count);
}

double PairedChunkShare(int64_t M, int64_t pp, int64_t vpp) {
  if (M < 1 || pp < 1 || vpp < 1) {
    throw Error(fmt::format("internal: paired chunk share needs num_microbatches, pp and vpp >= 1, got {}, {}, {}", M, pp, vpp));
  }
  // The chunk forwards each rank runs before its first backward (InFlightChunks, the schedule's one
  // home for Megatron's warm-up), averaged over the ranks; as many backwards run alone at the end.
  double alone = 0;
  for (int64_t s = 0; s < pp; ++s) alone += static_cast<double>(InFlightChunks(pp, vpp, M, s));
  const double chunks = static_cast<double>(M) * static_cast<double>(vpp);
  return std::clamp((chunks - alone / static_cast<double>(pp)) / chunks, 0.0, 1.0);
}

}  // namespace dockyard
