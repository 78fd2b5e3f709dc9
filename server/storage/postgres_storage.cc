#include "server/storage/postgres_storage.h"

#include <endian.h>
#include <libpq-fe.h>
#include <algorithm>
#include <cstring>
#include <set>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/log.h"
#include "server/storage/crc32.h"
#include "server/storage/snapshot_store.h"
#include "server/version.h"

namespace bandit::server {
namespace {

// Numbered schema migrations, applied in order, each once (bandit_schema_version). Never edit
// a released one: add the next number.
struct Migration {
  int version;
  const char* sql;
};
constexpr Migration kMigrations[] = {
    {1,
     // The journal: one row per record, keyed by the server-assigned sequence number (the
     // replay order). The instance name is a column of its own so corruption of a record is
     // blamed on one instance, as in the file frame header.
     "CREATE TABLE bandit_journal ("
     "  seq bigint PRIMARY KEY,"
     "  instance text NOT NULL,"
     "  payload_crc integer NOT NULL,"
     "  record bytea NOT NULL);"
     // One snapshot per instance, replaced in place (INSERT ... ON CONFLICT DO UPDATE).
     "CREATE TABLE bandit_snapshots ("
     "  instance text PRIMARY KEY,"
     "  last_seq bigint NOT NULL,"
     "  snapshot bytea NOT NULL,"
     "  written_at timestamptz NOT NULL DEFAULT now());"},
    {2,
     // A cluster of banditd nodes on one database (server/cluster/). Journal rows are keyed by
     // (instance, seq): every node numbers its own records (per instance they stay in order:
     // a new owner numbers above the instance's last row); the seq index keeps recovery order
     // and range compaction of a single writer cheap.
     "ALTER TABLE bandit_journal DROP CONSTRAINT bandit_journal_pkey;"
     "ALTER TABLE bandit_journal ADD PRIMARY KEY (instance, seq);"
     "CREATE INDEX bandit_journal_seq ON bandit_journal (seq);"
     // Membership: one row per node, renewed by its heartbeat. Every expiry is computed with
     // the database's clock (clock_timestamp()), so nodes' clocks never need to agree. A node's
     // row being live is what keeps all of its leases live (one row renewed, not one per
     // instance); `incarnation` tells a restarted node from its previous process.
     "CREATE TABLE bandit_nodes ("
     "  node_id text PRIMARY KEY,"
     "  address text NOT NULL,"
     "  incarnation bigint NOT NULL,"
     "  started_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
     "  heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
     "  expires_at timestamptz NOT NULL,"
     "  leaving boolean NOT NULL DEFAULT false);"
     // Ownership: one row per instance. owner NULL = released (graceful leave, hand-off). The
     // epoch grows by one on every change of owner and fences every write of the instance.
     "CREATE TABLE bandit_leases ("
     "  instance text PRIMARY KEY,"
     "  owner text,"
     "  owner_incarnation bigint,"
     "  epoch bigint NOT NULL,"
     "  acquired_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
     "  takeovers bigint NOT NULL DEFAULT 0);"
     "CREATE INDEX bandit_leases_owner ON bandit_leases (owner);"
     // The fencing check, the first statement of every transaction that writes an instance's
     // records or snapshot: share-locks the lease rows (in name order, so two fences never
     // deadlock) and raises BF001 unless `node` still holds every (instance, epoch). A
     // takeover's UPDATE of a lease row waits for a fenced transaction holding it; one that
     // committed first makes the re-checked row fail the check.
     "CREATE FUNCTION bandit_fence(node text, instances text[], epochs bigint[])"
     "  RETURNS integer LANGUAGE plpgsql AS $fence$"
     " DECLARE held integer;"
     " BEGIN"
     "  SELECT count(*) INTO held FROM ("
     "    SELECT l.instance FROM bandit_leases l"
     "      JOIN unnest(instances, epochs) AS f(instance, epoch) ON l.instance = f.instance"
     "     WHERE l.owner = node AND l.epoch = f.epoch"
     "     ORDER BY l.instance FOR SHARE OF l) AS held_leases;"
     "  IF held <> cardinality(instances) THEN"
     "    RAISE EXCEPTION 'lease fencing: node % no longer holds % of the % instance leases"
     " this commit writes', node, cardinality(instances) - held, cardinality(instances)"
     "      USING ERRCODE = 'BF001';"
     "  END IF;"
     "  RETURN held;"
     " END $fence$;"},
    {3,
     // Instances found behind: the database holds fewer of their records than a banditd had
     // committed (a failover to a standby without the last commits, an older backup). Every
     // load of a listed instance is refused until an operator deletes the instance or the row.
     "CREATE TABLE bandit_diverged ("
     "  instance text PRIMARY KEY,"
     "  database_seq bigint NOT NULL,"
     "  acknowledged_seq bigint NOT NULL,"
     "  detected_by text NOT NULL,"
     "  detected_at timestamptz NOT NULL DEFAULT clock_timestamp());"},
};

constexpr const char* kFencedSqlState = "BF001";

// Advisory lock keys ("band" "it" + purpose).
constexpr const char* kWriterLockKey = "7017280427813404673";     // 0x616e646974000001
constexpr const char* kMigrationLockKey = "7017280427813404674";  // 0x616e646974000002

constexpr size_t kRowsPerInsert = 1000;          // 4 parameters a row; the protocol allows 65535
constexpr std::chrono::milliseconds kLinger{2};  // everysec/none, as the file journal

constexpr unsigned kOidInt8 = 20, kOidText = 25, kOidInt4 = 23, kOidBytea = 17;

uint32_t Crc(const std::string& d) { return Crc32(d); }

std::string Trimmed(const char* msg) {
  return std::string(absl::StripAsciiWhitespace(msg ? msg : ""));
}

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// A PostgreSQL array literal of text values ({"a","b"}), quoting every element.
std::string TextArray(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::string IntArray(const std::vector<uint64_t>& values) {
  return absl::StrCat("{", absl::StrJoin(values, ","), "}");
}

uint64_t ReadBigEndian(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

// One libpq connection and the few ways this file talks over it.
class PostgresStorage::Connection {
 public:
  explicit Connection(PGconn* conn) : conn_(conn) {}
  ~Connection() { PQfinish(conn_); }
  PGconn* get() const { return conn_; }
  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }
  // Whether the server is still there, without a round trip: reads whatever it sent (a closed
  // socket, a termination notice). libpq's socket is non-blocking, so this never waits.
  absl::Status Probe() const {
    if (PQconsumeInput(conn_) != 1 || !ok())
      return absl::UnavailableError(absl::StrCat("PostgreSQL: the connection was lost: ",
                                                 Trimmed(PQerrorMessage(conn_))));
    return absl::OkStatus();
  }

  // UNAVAILABLE, or ABORTED when the fencing check refused the transaction (the lease moved on:
  // the connection is fine, the rows must not be written).
  absl::Status Error(absl::string_view what, const PGresult* res = nullptr) const {
    std::string why = res ? Trimmed(PQresultErrorMessage(res)) : "";
    if (why.empty()) why = Trimmed(PQerrorMessage(conn_));
    if (why.empty() && res) why = PQresStatus(PQresultStatus(res));
    const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
    if (state != nullptr && std::strcmp(state, kFencedSqlState) == 0)
      return absl::AbortedError(absl::StrCat("PostgreSQL: ", why));
    return absl::UnavailableError(absl::StrCat("PostgreSQL: ", what, ": ", why));
  }

  // A statement with text parameters; `value` gets the first column of the first row.
  absl::Status Exec(const std::string& sql, const std::vector<std::string>& params = {},
                    std::string* value = nullptr) const {
    std::vector<const char*> p;
    for (const auto& s : params) p.push_back(s.c_str());
    // Without parameters: the simple protocol, which also runs a migration's several commands.
    Result res(p.empty() ? PQexec(conn_, sql.c_str())
                         : PQexecParams(conn_, sql.c_str(), static_cast<int>(p.size()), nullptr,
                                        p.data(), nullptr, nullptr, 0));
    const auto st = PQresultStatus(res.get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return Error(sql, res.get());
    if (value != nullptr)
      *value = (PQntuples(res.get()) > 0 && !PQgetisnull(res.get(), 0, 0))
                   ? PQgetvalue(res.get(), 0, 0)
                   : "";
    return absl::OkStatus();
  }

 private:
  PGconn* conn_;
};

PostgresStorage::PostgresStorage(PostgresStorageOptions options) : options_(std::move(options)) {}

PostgresStorage::~PostgresStorage() {
  bool recovered;
  {
    std::lock_guard<std::mutex> lock(mu_);
    recovered = recovered_;
  }
  if (recovered) (void)Flush();
  size_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    dropped = buffer_.size();
  }
  work_cv_.notify_all();
  if (committer_.joinable()) committer_.join();
  // Nobody waits forever: whatever the committer could not cover is answered here.
  std::multimap<uint64_t, std::function<void(absl::Status)>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(waiters_);
  }
  for (auto& [seq, done] : left)
    done(absl::UnavailableError("PostgreSQL storage closed before the record was committed"));
  if (dropped > 0)
    BANDIT_LOG_WARN(
        "PostgreSQL storage closed with ", dropped,
        " records never committed (none of them was acknowledged in durability=always)");
}

int PostgresStorage::LatestSchemaVersion() { return std::end(kMigrations)[-1].version; }

std::string PostgresStorage::RedactedDsn(const std::string& dsn) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
  if (opts == nullptr) {
    if (err) PQfreemem(err);
    return "(unparseable connection string)";
  }
  std::vector<std::string> parts;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    if (std::strcmp(o->keyword, "password") == 0) {
      parts.push_back("password=(hidden)");
      continue;
    }
    parts.push_back(absl::StrCat(o->keyword, "=", o->val));
  }
  PQconninfoFree(opts);
  return absl::StrJoin(parts, " ");
}

