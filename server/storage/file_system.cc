#include "server/storage/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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
  PosixWritableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  absl::Status Append(absl::string_view data) override {
    while (!data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("write", path_);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    if (::fdatasync(fd_) != 0) return Errno("fdatasync", path_);
    return absl::OkStatus();
  }
  absl::Status Close() override {
    if (fd_ < 0) return absl::OkStatus();
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return Errno("close", path_);
    return absl::OkStatus();
  }

 private:
  int fd_;
  std::string path_;
};

class PosixFs final : public FileSystem {
 public:
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("open", path);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(fd, path));
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(
      const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("open", path);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(fd, path));
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

absl::Status WriteFileAtomically(FileSystem* fs, const std::string& dir, const std::string& name,
                                 absl::string_view data) {
  const std::string tmp = absl::StrCat(dir, "/", name, ".tmp");
  auto f = fs->NewWritableFile(tmp);
  if (!f.ok()) return f.status();
  if (auto s = (*f)->Append(data); !s.ok()) return s;
  if (auto s = (*f)->Sync(); !s.ok()) return s;
  if (auto s = (*f)->Close(); !s.ok()) return s;
  if (auto s = fs->Rename(tmp, absl::StrCat(dir, "/", name)); !s.ok()) return s;
  return fs->SyncDir(dir);
}

}  // namespace bandit::server
