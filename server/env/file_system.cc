#include "server/env/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace bandit::server {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

class PosixWritableFile final : public WritableFile {
 public:
  // `size`: the file's size at open (appends continue from there).
  PosixWritableFile(int fd, std::string path, uint64_t size)
      : fd_(fd), path_(std::move(path)), size_(size), reserved_(size) {}
  ~PosixWritableFile() override { (void)Close(); }
  absl::Status Append(absl::string_view data) override {
    while (!data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("write", path_);
      }
      data.remove_prefix(static_cast<size_t>(n));
      size_ += static_cast<uint64_t>(n);
    }
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    if (::fdatasync(fd_) != 0) return Errno("fdatasync", path_);
    return absl::OkStatus();
  }
  absl::Status Close() override {
    if (fd_ < 0) return absl::OkStatus();
    // Blocks reserved past the end stay allocated after close on ext4: give them back (a
    // truncate to the current size frees them and changes nothing a reader sees). Failing to
    // is only space held until the file is removed, not an error of the data.
    if (reserved_ > size_) (void)::ftruncate(fd_, static_cast<off_t>(size_));
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return Errno("close", path_);
    return absl::OkStatus();
  }
  void Preallocate(uint64_t size) override {
    if (fd_ < 0 || size <= reserved_ || !preallocate_works_) return;
    // FALLOC_FL_KEEP_SIZE: the blocks are allocated (as unwritten extents), the file's size
    // stays where the appends left it, so readers and recovery see exactly the written bytes.
    if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(reserved_),
                    static_cast<off_t>(size - reserved_)) == 0) {
      reserved_ = size;
    } else if (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL) {
      preallocate_works_ = false;  // this file system cannot: plain appends from here on
    }
  }

 private:
  int fd_;
  std::string path_;
  uint64_t size_;      // bytes in the file
  uint64_t reserved_;  // end of the blocks reserved by Preallocate (>= size_ once reserved)
  bool preallocate_works_ = true;
};

absl::StatusOr<uint64_t> FileSize(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Errno("fstat", path);
  return static_cast<uint64_t>(st.st_size);
}

class PosixReadableFile final : public ReadableFile {
 public:
  PosixReadableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixReadableFile() override { ::close(fd_); }
  absl::StatusOr<size_t> Read(char* out, size_t n) override {
    for (;;) {
      const ssize_t got = ::read(fd_, out, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return Errno("read", path_);
    }
  }

 private:
  const int fd_;
  const std::string path_;
};

class PosixFs final : public FileSystem {
 public:
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("open", path);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(fd, path, 0));
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(
      const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("open", path);
    auto size = FileSize(fd, path);
    if (!size.ok()) {
      ::close(fd);
      return size.status();
    }
    return std::unique_ptr<WritableFile>(new PosixWritableFile(fd, path, *size));
  }
  absl::StatusOr<std::unique_ptr<ReadableFile>> NewReadableFile(
      const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no file ", path));
      return Errno("open", path);
    }
    return std::unique_ptr<ReadableFile>(new PosixReadableFile(fd, path));
  }
  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no file ", path));
      return Errno("open", path);
    }
    std::string out;
    char buf[1 << 16];
    while (true) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        ::close(fd);
        return Errno("read", path);
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return Errno("rename", from);
    return absl::OkStatus();
  }
  absl::Status SyncDir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Errno("open dir", dir);
    const int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) return Errno("fsync dir", dir);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) return out;
      return Errno("opendir", dir);
    }
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    ::closedir(d);
    return out;
  }
  absl::Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("unlink", path);
    return absl::OkStatus();
  }
  absl::Status CreateDirs(const std::string& dir) override {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::UnavailableError(absl::StrCat("mkdir ", dir, ": ", ec.message()));
    return absl::OkStatus();
  }
  absl::Status Truncate(const std::string& path, uint64_t size) override {
    if (::truncate(path.c_str(), static_cast<off_t>(size)) != 0) return Errno("truncate", path);
    return absl::OkStatus();
  }
};

}  // namespace

FileSystem* PosixFileSystem() {
  static PosixFs fs;
  return &fs;
}

namespace {
// A file's bytes as held in memory, read in pieces (FileSystem::NewReadableFile's default).
class StringReadableFile final : public ReadableFile {
 public:
  explicit StringReadableFile(std::string data) : data_(std::move(data)) {}
  absl::StatusOr<size_t> Read(char* out, size_t n) override {
    const size_t take = std::min(n, data_.size() - at_);
    std::memcpy(out, data_.data() + at_, take);
    at_ += take;
    return take;
  }

 private:
  const std::string data_;
  size_t at_ = 0;
};
}  // namespace

absl::StatusOr<std::unique_ptr<ReadableFile>> FileSystem::NewReadableFile(
    const std::string& path) {
  auto data = ReadFile(path);
  if (!data.ok()) return data.status();
  return std::unique_ptr<ReadableFile>(new StringReadableFile(*std::move(data)));
}

absl::Status WriteFileAtomically(FileSystem* fs, const std::string& dir, const std::string& name,
                                 absl::string_view data) {
  return WriteFileAtomically(fs, dir, name, data.size(),
                             [&](WritableFile& f) { return f.Append(data); });
}

absl::Status WriteFileAtomically(FileSystem* fs, const std::string& dir, const std::string& name,
                                 uint64_t size,
                                 absl::FunctionRef<absl::Status(WritableFile& file)> write) {
  const std::string tmp = absl::StrCat(dir, "/", name, ".tmp");
  auto f = fs->NewWritableFile(tmp);
  if (!f.ok()) return f.status();
  (*f)->Preallocate(size);
  if (auto s = write(**f); !s.ok()) return s;
  if (auto s = (*f)->Sync(); !s.ok()) return s;
  if (auto s = (*f)->Close(); !s.ok()) return s;
  if (auto s = fs->Rename(tmp, absl::StrCat(dir, "/", name)); !s.ok()) return s;
  return fs->SyncDir(dir);
}

}  // namespace bandit::server
