// Instance setup and the scale test of bandit-loadgen (--instances=N).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "bandit/v1/service.grpc.pb.h"
#include "bench/loadgen/workload.h"

namespace bandit::loadgen {

// Creates instance `name` with `pc` unless it exists (deleting it first if `fresh`);
// capacity > 0 sets config.pending.capacity.
absl::Status EnsureInstance(v1::BanditService::Stub& stub, const std::string& name,
                            const v1::PolicyConfig& pc, bool fresh, int64_t capacity);

// Creates n instances, lists them all, serves one Select + Update round on each (at most
// `window` calls in flight), and reports the server's RSS (server_pid) before and after each
// step and the bytes per instance; deletes them at the end if `cleanup`.
nlohmann::ordered_json RunInstancesTest(v1::BanditService::Stub& stub, const v1::PolicyConfig& pc,
                                        const Workload& w, int n, int window, int server_pid,
                                        bool cleanup);

}  // namespace bandit::loadgen
