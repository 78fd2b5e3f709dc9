// bandit-loadgen: drives banditd (or bandit-echo, the ceiling) with the gRPC callback API and
// reports throughput and latency percentiles as JSON.
//
// Load model: --channels separate HTTP/2 connections, each with --inflight concurrent "slots".
// A slot runs one RPC at a time and starts its next RPC from the completion callback (closed
// loop), so the offered concurrency is exactly channels x inflight.
//
//   --mode=paired  every slot does Select then Update with the returned event id (one "round");
//                  with --batch=N it does SelectBatch(N) then UpdateBatch(N) (N rounds).
//   --mode=mix     every slot does Select with probability --select_fraction, otherwise Update of
//                  an event id some earlier Select returned (Select when none is waiting).
//   --instances=N  scale test: create N instances, list them all, serve one round on each,
//                  report RSS of --server_pid before/after and bytes per instance.
//
// Examples
//   bandit-loadgen --target=127.0.0.1:50051 --instance=lg --policy=glb_omd --d=20
//                  --arms=50 --channels=1 --inflight=64 --duration_s=10
//   bandit-loadgen --service=echo --target=127.0.0.1:7000 --d=20 --arms=50 --inflight=64
//   bandit-loadgen --target=... --instances=10000 --server_pid=1234
//
// Files: workload.* (policy config, request pool, reward model), load_run.* (the closed-loop
// run), scale_test.* (instance setup, --instances), measure.* (percentiles, /proc readings,
// errors), inprocess.* (--inprocess: per-round timing of every policy without gRPC).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "bandit/v1/service.grpc.pb.h"
#include "bench/loadgen/inprocess.h"
#include "bench/loadgen/load_run.h"
#include "bench/loadgen/scale_test.h"
#include "bench/loadgen/workload.h"
#include "core/registry.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "Server address host:port");
ABSL_FLAG(std::string, service, "bandit",
          "bandit (bandit.v1.BanditService) or echo (bandit.bench.Echo)");
ABSL_FLAG(std::string, instance, "loadgen", "Instance name (created if missing)");
ABSL_FLAG(bool, fresh, false, "Delete the instance first if it exists, then create it");
ABSL_FLAG(std::string, policy, "glb_omd",
          "Policy of a created instance: any registered policy, its first registered example "
          "at --d (dimension; S = 3, the reward model's norm) and --arms (arm count, arm "
          "features of dimension --d)");
ABSL_FLAG(std::string, policy_config, "",
          "Text-format bandit.v1.PolicyConfig; overrides --policy (requests still use --d/--arms)");
ABSL_FLAG(int32_t, d, 20, "Feature dimension (candidates, arm features, x)");
ABSL_FLAG(int32_t, arms, 50, "Candidates per Select (contextual) or arms of the arm set");
ABSL_FLAG(int64_t, pending_capacity, 0,
          "config.pending.capacity of a created instance (0 = server default)");
ABSL_FLAG(int32_t, channels, 1, "Number of channels (separate connections)");
ABSL_FLAG(int32_t, inflight, 64, "Concurrent RPCs per channel");
ABSL_FLAG(double, duration_s, 10.0, "Measured duration in seconds");
ABSL_FLAG(double, warmup_s, 1.0, "Warm-up before measuring, in seconds (not counted)");
ABSL_FLAG(std::string, mode, "paired", "paired (Select then Update = one round) or mix");
ABSL_FLAG(double, select_update_mix, 0.5, "mix mode: fraction of RPCs that are Select");
ABSL_FLAG(int32_t, batch, 1, "Items per RPC; > 1 uses SelectBatch/UpdateBatch");
ABSL_FLAG(int32_t, instances, 0, "Scale test with this many instances (instead of the load run)");
ABSL_FLAG(int32_t, server_pid, 0, "Server pid, to read its RSS and CPU time from /proc (optional)");
ABSL_FLAG(bool, cleanup, false, "Scale test: delete the instances at the end");
ABSL_FLAG(int64_t, deadline_ms, 10000, "Deadline of each RPC");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the request generator");
ABSL_FLAG(std::string, label, "", "Free text copied into the JSON");
ABSL_FLAG(bool, inprocess, false,
          "No server: time Select+Update of every registered policy in-process against t");
ABSL_FLAG(int64_t, inprocess_rounds, 100000, "--inprocess: last checkpoint t");
ABSL_FLAG(double, inprocess_budget_s, 6.0, "--inprocess: time budget per policy");
ABSL_FLAG(std::string, inprocess_only, "", "--inprocess: only cases whose name contains this");
ABSL_FLAG(std::string, out, "", "Write the JSON here (default: stdout)");

