// What the decision log's benchmarks share: process CPU time, the median of repetitions, and
// stopping on the first failed call (a benchmark that cannot run its rounds has nothing to report).
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "absl/status/status.h"

namespace bandit::bench {

inline void ExitUnlessOk(const absl::Status& s) {
  if (s.ok()) return;
  std::cerr << s << "\n";
  std::exit(1);
}

// Seconds of CPU used by the whole process (every thread: the journal writer's too).
inline double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace bandit::bench
