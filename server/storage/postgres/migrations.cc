#include "server/storage/postgres/migrations.h"

#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/env/log.h"
#include "server/env/version.h"

namespace bandit::server::pg {
namespace {

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
    {4,
     // Instances a node declined to load for want of room in its memory budget
     // (server/cluster/cluster_node.h): placement passes over the declining node while its
     // incarnation lives, so the instance goes to the next node in rendezvous order. The node
     // withdraws its row once it has room for `needed_bytes` again.
     "CREATE TABLE bandit_declines ("
     "  instance text NOT NULL,"
     "  node_id text NOT NULL,"
     "  incarnation bigint NOT NULL,"
     "  needed_bytes bigint NOT NULL,"
     "  declined_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
     "  PRIMARY KEY (instance, node_id));"},
};

// Advisory lock key ("band" "it" + purpose) the migrating transaction holds.
constexpr const char* kMigrationLockKey = "7017280427813404674";  // 0x616e646974000002

}  // namespace

int LatestSchemaVersion() { return std::end(kMigrations)[-1].version; }

absl::StatusOr<int> CheckSchemaVersion(const Connection& conn) {
  auto text = conn.Value("SELECT coalesce(max(version), 0) FROM bandit_schema_version");
  if (!text.ok()) return text.status();
  int version = 0;
  if (absl::SimpleAtoi(*text, &version) && version > LatestSchemaVersion())
    return absl::FailedPreconditionError(absl::StrCat(
        "the database was migrated to schema version ", version, " by a newer banditd"));
  return version;
}

absl::Status Migrate(const Connection& conn, const std::string& redacted_dsn) {
  return conn.Transaction("the schema migration", [&]() -> absl::Status {
    // Two servers starting at once on an empty database: one migrates, the other waits.
    if (auto s = conn.Exec(absl::StrCat("SELECT pg_advisory_xact_lock(", kMigrationLockKey, ")"));
        !s.ok())
      return s;
    if (auto s = conn.Exec("CREATE TABLE IF NOT EXISTS bandit_schema_version ("
                           "  version integer PRIMARY KEY,"
                           "  applied_at timestamptz NOT NULL DEFAULT now(),"
                           "  applied_by text NOT NULL)");
        !s.ok())
      return s;
    auto current_text = conn.Value("SELECT coalesce(max(version), 0) FROM bandit_schema_version");
    if (!current_text.ok()) return current_text.status();
    int current = 0;
    (void)absl::SimpleAtoi(*current_text, &current);
    if (current > LatestSchemaVersion())
      return absl::FailedPreconditionError(absl::StrCat(
          "the PostgreSQL database (", redacted_dsn, ") has bandit schema version ", current,
          ", newer than this banditd knows (", LatestSchemaVersion(),
          "): a newer banditd has migrated it; run that version (or point --postgres_dsn at "
          "another database)"));
    for (const Migration& m : kMigrations) {
      if (m.version <= current) continue;
      if (auto s = conn.Exec(m.sql); !s.ok()) return s;
      if (auto s = conn.Exec(
              "INSERT INTO bandit_schema_version (version, applied_by) VALUES ($1::integer, $2)",
              {absl::StrCat(m.version), absl::StrCat("banditd ", kVersion)});
          !s.ok())
        return s;
      BANDIT_LOG_INFO("PostgreSQL schema migrated to version ", m.version);
    }
    return absl::OkStatus();
  });
}

}  // namespace bandit::server::pg