using bandit::loadgen::EnsureInstance;
using bandit::loadgen::Gen;
using bandit::loadgen::MakeChannels;
using bandit::loadgen::MakePolicyConfig;
using bandit::loadgen::MakeWorkload;
using bandit::loadgen::RunBanditLoad;
using bandit::loadgen::RunConfig;
using bandit::loadgen::RunEchoLoad;
using bandit::loadgen::RunInstancesTest;
using bandit::loadgen::Workload;
using nlohmann::ordered_json;
namespace v1 = bandit::v1;

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("bandit-loadgen: load generator for banditd and bandit-echo");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_inprocess)) {
    bandit::loadgen::InProcessOptions o;
    o.d = absl::GetFlag(FLAGS_d);
    o.arms = absl::GetFlag(FLAGS_arms);
    o.max_rounds = absl::GetFlag(FLAGS_inprocess_rounds);
    o.budget_s = absl::GetFlag(FLAGS_inprocess_budget_s);
    o.only = absl::GetFlag(FLAGS_inprocess_only);
    ordered_json j;
    j["tool"] = "bandit-loadgen --inprocess";
    j["label"] = absl::GetFlag(FLAGS_label);
    j["policies"] = bandit::loadgen::RunInProcess(o);
    const std::string text = j.dump(2);
    if (const std::string path = absl::GetFlag(FLAGS_out); !path.empty()) {
      std::ofstream f(path);
      f << text << "\n";
    } else {
      std::printf("%s\n", text.c_str());
    }
    return 0;
  }
  const std::string service = absl::GetFlag(FLAGS_service);
  if (service != "bandit" && service != "echo") {
    std::fprintf(stderr, "--service must be bandit or echo\n");
    return 2;
  }
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode != "paired" && mode != "mix") {
    std::fprintf(stderr, "--mode must be paired or mix\n");
    return 2;
  }
  RunConfig cfg;
  cfg.channels = std::max(1, absl::GetFlag(FLAGS_channels));
  cfg.inflight = std::max(1, absl::GetFlag(FLAGS_inflight));
  cfg.batch = std::max(1, absl::GetFlag(FLAGS_batch));
  cfg.paired = mode == "paired";
  cfg.select_fraction = std::clamp(absl::GetFlag(FLAGS_select_update_mix), 0.0, 1.0);
  cfg.warmup_s = std::max(0.0, absl::GetFlag(FLAGS_warmup_s));
  cfg.duration_s = std::max(0.1, absl::GetFlag(FLAGS_duration_s));
  cfg.deadline_ms = absl::GetFlag(FLAGS_deadline_ms);
  cfg.seed = absl::GetFlag(FLAGS_seed);
  const int server_pid = absl::GetFlag(FLAGS_server_pid);

  Gen g(cfg.seed);
  const int d = absl::GetFlag(FLAGS_d), arms = absl::GetFlag(FLAGS_arms);
  const auto config =
      MakePolicyConfig(absl::GetFlag(FLAGS_policy), absl::GetFlag(FLAGS_policy_config), d, arms, g);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  const v1::PolicyConfig& pc = *config;
  auto local = bandit::CreatePolicy(pc, 1);  // only to learn which requests the policy takes
  if (!local.ok()) {
    std::fprintf(stderr, "policy config: %s\n", std::string(local.status().message()).c_str());
    return 2;
  }
  const std::string instance = absl::GetFlag(FLAGS_instance);
  const Workload w = MakeWorkload((*local)->context_kind(), d, arms, instance, cfg.seed);

  ordered_json out;
  out["tool"] = "bandit-loadgen";
  out["label"] = absl::GetFlag(FLAGS_label);
  out["target"] = absl::GetFlag(FLAGS_target);
  out["service"] = service;
  out["policy"] = std::string((*local)->name());
  out["d"] = d;
  out["arms"] = arms;
  out["mode"] = mode;
  if (!cfg.paired) out["select_fraction"] = cfg.select_fraction;
  out["channels"] = cfg.channels;
  out["inflight_per_channel"] = cfg.inflight;
  out["concurrency"] = cfg.channels * cfg.inflight;
  out["batch"] = cfg.batch;
  out["warmup_s"] = cfg.warmup_s;

  auto channels = MakeChannels(absl::GetFlag(FLAGS_target), cfg.channels);
  int rc = 0;
  if (const int n = absl::GetFlag(FLAGS_instances); n > 0) {
    if (service != "bandit") {
      std::fprintf(stderr, "--instances needs --service=bandit\n");
      return 2;
    }
    auto stub = v1::BanditService::NewStub(channels[0]);
    out["scale"] = RunInstancesTest(*stub, pc, w, n, cfg.channels * cfg.inflight, server_pid,
                                    absl::GetFlag(FLAGS_cleanup));
  } else {
    if (service == "bandit") {
      auto stub = v1::BanditService::NewStub(channels[0]);
      const int64_t cap = absl::GetFlag(FLAGS_pending_capacity);
      if (auto s = EnsureInstance(*stub, instance, pc, absl::GetFlag(FLAGS_fresh), cap); !s.ok()) {
        std::fprintf(stderr, "instance '%s': %s\n", instance.c_str(), s.ToString().c_str());
        return 1;
      }
      out["result"] = RunBanditLoad(channels, w, cfg, server_pid);
    } else {
      out["result"] = RunEchoLoad(channels, w, cfg, server_pid);
    }
    const auto& r = out["result"];
    if (r["rpcs"].get<int64_t>() == 0 || r["errors"].get<int64_t>() > r["rpcs"].get<int64_t>())
      rc = 1;  // nothing worked
  }

  const std::string text = out.dump(2);
  if (const std::string path = absl::GetFlag(FLAGS_out); !path.empty()) {
    std::ofstream f(path);
    f << text << "\n";
  } else {
    std::printf("%s\n", text.c_str());
  }
  std::fflush(stdout);
  std::_Exit(rc);  // skip static destructors while gRPC threads may still hold references
}
