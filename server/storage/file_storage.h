// Storage on a local directory (the LevelDB recipe): <dir>/journal/journal-<first seq>.log
// segments with group commit (server/storage/journal.h) and <dir>/snapshots/<instance>.snap
// files written atomically (server/storage/snapshot_store.h). Every file operation goes through
// the FileSystem seam.
#pragma once

#include <memory>
#include <string>

#include "server/env/file_system.h"
#include "server/storage/journal.h"
#include "server/storage/snapshot_store.h"
#include "server/storage/storage.h"

namespace bandit::server {

struct FileStorageOptions {
  FileSystem* fs = PosixFileSystem();
  std::string dir = "./data";
  Durability durability = Durability::kAlways;
  JournalObserver observer;                 // fsync timings, storage errors
  const Clock* clock = SystemClock::Get();  // everysec's once-a-second fsync timer
};

class FileStorage final : public Storage {
 public:
  explicit FileStorage(FileStorageOptions options);

  // Loads every valid snapshot, then reads every journal segment (a torn tail of the newest is
  // cut off), then opens the journal for appends.
  absl::StatusOr<RecoveryStats> Recover(const RecoverySink& sink) override;
  absl::StatusOr<uint64_t> Append(bandit::v1::JournalRecord* rec) override;
  absl::StatusOr<uint64_t> AppendAll(absl::Span<bandit::v1::JournalRecord* const> recs) override;
  void WhenDurable(uint64_t seq, std::function<void(absl::Status)> done) override;
  absl::Status Flush() override;
  // Rotates the journal to a new segment; the boundary is its first sequence number.
  absl::StatusOr<uint64_t> BeginSnapshotRound() override;
  absl::Status WriteSnapshot(const bandit::v1::InstanceSnapshot& snap,
                             const EncodedSnapshotFields* extra = nullptr) override;
  absl::Status RemoveSnapshot(const std::string& instance) override;
  // Deletes the segments entirely below `boundary`.
  absl::Status Compact(uint64_t boundary) override;
  absl::Status health() const override;
  Durability mode() const override { return options_.durability; }

 private:
  const FileStorageOptions options_;
  SnapshotStore snapshots_;
  std::unique_ptr<Journal> journal_;  // set by Recover
};

}  // namespace bandit::server
