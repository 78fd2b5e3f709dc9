// PostgresStorage: the Storage calls outside the commit path (appends, waits, snapshots,
// compaction) and cluster ownership. The committer is in committer.cc, what is read back in
// recovery.cc.
#include "server/storage/postgres/postgres_storage.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/env/log.h"
#include "server/storage/postgres/migrations.h"
#include "server/storage/snapshot_store.h"

namespace bandit::server {
namespace {

// Advisory lock key ("band" "it" + purpose): one writer per database (migrations.cc holds the
// migration's).
constexpr const char* kWriterLockKey = "7017280427813404673";  // 0x616e646974000001

}  // namespace

PostgresStorage::PostgresStorage(PostgresStorageOptions options) : options_(std::move(options)) {}

int PostgresStorage::LatestSchemaVersion() { return pg::LatestSchemaVersion(); }

PostgresStorage::~PostgresStorage() {
  bool recovered;
  {
    absl::MutexLock lock(&mu_);
    recovered = recovered_;
  }
  if (recovered) (void)Flush();
  size_t dropped = 0;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    dropped = buffer_.size();
  }
  work_cv_.SignalAll();
  if (committer_.joinable()) committer_.join();
  // Nobody waits forever: whatever the committer could not cover is answered here.
  std::multimap<uint64_t, Waiter> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(waiters_);
  }
  for (auto& [seq, done] : left)
    done(absl::UnavailableError("PostgreSQL storage closed before the record was committed"));
  if (dropped > 0)
    BANDIT_LOG_WARN(
        "PostgreSQL storage closed with ", dropped,
        " records never committed (none of them was acknowledged in durability=always)");
}

absl::StatusOr<std::unique_ptr<pg::Connection>> PostgresStorage::Connect(
    bool commit_session) const {
  pg::ConnectOptions co;
  co.dsn = options_.dsn;
  co.password = options_.password;
  auto conn = pg::Connection::Open(co);
  if (!conn.ok()) return conn.status();
  // always: the COMMIT returns once its WAL is flushed. everysec/none: PostgreSQL's WAL writer
  // flushes within 3 x wal_writer_delay. Snapshots (the admin session) commit asynchronously:
  // a lost snapshot only means replaying more journal, which stays until Compact, whose
  // synchronous commit flushes the WAL past every earlier snapshot before rows are deleted.
  // (A synchronous commit per snapshot made a 10 000-instance round wait for 10 000 WAL
  // flushes.)
  const bool sync = commit_session && options_.durability == Durability::kAlways;
  if (auto s = (*conn)->Exec(absl::StrCat("SET synchronous_commit TO ", sync ? "on" : "off"));
      !s.ok())
    return s;
  return conn;
}

