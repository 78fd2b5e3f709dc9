// The decision log's cost per round: Select + Update through DecisionService with a journal
// (FileStorage, --durability=none, default snapshot schedule) and the log off vs on, CPU time of
// the whole process (journal writer and snapshot threads included), interleaved repetitions,
// medians. In-process (no gRPC), so the ratio overstates the log's share of a real server
// round, whose gRPC work comes on top.
//
//   bandit-decision-log-bench [--rounds=N] [--reps=R] [--candidates=50] [--dim=20]
//       [--policy=linucb|glm_eps] [--data_dir=/tmp/dl_bench] [--write_log=LOG.dsjson]
//   bandit-decision-log-bench --memory [--rounds=N] [--policy=linucb|eps_greedy]
//
// --memory: the memory a held decision costs, measured by the allocator (glibc's in-use heap
// and mmapped bytes) after N rounds without storage, log on minus log off, per held decision,
// against the decision's encoded size (what max_bytes counts).
//
// --write_log writes the last "on" run's decision log as DSJSON (input for bandit-ope's
// throughput).
#include <malloc.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <vector>

#include <google/protobuf/text_format.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/decision_log/bench_common.h"
#include "client/cpp/decision_log_format.h"
#include "server/service/decision_service.h"
#include "server/service/persistence.h"

ABSL_FLAG(int, rounds, 20000, "Select + Update rounds per run");
ABSL_FLAG(int, reps, 5, "interleaved repetitions of (off, on)");
ABSL_FLAG(int, candidates, 50, "candidates per Select");
ABSL_FLAG(int, dim, 20, "feature dimension");
ABSL_FLAG(std::string, policy, "linucb",
          "linucb (read-only Select) or glm_eps (GLM epsilon-greedy)");
ABSL_FLAG(int64_t, log_max_bytes, 0,
          "decision_log.max_bytes of the logged runs (0 = the default, 64 MiB)");
ABSL_FLAG(std::string, data_dir, "/tmp/decision_log_bench", "journal directory (wiped per run)");
ABSL_FLAG(std::string, write_log, "", "write the last logged run as DSJSON here");
ABSL_FLAG(bool, journal, true,
          "false: no storage at all (splits the log's cost into its in-memory and its journal "
          "part)");
ABSL_FLAG(std::string, prepare_data_dir, "",
          "instead: write a data dir whose instance 'big' holds --events logged decisions "
          "(2 arms), for the export memory measurement (export_memory.sh)");
ABSL_FLAG(int64_t, events, 1'000'000, "--prepare_data_dir: decisions in the log");
ABSL_FLAG(bool, memory, false,
          "instead: bytes of memory per held decision, log on minus off (eps_greedy: 2 arms)");

namespace {

using bandit::bench::ExitUnlessOk;
using bandit::bench::CpuSeconds;
using bandit::bench::Median;

namespace v1 = bandit::v1;
using bandit::server::DecisionService;

// Of the last RunOnce: its kernel CPU and page faults per round (the log's writes and
// snapshots are kernel copies into page-cache pages).
struct KernelShare {
  double sys_us = 0;
  double minor_faults = 0;
} last_kernel_share;

rusage Usage() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u;
}

