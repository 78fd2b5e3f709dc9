// Storage in PostgreSQL: journal records and snapshots in tables of one database, so the
// learned state lives in a store operators already run, back up and replicate.
//
// Schema (created and upgraded by numbered migrations at start; bandit_schema_version records
// which have run, and a database newer than this binary is refused):
//   bandit_journal(seq bigint PRIMARY KEY, instance text, payload_crc integer, record bytea)
//     one row per JournalRecord, record = its serialized bytes, payload_crc = crc32(record)
//   bandit_snapshots(instance text PRIMARY KEY, last_seq bigint, snapshot bytea, written_at)
//     one row per instance, snapshot = the snapshot-file encoding (magic, version, crc)
//
// Commit path: Append buffers the record in memory (sequence number assigned under the caller's
// instance lock, as in the file journal); one committer thread owns one connection and turns
// whatever accumulated into one transaction (BEGIN, multi-row INSERTs, COMMIT sent together in
// libpq pipeline mode: one round trip). The COMMIT that covers a record answers every waiter it
// covers in the same step; a failed COMMIT answers every waiter UNAVAILABLE and is never
// acknowledged.
//   always:   synchronous_commit = on; WhenDurable answers after the COMMIT returned (the WAL
//             is flushed on the server): nothing acknowledged is lost.
//   everysec, none: synchronous_commit = off; acknowledged at once. A banditd crash loses the
//             records not yet committed (the committer's linger plus one commit round trip); a
//             PostgreSQL crash loses at most its WAL writer's window (3 x wal_writer_delay,
//             600 ms with the default 200 ms). PostgreSQL has no "never flush", so `none` is the
//             same as `everysec` here.
//
// Failure: a failed COMMIT or a lost connection turns health() UNAVAILABLE (writes refused,
// health NOT_SERVING upstream, on_error called with the reason); the committer reconnects with
// exponential backoff, re-takes the writer lock, checks which of the unconfirmed records the
// failed COMMIT did store (a transaction is all or nothing), writes the rest in order, and
// only then reports healthy again (on_recovered). Records that raced with the failure (their
// change was already applied in memory when health turned) are kept and written at reconnect,
// so the database never falls behind what the server has applied; their callers were answered
// UNAVAILABLE (not acknowledged: the outcome of such a write is unknown, as with a deadline).
//
// A database that went backwards (a failover to a standby that lacked the last commits, an
// older backup restored): on every reconnect, before anything new is written or acknowledged,
// the committer compares each loaded instance's newest committed sequence number (what this
// server applied in memory and the database confirmed) with the newest the database holds for
// it (journal rows and snapshot). An instance the database holds less of has *diverged*: it is
// recorded in bandit_diverged, its buffered rows are dropped (never acknowledged), appends of it
// are refused (DATA_LOSS), and on_diverged tells the server to stop serving it from memory. A
// later Recover / RecoverInstance refuses an instance listed in bandit_diverged (DATA_LOSS), so
// no node and no restart serves it until an operator decides: delete the instance, or accept
// what the database holds by deleting its bandit_diverged row (then restart / reload it).
//
// What `always` promises depends on the database: after the COMMIT returned, the WAL is flushed
// on the server, and on a synchronous standby only if synchronous_standby_names names one. At
// start, after every reconnect and every standby_recheck (10 s) the committer reads
// synchronous_standby_names; with
// durability=always and none it warns (a failover can lose acknowledged writes), or refuses to
// accept writes when require_synchronous_standby is set.
//
// One writer per database: the committer's session holds an advisory lock; a second banditd
// on the same database waits for it at start (up to writer_lock_wait) and then refuses to start.
//
// Cluster mode (cluster_node_id set, server/cluster/): several banditd share the database, each
// writing only the instances whose lease it holds (bandit_leases: owner, epoch). There is no
// writer lock and Recover reads nothing; the node loads an instance when it acquires its lease
// (RecoverInstance) and registers the epoch it holds (Own). Fencing: every transaction that
// writes an instance's records or snapshot starts with bandit_fence(node, instances, epochs),
// which share-locks those lease rows and raises unless this node still holds exactly those
// epochs. A takeover (an UPDATE of the lease row) therefore either waits for the commit, and
// then reads its rows, or has happened before it, and the commit is refused: a refused commit's
// rows are dropped, its waiters hear UNAVAILABLE (never acknowledged), the instance is disowned
// and on_fenced tells the server to drop it from memory. Journal rows are keyed by (instance,
// seq): each node numbers its own records, and Own raises the node's counter above the
// instance's last row, so an instance's records stay in order across owners.
//
// The code: postgres_storage.cc the Storage calls and cluster ownership, committer.cc the commit
// path, recovery.cc what is read back (at start, at a takeover, at every reconnect), over the
// shared access layer (connection.h) and the schema (migrations.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/storage/instance_fence.h"
#include "server/storage/postgres/connection.h"
#include "server/storage/storage.h"

