// Durable state for a DecisionService, over any Storage backend: recovery at start (newest
// snapshot per instance, then the journal records after it, replayed through the instances),
// and snapshot rounds (every N changes per instance, every T seconds, on demand, at shutdown)
// followed by compaction. The request path never comes here: instances append their own
// records (Instance::Commit).
#pragma once

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include <functional>
#include <vector>
#include "absl/synchronization/mutex.h"

#include "server/service/decision_service.h"
#include "server/storage/file_storage.h"
#include "server/storage/storage.h"

namespace bandit::server {

struct PersistenceOptions {
  // The file backend's settings (Open without a Storage builds a FileStorage from them).
  std::string data_dir = "./data";
  Durability durability = Durability::kAlways;
  FileSystem* fs = PosixFileSystem();
  JournalObserver observer;                 // fsync timings, storage errors
  int64_t snapshot_every_changes = 10'000;  // per instance
  int64_t snapshot_interval_ms = 60'000;    // full round + compaction
  // Runs the snapshot interval's timer (and the file journal's everysec timer).
  const Clock* clock = SystemClock::Get();
  std::function<void(double seconds)> on_snapshot;  // snapshot write durations
  // A snapshot that could not be stored. Not a storage failure: the journal still holds every
  // change it would have covered (nothing is compacted without it) and writes go on; the next
  // round tries again.
  std::function<void(const absl::Status&)> on_snapshot_error;
};

struct RecoveryReport {
  int64_t snapshots_loaded = 0;
  int64_t journal_records = 0;
  int64_t records_replayed = 0;
  int64_t truncated_bytes = 0;
  std::vector<std::pair<std::string, std::string>> refused;  // (instance, why)
  double seconds = 0;
};

class Persistence {
 public:
  // Recovers every instance from `storage` into `service` (which must be empty), then attaches
  // the storage to the service: from then on every change is appended to it.
  static absl::StatusOr<std::unique_ptr<Persistence>> Open(std::unique_ptr<Storage> storage,
                                                           const PersistenceOptions& options,
                                                           DecisionService* service,
                                                           RecoveryReport* report = nullptr);
  // The same over files under options.data_dir (FileStorage).
  static absl::StatusOr<std::unique_ptr<Persistence>> Open(const PersistenceOptions& options,
                                                           DecisionService* service,
                                                           RecoveryReport* report = nullptr);
  ~Persistence();

  // Starts the background thread that applies the snapshot triggers and runs requested
  // snapshots (the service's SnapshotInstances).
  void StartBackground();
  // Snapshots `name` (empty = a full round) on the background thread, or inline if it is not
  // running; done(snapshots written). Requests still queued at Close run before the final round.
  void RequestSnapshot(const std::string& name, std::function<void(absl::StatusOr<int64_t>)> done);
  // Snapshot round: take a boundary, snapshot every changed instance, forget deleted ones,
  // compact the records every snapshot now covers. Returns snapshots written.
  absl::StatusOr<int64_t> SnapshotAll();
  absl::Status SnapshotOne(const std::string& name);
  // Final round and storage flush (graceful shutdown).
  absl::Status Close();

  Storage* storage() const { return storage_.get(); }
  // One instance as storage holds it, replayed, charged to the service's memory budget and
  // attached to storage (a cluster node taking it over); nullptr if it does not exist.
  // max_seq = the highest sequence number seen. Admitted on the footprint its stored config
  // declares before it is built, then charged as built: RESOURCE_EXHAUSTED (nothing kept) when
  // either does not fit, with *needed_bytes = the bytes that were asked for.
  absl::StatusOr<std::shared_ptr<Instance>> LoadInstance(const std::string& name,
                                                         uint64_t* max_seq,
                                                         int64_t* needed_bytes = nullptr);
  // Milliseconds-since-epoch of each instance's last snapshot (for the snapshot-age metric).
  std::vector<std::pair<std::string, int64_t>> LastSnapshotTimes() const;

 private:
  Persistence(std::unique_ptr<Storage> storage, const PersistenceOptions& options,
              DecisionService* service);
  absl::Status Recover(RecoveryReport* report);
  // `postponed` (if given) tells a snapshot that did not fit the memory budget (the status is
  // then RESOURCE_EXHAUSTED, as a full disk's may be too).
  absl::Status WriteSnapshot(const std::shared_ptr<Instance>& inst, bool* postponed = nullptr);
  void BackgroundLoop();
  void StopBackground();
  // The snapshot interval's tick: a full round on the background thread; returns when it ran.
  void IntervalRound();

  const PersistenceOptions options_;
  DecisionService* const service_;
  const std::unique_ptr<Storage> storage_;
  absl::Mutex round_mu_;  // one snapshot round at a time
  mutable absl::Mutex mu_;
  std::set<std::string> deleted_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> last_snapshot_ms_ ABSL_GUARDED_BY(mu_);
  // Instances whose snapshot waits for room in the memory budget (logged once each).
  std::set<std::string> postponed_ ABSL_GUARDED_BY(mu_);
  struct SnapshotRequest {
    std::string name;
    std::function<void(absl::StatusOr<int64_t>)> done;
  };
  void RunRequest(const SnapshotRequest& r);
  absl::Mutex queue_mu_;
  std::vector<SnapshotRequest> requests_ ABSL_GUARDED_BY(queue_mu_);
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  bool background_running_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread background_;
  std::unique_ptr<Timer> interval_timer_;  // started with the background thread
  bool closed_ = false;
};

}  // namespace bandit::server
