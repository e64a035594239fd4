// Unit conversions of the cost model: its bandwidths are in GB/s (1e9 bytes/s, ClusterSpec and
// LinkKnobs), its compute in TFLOP/s (1e12 FLOP/s), its times in microseconds.
#pragma once

namespace dockyard {

inline constexpr double kBytesPerUsPerGbps = 1e3;    // 1 GB/s = 1e9 B/s = 1e3 bytes per microsecond
inline constexpr double kFlopsPerUsPerTflops = 1e6;  // 1 TFLOP/s = 1e6 FLOP per microsecond

}  // namespace dockyard