namespace bandit::server {

struct PostgresStorageOptions {
  // libpq connection string ("host=... dbname=..." or a postgresql:// URI). A password comes
  // from PGPASSWORD, ~/.pgpass (libpq reads both) or `password` (the server reads
  // --postgres_password_file through its FileSystem seam). Connection options: connection.h.
  std::string dsn;
  std::string password;  // overrides the others when set; never logged
  Durability durability = Durability::kAlways;
  // Group commit in one round trip (pipeline mode). Off: BEGIN, each INSERT and COMMIT are
  // separate round trips (kept to measure the difference, bench/durability).
  bool pipeline = true;
  std::chrono::milliseconds reconnect_initial{100};
  std::chrono::milliseconds reconnect_max{2000};
  std::chrono::milliseconds writer_lock_wait{10'000};
  std::function<void(double seconds)> on_commit;      // each group COMMIT's duration
  std::function<void(const absl::Status&)> on_error;  // a failed commit / reconnect attempt
  std::function<void()> on_recovered;                 // writes accepted again
  // Cluster mode (see above): this node's id in bandit_nodes / bandit_leases.owner. Empty =
  // one writer per database (the writer lock).
  std::string cluster_node_id;
  // Instances whose commit was refused by fencing (the lease moved on): drop them from memory.
  std::function<void(const std::vector<std::string>& instances)> on_fenced;
  // The instances the server holds in memory (checked for divergence at every reconnect).
  // Unset: every instance this storage loaded or committed.
  std::function<std::vector<std::string>()> loaded_instances;
  // Instances the database holds less of than this server committed (see above): stop serving
  // them. Called on the committer thread before writes are accepted again.
  struct Divergence {
    std::string instance;
    uint64_t database_seq = 0;      // the newest sequence number the database holds for it
    uint64_t acknowledged_seq = 0;  // the newest this server committed (or loaded) for it
    std::string why;                // the message calls on it are refused with (DATA_LOSS)
  };
  std::function<void(const std::vector<Divergence>&)> on_diverged;
  // durability=always without a synchronous standby (synchronous_standby_names empty): refuse
  // to start and to accept writes after a reconnect, instead of warning.
  bool require_synchronous_standby = false;
  // How often the committer re-reads synchronous_standby_names on its connection (Patroni
  // empties it when the standby is lost while the primary stays up).
  std::chrono::milliseconds standby_recheck{10'000};
};

class PostgresStorage final : public Storage, public InstanceFence {
 public:
  explicit PostgresStorage(PostgresStorageOptions options);
  ~PostgresStorage() override;

  // Connects, runs the migrations, takes the writer lock, then reads every snapshot and every
  // journal row in sequence order. Fails (and the server does not start) when PostgreSQL is
  // unreachable, the schema is newer than this binary, or another writer holds the lock.
  absl::StatusOr<RecoveryStats> Recover(const RecoverySink& sink) override;
  // Buffers the record for the committer. Refused only before Recover, after a permanent
  // failure, or while shutting down; while PostgreSQL is unreachable callers are refused by
  // health() before they change anything (see above for the records that race with that).
  absl::StatusOr<uint64_t> Append(bandit::v1::JournalRecord* rec) override;
  absl::StatusOr<uint64_t> AppendAll(absl::Span<bandit::v1::JournalRecord* const> recs) override;
  void WhenDurable(uint64_t seq, std::function<void(absl::Status)> done) override;
  // Waits until a synchronous COMMIT covers every record appended so far (in everysec/none too).
  absl::Status Flush() override;
  // Flush, then the next sequence number: every row below it is committed.
  absl::StatusOr<uint64_t> BeginSnapshotRound() override;
  absl::Status WriteSnapshot(const bandit::v1::InstanceSnapshot& snap,
                             const EncodedSnapshotFields* extra = nullptr) override;  // upsert
  absl::Status RemoveSnapshot(const std::string& instance) override;
  absl::Status Compact(uint64_t boundary) override;  // DELETE rows with seq < boundary
  absl::Status health() const override;
  Durability mode() const override { return options_.durability; }

  // Cluster mode. Records of `instance` are from now on committed under lease `epoch`, with
  // sequence numbers above `last_seq` (the instance's newest stored row or snapshot).
  void Own(const std::string& instance, uint64_t epoch, uint64_t last_seq) override;
  // Stops committing `instance` (lease released or lost); its buffered rows still carry the
  // epoch they were appended under, so the fence decides them.
  void Disown(const std::string& instance) override;
  // The epoch this node holds for `instance` (0 = none).
  uint64_t OwnedEpoch(const std::string& instance) const override;
  // Until `deadline` (steady clock) this node's membership lease is known to be valid; after it
  // writes are refused before they change anything (a paused or partitioned node stops acting
  // as owner on its own, before fencing has to refuse it). Set by every successful heartbeat.
  void SetLeaseDeadline(std::chrono::steady_clock::time_point deadline) override;
  absl::Status WritableFor(const std::string& instance) const override;
  // False once the membership lease may have run out (see SetLeaseDeadline): the node then
  // serves none of its instances, reads included, until a heartbeat has reconciled its leases.
  bool LeaseCurrent() const override;
  // One instance's snapshot and its journal rows after it, in sequence order (takeover).
  absl::StatusOr<uint64_t> RecoverInstance(const std::string& instance,
                                           const RecoverySink& sink) override;
  bool cluster() const { return !options_.cluster_node_id.empty(); }

  // The message an instance that diverged is refused with (live and at recovery).
  static std::string DivergedMessage(const PostgresStorageOptions::Divergence& d,
                                     const std::string& detected_by);

  // The connection string with any password removed, for logs and messages.
  static std::string RedactedDsn(const std::string& dsn) { return pg::RedactedDsn(dsn); }
  // Schema versions this binary knows (the newest migration's number).
  static int LatestSchemaVersion();

  // Count of commits and the rows they carried (bench: mean batch size).
  struct CommitStats {
    int64_t commits = 0;
    int64_t rows = 0;
  };
  CommitStats commit_stats() const;

 private:
  struct Row {
    uint64_t seq;
    std::string instance;
    std::string record;  // serialized JournalRecord
    uint64_t epoch = 0;  // cluster mode: the lease epoch it was appended under
  };
  using Lease = std::pair<std::string, uint64_t>;  // instance, epoch
  using Waiter = std::function<void(absl::Status)>;

  // ---- sessions and the calls outside the commit path (postgres_storage.cc) ----
  // A session with the storage's settings; the commit session's synchronous_commit follows the
  // durability mode, the others' is off (see the .cc).
  absl::StatusOr<std::unique_ptr<pg::Connection>> Connect(bool commit_session) const;
  absl::Status TakeWriterLock(const pg::Connection& conn, std::chrono::milliseconds wait) const;
  // Runs `op` on the admin connection (snapshots, compaction), reconnecting once if it is gone.
  absl::Status OnAdmin(const std::function<absl::Status(const pg::Connection&)>& op)
      ABSL_LOCKS_EXCLUDED(admin_mu_);
  // BEGIN, the fencing check for `instance`, `body`, COMMIT on the admin connection.
  absl::Status FencedAdminTransaction(
      const std::string& instance, const std::function<absl::Status(const pg::Connection&)>& body)
      ABSL_LOCKS_EXCLUDED(mu_, admin_mu_);
  // Called after a commit refused the rows of `lost`: disowns those epochs and tells the server
  // (on_fenced).
  void ReportFenced(const std::vector<Lease>& lost) ABSL_LOCKS_EXCLUDED(mu_);
  // What the caller of a write fencing refused hears.
  static absl::Status RefusedByFencing();
  void RememberRefused(uint64_t first, uint64_t last) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Refused(uint64_t seq) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- recovery (recovery.cc) ----
  // Recover in cluster mode: the checks only, nothing is read (RecoverInstance loads).
  absl::StatusOr<RecoveryStats> RecoverCluster(std::unique_ptr<pg::Connection> admin,
                                               std::unique_ptr<pg::Connection> commit)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Takes over the two sessions and starts the committer.
  void StartCommitter(std::unique_ptr<pg::Connection> admin, std::unique_ptr<pg::Connection> commit)
      ABSL_LOCKS_EXCLUDED(mu_, admin_mu_);
  // The loaded instances whose newest committed record the database no longer holds; records
  // them in bandit_diverged. Runs on the committer's fresh connection before anything is written.
  absl::StatusOr<std::vector<PostgresStorageOptions::Divergence>> FindDivergence(
      const pg::Connection& conn) ABSL_LOCKS_EXCLUDED(mu_, high_mu_);
  std::string DetectedBy() const;  // who found a divergence: this node / host
  // The newest committed (or loaded) sequence number per instance.
  void NoteCommitted(const std::vector<Row>& rows) ABSL_LOCKS_EXCLUDED(high_mu_);

  // ---- the committer (committer.cc) ----
  // What the committer thread carries from one step to the next.
  struct CommitterState {
    std::chrono::milliseconds backoff;  // before the next reconnect attempt
    std::chrono::steady_clock::time_point next_standby_check;
    int failed_attempts = 0;  // reconnect attempts since the connection was lost
    std::chrono::steady_clock::time_point down_since;
  };
  void CommitterLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Down: after the backoff, one attempt to reconnect and catch the database up (below); on
  // success writes are accepted again. False when the storage is stopping.
  bool ReconnectStep(CommitterState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a fresh commit session does before writes are accepted again: the writer lock, the
  // schema and standby checks, the divergence check, then the unconfirmed rows of `batch` the
  // database does not hold yet are written (rows of leases lost meanwhile go to `fenced`).
  absl::Status RestoreSession(const pg::Connection& conn, std::vector<Row>* batch,
                              std::vector<Row>* fenced) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops from `batch` the rows a COMMIT whose answer was lost did store after all.
  absl::Status DropRowsAlreadyStored(const pg::Connection& conn, std::vector<Row>* batch) const;
  // FindDivergence, then the diverged instances are refused and their rows in `batch` dropped.
  absl::Status RefuseDiverged(const pg::Connection& conn, std::vector<Row>* batch)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The attempt failed: `batch` goes back in front of the buffer, the backoff doubles.
  void ReconnectFailed(CommitterState& state, const absl::Status& why, std::vector<Row> batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attempt succeeded (`written` rows, up to `batch_last`): `conn` becomes the commit
  // session and writes are accepted again.
  void Reconnected(CommitterState& state, std::unique_ptr<pg::Connection> conn, size_t written,
                   uint64_t batch_last) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Up: waits for records (or a flush, or a second), re-checks the standby when due, probes an
  // idle connection, else commits whatever accumulated as one transaction and answers the
  // waiters it decides. False when the storage is stopping.
  bool CommitStep(CommitterState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits up to a second for records, a flush request or stop.
  void WaitForRecords() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // everysec/none: waits kLinger for more records to share the transaction.
  void Linger() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Nothing to commit: checks that the session is still there (going down if not).
  void ProbeIdleSession(CommitterState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the buffer, commits it as one transaction (fenced in cluster mode) and answers every
  // waiter that COMMIT decides; a failure takes the storage down with the rows kept.
  void CommitBuffered(CommitterState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The periodic synchronous_standby_names check; false if it took the storage down.
  bool RecheckStandbyIfDue(CommitterState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One transaction carrying `rows`; `sync` forces a synchronous commit in everysec/none.
  absl::Status CommitBatch(const pg::Connection& conn, const std::vector<Row>& rows, bool sync);
  // CommitBatch, in cluster mode until the rows of instances whose lease this node lost are
  // out of `rows` (moved to `fenced`, with their instances in `lost`).
  absl::Status CommitFenced(const pg::Connection& conn, std::vector<Row>* rows, bool sync,
                            std::vector<Row>* fenced, std::vector<Lease>* lost);
  // After a commit of the rows up to `last` (or its failure, then health_ is not OK): takes the
  // waiters it decides, each with its answer (the fenced ones from `first_fenced` on refused).
  std::vector<std::pair<Waiter, absl::Status>> TakeDecidedWaiters(uint64_t first_fenced,
                                                                  uint64_t last)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fail, drop the committer's connection and answer every waiter (committer, between commits;
  // releases mu_ for the callbacks).
  void GoDownLocked(const absl::Status& why, CommitterState& state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads synchronous_standby_names: with durability=always and no synchronous standby, warns
  // (or, with require_synchronous_standby, returns FAILED_PRECONDITION). `quiet`: log only if
  // the answer changed since the last check (the committer's periodic re-check).
  absl::Status CheckSynchronousStandby(const pg::Connection& conn, bool quiet = false);
  // Drops the rows of diverged instances from `rows` (remembered as refused).
  void DropDivergedLocked(std::vector<Row>* rows) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PostgresStorageOptions options_;
  // Last standby check: -1 none yet, 0 no synchronous standby, 1 one. Recover, then only the
  // committer thread.
  int standby_state_ = -1;

  mutable absl::Mutex mu_;
  absl::CondVar work_cv_;  // records, a flush request or stop for the committer
  absl::CondVar done_cv_;  // a commit (or a failure) for Flush
  // Appended, not yet handed to a COMMIT (in seq order).
  std::vector<Row> buffer_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  // Flush's target (Own may skip numbers: none appended).
  uint64_t last_appended_ ABSL_GUARDED_BY(mu_) = 0;
  // Every seq <= this is committed, or refused (below) ...
  uint64_t committed_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t synced_seq_ ABSL_GUARDED_BY(mu_) = 0;  // ... and covered by a synchronous commit
  // Sequence ranges [first, last] that lease fencing refused. A caller may ask WhenDurable
  // after the COMMIT that decided its record is over (Append and the wait are two calls): it
  // must hear the refusal, never OK. Fencing is rare (a lost lease), so the newest
  // kRefusedRangesKept ranges cover any caller still between its Append and its wait.
  std::map<uint64_t, uint64_t> refused_ ABSL_GUARDED_BY(mu_);
  static constexpr size_t kRefusedRangesKept = 4096;
  // Rows dropped because their instance diverged (rare), for their waiters: seq -> why.
  std::map<uint64_t, std::string> dropped_diverged_ ABSL_GUARDED_BY(mu_);
  std::multimap<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  absl::Status health_ ABSL_GUARDED_BY(mu_) = absl::FailedPreconditionError(
      "PostgreSQL storage is not recovered yet; Recover() comes first");
  bool recovered_ ABSL_GUARDED_BY(mu_) = false;
  bool down_ ABSL_GUARDED_BY(mu_) = false;  // connection lost or COMMIT failed: reconnecting
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool flush_requested_ ABSL_GUARDED_BY(mu_) = false;
  CommitStats stats_ ABSL_GUARDED_BY(mu_);
  // Cluster mode: instance -> lease epoch held.
  std::map<std::string, uint64_t> epochs_ ABSL_GUARDED_BY(mu_);
  // Instances found behind in the database (bandit_diverged): appends refused, rows dropped.
  std::map<std::string, std::string> diverged_ ABSL_GUARDED_BY(mu_);  // instance -> why
  std::chrono::steady_clock::time_point lease_deadline_ ABSL_GUARDED_BY(mu_){};
  // The committer's session (holds the writer lock). The pointer is guarded; the session itself
  // is used by the committer thread alone, without mu_.
  std::unique_ptr<pg::Connection> commit_conn_ ABSL_GUARDED_BY(mu_);
  std::thread committer_;

  // Newest sequence number per instance known to be in the database (committed by this server,
  // or read at load); compared with the database at every reconnect. Only the committer, Recover
  // and Own write it.
  mutable absl::Mutex high_mu_;
  std::unordered_map<std::string, uint64_t> committed_high_ ABSL_GUARDED_BY(high_mu_);

  absl::Mutex admin_mu_;
  std::unique_ptr<pg::Connection> admin_conn_ ABSL_GUARDED_BY(admin_mu_);
};

}  // namespace bandit::server
