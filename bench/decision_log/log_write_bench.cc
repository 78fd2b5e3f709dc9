// What the decision log's writes cost the process, each way side by side in one run
// (alternated repetitions, medians of process CPU, journal writer thread included), on the real
// file system under --dir:
//
//  snapshot: one instance snapshot carrying a full decision log (by default 64 MiB of LinUCB
//    contexts, 50 x 20 candidates, the default max_bytes), written
//      gathered  - encoded into one buffer, then written (the previous SnapshotStore::Write),
//      streamed  - SnapshotStore::Write: checksummed and written from the log's chunks through
//                  a 1 MiB buffer, the file's blocks reserved first,
//      streamed, no reserve - the same without reserving the blocks (fallocate) first.
//  journal: N Select records of that size (~8.3 KB each) through a Journal (durability none),
//    with and without its segments' blocks reserved ahead (Journal::kPreallocateBytes).
//
//   bandit-log-write-bench [--dir=/tmp/log_write_bench] [--reps=5] [--log_mib=64]
//       [--records=20000] [--candidates=50] [--dim=20] [--pause_ms=0]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "bench/decision_log/bench_common.h"
#include "server/env/file_system.h"
#include "server/instance/decision_log/decision_log.h"
#include "server/storage/journal.h"
#include "server/storage/snapshot_store.h"

ABSL_FLAG(std::string, dir, "/tmp/log_write_bench", "scratch directory (wiped)");
ABSL_FLAG(int, reps, 5, "alternated repetitions of each way");
ABSL_FLAG(int, log_mib, 64, "decision log size in the snapshot, MiB");
ABSL_FLAG(int, records, 20000, "journal records per repetition");
ABSL_FLAG(int, candidates, 50, "candidates per decision");
ABSL_FLAG(int, dim, 20, "feature dimension");
ABSL_FLAG(int, pause_ms, 0,
          "pause before each snapshot write (a server snapshots every few seconds, not back to "
          "back)");

namespace {

using bandit::bench::ExitUnlessOk;
using bandit::bench::CpuSeconds;
using bandit::bench::Median;

namespace v1 = bandit::v1;
using namespace bandit::server;

// The real file system with Preallocate ignored: the other way of each comparison.
class NoReserveFile final : public WritableFile {
 public:
  explicit NoReserveFile(std::unique_ptr<WritableFile> f) : f_(std::move(f)) {}
  absl::Status Append(absl::string_view data) override { return f_->Append(data); }
  absl::Status Sync() override { return f_->Sync(); }
  absl::Status Close() override { return f_->Close(); }

 private:
  std::unique_ptr<WritableFile> f_;
};

class NoReserveFs final : public FileSystem {
 public:
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    return Wrap(posix_->NewWritableFile(p));
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& p) override {
    return Wrap(posix_->NewAppendableFile(p));
  }
  absl::StatusOr<std::string> ReadFile(const std::string& p) override {
    return posix_->ReadFile(p);
  }
  absl::Status Rename(const std::string& a, const std::string& b) override {
    return posix_->Rename(a, b);
  }
  absl::Status SyncDir(const std::string& d) override { return posix_->SyncDir(d); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& d) override {
    return posix_->ListDir(d);
  }
  absl::Status Remove(const std::string& p) override { return posix_->Remove(p); }
  absl::Status CreateDirs(const std::string& d) override { return posix_->CreateDirs(d); }
  absl::Status Truncate(const std::string& p, uint64_t s) override {
    return posix_->Truncate(p, s);
  }

 private:
  static absl::StatusOr<std::unique_ptr<WritableFile>> Wrap(
      absl::StatusOr<std::unique_ptr<WritableFile>> f) {
    if (!f.ok()) return f.status();
    return std::unique_ptr<WritableFile>(new NoReserveFile(*std::move(f)));
  }
  FileSystem* posix_ = PosixFileSystem();
};

v1::SelectRequest Request(std::mt19937_64& rng, int n, int dim) {
  std::normal_distribution<double> g;
  v1::SelectRequest r;
  r.set_instance("bench");
  for (int c = 0; c < n; ++c) {
    auto* v = r.add_candidates();
    for (int k = 0; k < dim; ++k) v->add_values(g(rng));
  }
  return r;
}