absl::StatusOr<std::unique_ptr<PostgresStorage::Connection>> PostgresStorage::Connect(
    bool commit_session) const {
  // Defaults first; the operator's connection string (expanded from "dbname") overrides them;
  // a password from --postgres_password_file overrides everything.
  std::vector<const char*> keys = {
      "connect_timeout",  "application_name", "keepalives_idle", "keepalives_interval",
      "keepalives_count", "tcp_user_timeout", "dbname"};
  std::vector<const char*> values = {"5", "banditd", "10", "5", "3", "15000", options_.dsn.c_str()};
  if (!password_.empty()) {
    keys.push_back("password");
    values.push_back(password_.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  auto conn = std::make_unique<Connection>(PQconnectdbParams(keys.data(), values.data(), 1));
  // Server notices (e.g. "terminating connection due to administrator command") into our log.
  PQsetNoticeProcessor(
      conn->get(),
      [](void*, const char* message) { BANDIT_LOG_WARN("PostgreSQL: ", Trimmed(message)); },
      nullptr);
  if (!conn->ok())
    return absl::UnavailableError(absl::StrCat("cannot connect to PostgreSQL (",
                                               RedactedDsn(options_.dsn),
                                               "): ", Trimmed(PQerrorMessage(conn->get()))));
  // always: the COMMIT returns once its WAL is flushed. everysec/none: PostgreSQL's WAL writer
  // flushes within 3 x wal_writer_delay. Snapshots (the admin session) commit asynchronously:
  // a lost snapshot only means replaying more journal, which stays until Compact, whose
  // synchronous commit flushes the WAL past every earlier snapshot before rows are deleted.
  // (A synchronous commit per snapshot made a 10 000-instance round wait for 10 000 WAL
  // flushes.)
  const bool sync = commit_session && options_.durability == Durability::kAlways;
  if (auto s = conn->Exec(absl::StrCat("SET synchronous_commit TO ", sync ? "on" : "off")); !s.ok())
    return s;
  if (auto s = conn->Exec("SET client_min_messages TO warning"); !s.ok()) return s;
  return conn;
}

absl::Status PostgresStorage::Migrate(Connection& conn) const {
  auto fail = [&](absl::Status s) {
    (void)conn.Exec("ROLLBACK");
    return s;
  };
  if (auto s = conn.Exec("BEGIN"); !s.ok()) return s;
  // Two servers starting at once on an empty database: one migrates, the other waits.
  if (auto s = conn.Exec(absl::StrCat("SELECT pg_advisory_xact_lock(", kMigrationLockKey, ")"));
      !s.ok())
    return fail(s);
  if (auto s = conn.Exec("CREATE TABLE IF NOT EXISTS bandit_schema_version ("
                         "  version integer PRIMARY KEY,"
                         "  applied_at timestamptz NOT NULL DEFAULT now(),"
                         "  applied_by text NOT NULL)");
      !s.ok())
    return fail(s);
  std::string current_text;
  if (auto s = conn.Exec("SELECT coalesce(max(version), 0) FROM bandit_schema_version", {},
                         &current_text);
      !s.ok())
    return fail(s);
  int current = 0;
  (void)absl::SimpleAtoi(current_text, &current);
  if (current > LatestSchemaVersion())
    return fail(absl::FailedPreconditionError(absl::StrCat(
        "the PostgreSQL database (", RedactedDsn(options_.dsn), ") has bandit schema version ",
        current, ", newer than this banditd knows (", LatestSchemaVersion(),
        "): a newer banditd has migrated it; run that version (or point --postgres_dsn at "
        "another database)")));
  for (const Migration& m : kMigrations) {
    if (m.version <= current) continue;
    if (auto s = conn.Exec(m.sql); !s.ok()) return fail(s);
    if (auto s = conn.Exec(
            "INSERT INTO bandit_schema_version (version, applied_by) VALUES ($1::integer, $2)",
            {absl::StrCat(m.version), absl::StrCat("banditd ", kVersion)});
        !s.ok())
      return fail(s);
    BANDIT_LOG_INFO("PostgreSQL schema migrated to version ", m.version);
  }
  return conn.Exec("COMMIT");
}

absl::Status PostgresStorage::TakeWriterLock(Connection& conn,
                                             std::chrono::milliseconds wait) const {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    std::string got;
    if (auto s =
            conn.Exec(absl::StrCat("SELECT pg_try_advisory_lock(", kWriterLockKey, ")"), {}, &got);
        !s.ok())
      return s;
    if (got == "t") return absl::OkStatus();
    if (std::chrono::steady_clock::now() >= deadline)
      return absl::FailedPreconditionError(
          absl::StrCat("another banditd holds the writer lock on the PostgreSQL database (",
                       RedactedDsn(options_.dsn), "): one server writes a database at a time"));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

absl::StatusOr<RecoveryStats> PostgresStorage::Recover(const RecoverySink& sink) {
  password_ = options_.password;
  auto admin = Connect(false);
  if (!admin.ok()) return admin.status();
  if (auto s = Migrate(**admin); !s.ok()) return s;
  auto commit = Connect(true);
  if (!commit.ok()) return commit.status();
  if (cluster()) {
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
    if (auto s = CheckSynchronousStandby(**commit); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    admin_conn_ = *std::move(admin);
    commit_conn_ = *std::move(commit);
    health_ = absl::OkStatus();
    recovered_ = true;
    committer_ = std::thread([this] { CommitterLoop(); });
    BANDIT_LOG_INFO("PostgreSQL storage (", RedactedDsn(options_.dsn), ", schema version ",
                    LatestSchemaVersion(), ") in cluster mode as node '", options_.cluster_node_id,
                    "': every commit is fenced by instance leases");
    return RecoveryStats{};
  }
  // Before reading anything: a previous server (killed a moment ago, or still running) must
  // not write while we read.
  if (auto s = TakeWriterLock(**commit, options_.writer_lock_wait); !s.ok()) return s;

  if (auto s = CheckSynchronousStandby(**commit); !s.ok()) return s;

  Connection& conn = **admin;
  uint64_t max_seq = 0;
  std::unordered_map<std::string, uint64_t> high;  // newest sequence number per instance
  std::map<std::string, std::string> diverged;
  {
    // Instances an earlier check found behind: refused before anything of theirs is read.
    Result res(PQexec(conn.get(),
                      "SELECT instance, database_seq, acknowledged_seq, detected_by FROM "
                      "bandit_diverged ORDER BY instance"));
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      return conn.Error("reading bandit_diverged", res.get());
    for (int i = 0; i < PQntuples(res.get()); ++i) {
      PostgresStorageOptions::Divergence d;
      d.instance = PQgetvalue(res.get(), i, 0);
      (void)absl::SimpleAtoi(PQgetvalue(res.get(), i, 1), &d.database_seq);
      (void)absl::SimpleAtoi(PQgetvalue(res.get(), i, 2), &d.acknowledged_seq);
      const std::string why = DivergedMessage(d, PQgetvalue(res.get(), i, 3));
      diverged[d.instance] = why;
      sink.corrupt(d.instance, why);
    }
  }
  {
    Result res(PQexecParams(conn.get(),
                            "SELECT instance, snapshot FROM bandit_snapshots ORDER BY instance", 0,
                            nullptr, nullptr, nullptr, nullptr, 1));
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      return conn.Error("reading bandit_snapshots", res.get());
    for (int i = 0; i < PQntuples(res.get()); ++i) {
      const std::string name(PQgetvalue(res.get(), i, 0), PQgetlength(res.get(), i, 0));
      auto snap = SnapshotStore::Decode(
          absl::string_view(PQgetvalue(res.get(), i, 1), PQgetlength(res.get(), i, 1)));
      if (!snap.ok()) {
        sink.corrupt(name, absl::StrCat("snapshot: ", snap.status().message()));
        continue;
      }
      if (snap->name() != name) {
        sink.corrupt(name, absl::StrCat("snapshot: the row of '", name, "' holds instance '",
                                        snap->name(), "'"));
        continue;
      }
      max_seq = std::max<uint64_t>(max_seq, snap->last_journal_seq());
      uint64_t& h = high[name];
      h = std::max<uint64_t>(h, snap->last_journal_seq());
      sink.snapshot(*snap);
    }
  }

  RecoveryStats stats;
  // Row by row (single-row mode): the journal is not held in memory twice.
  if (!PQsendQueryParams(conn.get(),
                         "SELECT seq, instance, payload_crc, record FROM bandit_journal "
                         "ORDER BY seq",
                         0, nullptr, nullptr, nullptr, nullptr, 1) ||
      !PQsetSingleRowMode(conn.get()))
    return conn.Error("reading bandit_journal");
  absl::Status read_status;
  while (PGresult* raw = PQgetResult(conn.get())) {
    Result res(raw);
    const auto st = PQresultStatus(raw);
    if (st == PGRES_TUPLES_OK) continue;  // the end
    if (st != PGRES_SINGLE_TUPLE) {
      if (read_status.ok()) read_status = conn.Error("reading bandit_journal", raw);
      continue;
    }
    const uint64_t seq = ReadBigEndian(PQgetvalue(raw, 0, 0), 8);
    const std::string name(PQgetvalue(raw, 0, 1), PQgetlength(raw, 0, 1));
    const uint32_t crc = static_cast<uint32_t>(ReadBigEndian(PQgetvalue(raw, 0, 2), 4));
    const std::string payload(PQgetvalue(raw, 0, 3), PQgetlength(raw, 0, 3));
    max_seq = std::max(max_seq, seq);
    bandit::v1::JournalRecord rec;
    if (Crc(payload) != crc || !rec.ParseFromString(payload)) {
      sink.corrupt(name, absl::StrCat("journal corrupted: bandit_journal row ", seq,
                                      ": record payload checksum mismatch"));
      continue;
    }
    if (rec.seq() != seq || rec.instance() != name) {
      sink.corrupt(name, absl::StrCat("journal corrupted: bandit_journal row ", seq,
                                      " holds record ", rec.seq(), " of '", rec.instance(), "'"));
      continue;
    }
    ++stats.records;
    uint64_t& h = high[name];
    h = std::max(h, seq);
    sink.record(rec);
  }
  if (!read_status.ok()) return read_status;

  {
    std::lock_guard<std::mutex> lock(high_mu_);
    committed_high_ = std::move(high);
  }
  std::lock_guard<std::mutex> lock(mu_);
  diverged_ = std::move(diverged);
  admin_conn_ = *std::move(admin);
  commit_conn_ = *std::move(commit);
  next_seq_ = max_seq + 1;
  last_appended_ = committed_seq_ = synced_seq_ = max_seq;
  health_ = absl::OkStatus();
  recovered_ = true;
  committer_ = std::thread([this] { CommitterLoop(); });
  BANDIT_LOG_INFO(
      "PostgreSQL storage (", RedactedDsn(options_.dsn), ", schema version ", LatestSchemaVersion(),
      ", durability=", DurabilityName(options_.durability),
      ", synchronous_commit=", options_.durability == Durability::kAlways ? "on" : "off", ")");
  return stats;
}

absl::StatusOr<uint64_t> PostgresStorage::Append(bandit::v1::JournalRecord* rec) {
  return AppendAll(absl::MakeConstSpan(&rec, 1));
}

absl::StatusOr<uint64_t> PostgresStorage::AppendAll(
    absl::Span<bandit::v1::JournalRecord* const> recs) {
  if (recs.empty()) return 0;
  std::lock_guard<std::mutex> lock(mu_);
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
  if (wake) work_cv_.notify_one();
  return recs.back()->seq();
}

namespace {
absl::Status FencedStatus() {
  return absl::UnavailableError(
      "the instance's lease moved to another node before this change was committed: "
      "refused by fencing, not applied; retry (the cluster routes the call to the new owner)");
}
}  // namespace

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
    std::lock_guard<std::mutex> lock(mu_);
    status = health_;
    if (status.ok() && options_.durability == Durability::kAlways && seq > committed_seq_) {
      waiters_.emplace(seq, std::move(done));
      return;
    }
    if (status.ok() && Refused(seq)) status = FencedStatus();
    if (status.ok() && !dropped_diverged_.empty())
      if (auto it = dropped_diverged_.find(seq); it != dropped_diverged_.end())
        status = absl::DataLossError(it->second);
  }
  done(status);
}

absl::Status PostgresStorage::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!recovered_) return health_;
  const uint64_t target = last_appended_;
  while (health_.ok() && synced_seq_ < target) {
    flush_requested_ = true;
    work_cv_.notify_one();
    done_cv_.wait(lock);
  }
  return health_;
}

