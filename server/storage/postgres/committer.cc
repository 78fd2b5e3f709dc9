// PostgresStorage: the commit path. One committer thread owns the commit session and alternates
// between two steps: up, it turns whatever was appended into one transaction and answers every
// waiter that COMMIT decides (CommitStep); down, it reconnects with backoff and catches the
// database up before writes are accepted again (ReconnectStep). See postgres_storage.h for what
// each durability mode promises.
#include <endian.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/env/log.h"
#include "server/storage/crc32.h"
#include "server/storage/postgres/migrations.h"
#include "server/storage/postgres/postgres_storage.h"

namespace bandit::server {
namespace {

constexpr size_t kRowsPerInsert = 1000;          // 4 parameters a row; the protocol allows 65535
constexpr std::chrono::milliseconds kLinger{2};  // everysec/none, as the file journal

absl::Time DeadlineAfter(std::chrono::nanoseconds wait) {
  return absl::Now() + absl::FromChrono(wait);
}

}  // namespace

void PostgresStorage::CommitterLoop() {
  const auto now = std::chrono::steady_clock::now();
  CommitterState state{options_.reconnect_initial, now + options_.standby_recheck, 0, now};
  absl::MutexLock lock(&mu_);
  while (down_ ? ReconnectStep(state) : CommitStep(state)) {
  }
}

// ---- down: reconnect ----

bool PostgresStorage::ReconnectStep(CommitterState& state) {
  // Reconnect with exponential backoff. Nothing is acknowledged while down: WhenDurable
  // answers UNAVAILABLE and callers are refused before they change anything.
  const absl::Time deadline = DeadlineAfter(state.backoff);
  while (!stop_ && !work_cv_.WaitWithDeadline(&mu_, deadline)) {
  }
  if (stop_) return false;
  std::vector<Row> batch;
  batch.swap(buffer_);
  const uint64_t batch_last = batch.empty() ? 0 : batch.back().seq;
  mu_.Unlock();
  absl::Status s;
  std::unique_ptr<pg::Connection> conn;
  std::vector<Row> fenced;  // rows of leases lost while down: dropped
  if (auto c = Connect(true); !c.ok()) {
    s = c.status();
  } else {
    conn = *std::move(c);
    s = RestoreSession(*conn, &batch, &fenced);
    if (!s.ok()) conn.reset();  // closed outside the lock
  }
  mu_.Lock();
  for (const Row& r : fenced) RememberRefused(r.seq, r.seq);
  if (s.ok()) {
    Reconnected(state, std::move(conn), batch.size(), batch_last);
  } else {
    ReconnectFailed(state, s, std::move(batch));
  }
  return true;
}

void PostgresStorage::ReconnectFailed(CommitterState& state, const absl::Status& why,
                                      std::vector<Row> batch) {
  // Back in front of anything that raced in meanwhile.
  batch.insert(batch.end(), std::make_move_iterator(buffer_.begin()),
               std::make_move_iterator(buffer_.end()));
  buffer_.swap(batch);
  health_ = absl::UnavailableError(
      absl::StrCat("PostgreSQL storage failed, writes are refused until it is reachable again "
                   "(reconnecting): ",
                   why.message()));
  ++state.failed_attempts;
  state.backoff = std::min(options_.reconnect_max, state.backoff * 2);
  mu_.Unlock();
  if (options_.on_error) options_.on_error(why);
  if (state.failed_attempts <= 3 || state.failed_attempts % 10 == 0)
    BANDIT_LOG_WARN("PostgreSQL reconnect attempt ", state.failed_attempts,
                    " failed: ", why.message(), " (next in ", state.backoff.count(), " ms)");
  mu_.Lock();
}

void PostgresStorage::Reconnected(CommitterState& state, std::unique_ptr<pg::Connection> conn,
                                  size_t written, uint64_t batch_last) {
  committed_seq_ = synced_seq_ = std::max(committed_seq_, batch_last);
  commit_conn_ = std::move(conn);
  down_ = false;
  health_ = absl::OkStatus();
  state.backoff = options_.reconnect_initial;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - state.down_since).count();
  BANDIT_LOG_INFO("PostgreSQL reachable again after ", seconds, " s (", state.failed_attempts + 1,
                  " attempts; ", written, " unacknowledged records written); accepting writes");
  state.failed_attempts = 0;
  done_cv_.SignalAll();
  mu_.Unlock();
  if (options_.on_recovered) options_.on_recovered();
  mu_.Lock();
}

