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

class SnapshotStore {
 public:
  SnapshotStore(FileSystem* fs, std::string dir) : fs_(fs), dir_(std::move(dir)) {}

  absl::Status Init();
  absl::Status Write(const bandit::v1::InstanceSnapshot& snap,
                     const EncodedSnapshotFields* extra = nullptr);
  absl::Status Remove(const std::string& instance);

  struct Loaded {
    std::vector<bandit::v1::InstanceSnapshot> snapshots;
    std::vector<std::pair<std::string, std::string>> invalid;  // (instance, why)
  };
  absl::StatusOr<Loaded> LoadAll();

  // The file format, also used for Export/Import payloads. Write produces these same bytes.
  static std::string Encode(const bandit::v1::InstanceSnapshot& snap,
                            const EncodedSnapshotFields* extra = nullptr);
  static absl::StatusOr<bandit::v1::InstanceSnapshot> Decode(absl::string_view data);

 private:
  FileSystem* fs_;
  std::string dir_;
};

}  // namespace bandit::server
