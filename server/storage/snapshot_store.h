// Per-instance snapshot files: <dir>/<instance>.snap = "BSNP" | u32 format | u32 crc32 | payload
// (a serialized bandit.v1.InstanceSnapshot), written atomically (temp, fsync, rename, fsync dir).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bandit/v1/storage.pb.h"
#include "server/storage/file_system.h"

namespace bandit::server {

class SnapshotStore {
 public:
  SnapshotStore(FileSystem* fs, std::string dir) : fs_(fs), dir_(std::move(dir)) {}

  absl::Status Init();
  absl::Status Write(const bandit::v1::InstanceSnapshot& snap);
  absl::Status Remove(const std::string& instance);

  struct Loaded {
    std::vector<bandit::v1::InstanceSnapshot> snapshots;
    std::vector<std::pair<std::string, std::string>> invalid;  // (instance, why)
  };
  absl::StatusOr<Loaded> LoadAll();

  // The file format, also used for Export/Import payloads.
  static std::string Encode(const bandit::v1::InstanceSnapshot& snap);
  static absl::StatusOr<bandit::v1::InstanceSnapshot> Decode(absl::string_view data);

 private:
  FileSystem* fs_;
  std::string dir_;
};

}  // namespace bandit::server
