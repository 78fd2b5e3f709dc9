// The bandit schema in PostgreSQL, for the storage backend and the cluster alike: numbered
// migrations applied in order, each once, recorded in bandit_schema_version. A database newer
// than this binary is refused. Never edit a released migration: add the next number.
//
//   1  bandit_journal (one row per journal record), bandit_snapshots (one row per instance)
//   2  the cluster: bandit_nodes (membership), bandit_leases (ownership, epochs), the journal
//      keyed by (instance, seq), bandit_fence() (every fenced transaction's first statement)
//   3  bandit_diverged (instances the database holds less of than a banditd had committed)
//   4  bandit_declines (instances a node had no room for: placement passes over it)
#pragma once

#include <string>

#include "absl/status/status.h"
#include "server/storage/postgres/connection.h"

namespace bandit::server::pg {

// The newest migration's number: the schema version this binary writes.
int LatestSchemaVersion();

// Brings the database to LatestSchemaVersion() in one transaction (two servers starting at
// once on an empty database: one migrates, the other waits for it). FAILED_PRECONDITION when a
// newer banditd has migrated it further; `redacted_dsn` names the database in that message.
absl::Status Migrate(const Connection& conn, const std::string& redacted_dsn);

// The version the database is at now (0 before any migration); FAILED_PRECONDITION when it is
// newer than this binary (a newer banditd migrated it since this one connected).
absl::StatusOr<int> CheckSchemaVersion(const Connection& conn);

}  // namespace bandit::server::pg