absl::StatusOr<uint64_t> PostgresStorage::BeginSnapshotRound() {
  uint64_t boundary;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!health_.ok()) return health_;
    boundary = next_seq_;
  }
  // Everything below the boundary is committed before a snapshot round may delete it.
  if (auto s = Flush(); !s.ok()) return s;
  return boundary;
}

absl::Status PostgresStorage::OnAdmin(const std::function<absl::Status(Connection&)>& op) {
  if (auto s = health(); !s.ok()) return s;  // never write around a failed commit path
  std::lock_guard<std::mutex> lock(admin_mu_);
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
    const std::string& instance, const std::function<absl::Status(Connection&)>& body) {
  const uint64_t epoch = OwnedEpoch(instance);
  if (epoch == 0)
    return absl::UnavailableError(absl::StrCat("instance '", instance, "' is not owned by node '",
                                               options_.cluster_node_id, "' any more"));
  absl::Status s = OnAdmin([&](Connection& conn) -> absl::Status {
    if (auto s = conn.Exec("BEGIN"); !s.ok()) return s;
    absl::Status st =
        conn.Exec("SELECT bandit_fence($1, $2::text[], $3::bigint[])",
                  {options_.cluster_node_id, TextArray({instance}), IntArray({epoch})});
    if (st.ok()) st = body(conn);
    if (!st.ok()) {
      (void)conn.Exec("ROLLBACK");
      return st;
    }
    Result res(PQexec(conn.get(), "COMMIT"));
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK ||
        std::strcmp(PQcmdStatus(res.get()), "COMMIT") != 0)
      return conn.Error(absl::StrCat("committing a write of '", instance, "'"), res.get());
    return absl::OkStatus();
  });
  if (s.code() == absl::StatusCode::kAborted) {
    ReportFenced({{instance, epoch}});
    return absl::UnavailableError(absl::StrCat("instance '", instance, "': ", s.message()));
  }
  return s;
}

