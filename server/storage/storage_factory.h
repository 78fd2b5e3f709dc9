// The storage backend --storage names, built from its settings: the one place that knows every
// backend. The composition root (server/server.cc) calls it and gets the Storage plus, from a
// backend several servers share, the fence a cluster node drives; nothing downcasts a Storage.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/storage/file_storage.h"
#include "server/storage/instance_fence.h"
#include "server/storage/postgres/postgres_storage.h"
#include "server/storage/storage.h"

namespace bandit::server {

struct StorageSettings {
  std::string kind = "file";  // "file" (FileStorage) or "postgres" (PostgresStorage)
  FileStorageOptions file;
  PostgresStorageOptions postgres;
};

struct BuiltStorage {
  std::unique_ptr<Storage> storage;
  // The lease fence, set only by a backend in cluster mode (PostgreSQL with
  // postgres.cluster_node_id); owned by `storage`.
  InstanceFence* fence = nullptr;
  // For logs: the backend and where it keeps state (never a password).
  std::string description;
};

// INVALID_ARGUMENT for a kind that is none of the above. Nothing is opened yet: Persistence
// recovers from the storage it is given.
absl::StatusOr<BuiltStorage> MakeStorage(StorageSettings settings);

}  // namespace bandit::server
