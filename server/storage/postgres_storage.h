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
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/storage/storage.h"

typedef struct pg_conn PGconn;

namespace bandit::server {

struct PostgresStorageOptions {
  // libpq connection string ("host=... dbname=..." or a postgresql:// URI). A password comes
  // from PGPASSWORD, ~/.pgpass (libpq reads both) or `password` (the server reads
  // --postgres_password_file through its FileSystem seam).
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

class PostgresStorage final : public Storage {
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
  void Own(const std::string& instance, uint64_t epoch, uint64_t last_seq);
  // Stops committing `instance` (lease released or lost); its buffered rows still carry the
  // epoch they were appended under, so the fence decides them.
  void Disown(const std::string& instance);
  // The epoch this node holds for `instance` (0 = none).
  uint64_t OwnedEpoch(const std::string& instance) const;
  // Until `deadline` (steady clock) this node's membership lease is known to be valid; after it
  // writes are refused before they change anything (a paused or partitioned node stops acting
  // as owner on its own, before fencing has to refuse it). Set by every successful heartbeat.
  void SetLeaseDeadline(std::chrono::steady_clock::time_point deadline);
  absl::Status WritableFor(const std::string& instance) const override;
  // False once the membership lease may have run out (see SetLeaseDeadline): the node then
  // serves none of its instances, reads included, until a heartbeat has reconciled its leases.
  bool LeaseCurrent() const;
  // One instance's snapshot and its journal rows after it, in sequence order (takeover).
  absl::StatusOr<uint64_t> RecoverInstance(const std::string& instance,
                                           const RecoverySink& sink) override;
  bool cluster() const { return !options_.cluster_node_id.empty(); }

  // The message an instance that diverged is refused with (live and at recovery).
  static std::string DivergedMessage(const PostgresStorageOptions::Divergence& d,
                                     const std::string& detected_by);

  // The connection string with any password removed, for logs and messages.
  static std::string RedactedDsn(const std::string& dsn);
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
  class Connection;

  absl::StatusOr<std::unique_ptr<Connection>> Connect(bool commit_session) const;
  absl::Status Migrate(Connection& conn) const;
  absl::Status TakeWriterLock(Connection& conn, std::chrono::milliseconds wait) const;
  // Runs `op` on the admin connection (snapshots, compaction), reconnecting once if it is gone.
  absl::Status OnAdmin(const std::function<absl::Status(Connection&)>& op);

  void CommitterLoop();
  // One transaction carrying `rows`; `sync` forces a synchronous commit in everysec/none.
  absl::Status CommitBatch(Connection& conn, const std::vector<Row>& rows, bool sync);
  // CommitBatch, in cluster mode until the rows of instances whose lease this node lost are
  // out of `rows` (moved to `fenced`, with their instances in `lost`).
  using Lease = std::pair<std::string, uint64_t>;  // instance, epoch
  absl::Status CommitFenced(Connection& conn, std::vector<Row>* rows, bool sync,
                            std::vector<Row>* fenced, std::vector<Lease>* lost);
  // Called without mu_ after a commit refused the rows of `lost`: disowns those epochs and
  // tells the server (on_fenced).
  void ReportFenced(const std::vector<Lease>& lost);
  // BEGIN, the fencing check for `instance`, `body`, COMMIT on the admin connection.
  absl::Status FencedAdminTransaction(const std::string& instance,
                                      const std::function<absl::Status(Connection&)>& body);
  void Fail(const absl::Status& why);  // requires mu_
  // Fail, drop the committer's connection and answer every waiter (committer, holding `lock`
  // on mu_, between commits; unlocks it for the callbacks).
  void GoDownLocked(std::unique_lock<std::mutex>& lock, const absl::Status& why,
                    std::chrono::steady_clock::time_point* down_since);
  // Reads synchronous_standby_names: with durability=always and no synchronous standby, warns
  // (or, with require_synchronous_standby, returns FAILED_PRECONDITION). `quiet`: log only if
  // the answer changed since the last check (the committer's periodic re-check).
  absl::Status CheckSynchronousStandby(Connection& conn, bool quiet = false);
  int standby_state_ = -1;  // last check: -1 none yet, 0 no synchronous standby, 1 one (committer)
  // The loaded instances whose newest committed record the database no longer holds; records
  // them in bandit_diverged. Runs on the committer's fresh connection before anything is written.
  absl::StatusOr<std::vector<PostgresStorageOptions::Divergence>> FindDivergence(Connection& conn);
  std::string DetectedBy() const;  // who found a divergence: this node / host
  // Drops the rows of diverged instances from `rows` (remembered as refused). Requires mu_.
  void DropDivergedLocked(std::vector<Row>* rows);
  // The newest committed (or loaded) sequence number per instance.
  void NoteCommitted(const std::vector<Row>& rows);

  const PostgresStorageOptions options_;
  std::string password_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::vector<Row> buffer_;  // appended, not yet handed to a COMMIT (in seq order)
  uint64_t next_seq_ = 1;
  uint64_t last_appended_ = 0;  // Flush's target (Own may skip numbers: none appended)
  uint64_t committed_seq_ = 0;  // every seq <= this is committed, or refused (below)
  uint64_t synced_seq_ = 0;     // ... and covered by a synchronous commit
  // Sequence ranges [first, last] that lease fencing refused. A caller may ask WhenDurable
  // after the COMMIT that decided its record is over (Append and the wait are two calls): it
  // must hear the refusal, never OK. Fencing is rare (a lost lease), so the newest
  // kRefusedRangesKept ranges cover any caller still between its Append and its wait.
  std::map<uint64_t, uint64_t> refused_;
  static constexpr size_t kRefusedRangesKept = 4096;
  void RememberRefused(uint64_t first, uint64_t last);  // requires mu_
  bool Refused(uint64_t seq) const;                     // requires mu_
  // Rows dropped because their instance diverged (rare), for their waiters: seq -> why.
  std::map<uint64_t, std::string> dropped_diverged_;
  std::multimap<uint64_t, std::function<void(absl::Status)>> waiters_;
  absl::Status health_ = absl::FailedPreconditionError(
      "PostgreSQL storage is not recovered yet; Recover() comes first");
  bool recovered_ = false;
  bool down_ = false;  // connection lost or COMMIT failed: reconnecting
  bool stop_ = false;
  bool flush_requested_ = false;
  CommitStats stats_;
  std::map<std::string, uint64_t> epochs_;  // cluster mode: instance -> lease epoch held
  // Instances found behind in the database (bandit_diverged): appends refused, rows dropped.
  std::map<std::string, std::string> diverged_;  // instance -> why
  // Newest sequence number per instance known to be in the database (committed by this server,
  // or read at load); compared with the database at every reconnect. Only the committer, Recover
  // and Own write it.
  mutable std::mutex high_mu_;
  std::unordered_map<std::string, uint64_t> committed_high_;
  std::chrono::steady_clock::time_point lease_deadline_{};
  std::unique_ptr<Connection> commit_conn_;  // the committer's (holds the writer lock)
  std::thread committer_;

  std::mutex admin_mu_;
  std::unique_ptr<Connection> admin_conn_;
};

}  // namespace bandit::server