absl::Status PostgresStorage::WriteSnapshot(const bandit::v1::InstanceSnapshot& snap,
                                            const EncodedSnapshotFields* extra) {
  const std::string bytes = SnapshotStore::Encode(snap, extra);
  const std::string last_seq = absl::StrCat(snap.last_journal_seq());
  if (cluster()) {
    // A snapshot holds only committed records: a state whose last change fencing may still
    // refuse must never reach the next owner. (An instance whose last record was loaded from
    // another owner's numbering may name a number this node never appended: that record is
    // committed already, and this node's own records of it are all at or below last_appended_.)
    uint64_t wait_for;
    {
      std::lock_guard<std::mutex> lock(mu_);
      wait_for = std::min<uint64_t>(snap.last_journal_seq(), last_appended_);
    }
    if (auto s = WaitDurable(wait_for); !s.ok()) return s;
    return FencedAdminTransaction(snap.name(), [&](Connection& conn) -> absl::Status {
      const char* values[3] = {snap.name().c_str(), last_seq.c_str(), bytes.data()};
      const int lengths[3] = {0, 0, static_cast<int>(bytes.size())};
      const int formats[3] = {0, 0, 1};
      Result res(PQexecParams(
          conn.get(),
          "INSERT INTO bandit_snapshots (instance, last_seq, snapshot) VALUES ($1, $2::bigint, "
          "$3) ON CONFLICT (instance) DO UPDATE SET last_seq = excluded.last_seq, "
          "snapshot = excluded.snapshot, written_at = now()",
          3, nullptr, values, lengths, formats, 0));
      if (PQresultStatus(res.get()) != PGRES_COMMAND_OK)
        return conn.Error(absl::StrCat("writing the snapshot of '", snap.name(), "'"), res.get());
      return absl::OkStatus();
    });
  }
  return OnAdmin([&](Connection& conn) {
    const char* values[3] = {snap.name().c_str(), last_seq.c_str(), bytes.data()};
    const int lengths[3] = {0, 0, static_cast<int>(bytes.size())};
    const int formats[3] = {0, 0, 1};
    Result res(PQexecParams(
        conn.get(),
        "INSERT INTO bandit_snapshots (instance, last_seq, snapshot) VALUES ($1, $2::bigint, $3) "
        "ON CONFLICT (instance) DO UPDATE SET last_seq = excluded.last_seq, "
        "snapshot = excluded.snapshot, written_at = now()",
        3, nullptr, values, lengths, formats, 0));
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK)
      return conn.Error(absl::StrCat("writing the snapshot of '", snap.name(), "'"), res.get());
    return absl::OkStatus();
  });
}

absl::Status PostgresStorage::RemoveSnapshot(const std::string& instance) {
  if (cluster()) {
    // A deleted instance leaves nothing behind: snapshot, journal rows and its lease go in
    // one fenced transaction (the deletion record is committed: the round flushed first).
    absl::Status s = FencedAdminTransaction(instance, [&](Connection& conn) -> absl::Status {
      for (const char* sql : {"DELETE FROM bandit_snapshots WHERE instance = $1",
                              "DELETE FROM bandit_journal WHERE instance = $1",
                              "DELETE FROM bandit_diverged WHERE instance = $1",
                              "DELETE FROM bandit_leases WHERE instance = $1"})
        if (auto s = conn.Exec(sql, {instance}); !s.ok()) return s;
      return absl::OkStatus();
    });
    if (s.ok()) {
      Disown(instance);
      std::lock_guard<std::mutex> lock(mu_);
      diverged_.erase(instance);
    }
    return s;
  }
  absl::Status s = OnAdmin([&](Connection& conn) {
    absl::Status st = conn.Exec("DELETE FROM bandit_snapshots WHERE instance = $1", {instance});
    if (st.ok()) st = conn.Exec("DELETE FROM bandit_diverged WHERE instance = $1", {instance});
    return st;
  });
  if (s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    diverged_.erase(instance);
  }
  return s;
}