absl::Status PostgresStorage::RestoreSession(const pg::Connection& conn, std::vector<Row>* batch,
                                             std::vector<Row>* fenced) {
  absl::Status s;
  if (!cluster()) s = TakeWriterLock(conn, std::chrono::milliseconds(0));
  if (s.ok()) s = pg::CheckSchemaVersion(conn).status();
  // A failover may have changed what `always` means (another server, other settings).
  if (s.ok()) s = CheckSynchronousStandby(conn);
  if (s.ok()) s = DropRowsAlreadyStored(conn, batch);
  // Does the database still hold everything committed before the connection was lost?
  // (A failover to a standby that lacked the last commits, an older backup.) Checked before
  // anything is written: an instance it does not hold is never served from memory again, and
  // its unwritten rows are dropped, so its journal gets no hole.
  if (s.ok()) s = RefuseDiverged(conn, batch);
  // Write what the database is missing before accepting anything new (fenced: rows of leases
  // lost meanwhile are dropped; their callers already heard UNAVAILABLE).
  std::vector<Lease> lost;
  if (s.ok()) s = CommitFenced(conn, batch, true, fenced, &lost);
  if (!lost.empty()) ReportFenced(lost);
  if (s.ok()) NoteCommitted(*batch);
  return s;
}

absl::Status PostgresStorage::DropRowsAlreadyStored(const pg::Connection& conn,
                                                    std::vector<Row>* batch) const {
  // The COMMIT that failed may have been stored (the connection can drop after the server
  // committed): a transaction is all or nothing, so drop the rows found.
  if (batch->empty()) return absl::OkStatus();
  // (instance, seq): in cluster mode other nodes number their rows in the same range.
  auto res = conn.Query(
      "SELECT instance, seq FROM bandit_journal WHERE seq BETWEEN $1::bigint AND $2::bigint",
      {absl::StrCat(batch->front().seq), absl::StrCat(batch->back().seq)});
  if (!res.ok())
    return absl::Status(
        res.status().code(),
        absl::StrCat(res.status().message(), " (checking which records the failed commit stored)"));
  std::set<std::pair<std::string, uint64_t>> stored;
  for (int i = 0; i < res->rows(); ++i)
    if (uint64_t seq = res->uint(i, 1); seq != 0) stored.insert({res->text(i, 0), seq});
  const size_t before = batch->size();
  batch->erase(std::remove_if(batch->begin(), batch->end(),
                              [&](const Row& r) {
                                return stored.count({r.instance, r.seq}) > 0;
                              }),
               batch->end());
  if (before != batch->size())
    BANDIT_LOG_INFO("PostgreSQL: the failed commit had stored ", before - batch->size(),
                    " records after all (not acknowledged; kept)");
  return absl::OkStatus();
}

absl::Status PostgresStorage::RefuseDiverged(const pg::Connection& conn, std::vector<Row>* batch) {
  auto diverged = FindDivergence(conn);
  if (!diverged.ok()) return diverged.status();
  if (diverged->empty()) return absl::OkStatus();
  const std::string by = DetectedBy();
  {
    absl::MutexLock lock(&mu_);
    for (auto& d : *diverged) diverged_[d.instance] = d.why = DivergedMessage(d, by);
    DropDivergedLocked(batch);
  }
  for (const auto& d : *diverged)
    BANDIT_LOG_ERROR("PostgreSQL went backwards: the database holds the records of '", d.instance,
                     "' up to sequence number ", d.database_seq,
                     ", this server had committed up to ", d.acknowledged_seq,
                     "; refusing the instance (DATA_LOSS) until an operator decides "
                     "(bandit_diverged)");
  if (options_.on_diverged) options_.on_diverged(*diverged);
  return absl::OkStatus();
}