int Snapshots(const std::string& dir) {
  const int n = absl::GetFlag(FLAGS_candidates), dim = absl::GetFlag(FLAGS_dim);
  const int64_t max_bytes = int64_t{absl::GetFlag(FLAGS_log_mib)} << 20;
  v1::DecisionLogConfig config;
  config.set_enabled(true);
  config.set_max_events(1'000'000'000);
  config.set_max_bytes(max_bytes);
  DecisionLog log(config);
  std::mt19937_64 rng(1);
  std::normal_distribution<double> g;
  std::vector<bandit::Vector> candidates(n, bandit::Vector(dim));
  const std::string policy = "linucb";
  for (uint64_t seq = 1; log.bytes() + 8 * n * dim < max_bytes; ++seq) {
    for (auto& v : candidates)
      for (int k = 0; k < dim; ++k) v[k] = g(rng);
    const std::string id = absl::StrFormat("00000000000000ab-%x", seq);
    DecisionLog::Context c;
    c.event_seq = seq;
    c.event_id = id;
    c.decided_at_ms = 1'700'000'000'000 + static_cast<int64_t>(seq);
    c.num_candidates = n;
    c.candidate_dim = dim;
    c.candidates = candidates;
    c.num_actions = n;
    c.chosen_index = static_cast<int>(seq % static_cast<uint64_t>(n));
    c.propensity = 1.0;
    c.one_hot_actions = n;
    c.policy = policy;
    log.Append(c, 0);
    if (seq % 2 == 0) log.SetOutcome(seq, v1::OUTCOME_REWARDED, 0.5, 1);
  }
  const auto frozen = log.Freeze();
  v1::InstanceSnapshot snap;
  snap.set_format_version(1);
  snap.set_name("bench");
  snap.set_uid(42);
  snap.set_last_journal_seq(7);
  std::printf("snapshot: %lld decisions, %.1f MiB of log\n", static_cast<long long>(log.events()),
              static_cast<double>(frozen->size()) / (1 << 20));
  NoReserveFs no_reserve;
  SnapshotStore streamed(PosixFileSystem(), dir), streamed_no_reserve(&no_reserve, dir);
  ExitUnlessOk(streamed.Init());
  const char* names[] = {"gathered", "streamed", "streamed, no reserve"};
  std::vector<double> cpu[3], wall[3];
  for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) {
    for (int way = 0; way < 3; ++way) {
      std::this_thread::sleep_for(std::chrono::milliseconds(absl::GetFlag(FLAGS_pause_ms)));
      const double c0 = CpuSeconds();
      const auto w0 = std::chrono::steady_clock::now();
      if (way == 0) {
        // The previous writer: the whole file encoded into one string, then written.
        const std::string bytes = SnapshotStore::Encode(snap, frozen.get());
        ExitUnlessOk(WriteFileAtomically(&no_reserve, dir, "bench.snap", bytes));
      } else {
        ExitUnlessOk((way == 1 ? streamed : streamed_no_reserve).Write(snap, frozen.get()));
      }
      cpu[way].push_back(1e3 * (CpuSeconds() - c0));
      wall[way].push_back(
          1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count());
    }
  }
  for (int way = 0; way < 3; ++way) {
    std::printf("  %-22s CPU per snapshot %7.1f ms (", names[way], Median(cpu[way]));
    for (double v : cpu[way]) std::printf(" %.1f", v);
    std::printf(" ), wall %7.1f ms\n", Median(wall[way]));
  }
  std::printf("  streamed/gathered CPU %.3f\n", Median(cpu[1]) / Median(cpu[0]));
  return 0;
}

int Journals(const std::string& dir) {
  const int records = absl::GetFlag(FLAGS_records);
  std::mt19937_64 rng(2);
  std::vector<v1::JournalRecord> pool(64);
  for (auto& rec : pool) {
    rec.set_instance("bench");
    *rec.mutable_select() = Request(rng, absl::GetFlag(FLAGS_candidates), absl::GetFlag(FLAGS_dim));
    rec.set_event_id("00000000000000ab-1");
  }
  NoReserveFs no_reserve;
  const char* names[] = {"reserved ahead", "no reserve"};
  std::vector<double> cpu[2];
  for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) {
    for (int way = 0; way < 2; ++way) {
      const std::string jdir = dir + "/journal";
      std::filesystem::remove_all(jdir);
      const double c0 = CpuSeconds();
      {
        auto j = Journal::Open(way == 0 ? PosixFileSystem() : &no_reserve, jdir, Durability::kNone,
                               1);
        ExitUnlessOk(j.status());
        for (int i = 0; i < records; ++i) ExitUnlessOk((*j)->Append(&pool[i % 64]).status());
        ExitUnlessOk((*j)->Flush());
      }
      cpu[way].push_back(1e6 * (CpuSeconds() - c0) / records);
    }
  }
  std::printf("journal: %d records of %zu bytes per repetition, durability none\n", records,
              Journal::EncodeFrame(pool[0]).size());
  for (int way = 0; way < 2; ++way) {
    std::printf("  %-15s CPU per record %6.2f us (", names[way], Median(cpu[way]));
    for (double v : cpu[way]) std::printf(" %.2f", v);
    std::printf(" )\n");
  }
  std::printf("  reserved/none CPU %.3f\n", Median(cpu[0]) / Median(cpu[1]));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_dir);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Snapshots(dir);
  Journals(dir);
  std::filesystem::remove_all(dir);
  return 0;
}