absl::Status PostgresStorage::Compact(uint64_t boundary) {
  // Synchronous, and with a transaction id even when nothing is deleted: its WAL flush makes
  // every snapshot written before it durable before any row they cover is gone.
  return OnAdmin([&](Connection& conn) -> absl::Status {
    if (auto s = conn.Exec("BEGIN"); !s.ok()) return s;
    for (const std::string& sql :
         {std::string("SET LOCAL synchronous_commit TO on"), std::string("SELECT txid_current()"),
          cluster()
              // Per instance: every row a stored snapshot covers (an instance's rows are in
              // order across owners), for the instances this node holds.
              ? absl::StrCat("DELETE FROM bandit_journal j USING bandit_snapshots s, "
                             "bandit_leases l WHERE j.instance = s.instance AND "
                             "j.seq <= s.last_seq AND l.instance = j.instance AND l.owner = '",
                             options_.cluster_node_id, "'")
              // A diverged instance keeps its rows: what the database holds of it is what an
              // operator may choose to accept.
              : absl::StrCat("DELETE FROM bandit_journal WHERE seq < ", boundary,
                             " AND instance NOT IN (SELECT instance FROM bandit_diverged)")}) {
      if (auto s = conn.Exec(sql); !s.ok()) {
        (void)conn.Exec("ROLLBACK");
        return s;
      }
    }
    Result res(PQexec(conn.get(), "COMMIT"));
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK ||
        std::strcmp(PQcmdStatus(res.get()), "COMMIT") != 0)
      return conn.Error("committing the compaction", res.get());
    return absl::OkStatus();
  });
}

void PostgresStorage::Own(const std::string& instance, uint64_t epoch, uint64_t last_seq) {
  {
    std::lock_guard<std::mutex> lock(high_mu_);
    committed_high_[instance] = last_seq;  // what the database held when it was loaded
  }
  std::lock_guard<std::mutex> lock(mu_);
  epochs_[instance] = epoch;
  next_seq_ = std::max(next_seq_, last_seq + 1);
}

void PostgresStorage::Disown(const std::string& instance) {
  std::lock_guard<std::mutex> lock(mu_);
  epochs_.erase(instance);
}

uint64_t PostgresStorage::OwnedEpoch(const std::string& instance) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = epochs_.find(instance);
  return it == epochs_.end() ? 0 : it->second;
}

void PostgresStorage::SetLeaseDeadline(std::chrono::steady_clock::time_point deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  lease_deadline_ = deadline;
}

absl::Status PostgresStorage::WritableFor(const std::string& instance) const {
  std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  return std::chrono::steady_clock::now() < lease_deadline_;
}

