// PostgresStorage: what is read back. Recover (every snapshot and journal row at start, one
// writer per database), RecoverInstance (one instance at a cluster takeover), and the
// divergence check every reconnect runs (does the database still hold what was committed?).
#include <unistd.h>

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/env/log.h"
#include "server/storage/crc32.h"
#include "server/storage/postgres/migrations.h"
#include "server/storage/postgres/postgres_storage.h"
#include "server/storage/snapshot_store.h"

namespace bandit::server {
namespace {

// A bandit_snapshots row of `name`; the reason it cannot be used otherwise.
absl::StatusOr<bandit::v1::InstanceSnapshot> DecodeSnapshotRow(const std::string& name,
                                                               absl::string_view bytes) {
  auto snap = SnapshotStore::Decode(bytes);
  if (!snap.ok()) return absl::DataLossError(absl::StrCat("snapshot: ", snap.status().message()));
  if (snap->name() != name)
    return absl::DataLossError(
        absl::StrCat("snapshot: the row of '", name, "' holds instance '", snap->name(), "'"));
  return snap;
}

// A bandit_journal row (seq, instance, payload_crc, record), checked against its checksum and
// its key; the reason it cannot be replayed otherwise.
absl::StatusOr<bandit::v1::JournalRecord> DecodeJournalRow(uint64_t seq, const std::string& name,
                                                           uint32_t crc,
                                                           absl::string_view payload) {
  bandit::v1::JournalRecord rec;
  if (Crc32(payload) != crc ||
      !rec.ParseFromArray(payload.data(), static_cast<int>(payload.size())))
    return absl::DataLossError(absl::StrCat("journal corrupted: bandit_journal row ", seq,
                                            ": record payload checksum mismatch"));
  if (rec.seq() != seq || rec.instance() != name)
    return absl::DataLossError(absl::StrCat("journal corrupted: bandit_journal row ", seq,
                                            " holds record ", rec.seq(), " of '", rec.instance(),
                                            "'"));
  return rec;
}

PostgresStorageOptions::Divergence DivergenceRow(const std::string& instance, const pg::Result& res,
                                                 int row, int first) {
  PostgresStorageOptions::Divergence d;
  d.instance = instance;
  d.database_seq = res.uint(row, first);
  d.acknowledged_seq = res.uint(row, first + 1);
  return d;
}

}  // namespace

absl::StatusOr<RecoveryStats> PostgresStorage::Recover(const RecoverySink& sink) {
  auto admin = Connect(false);
  if (!admin.ok()) return admin.status();
  if (auto s = pg::Migrate(**admin, RedactedDsn(options_.dsn)); !s.ok()) return s;
  auto commit = Connect(true);
  if (!commit.ok()) return commit.status();
  if (cluster()) return RecoverCluster(*std::move(admin), *std::move(commit));
  // Before reading anything: a previous server (killed a moment ago, or still running) must
  // not write while we read.
  if (auto s = TakeWriterLock(**commit, options_.writer_lock_wait); !s.ok()) return s;

  if (auto s = CheckSynchronousStandby(**commit); !s.ok()) return s;

  const pg::Connection& conn = **admin;
  uint64_t max_seq = 0;
  std::unordered_map<std::string, uint64_t> high;  // newest sequence number per instance
  std::map<std::string, std::string> diverged;
  {
    // Instances an earlier check found behind: refused before anything of theirs is read.
    auto res = conn.Query(
        "SELECT instance, database_seq, acknowledged_seq, detected_by FROM bandit_diverged "
        "ORDER BY instance");
    if (!res.ok()) return res.status();
    for (int i = 0; i < res->rows(); ++i) {
      const auto d = DivergenceRow(res->text(i, 0), *res, i, 1);
      const std::string why = DivergedMessage(d, res->text(i, 3));
      diverged[d.instance] = why;
      sink.corrupt(d.instance, why);
    }
  }
  {
    // Row by row: one snapshot is held at a time (its row, then its message as the instance is
    // built from it), never every instance's at once.
    absl::Status read = conn.ForEachRow(
        "SELECT instance, snapshot FROM bandit_snapshots ORDER BY instance", {},
        pg::Format::kBinary, [&](const pg::Result& row) {
          const std::string name = row.text(0, 0);
          auto snap = DecodeSnapshotRow(name, row.bytes(0, 1));
          if (!snap.ok()) {
            sink.corrupt(name, std::string(snap.status().message()));
            return;
          }
          max_seq = std::max<uint64_t>(max_seq, snap->last_journal_seq());
          uint64_t& h = high[name];
          h = std::max<uint64_t>(h, snap->last_journal_seq());
          sink.snapshot(*std::move(snap));
        });
    if (!read.ok()) return read;
  }

  RecoveryStats stats;
  // Row by row: the journal is not held in memory twice.
  absl::Status read = conn.ForEachRow(
      "SELECT seq, instance, payload_crc, record FROM bandit_journal ORDER BY seq", {},
      pg::Format::kBinary, [&](const pg::Result& row) {
        const uint64_t seq = row.big_endian(0, 0);
        const std::string name = row.text(0, 1);
        max_seq = std::max(max_seq, seq);
        auto rec = DecodeJournalRow(seq, name, static_cast<uint32_t>(row.big_endian(0, 2)),
                                    row.bytes(0, 3));
        if (!rec.ok()) {
          sink.corrupt(name, std::string(rec.status().message()));
          return;
        }
        ++stats.records;
        uint64_t& h = high[name];
        h = std::max(h, seq);
        sink.record(*rec);
      });
  if (!read.ok()) return read;

  {
    absl::MutexLock lock(&high_mu_);
    committed_high_ = std::move(high);
  }
  {
    absl::MutexLock lock(&mu_);
    diverged_ = std::move(diverged);
    next_seq_ = max_seq + 1;
    last_appended_ = committed_seq_ = synced_seq_ = max_seq;
  }
  StartCommitter(*std::move(admin), *std::move(commit));
  BANDIT_LOG_INFO(
      "PostgreSQL storage (", RedactedDsn(options_.dsn), ", schema version ", LatestSchemaVersion(),
      ", durability=", DurabilityName(options_.durability),
      ", synchronous_commit=", options_.durability == Durability::kAlways ? "on" : "off", ")");
  return stats;
}

absl::StatusOr<RecoveryStats> PostgresStorage::RecoverCluster(
    std::unique_ptr<pg::Connection> admin, std::unique_ptr<pg::Connection> commit) {
  for (char c : options_.cluster_node_id)
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != ':' &&
        c != '-')
      return absl::InvalidArgumentError(absl::StrCat("node id '", options_.cluster_node_id,
                                                     "' has an invalid character, expected "
                                                     "[A-Za-z0-9_.:-]"));
  // Nothing is read here: the node loads each instance when it takes its lease
  // (RecoverInstance), and fencing, not a writer lock, keeps nodes apart.
  if (options_.durability != Durability::kAlways)
    return absl::FailedPreconditionError(absl::StrCat(
        "cluster mode needs --durability=always (a change is acknowledged only once its "
        "fenced COMMIT returned; durability=",
        DurabilityName(options_.durability),
        " would acknowledge writes that fencing may still refuse)"));
  if (auto s = CheckSynchronousStandby(*commit); !s.ok()) return s;
  StartCommitter(std::move(admin), std::move(commit));
  BANDIT_LOG_INFO("PostgreSQL storage (", RedactedDsn(options_.dsn), ", schema version ",
                  LatestSchemaVersion(), ") in cluster mode as node '", options_.cluster_node_id,
                  "': every commit is fenced by instance leases");
  return RecoveryStats{};
}