void PostgresStorage::DropDivergedLocked(std::vector<Row>* rows) {
  if (diverged_.empty() || rows->empty()) return;
  std::vector<Row> keep;
  keep.reserve(rows->size());
  for (Row& r : *rows) {
    auto it = diverged_.find(r.instance);
    if (it == diverged_.end()) {
      keep.push_back(std::move(r));
      continue;
    }
    dropped_diverged_[r.seq] = it->second;
    while (dropped_diverged_.size() > kRefusedRangesKept)
      dropped_diverged_.erase(dropped_diverged_.begin());
  }
  rows->swap(keep);
}

// ---- up: commit ----

bool PostgresStorage::RecheckStandbyIfDue(CommitterState& state) {
  // What `always` promises can change under a live connection (Patroni empties
  // synchronous_standby_names when the standby is lost): re-read it now and then.
  if (options_.durability != Durability::kAlways || stop_ ||
      std::chrono::steady_clock::now() < state.next_standby_check)
    return true;
  state.next_standby_check = std::chrono::steady_clock::now() + options_.standby_recheck;
  const pg::Connection* conn = commit_conn_.get();
  mu_.Unlock();
  absl::Status s = CheckSynchronousStandby(*conn, /*quiet=*/true);
  mu_.Lock();
  if (s.ok()) return true;
  GoDownLocked(s, state);
  return false;
}

bool PostgresStorage::CommitStep(CommitterState& state) {
  WaitForRecords();
  if (!RecheckStandbyIfDue(state)) return true;  // down now: the next step reconnects
  if (options_.durability != Durability::kAlways) Linger();
  if (buffer_.empty() && !flush_requested_) {
    if (stop_) return false;
    ProbeIdleSession(state);
    return true;
  }
  CommitBuffered(state);
  return true;
}

void PostgresStorage::WaitForRecords() {
  const absl::Time deadline = DeadlineAfter(std::chrono::seconds(1));
  while (!stop_ && buffer_.empty() && !flush_requested_ &&
         !work_cv_.WaitWithDeadline(&mu_, deadline)) {
  }
}

void PostgresStorage::Linger() {
  // Let records accumulate for one transaction (everysec/none acknowledged them already).
  const absl::Time deadline = DeadlineAfter(kLinger);
  while (!stop_ && !flush_requested_ && !work_cv_.WaitWithDeadline(&mu_, deadline)) {
  }
}

void PostgresStorage::ProbeIdleSession(CommitterState& state) {
  // Notice a lost connection now (a failover, a restarted server) rather than at the next
  // write, so the reconnect and its checks run before the next change is accepted.
  const pg::Connection* idle = commit_conn_.get();
  mu_.Unlock();
  absl::Status alive = idle->Probe();
  mu_.Lock();
  if (!alive.ok() && !down_ && !stop_ && buffer_.empty()) GoDownLocked(alive, state);
}

