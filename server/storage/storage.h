// Where journal records and snapshots live. One implementation per backend: FileStorage
// (journal segments + snapshot files under a directory, server/storage/file_storage.h); a
// database backend implements the same interface. Persistence (server/service/persistence.h) talks
// only to this interface, and the request path only reaches it through Instance::Commit and
// DecisionService::WhenDurable.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "bandit/v1/storage.pb.h"
#include "server/storage/durability.h"

namespace bandit::server {

class EncodedSnapshotFields;  // server/storage/snapshot_store.h

// What Recover hands to its caller, in this order: every stored snapshot, then every journal
// record in sequence order. The replay logic is the caller's (the same for every backend); only
// the byte source differs.
struct RecoverySink {
  // The snapshot is the sink's to consume (recovery frees it as the instance is built).
  std::function<void(bandit::v1::InstanceSnapshot&&)> snapshot;
  std::function<void(const bandit::v1::JournalRecord&)> record;
  // Damage attributed to one instance (`instance` non-empty: its snapshot or one of its records
  // cannot be read), or to none (`instance` empty: the records that follow cannot be
  // attributed, so every instance recovered so far is suspect). `why` is a full sentence.
  std::function<void(const std::string& instance, const std::string& why)> corrupt;
};

struct RecoveryStats {
  int64_t records = 0;          // intact journal records read
  int64_t truncated_bytes = 0;  // a torn tail cut off
};

class Storage {
 public:
  virtual ~Storage() = default;

  // Called once, before anything else. Afterwards Append assigns sequence numbers above every
  // record and snapshot that was found.
  virtual absl::StatusOr<RecoveryStats> Recover(const RecoverySink& sink) = 0;

  // Assigns the next sequence number to `rec` (rec->seq()), buffers it and returns the number.
  // Callers append under the lock of the instance they change, so storage order equals the
  // order changes were applied. UNAVAILABLE once storage has failed.
  virtual absl::StatusOr<uint64_t> Append(bandit::v1::JournalRecord* rec) = 0;
  // Appends `recs` in one step, as consecutive Appends would (consecutive sequence numbers, in
  // this order) but under one storage lock with one wake-up of the writer: the records a batch
  // produced for one instance. All or nothing: on error none was appended. Returns the last
  // record's sequence number (0 when `recs` is empty).
  virtual absl::StatusOr<uint64_t> AppendAll(absl::Span<bandit::v1::JournalRecord* const> recs) = 0;
  // done(status) once record `seq` is as durable as mode() promises (immediately in everysec
  // and none), on a storage thread or inline; UNAVAILABLE if storage failed. Whoever makes
  // records durable answers their waiters in the same step.
  virtual void WhenDurable(uint64_t seq, std::function<void(absl::Status)> done) = 0;
  // Blocking form of WhenDurable.
  absl::Status WaitDurable(uint64_t seq);
  // Makes everything appended so far durable, whatever the mode (shutdown).
  virtual absl::Status Flush() = 0;

  // A snapshot round: returns a boundary sequence number; every record below it is covered once
  // the round's snapshots are written, and Compact(boundary) may then drop those records.
  virtual absl::StatusOr<uint64_t> BeginSnapshotRound() = 0;
  // Replaces the instance's stored snapshot, atomically, streaming what it is given (its memory
  // a constant: the memory budget charges a snapshot for the copy it holds, not for its bytes).
  // `extra`: fields already encoded (the decision log), stored after the snapshot's own.
  virtual absl::Status WriteSnapshot(const bandit::v1::InstanceSnapshot& snap,
                                     const EncodedSnapshotFields* extra = nullptr) = 0;
  virtual absl::Status RemoveSnapshot(const std::string& instance) = 0;
  virtual absl::Status Compact(uint64_t boundary) = 0;

  // OK, or why writes are refused (a failed write or fsync is never retried silently).
  virtual absl::Status health() const = 0;
  // Whether a change of `instance` may be made now (checked before anything changes). A
  // backend shared by several servers also refuses instances this server does not own.
  virtual absl::Status WritableFor(const std::string& /*instance*/) const { return health(); }
  // One instance's stored snapshot and records (a backend shared by several servers, when this
  // one takes the instance over). Returns the highest sequence number seen.
  virtual absl::StatusOr<uint64_t> RecoverInstance(const std::string& /*instance*/,
                                                   const RecoverySink& /*sink*/) {
    return absl::UnimplementedError("this storage backend recovers all instances at start");
  }
  virtual Durability mode() const = 0;
};

}  // namespace bandit::server