void PostgresStorage::ReportFenced(const std::vector<Lease>& lost) {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
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

absl::StatusOr<uint64_t> PostgresStorage::RecoverInstance(const std::string& instance,
                                                          const RecoverySink& sink) {
  uint64_t max_seq = 0;
  absl::Status s = OnAdmin([&](Connection& conn) -> absl::Status {
    const char* name = instance.c_str();
    uint64_t snap_seq = 0;
    {
      Result res(PQexecParams(conn.get(),
                              "SELECT database_seq, acknowledged_seq, detected_by FROM "
                              "bandit_diverged WHERE instance = $1",
                              1, nullptr, &name, nullptr, nullptr, 0));
      if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
        return conn.Error("reading bandit_diverged", res.get());
      if (PQntuples(res.get()) > 0) {
        PostgresStorageOptions::Divergence d;
        d.instance = instance;
        (void)absl::SimpleAtoi(PQgetvalue(res.get(), 0, 0), &d.database_seq);
        (void)absl::SimpleAtoi(PQgetvalue(res.get(), 0, 1), &d.acknowledged_seq);
        sink.corrupt(instance, DivergedMessage(d, PQgetvalue(res.get(), 0, 2)));
        return absl::OkStatus();
      }
    }
    {
      Result res(PQexecParams(conn.get(),
                              "SELECT snapshot FROM bandit_snapshots WHERE instance = $1", 1,
                              nullptr, &name, nullptr, nullptr, 1));
      if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
        return conn.Error("reading bandit_snapshots", res.get());
      if (PQntuples(res.get()) > 0) {
        auto snap = SnapshotStore::Decode(
            absl::string_view(PQgetvalue(res.get(), 0, 0), PQgetlength(res.get(), 0, 0)));
        if (!snap.ok()) {
          sink.corrupt(instance, absl::StrCat("snapshot: ", snap.status().message()));
          return absl::OkStatus();
        }
        if (snap->name() != instance) {
          sink.corrupt(instance, absl::StrCat("snapshot: the row of '", instance,
                                              "' holds instance '", snap->name(), "'"));
          return absl::OkStatus();
        }
        snap_seq = max_seq = snap->last_journal_seq();
        sink.snapshot(*snap);
      }
    }
    const std::string after = absl::StrCat(snap_seq);
    const char* params[2] = {name, after.c_str()};
    Result res(PQexecParams(conn.get(),
                            "SELECT seq, payload_crc, record FROM bandit_journal WHERE instance "
                            "= $1 AND seq > $2::bigint ORDER BY seq",
                            2, nullptr, params, nullptr, nullptr, 1));
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      return conn.Error("reading bandit_journal", res.get());
    for (int i = 0; i < PQntuples(res.get()); ++i) {
      const uint64_t seq = ReadBigEndian(PQgetvalue(res.get(), i, 0), 8);
      const uint32_t crc = static_cast<uint32_t>(ReadBigEndian(PQgetvalue(res.get(), i, 1), 4));
      const std::string payload(PQgetvalue(res.get(), i, 2), PQgetlength(res.get(), i, 2));
      max_seq = std::max(max_seq, seq);
      bandit::v1::JournalRecord rec;
      if (Crc(payload) != crc || !rec.ParseFromString(payload)) {
        sink.corrupt(instance, absl::StrCat("journal corrupted: bandit_journal row ", seq,
                                            ": record payload checksum mismatch"));
        return absl::OkStatus();
      }
      if (rec.seq() != seq || rec.instance() != instance) {
        sink.corrupt(instance,
                     absl::StrCat("journal corrupted: bandit_journal row ", seq, " holds record ",
                                  rec.seq(), " of '", rec.instance(), "'"));
        return absl::OkStatus();
      }
      sink.record(rec);
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return max_seq;
}

std::string PostgresStorage::DivergedMessage(const PostgresStorageOptions::Divergence& d,
                                             const std::string& detected_by) {
  return absl::StrCat(
      "instance '", d.instance, "': PostgreSQL no longer holds every change that was "
      "acknowledged (the database has its records up to sequence number ", d.database_seq, ", ",
      detected_by, " had committed up to ", d.acknowledged_seq,
      "): the database went backwards (a failover to a standby that lacked the last commits, or "
      "an older backup restored). Refused rather than served from a state the database does not "
      "hold; an operator decides: delete the instance, or accept what the database holds with "
      "DELETE FROM bandit_diverged WHERE instance = '", d.instance,
      "' and a restart (event ids issued after the lost records may then be issued again)");
}

absl::Status PostgresStorage::CheckSynchronousStandby(Connection& conn, bool quiet) {
  std::string names;
  if (auto s = conn.Exec("SELECT current_setting('synchronous_standby_names')", {}, &names);
      !s.ok())
    return s;
  if (options_.durability != Durability::kAlways) return absl::OkStatus();
  const int state = names.empty() ? 0 : 1;
  const bool changed = state != standby_state_;
  standby_state_ = state;
  if (quiet && !changed) {
    if (state == 0 && options_.require_synchronous_standby)
      return absl::FailedPreconditionError(
          "durability=always, but PostgreSQL has no synchronous standby; "
          "--postgres_require_sync_standby refuses writes until it has one");
    return absl::OkStatus();
  }
  if (!names.empty()) {
    BANDIT_LOG_INFO("PostgreSQL synchronous_standby_names = '", names,
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

void PostgresStorage::NoteCommitted(const std::vector<Row>& rows) {
  if (rows.empty()) return;
  std::lock_guard<std::mutex> lock(high_mu_);
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

absl::StatusOr<std::vector<PostgresStorageOptions::Divergence>> PostgresStorage::FindDivergence(
    Connection& conn) {
  std::vector<std::string> loaded;
  if (options_.loaded_instances) loaded = options_.loaded_instances();
  std::set<std::string> skip;  // found before: refused already
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [n, why] : diverged_) skip.insert(n);
    // Cluster mode: only what this node owns (it committed nothing else since it loaded it).
    if (cluster())
      loaded.erase(std::remove_if(loaded.begin(), loaded.end(),
                                  [&](const std::string& n) { return epochs_.count(n) == 0; }),
                   loaded.end());
  }
  std::vector<std::string> names;
  std::vector<uint64_t> acked;
  {
    std::lock_guard<std::mutex> lock(high_mu_);
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
  const std::string a = TextArray(names), b = IntArray(acked);
  const char* params[2] = {a.c_str(), b.c_str()};
  // The newest record the database holds per instance: its newest journal row, or its
  // snapshot's (compaction removes rows a snapshot covers).
  Result res(PQexecParams(
      conn.get(),
      "SELECT instance, held, acked FROM (SELECT f.instance, f.acked, greatest(coalesce((SELECT "
      "max(j.seq) FROM bandit_journal j WHERE j.instance = f.instance), 0), coalesce((SELECT "
      "s.last_seq FROM bandit_snapshots s WHERE s.instance = f.instance), 0)) AS held FROM "
      "unnest($1::text[], $2::bigint[]) AS f(instance, acked)) c WHERE held < acked ORDER BY "
      "instance",
      2, nullptr, params, nullptr, nullptr, 0));
  if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
    return conn.Error("comparing what the database holds with what was committed", res.get());
  for (int i = 0; i < PQntuples(res.get()); ++i) {
    PostgresStorageOptions::Divergence d;
    d.instance = PQgetvalue(res.get(), i, 0);
    (void)absl::SimpleAtoi(PQgetvalue(res.get(), i, 1), &d.database_seq);
    (void)absl::SimpleAtoi(PQgetvalue(res.get(), i, 2), &d.acknowledged_seq);
    out.push_back(std::move(d));
  }
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
          {TextArray(d_names), IntArray(d_db), IntArray(d_acked), DetectedBy()});
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

absl::Status PostgresStorage::CommitFenced(Connection& conn, std::vector<Row>* rows, bool sync,
                                           std::vector<Row>* fenced, std::vector<Lease>* lost) {
  for (int attempt = 0;; ++attempt) {
    absl::Status s = CommitBatch(conn, *rows, sync);
    if (s.code() != absl::StatusCode::kAborted) return s;
    // The refused transaction is still open (its COMMIT was skipped): end it.
    if (PQtransactionStatus(conn.get()) != PQTRANS_IDLE) {
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
    const std::string a = TextArray(names), b = IntArray(epochs);
    const char* params[3] = {options_.cluster_node_id.c_str(), a.c_str(), b.c_str()};
    Result res(PQexecParams(conn.get(),
                            "SELECT f.instance, f.epoch FROM unnest($2::text[], $3::bigint[]) "
                            "AS f(instance, epoch) LEFT JOIN bandit_leases l ON l.instance = "
                            "f.instance WHERE l.owner IS DISTINCT FROM $1 OR l.epoch IS "
                            "DISTINCT FROM f.epoch",
                            3, nullptr, params, nullptr, nullptr, 0));
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      return conn.Error("finding the instances whose lease moved on", res.get());
    std::set<Lease> stale;
    for (int i = 0; i < PQntuples(res.get()); ++i) {
      uint64_t epoch = 0;
      (void)absl::SimpleAtoi(PQgetvalue(res.get(), i, 1), &epoch);
      stale.insert({PQgetvalue(res.get(), i, 0), epoch});
    }
    lost->insert(lost->end(), stale.begin(), stale.end());
    std::vector<Row> keep;
    for (Row& r : *rows)
      (stale.count({r.instance, r.epoch}) ? *fenced : keep).push_back(std::move(r));
    rows->swap(keep);
  }
}

absl::Status PostgresStorage::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return health_;
}

PostgresStorage::CommitStats PostgresStorage::commit_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

absl::Status PostgresStorage::CommitBatch(Connection& conn, const std::vector<Row>& rows,
                                          bool sync) {
  const bool async_mode = options_.durability != Durability::kAlways;
  if (rows.empty() && !(sync && async_mode)) return absl::OkStatus();
  // The statements of one transaction. A flush in everysec/none makes this commit synchronous;
  // txid_current() gives it a commit record to wait for even without rows, and its WAL flush
  // covers every earlier asynchronous commit.
  struct Statement {
    std::string sql;
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
    std::vector<unsigned> types;
    const char* expect_tag = nullptr;  // the command tag that means success (COMMIT)
  };
  std::vector<Statement> stmts;
  auto plain = [](const char* sql) {  // no parameters
    Statement st;
    st.sql = sql;
    return st;
  };
  stmts.push_back(plain("BEGIN"));
  if (sync && async_mode) {
    stmts.push_back(plain("SET LOCAL synchronous_commit TO on"));
    stmts.push_back(plain("SELECT txid_current()"));
  }
  // Cluster mode: the fencing check first, on every (instance, epoch) the rows were appended
  // under; it raises (and the whole transaction is refused) unless this node holds them all.
  std::string fence_node, fence_instances, fence_epochs;
  if (cluster() && !rows.empty()) {
    std::set<std::pair<std::string, uint64_t>> leases;
    for (const Row& r : rows) leases.insert({r.instance, r.epoch});
    std::vector<std::string> names;
    std::vector<uint64_t> epochs;
    for (const auto& [instance, epoch] : leases) {
      names.push_back(instance);
      epochs.push_back(epoch);
    }
    fence_node = options_.cluster_node_id;
    fence_instances = TextArray(names);
    fence_epochs = IntArray(epochs);
    Statement fence = plain("SELECT bandit_fence($1, $2::text[], $3::bigint[])");
    fence.values = {fence_node.c_str(), fence_instances.c_str(), fence_epochs.c_str()};
    fence.lengths = {0, 0, 0};
    fence.formats = {0, 0, 0};
    fence.types = {kOidText, 0, 0};
    stmts.push_back(std::move(fence));
  }
  std::vector<uint64_t> seqs(rows.size());
  std::vector<uint32_t> crcs(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    seqs[i] = htobe64(rows[i].seq);
    crcs[i] = htobe32(Crc(rows[i].record));
  }
  for (size_t from = 0; from < rows.size(); from += kRowsPerInsert) {
    const size_t to = std::min(rows.size(), from + kRowsPerInsert);
    Statement st;
    st.sql = "INSERT INTO bandit_journal (seq, instance, payload_crc, record) VALUES ";
    for (size_t i = from; i < to; ++i) {
      const size_t p = 4 * (i - from);
      absl::StrAppend(&st.sql, i == from ? "" : ",", "($", p + 1, ",$", p + 2, ",$", p + 3, ",$",
                      p + 4, ")");
      st.values.insert(st.values.end(),
                       {reinterpret_cast<const char*>(&seqs[i]), rows[i].instance.c_str(),
                        reinterpret_cast<const char*>(&crcs[i]), rows[i].record.data()});
      st.lengths.insert(st.lengths.end(), {8, 0, 4, static_cast<int>(rows[i].record.size())});
      st.formats.insert(st.formats.end(), {1, 0, 1, 1});
      st.types.insert(st.types.end(), {kOidInt8, kOidText, kOidInt4, kOidBytea});
    }
    stmts.push_back(std::move(st));
  }
  Statement commit = plain("COMMIT");
  commit.expect_tag = "COMMIT";  // COMMIT of a failed transaction answers ROLLBACK
  stmts.push_back(std::move(commit));

  auto check = [&](const Statement& st, PGresult* res) -> absl::Status {
    const auto status = PQresultStatus(res);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      return conn.Error(st.sql.substr(0, 60), res);
    if (st.expect_tag && std::strcmp(PQcmdStatus(res), st.expect_tag) != 0)
      return absl::UnavailableError(absl::StrCat("PostgreSQL: COMMIT answered ", PQcmdStatus(res),
                                                 ": the batch of ", rows.size(),
                                                 " records was not stored"));
    return absl::OkStatus();
  };
  auto send = [&](const Statement& st) {
    return PQsendQueryParams(conn.get(), st.sql.c_str(), static_cast<int>(st.values.size()),
                             st.types.data(), st.values.data(), st.lengths.data(),
                             st.formats.data(), 0) == 1;
  };

  if (!options_.pipeline) {
    for (const auto& st : stmts) {
      if (!send(st)) return conn.Error("sending a statement");
      absl::Status s;
      while (PGresult* raw = PQgetResult(conn.get())) {
        Result res(raw);
        if (s.ok()) s = check(st, raw);
      }
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // Pipeline mode: every statement and the sync go out together; one round trip per batch.
  if (PQenterPipelineMode(conn.get()) != 1) return conn.Error("entering pipeline mode");
  for (const auto& st : stmts)
    if (!send(st)) return conn.Error("sending a statement in pipeline mode");
  if (PQpipelineSync(conn.get()) != 1) return conn.Error("sending the pipeline sync");
  absl::Status s;
  for (const auto& st : stmts) {
    PGresult* raw = PQgetResult(conn.get());
    if (raw == nullptr) return conn.Error("reading a pipeline result");
    Result res(raw);
    if (s.ok()) s = check(st, raw);
    // Each statement's results end with a null.
    while (PGresult* extra = PQgetResult(conn.get())) PQclear(extra);
  }
  Result sync_res(PQgetResult(conn.get()));
  if (!sync_res || PQresultStatus(sync_res.get()) != PGRES_PIPELINE_SYNC)
    return s.ok() ? conn.Error("reading the pipeline sync") : s;
  if (PQexitPipelineMode(conn.get()) != 1 && s.ok()) return conn.Error("leaving pipeline mode");
  return s;
}

void PostgresStorage::Fail(const absl::Status& why) {
  down_ = true;
  health_ = absl::UnavailableError(
      absl::StrCat("PostgreSQL storage failed, writes are refused until it is reachable again "
                   "(reconnecting): ",
                   why.message()));
}

void PostgresStorage::GoDownLocked(std::unique_lock<std::mutex>& lock, const absl::Status& why,
                                   std::chrono::steady_clock::time_point* down_since) {
  // Nothing is in flight (the committer is between commits): the buffered rows stay for the
  // reconnect, every waiter hears UNAVAILABLE now.
  Fail(why);
  std::unique_ptr<Connection> dead = std::move(commit_conn_);
  *down_since = std::chrono::steady_clock::now();
  std::vector<std::function<void(absl::Status)>> ready;
  while (!waiters_.empty()) {
    ready.push_back(std::move(waiters_.begin()->second));
    waiters_.erase(waiters_.begin());
  }
  const absl::Status status = health_;
  done_cv_.notify_all();
  lock.unlock();
  BANDIT_LOG_ERROR("PostgreSQL: refusing writes and reconnecting: ", why.message());
  if (options_.on_error) options_.on_error(why);
  dead.reset();
  for (auto& done : ready) done(status);
  lock.lock();
}

void PostgresStorage::CommitterLoop() {
  auto backoff = options_.reconnect_initial;
  auto next_standby_check = std::chrono::steady_clock::now() + options_.standby_recheck;
  int failed_attempts = 0;
  auto down_since = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    std::vector<Row> batch;
    if (down_) {
      // Reconnect with exponential backoff. Nothing is acknowledged while down: WhenDurable
      // answers UNAVAILABLE and callers are refused before they change anything.
      work_cv_.wait_for(lock, backoff, [&] { return stop_; });
      if (stop_) break;
      batch.swap(buffer_);
      const uint64_t batch_last = batch.empty() ? 0 : batch.back().seq;
      lock.unlock();
      absl::Status s;
      std::unique_ptr<Connection> conn;
      std::vector<Row> fenced_on_reconnect;  // rows of leases lost while down: dropped
      if (auto c = Connect(true); !c.ok()) {
        s = c.status();
      } else {
        conn = *std::move(c);
        if (!cluster()) s = TakeWriterLock(*conn, std::chrono::milliseconds(0));
        std::string version;
        if (s.ok())
          s = conn->Exec("SELECT coalesce(max(version), 0) FROM bandit_schema_version", {},
                         &version);
        int v = 0;
        if (s.ok() && absl::SimpleAtoi(version, &v) && v > LatestSchemaVersion())
          s = absl::FailedPreconditionError(absl::StrCat(
              "the database was migrated to schema version ", v, " by a newer banditd"));
        // A failover may have changed what `always` means (another server, other settings).
        if (s.ok()) s = CheckSynchronousStandby(*conn);
        // The COMMIT that failed may have been stored (the connection can drop after the
        // server committed): a transaction is all or nothing, so drop the rows found.
        if (s.ok() && !batch.empty()) {
          std::vector<std::string> params = {absl::StrCat(batch.front().seq),
                                             absl::StrCat(batch.back().seq)};
          std::vector<const char*> p = {params[0].c_str(), params[1].c_str()};
          // (instance, seq): in cluster mode other nodes number their rows in the same range.
          Result res(PQexecParams(conn->get(),
                                  "SELECT instance, seq FROM bandit_journal WHERE seq BETWEEN "
                                  "$1::bigint AND $2::bigint",
                                  2, nullptr, p.data(), nullptr, nullptr, 0));
          if (PQresultStatus(res.get()) != PGRES_TUPLES_OK) {
            s = conn->Error("checking which records the failed commit stored", res.get());
          } else {
            std::set<std::pair<std::string, uint64_t>> stored;
            for (int i = 0; i < PQntuples(res.get()); ++i) {
              uint64_t seq = 0;
              if (absl::SimpleAtoi(PQgetvalue(res.get(), i, 1), &seq))
                stored.insert({PQgetvalue(res.get(), i, 0), seq});
            }
            const size_t before = batch.size();
            batch.erase(std::remove_if(batch.begin(), batch.end(),
                                       [&](const Row& r) {
                                         return stored.count({r.instance, r.seq}) > 0;
                                       }),
                        batch.end());
            if (before != batch.size())
              BANDIT_LOG_INFO("PostgreSQL: the failed commit had stored ", before - batch.size(),
                              " records after all (not acknowledged; kept)");
          }
        }
        // Does the database still hold everything committed before the connection was lost?
        // (A failover to a standby that lacked the last commits, an older backup.) Checked
        // before anything is written: an instance it does not hold is never served from
        // memory again, and its unwritten rows are dropped, so its journal gets no hole.
        if (s.ok()) {
          auto diverged = FindDivergence(*conn);
          if (!diverged.ok()) {
            s = diverged.status();
          } else if (!diverged->empty()) {
            const std::string by = DetectedBy();
            {
              std::lock_guard<std::mutex> relock(mu_);
              for (auto& d : *diverged) diverged_[d.instance] = d.why = DivergedMessage(d, by);
              DropDivergedLocked(&batch);
            }
            for (const auto& d : *diverged)
              BANDIT_LOG_ERROR("PostgreSQL went backwards: the database holds the records of '",
                               d.instance, "' up to sequence number ", d.database_seq,
                               ", this server had committed up to ", d.acknowledged_seq,
                               "; refusing the instance (DATA_LOSS) until an operator decides "
                               "(bandit_diverged)");
            if (options_.on_diverged) options_.on_diverged(*diverged);
          }
        }
        // Write what the database is missing before accepting anything new (fenced: rows of
        // leases lost meanwhile are dropped; their callers already heard UNAVAILABLE).
        std::vector<Lease> lost;
        if (s.ok()) s = CommitFenced(*conn, &batch, true, &fenced_on_reconnect, &lost);
        if (!lost.empty()) ReportFenced(lost);
        if (s.ok()) NoteCommitted(batch);
      }
      lock.lock();
      for (const Row& r : fenced_on_reconnect) RememberRefused(r.seq, r.seq);
      if (!s.ok()) {
        // Back in front of anything that raced in meanwhile.
        batch.insert(batch.end(), std::make_move_iterator(buffer_.begin()),
                     std::make_move_iterator(buffer_.end()));
        buffer_.swap(batch);
        health_ = absl::UnavailableError(absl::StrCat(
            "PostgreSQL storage failed, writes are refused until it is reachable again "
            "(reconnecting): ",
            s.message()));
        ++failed_attempts;
        backoff = std::min(options_.reconnect_max, backoff * 2);
        lock.unlock();
        if (options_.on_error) options_.on_error(s);
        if (failed_attempts <= 3 || failed_attempts % 10 == 0)
          BANDIT_LOG_WARN("PostgreSQL reconnect attempt ", failed_attempts,
                          " failed: ", s.message(), " (next in ", backoff.count(), " ms)");
        conn.reset();
        lock.lock();
        continue;
      }
      committed_seq_ = synced_seq_ = std::max(committed_seq_, batch_last);
      commit_conn_ = std::move(conn);
      down_ = false;
      health_ = absl::OkStatus();
      backoff = options_.reconnect_initial;
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - down_since).count();
      BANDIT_LOG_INFO("PostgreSQL reachable again after ", seconds, " s (", failed_attempts + 1,
                      " attempts; ", batch.size(),
                      " unacknowledged records written); accepting writes");
      failed_attempts = 0;
      done_cv_.notify_all();
      lock.unlock();
      if (options_.on_recovered) options_.on_recovered();
      lock.lock();
      continue;
    }

    work_cv_.wait_for(lock, std::chrono::seconds(1),
                      [&] { return stop_ || !buffer_.empty() || flush_requested_; });
    // What `always` promises can change under a live connection (Patroni empties
    // synchronous_standby_names when the standby is lost): re-read it now and then.
    if (options_.durability == Durability::kAlways && !stop_ &&
        std::chrono::steady_clock::now() >= next_standby_check) {
      next_standby_check = std::chrono::steady_clock::now() + options_.standby_recheck;
      Connection* c = commit_conn_.get();
      lock.unlock();
      absl::Status st = CheckSynchronousStandby(*c, /*quiet=*/true);
      lock.lock();
      if (!st.ok()) {
        GoDownLocked(lock, st, &down_since);
        continue;
      }
    }
    if (options_.durability != Durability::kAlways) {
      // Linger: let records accumulate for one transaction (the mode acknowledged them already).
      work_cv_.wait_for(lock, kLinger, [&] { return stop_ || flush_requested_; });
    }
    if (buffer_.empty() && !flush_requested_) {
      if (stop_) break;
      // Idle: notice a lost connection now (a failover, a restarted server) rather than at the
      // next write, so the reconnect and its checks run before the next change is accepted.
      Connection* idle = commit_conn_.get();
      lock.unlock();
      absl::Status alive = idle->Probe();
      lock.lock();
      if (!alive.ok() && !down_ && !stop_ && buffer_.empty())
        GoDownLocked(lock, alive, &down_since);
      continue;
    }
    batch.swap(buffer_);
    const bool sync = options_.durability == Durability::kAlways || flush_requested_;
    flush_requested_ = false;  // this commit covers everything appended before the request
    const uint64_t last = batch.empty() ? committed_seq_ : batch.back().seq;
    // Rows that raced with a divergence check are dropped (their waiters hear DATA_LOSS);
    // `last` still covers them, so no waiter is left behind.
    DropDivergedLocked(&batch);
    Connection* conn = commit_conn_.get();
    lock.unlock();

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
    const absl::Status fenced_status = FencedStatus();

    std::vector<std::function<void(absl::Status)>> ready;
    std::unique_ptr<Connection> dead;
    lock.lock();
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
      down_since = std::chrono::steady_clock::now();
    }
    // The COMMIT (or its failure) answers every waiter it decides, in this one step.
    const absl::Status status = health_;
    std::vector<absl::Status> ready_status;
    while (!waiters_.empty() && (!status.ok() || waiters_.begin()->first <= committed_seq_)) {
      const uint64_t seq = waiters_.begin()->first;
      ready.push_back(std::move(waiters_.begin()->second));
      absl::Status st =
          status.ok() && seq >= first_fenced && seq <= last ? fenced_status : status;
      if (st.ok() && !dropped_diverged_.empty())
        if (auto it = dropped_diverged_.find(seq); it != dropped_diverged_.end())
          st = absl::DataLossError(it->second);
      ready_status.push_back(std::move(st));
      waiters_.erase(waiters_.begin());
    }
    done_cv_.notify_all();
    lock.unlock();
    if (!lost.empty()) ReportFenced(lost);
    if (s.ok()) {
      NoteCommitted(batch);
      if (options_.on_commit) options_.on_commit(seconds);
    } else {
      BANDIT_LOG_ERROR("PostgreSQL commit failed, refusing writes and reconnecting: ", s.message());
      if (options_.on_error) options_.on_error(s);
    }
    dead.reset();
    for (size_t i = 0; i < ready.size(); ++i) ready[i](ready_status[i]);
    lock.lock();
  }
}

}  // namespace bandit::server