// Microseconds of process CPU per round.
double RunOnce(bool log, const std::vector<v1::SelectRequest>& requests, bool write_log) {
  const std::string dir = absl::GetFlag(FLAGS_data_dir);
  std::filesystem::remove_all(dir);
  DecisionService svc;
  bandit::server::PersistenceOptions o;
  o.data_dir = dir;
  o.durability = bandit::server::Durability::kNone;
  std::unique_ptr<bandit::server::Persistence> persistence;
  if (absl::GetFlag(FLAGS_journal)) {
    auto opened = bandit::server::Persistence::Open(o, &svc);
    ExitUnlessOk(opened.status());
    persistence = *std::move(opened);
  }
  const int d = absl::GetFlag(FLAGS_dim);
  std::string config = absl::GetFlag(FLAGS_policy) == "linucb"
                           ? absl::StrCat("policy { linucb { dimension: ", d, " } }")
                           : absl::StrCat("policy { glm_epsilon_greedy { dimension: ", d,
                                          " link: GAUSSIAN epsilon: 0.1 } }");
  if (log)
    config += absl::StrCat(" decision_log { enabled: true max_bytes: ",
                           absl::GetFlag(FLAGS_log_max_bytes), " }");
  v1::CreateInstanceRequest create;
  create.set_name("bench");
  google::protobuf::TextFormat::ParseFromString(config, create.mutable_config());
  v1::Instance out;
  ExitUnlessOk(svc.CreateInstance(create, &out));
  std::mt19937_64 rng(1);
  std::normal_distribution<double> noise(0, 0.1);
  const rusage usage_before = Usage();
  const double start = CpuSeconds();
  for (const auto& req : requests) {
    v1::Decision dec;
    ExitUnlessOk(svc.Select(req, &dec));
    v1::UpdateRequest up;
    up.set_instance("bench");
    up.set_event_id(dec.event_id());
    up.set_reward(0.3 * req.candidates(dec.arm_index()).values(0) + noise(rng));
    v1::UpdateResponse r;
    ExitUnlessOk(svc.Update(up, &r));
  }
  const double us = (CpuSeconds() - start) * 1e6 / requests.size();
  const rusage usage_after = Usage();
  auto seconds = [](const timeval& t) { return t.tv_sec + 1e-6 * t.tv_usec; };
  last_kernel_share.sys_us =
      (seconds(usage_after.ru_stime) - seconds(usage_before.ru_stime)) * 1e6 / requests.size();
  last_kernel_share.minor_faults =
      static_cast<double>(usage_after.ru_minflt - usage_before.ru_minflt) / requests.size();
  if (write_log) {
    std::ofstream f(absl::GetFlag(FLAGS_write_log));
    v1::ExportDecisionLogRequest req;
    req.set_name("bench");
    DecisionService::DecisionLogCursor cursor;
    for (bool done = false; !done;) {
      v1::DecisionLogChunk chunk;
      if (!svc.ReadDecisionLog(req, &cursor, &chunk, &done).ok()) break;
      for (const auto& dl : chunk.decisions())
        f << bandit::client::FormatDecision(bandit::client::LogFormat::kDsjson, dl, "bench")
          << "\n";
    }
  }
  return us;
}

}  // namespace

