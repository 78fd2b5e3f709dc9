#include "server/storage/file_storage.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace bandit::server {

FileStorage::FileStorage(FileStorageOptions options)
    : options_(std::move(options)), snapshots_(options_.fs, options_.dir + "/snapshots") {}

absl::StatusOr<RecoveryStats> FileStorage::Recover(const RecoverySink& sink) {
  FileSystem* fs = options_.fs;
  if (auto s = fs->CreateDirs(options_.dir); !s.ok()) return s;
  if (auto s = snapshots_.Init(); !s.ok()) return s;
  const std::string journal_dir = options_.dir + "/journal";
  if (auto s = fs->CreateDirs(journal_dir); !s.ok()) return s;

  // One snapshot at a time, parsed as its file is read.
  uint64_t max_snapshot_seq = 0;
  absl::Status loaded = snapshots_.LoadEach(
      [&](bandit::v1::InstanceSnapshot&& snap) {
        max_snapshot_seq = std::max<uint64_t>(max_snapshot_seq, snap.last_journal_seq());
        sink.snapshot(std::move(snap));
      },
      [&](const std::string& name, const std::string& why) {
        sink.corrupt(name, "snapshot: " + why);
      });
  if (!loaded.ok()) return loaded;
  auto read = Journal::ReadAll(fs, journal_dir, sink.record,
                               [&](const std::string& name, const std::string& why) {
                                 sink.corrupt(name, absl::StrCat("journal corrupted: ", why));
                               });
  if (!read.ok()) return read.status();
  // Sequence numbers continue above everything found, snapshots included (their records may
  // have been compacted away).
  const uint64_t next_seq = std::max<uint64_t>(read->next_seq, max_snapshot_seq + 1);
  auto journal = Journal::Open(fs, journal_dir, options_.durability, next_seq, options_.observer,
                               options_.clock);
  if (!journal.ok()) return journal.status();
  journal_ = *std::move(journal);
  RecoveryStats stats;
  stats.records = read->records;
  stats.truncated_bytes = read->truncated_bytes;
  return stats;
}

absl::StatusOr<uint64_t> FileStorage::Append(bandit::v1::JournalRecord* rec) {
  if (journal_ == nullptr) return health();
  return journal_->Append(rec);
}

absl::StatusOr<uint64_t> FileStorage::AppendAll(absl::Span<bandit::v1::JournalRecord* const> recs) {
  if (journal_ == nullptr) return health();
  return journal_->AppendAll(recs);
}

void FileStorage::WhenDurable(uint64_t seq, std::function<void(absl::Status)> done) {
  if (journal_ == nullptr) {
    done(health());
    return;
  }
  journal_->WhenDurable(seq, std::move(done));
}

absl::Status FileStorage::Flush() { return journal_ ? journal_->Flush() : health(); }

absl::StatusOr<uint64_t> FileStorage::BeginSnapshotRound() {
  if (journal_ == nullptr) return health();
  return journal_->Rotate();
}

absl::Status FileStorage::WriteSnapshot(const bandit::v1::InstanceSnapshot& snap,
                                        const EncodedSnapshotFields* extra) {
  return snapshots_.Write(snap, extra);
}

absl::Status FileStorage::RemoveSnapshot(const std::string& instance) {
  return snapshots_.Remove(instance);
}

absl::Status FileStorage::Compact(uint64_t boundary) {
  if (journal_ == nullptr) return health();
  return journal_->DropSegmentsBefore(boundary);
}

absl::Status FileStorage::health() const {
  if (journal_ == nullptr)
    return absl::FailedPreconditionError(
        "file storage is not recovered yet; Recover() comes first");
  return journal_->health();
}

}  // namespace bandit::server
