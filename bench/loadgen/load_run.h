// The closed-loop load run: --channels connections with --inflight slots each; a slot starts
// its next RPC from the completion callback of the previous one, so the offered concurrency is
// exactly channels x inflight.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <nlohmann/json.hpp>

#include "bench/loadgen/workload.h"

namespace bandit::loadgen {

struct RunConfig {
  // paired: Select then Update of its event id (one round); else mix: Select with probability
  // select_fraction, otherwise Update of an event id an earlier Select returned.
  int channels, inflight, batch;
  bool paired;
  double select_fraction;
  double warmup_s, duration_s;
  int64_t deadline_ms;
  uint64_t seed;
};

// `n` channels to `target`, each its own HTTP/2 connection; exits if one cannot connect.
std::vector<std::shared_ptr<grpc::Channel>> MakeChannels(const std::string& target, int n);

// The load run against bandit.v1.BanditService, and against bandit.bench.Echo (the ceiling):
// throughput, latency percentiles, bytes per message, CPU of both processes over the measured
// window (the server's if server_pid > 0) and completions per second.
nlohmann::ordered_json RunBanditLoad(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                                     const Workload& w, const RunConfig& cfg, int server_pid);
nlohmann::ordered_json RunEchoLoad(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                                   const Workload& w, const RunConfig& cfg, int server_pid);

}  // namespace bandit::loadgen
