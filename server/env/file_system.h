// Every file operation of the storage layer goes through this seam (LevelDB's Env idea), so
// tests can inject faults and drop everything that was not fsynced.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace bandit::server {

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual absl::Status Append(absl::string_view data) = 0;
  // Makes everything appended so far durable (fdatasync).
  virtual absl::Status Sync() = 0;
  // Gives back what Preallocate reserved beyond the written end, then closes.
  virtual absl::Status Close() = 0;
  // A hint that the file will grow to at least `size` bytes: the file system may reserve the
  // blocks now, so appends write into allocated space instead of allocating as they go (ext4's
  // delayed allocation costs CPU per appended page). The file's size and what a reader sees are
  // unchanged (a crash leaves at most unused reserved blocks past the end, freed with the file).
  // Not an error when the file system cannot: an append that then lacks space fails itself.
  virtual void Preallocate(uint64_t size) { (void)size; }
};

// A file read from start to end in pieces (a large snapshot is checked and parsed as it is
// read, never held whole).
class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  // Reads up to `n` bytes into `out`; 0 at the end of the file.
  virtual absl::StatusOr<size_t> Read(char* out, size_t n) = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Creates or truncates.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;
  // Creates or appends.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(
      const std::string& path) = 0;
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // The file for reading in pieces. The default serves ReadFile's bytes (file systems that
  // hold files in memory); PosixFileSystem reads the file as it goes.
  virtual absl::StatusOr<std::unique_ptr<ReadableFile>> NewReadableFile(const std::string& path);
  virtual absl::Status Rename(const std::string& from, const std::string& to) = 0;
  // Makes renames, creations and removals in `dir` durable (fsync of the directory).
  virtual absl::Status SyncDir(const std::string& dir) = 0;
  // File names (not paths) in dir; empty if dir does not exist.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  virtual absl::Status Remove(const std::string& path) = 0;
  virtual absl::Status CreateDirs(const std::string& dir) = 0;
  virtual absl::Status Truncate(const std::string& path, uint64_t size) = 0;
};

FileSystem* PosixFileSystem();

// Writes `data` to `path` atomically and durably: temp file, fsync, rename, fsync the directory.
absl::Status WriteFileAtomically(FileSystem* fs, const std::string& dir, const std::string& name,
                                 absl::string_view data);
// The same with the contents appended by `write` (`size` bytes in all, preallocated first): a
// large file written from pieces without first gathering it in memory.
absl::Status WriteFileAtomically(FileSystem* fs, const std::string& dir, const std::string& name,
                                 uint64_t size,
                                 absl::FunctionRef<absl::Status(WritableFile& file)> write);

}  // namespace bandit::server