void PostgresStorage::StartCommitter(std::unique_ptr<pg::Connection> admin,
                                     std::unique_ptr<pg::Connection> commit) {
  {
    absl::MutexLock lock(&admin_mu_);
    admin_conn_ = std::move(admin);
  }
  absl::MutexLock lock(&mu_);
  commit_conn_ = std::move(commit);
  health_ = absl::OkStatus();
  recovered_ = true;
  committer_ = std::thread([this] { CommitterLoop(); });
}

absl::StatusOr<uint64_t> PostgresStorage::RecoverInstance(const std::string& instance,
                                                          const RecoverySink& sink) {
  uint64_t max_seq = 0;
  absl::Status s = OnAdmin([&](const pg::Connection& conn) -> absl::Status {
    uint64_t snap_seq = 0;
    {
      auto res = conn.Query(
          "SELECT database_seq, acknowledged_seq, detected_by FROM bandit_diverged WHERE "
          "instance = $1",
          {instance});
      if (!res.ok()) return res.status();
      if (res->rows() > 0) {
        sink.corrupt(instance,
                     DivergedMessage(DivergenceRow(instance, *res, 0, 0), res->text(0, 2)));
        return absl::OkStatus();
      }
    }
    {
      auto res = conn.Query("SELECT snapshot FROM bandit_snapshots WHERE instance = $1", {instance},
                            pg::Format::kBinary);
      if (!res.ok()) return res.status();
      if (res->rows() > 0) {
        auto snap = DecodeSnapshotRow(instance, res->bytes(0, 0));
        if (!snap.ok()) {
          sink.corrupt(instance, std::string(snap.status().message()));
          return absl::OkStatus();
        }
        snap_seq = max_seq = snap->last_journal_seq();
        sink.snapshot(*std::move(snap));
      }
    }
    auto res = conn.Query(
        "SELECT seq, payload_crc, record FROM bandit_journal WHERE instance = $1 AND "
        "seq > $2::bigint ORDER BY seq",
        {instance, absl::StrCat(snap_seq)}, pg::Format::kBinary);
    if (!res.ok()) return res.status();
    for (int i = 0; i < res->rows(); ++i) {
      const uint64_t seq = res->big_endian(i, 0);
      max_seq = std::max(max_seq, seq);
      auto rec = DecodeJournalRow(seq, instance, static_cast<uint32_t>(res->big_endian(i, 1)),
                                  res->bytes(i, 2));
      if (!rec.ok()) {
        sink.corrupt(instance, std::string(rec.status().message()));
        return absl::OkStatus();
      }
      sink.record(*rec);
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return max_seq;
}

std::string PostgresStorage::DivergedMessage(const PostgresStorageOptions::Divergence& d,
                                             const std::string& detected_by) {
  return absl::StrCat(
      "instance '", d.instance,
      "': PostgreSQL no longer holds every change that was "
      "acknowledged (the database has its records up to sequence number ",
      d.database_seq, ", ", detected_by, " had committed up to ", d.acknowledged_seq,
      "): the database went backwards (a failover to a standby that lacked the last commits, or "
      "an older backup restored). Refused rather than served from a state the database does not "
      "hold; an operator decides: delete the instance, or accept what the database holds with "
      "DELETE FROM bandit_diverged WHERE instance = '",
      d.instance,
      "' and a restart (event ids issued after the lost records may then be issued again)");
}

void PostgresStorage::NoteCommitted(const std::vector<Row>& rows) {
  if (rows.empty()) return;
  absl::MutexLock lock(&high_mu_);
  const std::string* last = nullptr;
  uint64_t* high = nullptr;
  for (const Row& r : rows) {  // rows of one instance tend to come in runs
    if (last == nullptr || *last != r.instance) {
      high = &committed_high_[r.instance];
      last = &r.instance;
    }
    *high = std::max(*high, r.seq);
  }
}

absl::StatusOr<std::vector<PostgresStorageOptions::Divergence>> PostgresStorage::FindDivergence(
    const pg::Connection& conn) {
  std::vector<std::string> loaded;
  if (options_.loaded_instances) loaded = options_.loaded_instances();
  std::set<std::string> skip;  // found before: refused already
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [n, why] : diverged_) skip.insert(n);
    // Cluster mode: only what this node owns (it committed nothing else since it loaded it).
    if (cluster())
      loaded.erase(std::remove_if(loaded.begin(), loaded.end(),
                                  [&](const std::string& n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                                    return epochs_.count(n) == 0;
                                  }),
                   loaded.end());
  }
  std::vector<std::string> names;
  std::vector<uint64_t> acked;
  {
    absl::MutexLock lock(&high_mu_);
    auto take = [&](const std::string& name, uint64_t seq) {
      if (seq == 0 || skip.count(name)) return;
      names.push_back(name);
      acked.push_back(seq);
    };
    if (options_.loaded_instances) {
      for (const auto& n : loaded)
        if (auto it = committed_high_.find(n); it != committed_high_.end()) take(n, it->second);
    } else {
      for (const auto& [n, seq] : committed_high_) take(n, seq);
    }
  }
  std::vector<PostgresStorageOptions::Divergence> out;
  if (names.empty()) return out;
  // The newest record the database holds per instance: its newest journal row, or its
  // snapshot's (compaction removes rows a snapshot covers).
  auto res = conn.Query(
      "SELECT instance, held, acked FROM (SELECT f.instance, f.acked, greatest(coalesce((SELECT "
      "max(j.seq) FROM bandit_journal j WHERE j.instance = f.instance), 0), coalesce((SELECT "
      "s.last_seq FROM bandit_snapshots s WHERE s.instance = f.instance), 0)) AS held FROM "
      "unnest($1::text[], $2::bigint[]) AS f(instance, acked)) c WHERE held < acked ORDER BY "
      "instance",
      {pg::TextArray(names), pg::IntArray(acked)});
  if (!res.ok()) return res.status();
  for (int i = 0; i < res->rows(); ++i) out.push_back(DivergenceRow(res->text(i, 0), *res, i, 1));
  if (out.empty()) return out;
  // Recorded, so that no later load (a restart, another node) serves them either.
  std::vector<std::string> d_names;
  std::vector<uint64_t> d_db, d_acked;
  for (const auto& d : out) {
    d_names.push_back(d.instance);
    d_db.push_back(d.database_seq);
    d_acked.push_back(d.acknowledged_seq);
  }
  if (auto s = conn.Exec(
          "INSERT INTO bandit_diverged (instance, database_seq, acknowledged_seq, detected_by) "
          "SELECT instance, db, acked, $4 FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS "
          "f(instance, db, acked) ON CONFLICT (instance) DO NOTHING",
          {pg::TextArray(d_names), pg::IntArray(d_db), pg::IntArray(d_acked), DetectedBy()});
      !s.ok())
    return s;
  return out;
}

std::string PostgresStorage::DetectedBy() const {
  if (cluster()) return absl::StrCat("node '", options_.cluster_node_id, "'");
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat("the banditd on ", host);
}

}  // namespace bandit::server