void PostgresStorage::CommitBuffered(CommitterState& state) {
  std::vector<Row> batch;
  batch.swap(buffer_);
  const bool sync = options_.durability == Durability::kAlways || flush_requested_;
  flush_requested_ = false;  // this commit covers everything appended before the request
  const uint64_t last = batch.empty() ? committed_seq_ : batch.back().seq;
  // Rows that raced with a divergence check are dropped (their waiters hear DATA_LOSS);
  // `last` still covers them, so no waiter is left behind.
  DropDivergedLocked(&batch);
  const pg::Connection* conn = commit_conn_.get();
  mu_.Unlock();

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Row> fenced;
  std::vector<Lease> lost;
  absl::Status s = CommitFenced(*conn, &batch, sync, &fenced, &lost);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Waiters from the first refused row to the end of the batch are never acknowledged (a
  // batch RPC may wait on a later row of another instance for a refused one of its own).
  uint64_t first_fenced = UINT64_MAX;
  for (const Row& r : fenced) first_fenced = std::min(first_fenced, r.seq);

  std::unique_ptr<pg::Connection> dead;
  mu_.Lock();
  if (s.ok() && first_fenced != UINT64_MAX)
    RememberRefused(first_fenced, last);
  else
    for (const Row& r : fenced) RememberRefused(r.seq, r.seq);  // dropped from the batch
  if (s.ok()) {
    committed_seq_ = std::max(committed_seq_, last);
    if (sync) synced_seq_ = std::max(synced_seq_, last);
    ++stats_.commits;
    stats_.rows += static_cast<int64_t>(batch.size());
  } else {
    // Never acknowledged: the rows go back in front of anything appended meanwhile and are
    // written (or found stored) after the reconnect; every waiter hears UNAVAILABLE now.
    batch.insert(batch.end(), std::make_move_iterator(buffer_.begin()),
                 std::make_move_iterator(buffer_.end()));
    buffer_.swap(batch);
    Fail(s);
    dead = std::move(commit_conn_);
    state.down_since = std::chrono::steady_clock::now();
  }
  // The COMMIT (or its failure) answers every waiter it decides, in this one step.
  auto ready = TakeDecidedWaiters(first_fenced, last);
  done_cv_.SignalAll();
  mu_.Unlock();
  if (!lost.empty()) ReportFenced(lost);
  if (s.ok()) {
    NoteCommitted(batch);
    if (options_.on_commit) options_.on_commit(seconds);
  } else {
    BANDIT_LOG_ERROR("PostgreSQL commit failed, refusing writes and reconnecting: ", s.message());
    if (options_.on_error) options_.on_error(s);
  }
  dead.reset();
  for (auto& [done, status] : ready) done(status);
  mu_.Lock();
}

std::vector<std::pair<PostgresStorage::Waiter, absl::Status>> PostgresStorage::TakeDecidedWaiters(
    uint64_t first_fenced, uint64_t last) {
  const absl::Status status = health_;
  const absl::Status fenced_status = RefusedByFencing();
  std::vector<std::pair<Waiter, absl::Status>> ready;
  while (!waiters_.empty() && (!status.ok() || waiters_.begin()->first <= committed_seq_)) {
    const uint64_t seq = waiters_.begin()->first;
    absl::Status st = status.ok() && seq >= first_fenced && seq <= last ? fenced_status : status;
    if (st.ok() && !dropped_diverged_.empty())
      if (auto it = dropped_diverged_.find(seq); it != dropped_diverged_.end())
        st = absl::DataLossError(it->second);
    ready.emplace_back(std::move(waiters_.begin()->second), std::move(st));
    waiters_.erase(waiters_.begin());
  }
  return ready;
}

absl::Status PostgresStorage::CommitFenced(const pg::Connection& conn, std::vector<Row>* rows,
                                           bool sync, std::vector<Row>* fenced,
                                           std::vector<Lease>* lost) {
  for (int attempt = 0;; ++attempt) {
    absl::Status s = CommitBatch(conn, *rows, sync);
    if (s.code() != absl::StatusCode::kAborted) return s;
    // The refused transaction is still open (its COMMIT was skipped): end it.
    if (conn.in_transaction()) {
      if (auto r = conn.Exec("ROLLBACK"); !r.ok()) return r;
    }
    if (attempt >= 3) return absl::UnavailableError(s.message());
    // Which (instance, epoch) of the batch does this node no longer hold?
    std::set<Lease> held;
    for (const Row& r : *rows) held.insert({r.instance, r.epoch});
    std::vector<std::string> names;
    std::vector<uint64_t> epochs;
    for (const auto& [instance, epoch] : held) {
      names.push_back(instance);
      epochs.push_back(epoch);
    }
    auto res = conn.Query(
        "SELECT f.instance, f.epoch FROM unnest($2::text[], $3::bigint[]) AS f(instance, epoch) "
        "LEFT JOIN bandit_leases l ON l.instance = f.instance WHERE l.owner IS DISTINCT FROM $1 "
        "OR l.epoch IS DISTINCT FROM f.epoch",
        {options_.cluster_node_id, pg::TextArray(names), pg::IntArray(epochs)});
    if (!res.ok()) return res.status();
    std::set<Lease> stale;
    for (int i = 0; i < res->rows(); ++i) stale.insert({res->text(i, 0), res->uint(i, 1)});
    lost->insert(lost->end(), stale.begin(), stale.end());
    std::vector<Row> keep;
    for (Row& r : *rows)
      (stale.count({r.instance, r.epoch}) ? *fenced : keep).push_back(std::move(r));
    rows->swap(keep);
  }
}

absl::Status PostgresStorage::CommitBatch(const pg::Connection& conn, const std::vector<Row>& rows,
                                          bool sync) {
  const bool async_mode = options_.durability != Durability::kAlways;
  if (rows.empty() && !(sync && async_mode)) return absl::OkStatus();
  // The statements of one transaction. A flush in everysec/none makes this commit synchronous;
  // txid_current() gives it a commit record to wait for even without rows, and its WAL flush
  // covers every earlier asynchronous commit.
  std::vector<pg::Statement> stmts;
  stmts.push_back({"BEGIN"});
  if (sync && async_mode) {
    stmts.push_back({"SET LOCAL synchronous_commit TO on"});
    stmts.push_back({"SELECT txid_current()"});
  }
  // Cluster mode: the fencing check first, on every (instance, epoch) the rows were appended
  // under; it raises (and the whole transaction is refused) unless this node holds them all.
  if (cluster() && !rows.empty()) {
    std::set<Lease> leases;
    for (const Row& r : rows) leases.insert({r.instance, r.epoch});
    std::vector<std::string> names;
    std::vector<uint64_t> epochs;
    for (const auto& [instance, epoch] : leases) {
      names.push_back(instance);
      epochs.push_back(epoch);
    }
    pg::Statement fence{"SELECT bandit_fence($1, $2::text[], $3::bigint[])"};
    fence.params.Text(options_.cluster_node_id, pg::kOidText)
        .Text(pg::TextArray(names))
        .Text(pg::IntArray(epochs));
    stmts.push_back(std::move(fence));
  }
  // Sent in binary, so the values need no formatting: seq and crc big-endian, the record as is.
  std::vector<uint64_t> seqs(rows.size());
  std::vector<uint32_t> crcs(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    seqs[i] = htobe64(rows[i].seq);
    crcs[i] = htobe32(Crc32(rows[i].record));
  }
  for (size_t from = 0; from < rows.size(); from += kRowsPerInsert) {
    const size_t to = std::min(rows.size(), from + kRowsPerInsert);
    pg::Statement st{"INSERT INTO bandit_journal (seq, instance, payload_crc, record) VALUES "};
    for (size_t i = from; i < to; ++i) {
      const size_t p = 4 * (i - from);
      absl::StrAppend(&st.sql, i == from ? "" : ",", "($", p + 1, ",$", p + 2, ",$", p + 3, ",$",
                      p + 4, ")");
      st.params
          .BinaryRef(absl::string_view(reinterpret_cast<const char*>(&seqs[i]), 8), pg::kOidInt8)
          .TextRef(rows[i].instance, pg::kOidText)
          .BinaryRef(absl::string_view(reinterpret_cast<const char*>(&crcs[i]), 4), pg::kOidInt4)
          .BinaryRef(rows[i].record, pg::kOidBytea);
    }
    stmts.push_back(std::move(st));
  }
  // COMMIT of a failed transaction answers ROLLBACK.
  stmts.push_back({"COMMIT", /*expect_tag=*/"COMMIT"});
  absl::Status s = conn.ExecAll(stmts, options_.pipeline);
  if (!s.ok() && s.code() != absl::StatusCode::kAborted)
    return absl::Status(s.code(), absl::StrCat(s.message(), ": the batch of ", rows.size(),
                                               " records was not stored"));
  return s;
}

void PostgresStorage::Fail(const absl::Status& why) {
  down_ = true;
  health_ = absl::UnavailableError(
      absl::StrCat("PostgreSQL storage failed, writes are refused until it is reachable again "
                   "(reconnecting): ",
                   why.message()));
}

void PostgresStorage::GoDownLocked(const absl::Status& why, CommitterState& state) {
  // Nothing is in flight (the committer is between commits): the buffered rows stay for the
  // reconnect, every waiter hears UNAVAILABLE now.
  Fail(why);
  std::unique_ptr<pg::Connection> dead = std::move(commit_conn_);
  state.down_since = std::chrono::steady_clock::now();
  std::vector<Waiter> ready;
  while (!waiters_.empty()) {
    ready.push_back(std::move(waiters_.begin()->second));
    waiters_.erase(waiters_.begin());
  }
  const absl::Status status = health_;
  done_cv_.SignalAll();
  mu_.Unlock();
  BANDIT_LOG_ERROR("PostgreSQL: refusing writes and reconnecting: ", why.message());
  if (options_.on_error) options_.on_error(why);
  dead.reset();
  for (auto& done : ready) done(status);
  mu_.Lock();
}

}  // namespace bandit::server