int PrepareDataDir() {
  const std::string dir = absl::GetFlag(FLAGS_prepare_data_dir);
  const int64_t n = absl::GetFlag(FLAGS_events);
  std::filesystem::remove_all(dir);
  DecisionService svc;
  bandit::server::PersistenceOptions o;
  o.data_dir = dir;
  o.durability = bandit::server::Durability::kNone;
  o.snapshot_every_changes = int64_t{1} << 40;
  o.snapshot_interval_ms = int64_t{1} << 40;
  auto persistence = bandit::server::Persistence::Open(o, &svc);
  if (!persistence.ok()) {
    std::cerr << persistence.status() << "\n";
    return 1;
  }
  v1::CreateInstanceRequest create;
  create.set_name("big");
  google::protobuf::TextFormat::ParseFromString(
      absl::StrCat("policy { epsilon_greedy { epsilon: 0.2 } num_arms: 2 } "
                   "pending { reward_wait_ms: 600000 } "
                   "decision_log { enabled: true max_bytes: 4000000000 max_events: ",
                   n, " }"),
      create.mutable_config());
  v1::Instance out;
  if (auto s = svc.CreateInstance(create, &out); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  v1::SelectRequest sel;
  sel.set_instance("big");
  for (int64_t i = 0; i < n; ++i) {
    v1::Decision dec;
    if (auto s = svc.Select(sel, &dec); !s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
    v1::UpdateRequest up;
    up.set_instance("big");
    up.set_event_id(dec.event_id());
    up.set_reward(dec.arm_index() == 1 ? 0.6 : 0.4);
    v1::UpdateResponse r;
    if (auto s = svc.Update(up, &r); !s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
  }
  if (auto s = (*persistence)->SnapshotAll(); !s.ok()) {
    std::cerr << s.status() << "\n";
    return 1;
  }
  std::cout << "wrote " << dir << ": instance 'big' with " << n << " logged decisions\n";
  return 0;
}

int64_t AllocatedBytes() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd);
}

// In-use bytes after `rounds` Select + Update rounds (no storage), log off or on; the log's
// encoded bytes and events through *stats.
int64_t HeldAfter(bool log, int rounds, const std::vector<v1::SelectRequest>& requests,
                  v1::InstanceStats* stats) {
  const int64_t before = AllocatedBytes();
  int64_t held = 0;
  {
    DecisionService svc;
    const std::string policy = absl::GetFlag(FLAGS_policy);
    std::string config =
        policy == "eps_greedy"
            ? "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 2 }"
            : absl::StrCat("policy { linucb { dimension: ", absl::GetFlag(FLAGS_dim), " } }");
    config += absl::StrCat(" pending { reward_wait_ms: 600000 } ");
    if (log)
      config += absl::StrCat("decision_log { enabled: true max_bytes: 4000000000 max_events: ",
                             rounds, " }");
    v1::CreateInstanceRequest create;
    create.set_name("bench");
    google::protobuf::TextFormat::ParseFromString(config, create.mutable_config());
    v1::Instance out;
    ExitUnlessOk(svc.CreateInstance(create, &out));
    v1::SelectRequest plain;
    plain.set_instance("bench");
    for (int i = 0; i < rounds; ++i) {
      const v1::SelectRequest& req = policy == "eps_greedy" ? plain : requests[i];
      v1::Decision dec;
      ExitUnlessOk(svc.Select(req, &dec));
      v1::UpdateRequest up;
      up.set_instance("bench");
      up.set_event_id(dec.event_id());
      up.set_reward(0.5);
      v1::UpdateResponse r;
      ExitUnlessOk(svc.Update(up, &r));
    }
    malloc_trim(0);
    held = AllocatedBytes() - before;
    v1::GetInstanceRequest g;
    g.set_name("bench");
    (void)svc.GetInstance(g, &out);
    *stats = out.stats();
  }
  return held;
}

int MeasureMemory(const std::vector<v1::SelectRequest>& requests) {
  const int rounds = static_cast<int>(requests.size());
  v1::InstanceStats off_stats, on_stats;
  const int64_t off = HeldAfter(false, rounds, requests, &off_stats);
  const int64_t on = HeldAfter(true, rounds, requests, &on_stats);
  const double events = static_cast<double>(on_stats.decision_log_events());
  std::cout << absl::StrFormat(
      "policy %s, %d rounds: log holds %d decisions, %.0f encoded bytes each; memory per held "
      "decision (log on minus off, allocator in-use bytes) %.0f bytes = %.2f x encoded\n",
      absl::GetFlag(FLAGS_policy), rounds, on_stats.decision_log_events(),
      on_stats.decision_log_bytes() / events, (on - off) / events,
      (on - off) / static_cast<double>(on_stats.decision_log_bytes()));
  return 0;
}

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (!absl::GetFlag(FLAGS_prepare_data_dir).empty()) return PrepareDataDir();
  const int rounds = absl::GetFlag(FLAGS_rounds), k = absl::GetFlag(FLAGS_candidates),
            d = absl::GetFlag(FLAGS_dim), reps = absl::GetFlag(FLAGS_reps);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> g(0, 1.0 / std::sqrt(d));
  std::vector<v1::SelectRequest> requests(rounds);
  for (auto& req : requests) {
    req.set_instance("bench");
    for (int c = 0; c < k; ++c) {
      auto* v = req.add_candidates();
      for (int j = 0; j < d; ++j) v->add_values(g(rng));
    }
  }
  if (absl::GetFlag(FLAGS_memory)) return MeasureMemory(requests);
  std::vector<double> off, on;
  for (int r = 0; r < reps; ++r) {
    off.push_back(RunOnce(false, requests, false));
    const KernelShare off_kernel = last_kernel_share;
    on.push_back(RunOnce(true, requests, r == reps - 1 && !absl::GetFlag(FLAGS_write_log).empty()));
    std::cout << absl::StrFormat(
        "rep %d: off %.2f us/round (kernel %.2f, %.3f page faults), on %.2f us/round (kernel "
        "%.2f, %.3f page faults)\n",
        r, off.back(), off_kernel.sys_us, off_kernel.minor_faults, on.back(),
        last_kernel_share.sys_us, last_kernel_share.minor_faults);
  }
  const double m_off = Median(off), m_on = Median(on);
  std::cout << absl::StrFormat(
      "policy %s, %d candidates x %d, %d rounds, %d reps: median CPU per round off %.2f us, on "
      "%.2f us, on/off %.3f (log +%.1f%%)\n",
      absl::GetFlag(FLAGS_policy), k, d, rounds, reps, m_off, m_on, m_on / m_off,
      100 * (m_on / m_off - 1));
  std::filesystem::remove_all(absl::GetFlag(FLAGS_data_dir));
  return 0;
}