absl::Status PostgresStorage::TakeWriterLock(const pg::Connection& conn,
                                             std::chrono::milliseconds wait) const {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    auto got = conn.Value(absl::StrCat("SELECT pg_try_advisory_lock(", kWriterLockKey, ")"));
    if (!got.ok()) return got.status();
    if (*got == "t") return absl::OkStatus();
    if (std::chrono::steady_clock::now() >= deadline)
      return absl::FailedPreconditionError(
          absl::StrCat("another banditd holds the writer lock on the PostgreSQL database (",
                       RedactedDsn(options_.dsn), "): one server writes a database at a time"));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

absl::Status PostgresStorage::CheckSynchronousStandby(const pg::Connection& conn, bool quiet) {
  auto names = conn.Value("SELECT current_setting('synchronous_standby_names')");
  if (!names.ok()) return names.status();
  if (options_.durability != Durability::kAlways) return absl::OkStatus();
  const int state = names->empty() ? 0 : 1;
  const bool changed = state != standby_state_;
  standby_state_ = state;
  if (quiet && !changed) {
    if (state == 0 && options_.require_synchronous_standby)
      return absl::FailedPreconditionError(
          "durability=always, but PostgreSQL has no synchronous standby; "
          "--postgres_require_sync_standby refuses writes until it has one");
    return absl::OkStatus();
  }
  if (!names->empty()) {
    BANDIT_LOG_INFO("PostgreSQL synchronous_standby_names = '", *names,
                    "': with durability=always a change is acknowledged once a synchronous "
                    "standby has it too");
    return absl::OkStatus();
  }
  const std::string why =
      "durability=always, but PostgreSQL has no synchronous standby (synchronous_standby_names "
      "is empty): an acknowledged change is flushed on that one server only, and a failover to a "
      "standby can lose it. Configure one (synchronous_standby_names; with Patroni "
      "synchronous_mode: true)";
  if (options_.require_synchronous_standby)
    return absl::FailedPreconditionError(absl::StrCat(
        why, "; --postgres_require_sync_standby refuses writes until PostgreSQL has one"));
  BANDIT_LOG_WARN("WARNING: ", why,
                  ", or pass --postgres_require_sync_standby to refuse writes instead");
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> PostgresStorage::Append(bandit::v1::JournalRecord* rec) {
  return AppendAll(absl::MakeConstSpan(&rec, 1));
}

absl::StatusOr<uint64_t> PostgresStorage::AppendAll(
    absl::Span<bandit::v1::JournalRecord* const> recs) {
  if (recs.empty()) return 0;
  absl::MutexLock lock(&mu_);
  if (!recovered_ || stop_)
    return health_.ok() ? absl::UnavailableError("storage closed") : health_;
  if (!diverged_.empty()) {
    for (auto* rec : recs)
      if (auto it = diverged_.find(rec->instance()); it != diverged_.end())
        return absl::DataLossError(it->second);
  }
  // Fencing: every record's instance must still be owned here (all or none is appended).
  std::vector<uint64_t> epochs(recs.size(), 0);
  if (cluster()) {
    for (size_t i = 0; i < recs.size(); ++i) {
      auto it = epochs_.find(recs[i]->instance());
      if (it == epochs_.end())
        return absl::UnavailableError(absl::StrCat(
            "instance '", recs[i]->instance(), "' is not owned by node '", options_.cluster_node_id,
            "' any more (its lease moved on); retry: the cluster routes the call to the owner"));
      epochs[i] = it->second;
    }
  }
  const bool wake = buffer_.empty();
  for (size_t i = 0; i < recs.size(); ++i) {
    recs[i]->set_seq(next_seq_++);
    last_appended_ = recs[i]->seq();
    buffer_.push_back(
        Row{recs[i]->seq(), recs[i]->instance(), recs[i]->SerializeAsString(), epochs[i]});
  }
  // Only the empty -> non-empty edge needs a wake-up: the committer takes the whole buffer.
  if (wake) work_cv_.Signal();
  return recs.back()->seq();
}

absl::Status PostgresStorage::RefusedByFencing() {
  return absl::UnavailableError(
      "the instance's lease moved to another node before this change was committed: "
      "refused by fencing, not applied; retry (the cluster routes the call to the new owner)");
}

void PostgresStorage::RememberRefused(uint64_t first, uint64_t last) {
  refused_[first] = last;
  while (refused_.size() > kRefusedRangesKept) refused_.erase(refused_.begin());
}

bool PostgresStorage::Refused(uint64_t seq) const {
  auto it = refused_.upper_bound(seq);
  if (it == refused_.begin()) return false;
  --it;
  return seq <= it->second;
}

void PostgresStorage::WhenDurable(uint64_t seq, std::function<void(absl::Status)> done) {
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = health_;
    if (status.ok() && options_.durability == Durability::kAlways && seq > committed_seq_) {
      waiters_.emplace(seq, std::move(done));
      return;
    }
    if (status.ok() && Refused(seq)) status = RefusedByFencing();
    if (status.ok() && !dropped_diverged_.empty())
      if (auto it = dropped_diverged_.find(seq); it != dropped_diverged_.end())
        status = absl::DataLossError(it->second);
  }
  done(status);
}

absl::Status PostgresStorage::Flush() {
  absl::MutexLock lock(&mu_);
  if (!recovered_) return health_;
  const uint64_t target = last_appended_;
  while (health_.ok() && synced_seq_ < target) {
    flush_requested_ = true;
    work_cv_.Signal();
    done_cv_.Wait(&mu_);
  }
  return health_;
}

absl::StatusOr<uint64_t> PostgresStorage::BeginSnapshotRound() {
  uint64_t boundary;
  {
    absl::MutexLock lock(&mu_);
    if (!health_.ok()) return health_;
    boundary = next_seq_;
  }
  // Everything below the boundary is committed before a snapshot round may delete it.
  if (auto s = Flush(); !s.ok()) return s;
  return boundary;
}

absl::Status PostgresStorage::OnAdmin(
    const std::function<absl::Status(const pg::Connection&)>& op) {
  if (auto s = health(); !s.ok()) return s;  // never write around a failed commit path
  absl::MutexLock lock(&admin_mu_);
  if (admin_conn_ == nullptr || !admin_conn_->ok()) {
    admin_conn_.reset();
    auto c = Connect(false);
    if (!c.ok()) return c.status();
    admin_conn_ = *std::move(c);
  }
  absl::Status s = op(*admin_conn_);
  if (!s.ok() && !admin_conn_->ok()) admin_conn_.reset();
  return s;
}

absl::Status PostgresStorage::FencedAdminTransaction(
    const std::string& instance, const std::function<absl::Status(const pg::Connection&)>& body) {
  const uint64_t epoch = OwnedEpoch(instance);
  if (epoch == 0)
    return absl::UnavailableError(absl::StrCat("instance '", instance, "' is not owned by node '",
                                               options_.cluster_node_id, "' any more"));
  absl::Status s = OnAdmin([&](const pg::Connection& conn) {
    return conn.Transaction(absl::StrCat("a write of '", instance, "'"), [&]() -> absl::Status {
      if (auto s = conn.Exec(
              "SELECT bandit_fence($1, $2::text[], $3::bigint[])",
              {options_.cluster_node_id, pg::TextArray({instance}), pg::IntArray({epoch})});
          !s.ok())
        return s;
      return body(conn);
    });
  });
  if (s.code() == absl::StatusCode::kAborted) {
    ReportFenced({{instance, epoch}});
    return absl::UnavailableError(absl::StrCat("instance '", instance, "': ", s.message()));
  }
  return s;
}

absl::Status PostgresStorage::WriteSnapshot(const bandit::v1::InstanceSnapshot& snap,
                                            const EncodedSnapshotFields* extra) {
  // The row goes out as a binary COPY (PostgreSQL's "Binary Format" of COPY: a signature, flags
  // and header extension, one tuple of three fields each with its length, the trailer), its
  // snapshot streamed from the pieces where they lie (SnapshotStore::Stream): banditd never
  // gathers the snapshot in one buffer. COPY cannot update a row, so the old one is deleted in
  // the same transaction (readers see the old row until it commits).
  const uint64_t size = SnapshotStore::EncodedSize(snap, extra);
  if (size > uint64_t{std::numeric_limits<int32_t>::max()})
    return absl::ResourceExhaustedError(absl::StrCat(
        "the snapshot of '", snap.name(), "' is ", size,
        " bytes, more than a PostgreSQL field holds (2 GiB); lower its decision log's retention "
        "or pending capacity"));
  auto put_be = [](std::string* out, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  auto upsert = [&](const pg::Connection& conn) -> absl::Status {
    if (auto s = conn.Exec("DELETE FROM bandit_snapshots WHERE instance = $1", {snap.name()});
        !s.ok())
      return s;
    absl::Status s = conn.CopyIn(
        "COPY bandit_snapshots (instance, last_seq, snapshot) FROM STDIN (FORMAT binary)",
        [&](absl::FunctionRef<absl::Status(absl::string_view)> put) -> absl::Status {
          std::string head("PGCOPY\n\xff\r\n\0", 11);
          put_be(&head, 0, 4);  // flags
          put_be(&head, 0, 4);  // header extension length
          put_be(&head, 3, 2);  // fields in the tuple
          put_be(&head, snap.name().size(), 4);
          head += snap.name();
          put_be(&head, 8, 4);
          put_be(&head, snap.last_journal_seq(), 8);
          put_be(&head, size, 4);
          absl::Status sent = put(head);
          // Pieces of up to 64 KiB each, as they come (libpq buffers and sends them).
          SnapshotStore::Stream(snap, extra, [&](absl::string_view piece) {
            if (sent.ok()) sent = put(piece);
          });
          if (!sent.ok()) return sent;
          std::string trailer;
          put_be(&trailer, 0xffff, 2);
          return put(trailer);
        });
    if (!s.ok())
      return absl::Status(s.code(), absl::StrCat(s.message(), " (writing the snapshot of '",
                                                 snap.name(), "')"));
    return absl::OkStatus();
  };
  if (cluster()) {
    // A snapshot holds only committed records: a state whose last change fencing may still
    // refuse must never reach the next owner. (An instance whose last record was loaded from
    // another owner's numbering may name a number this node never appended: that record is
    // committed already, and this node's own records of it are all at or below last_appended_.)
    uint64_t wait_for;
    {
      absl::MutexLock lock(&mu_);
      wait_for = std::min<uint64_t>(snap.last_journal_seq(), last_appended_);
    }
    if (auto s = WaitDurable(wait_for); !s.ok()) return s;
    return FencedAdminTransaction(snap.name(), upsert);
  }
  return OnAdmin([&](const pg::Connection& conn) {
    return conn.Transaction(absl::StrCat("the snapshot of '", snap.name(), "'"),
                            [&] { return upsert(conn); });
  });
}

absl::Status PostgresStorage::RemoveSnapshot(const std::string& instance) {
  if (cluster()) {
    // A deleted instance leaves nothing behind: snapshot, journal rows and its lease go in
    // one fenced transaction (the deletion record is committed: the round flushed first).
    absl::Status s = FencedAdminTransaction(instance, [&](const pg::Connection& conn) {
      for (const char* sql : {"DELETE FROM bandit_snapshots WHERE instance = $1",
                              "DELETE FROM bandit_journal WHERE instance = $1",
                              "DELETE FROM bandit_diverged WHERE instance = $1",
                              "DELETE FROM bandit_declines WHERE instance = $1",
                              "DELETE FROM bandit_leases WHERE instance = $1"})
        if (auto s = conn.Exec(sql, {instance}); !s.ok()) return s;
      return absl::OkStatus();
    });
    if (s.ok()) {
      Disown(instance);
      absl::MutexLock lock(&mu_);
      diverged_.erase(instance);
    }
    return s;
  }
  absl::Status s = OnAdmin([&](const pg::Connection& conn) {
    absl::Status st = conn.Exec("DELETE FROM bandit_snapshots WHERE instance = $1", {instance});
    if (st.ok()) st = conn.Exec("DELETE FROM bandit_diverged WHERE instance = $1", {instance});
    return st;
  });
  if (s.ok()) {
    absl::MutexLock lock(&mu_);
    diverged_.erase(instance);
  }
  return s;
}

absl::Status PostgresStorage::Compact(uint64_t boundary) {
  // Synchronous, and with a transaction id even when nothing is deleted: its WAL flush makes
  // every snapshot written before it durable before any row they cover is gone.
  const std::string remove =
      cluster()
          // Per instance: every row a stored snapshot covers (an instance's rows are in order
          // across owners), for the instances this node holds.
          ? absl::StrCat(
                "DELETE FROM bandit_journal j USING bandit_snapshots s, "
                "bandit_leases l WHERE j.instance = s.instance AND "
                "j.seq <= s.last_seq AND l.instance = j.instance AND l.owner = '",
                options_.cluster_node_id, "'")
          // A diverged instance keeps its rows: what the database holds of it is what an
          // operator may choose to accept.
          : absl::StrCat("DELETE FROM bandit_journal WHERE seq < ", boundary,
                         " AND instance NOT IN (SELECT instance FROM bandit_diverged)");
  return OnAdmin([&](const pg::Connection& conn) {
    return conn.Transaction("the compaction", [&]() -> absl::Status {
      for (const std::string& sql : {std::string("SET LOCAL synchronous_commit TO on"),
                                     std::string("SELECT txid_current()"), remove})
        if (auto s = conn.Exec(sql); !s.ok()) return s;
      return absl::OkStatus();
    });
  });
}

void PostgresStorage::Own(const std::string& instance, uint64_t epoch, uint64_t last_seq) {
  {
    absl::MutexLock lock(&high_mu_);
    committed_high_[instance] = last_seq;  // what the database held when it was loaded
  }
  absl::MutexLock lock(&mu_);
  epochs_[instance] = epoch;
  next_seq_ = std::max(next_seq_, last_seq + 1);
}

void PostgresStorage::Disown(const std::string& instance) {
  absl::MutexLock lock(&mu_);
  epochs_.erase(instance);
}

uint64_t PostgresStorage::OwnedEpoch(const std::string& instance) const {
  absl::MutexLock lock(&mu_);
  auto it = epochs_.find(instance);
  return it == epochs_.end() ? 0 : it->second;
}

void PostgresStorage::SetLeaseDeadline(std::chrono::steady_clock::time_point deadline) {
  absl::MutexLock lock(&mu_);
  lease_deadline_ = deadline;
}

absl::Status PostgresStorage::WritableFor(const std::string& instance) const {
  absl::MutexLock lock(&mu_);
  if (!health_.ok() || !cluster()) return health_;
  if (!epochs_.count(instance))
    return absl::UnavailableError(absl::StrCat(
        "instance '", instance, "' is not owned by node '", options_.cluster_node_id,
        "' any more (its lease moved on); retry: the cluster routes the call to the owner"));
  if (std::chrono::steady_clock::now() >= lease_deadline_)
    return absl::UnavailableError(absl::StrCat(
        "node '", options_.cluster_node_id,
        "' has not renewed its membership lease in time (paused or cut off from PostgreSQL); "
        "writes wait until it has, or another node has taken its instances over"));
  return absl::OkStatus();
}

bool PostgresStorage::LeaseCurrent() const {
  absl::MutexLock lock(&mu_);
  return std::chrono::steady_clock::now() < lease_deadline_;
}

void PostgresStorage::ReportFenced(const std::vector<Lease>& lost) {
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [instance, epoch] : lost) {
      auto it = epochs_.find(instance);
      if (it != epochs_.end() && it->second == epoch) epochs_.erase(it);
      names.push_back(instance);
    }
  }
  BANDIT_LOG_WARN("lease fencing refused the writes of ", names.size(), " instance(s) (",
                  absl::StrJoin(names, ", "),
                  "): another node holds their leases now; "
                  "dropping them from memory, nothing of theirs was acknowledged");
  if (options_.on_fenced) options_.on_fenced(names);
}

absl::Status PostgresStorage::health() const {
  absl::MutexLock lock(&mu_);
  return health_;
}

PostgresStorage::CommitStats PostgresStorage::commit_stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace bandit::server
