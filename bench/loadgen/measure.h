// What bandit-loadgen measures and how: latency samples and their percentiles, CPU time and
// RSS read from /proc, and the first errors of a run.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>
#include <nlohmann/json.hpp>

namespace bandit::loadgen {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Samples {
  std::vector<float> us;  // one entry per measured RPC
  void Add(Clock::duration d) { us.push_back(static_cast<float>(Seconds(d) * 1e6)); }
};

// count, mean, p50, p90, p99, p999, max (microseconds).
nlohmann::ordered_json Percentiles(std::vector<float> v);

// Resident set size of process `pid` (-1 if unknown or pid <= 0).
int64_t RssBytes(int pid);
// User + system CPU seconds of process `pid` (-1 if unknown or pid <= 0).
double CpuSecondsOf(int pid);
double SelfCpuSeconds();

// Counts errors and keeps the first few messages.
struct Errors {
  std::mutex mu;
  int64_t count = 0;
  std::vector<std::string> first;
  void Add(const grpc::Status& s, const char* what);
  void Add(const std::string& m);
};

}  // namespace bandit::loadgen
