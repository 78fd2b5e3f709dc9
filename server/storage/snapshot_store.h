// Per-instance snapshot files: <dir>/<instance>.snap = "BSNP" | u32 format | u32 crc32 | payload
// (a serialized bandit.v1.InstanceSnapshot), written atomically (temp, fsync, rename, fsync dir).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bandit/v1/storage.pb.h"
#include "server/env/file_system.h"

namespace bandit::server {

// Fields of an InstanceSnapshot that are already encoded elsewhere (the decision log's entries,
// which the live log holds encoded): written after the message's own fields. The payload parses
// as the same InstanceSnapshot (a parser takes fields in any order).
class EncodedSnapshotFields {
 public:
  virtual ~EncodedSnapshotFields() = default;
  virtual size_t size() const = 0;
  // Hands the encoded bytes to `piece` in order, as pieces (exactly size() bytes in all; a
  // piece is only valid during its call). A snapshot file is written and checksummed from the
  // pieces where they lie, never gathered in one buffer.
  virtual void ForEachPiece(absl::FunctionRef<void(absl::string_view)> piece) const = 0;
  // The same bytes copied to `out` (exactly size() bytes).
  void WriteTo(char* out) const;
};

// Repeated message fields encoded as they are added (tag, length, bytes), in chunks of about
// kChunkBytes, followed by `then`'s bytes if set: a snapshot's pending decisions go straight
// from the live table into their stored form, without a copy as messages first (a snapshot of
// an instance holding a large pending table was that table twice over, as messages and as their
// serialized string).
class EncodedFields final : public EncodedSnapshotFields {
 public:
  static constexpr size_t kChunkBytes = size_t{1} << 20;

  // Appends `message` as field `field` (length-delimited).
  void Add(int field, const google::protobuf::MessageLite& message);
  // Bytes added so far (without `then`'s).
  size_t own_size() const { return size_; }
  void Then(const EncodedSnapshotFields* then) { then_ = then; }

  size_t size() const override { return size_ + (then_ != nullptr ? then_->size() : 0); }
  void ForEachPiece(absl::FunctionRef<void(absl::string_view)> piece) const override;

 private:
  std::vector<std::string> chunks_;
  size_t size_ = 0;
  const EncodedSnapshotFields* then_ = nullptr;
};

class SnapshotStore {
 public:
  SnapshotStore(FileSystem* fs, std::string dir) : fs_(fs), dir_(std::move(dir)) {}

  absl::Status Init();
  // Stream()s the file (its memory a constant, whatever the snapshot's size), atomically.
  absl::Status Write(const bandit::v1::InstanceSnapshot& snap,
                     const EncodedSnapshotFields* extra = nullptr);
  absl::Status Remove(const std::string& instance);

  struct Loaded {
    std::vector<bandit::v1::InstanceSnapshot> snapshots;
    std::vector<std::pair<std::string, std::string>> invalid;  // (instance, why)
  };
  absl::StatusOr<Loaded> LoadAll();
  // The same one snapshot at a time, each read and checked in pieces and parsed from the file
  // as it is read: recovery holds one decoded snapshot at a time, never the file's bytes.
  // `loaded` may consume its snapshot.
  absl::Status LoadEach(
      absl::FunctionRef<void(bandit::v1::InstanceSnapshot&& snap)> loaded,
      absl::FunctionRef<void(const std::string& instance, const std::string& why)> invalid);

  // The file format, also used for Export/Import payloads. Write produces these same bytes.
  static std::string Encode(const bandit::v1::InstanceSnapshot& snap,
                            const EncodedSnapshotFields* extra = nullptr);
  static absl::StatusOr<bandit::v1::InstanceSnapshot> Decode(absl::string_view data);
  // Encode()'s bytes handed to `piece` in order, never gathered: the header (its checksum from a
  // first pass over the payload), the message's fields serialized through a small buffer, then
  // `extra`'s pieces where they lie. EncodedSize() bytes in all.
  static void Stream(const bandit::v1::InstanceSnapshot& snap, const EncodedSnapshotFields* extra,
                     absl::FunctionRef<void(absl::string_view)> piece);
  static uint64_t EncodedSize(const bandit::v1::InstanceSnapshot& snap,
                              const EncodedSnapshotFields* extra);

 private:
  FileSystem* fs_;
  std::string dir_;
};

}  // namespace bandit::server
