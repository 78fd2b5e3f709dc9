// An in-memory FileSystem that remembers what was fsynced, so a test can "pull the plug":
// Crash() keeps only synced file contents and directory entries made durable by SyncDir
// (LevelDB's FaultInjectionTestEnv idea). It can also fail syncs to simulate a broken disk.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/env/file_system.h"

namespace bandit::server {

class FaultInjectionFs final : public FileSystem {
 public:
  struct Inode {
    std::string data;
    size_t synced = 0;
  };

  // Drops every unsynced byte and every directory change not followed by SyncDir.
  void Crash() {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = durable_;
    for (auto& [path, inode] : current_) {
      inode->data.resize(inode->synced);
    }
    ++generation_;  // files opened before the crash write nowhere
  }
  // Every Append sleeps this long first (outside the lock): widens race windows in tests.
  void SetAppendDelay(std::chrono::microseconds d) {
    std::lock_guard<std::mutex> lock(mu_);
    append_delay_ = d;
  }
  // The next file Sync() (e.g. the journal writer's group-commit fsync) stops until
  // ReleaseSync(): a test can order its own steps against a writer parked mid-I/O without sleeps.
  void HoldNextSync() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_next_sync_ = true;
  }
  void AwaitSyncHeld() {
    std::unique_lock<std::mutex> lock(mu_);
    sync_cv_.wait(lock, [&] { return sync_held_; });
  }
  void ReleaseSync() {
    std::lock_guard<std::mutex> lock(mu_);
    sync_held_ = false;
    sync_cv_.notify_all();
  }
  // Creating a file under `prefix` fails from now on (a full or read-only snapshot directory);
  // "" ends it.
  void FailNewFilesUnder(std::string prefix) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_new_files_under_ = std::move(prefix);
  }
  void FailSyncs(bool fail) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_syncs_ = fail;
  }
  // Direct access for corruption tests.
  std::string* Data(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = current_.find(path);
    return it == current_.end() ? nullptr : &it->second->data;
  }
  std::vector<std::string> Paths() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [p, i] : current_) out.push_back(p);
    return out;
  }

  class File final : public WritableFile {
   public:
    File(FaultInjectionFs* fs, std::shared_ptr<Inode> inode, int generation)
        : fs_(fs), inode_(std::move(inode)), generation_(generation) {}
    absl::Status Append(absl::string_view data) override {
      std::chrono::microseconds delay;
      {
        std::lock_guard<std::mutex> lock(fs_->mu_);
        delay = fs_->append_delay_;
      }
      if (delay.count() > 0) std::this_thread::sleep_for(delay);
      std::lock_guard<std::mutex> lock(fs_->mu_);
      if (closed_) return absl::FailedPreconditionError("append to a closed file");
      if (generation_ != fs_->generation_) return absl::OkStatus();  // the machine is "off"
      inode_->data.append(data.data(), data.size());
      return absl::OkStatus();
    }
    absl::Status Sync() override {
      std::unique_lock<std::mutex> lock(fs_->mu_);
      if (fs_->hold_next_sync_) {
        fs_->hold_next_sync_ = false;
        fs_->sync_held_ = true;
        fs_->sync_cv_.notify_all();
        fs_->sync_cv_.wait(lock, [&] { return !fs_->sync_held_; });
      }
      if (closed_) return absl::FailedPreconditionError("sync of a closed file");
      if (fs_->fail_syncs_) return absl::UnavailableError("injected fsync failure");
      if (generation_ != fs_->generation_) return absl::OkStatus();
      inode_->synced = inode_->data.size();
      return absl::OkStatus();
    }
    absl::Status Close() override {
      std::lock_guard<std::mutex> lock(fs_->mu_);
      closed_ = true;
      return absl::OkStatus();
    }

   private:
    bool closed_ = false;  // guarded by fs_->mu_
    FaultInjectionFs* fs_;
    std::shared_ptr<Inode> inode_;
    int generation_;
  };

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fail_new_files_under_.empty() && absl::StartsWith(path, fail_new_files_under_))
      return absl::ResourceExhaustedError(absl::StrCat("injected: no space left for ", path));
    auto inode = std::make_shared<Inode>();
    current_[path] = inode;
    return std::unique_ptr<WritableFile>(new File(this, inode, generation_));
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(
      const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto& inode = current_[path];
    if (!inode) inode = std::make_shared<Inode>();
    return std::unique_ptr<WritableFile>(new File(this, inode, generation_));
  }
  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = current_.find(path);
    if (it == current_.end()) return absl::NotFoundError(path);
    return it->second->data;
  }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = current_.find(from);
    if (it == current_.end()) return absl::NotFoundError(from);
    current_[to] = it->second;
    current_.erase(from);
    return absl::OkStatus();
  }
  absl::Status SyncDir(const std::string& dir) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (fail_syncs_) return absl::UnavailableError("injected fsync failure");
    const std::string prefix = dir + "/";
    for (auto it = durable_.begin(); it != durable_.end();) {
      if (absl::StartsWith(it->first, prefix) && !current_.count(it->first))
        it = durable_.erase(it);
      else
        ++it;
    }
    for (const auto& [path, inode] : current_)
      if (absl::StartsWith(path, prefix)) durable_[path] = inode;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    const std::string prefix = dir + "/";
    for (const auto& [path, inode] : current_)
      if (absl::StartsWith(path, prefix) && path.find('/', prefix.size()) == std::string::npos)
        out.push_back(path.substr(prefix.size()));
    return out;
  }
  absl::Status Remove(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    current_.erase(path);
    return absl::OkStatus();
  }
  absl::Status CreateDirs(const std::string&) override { return absl::OkStatus(); }
  absl::Status Truncate(const std::string& path, uint64_t size) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = current_.find(path);
    if (it == current_.end()) return absl::NotFoundError(path);
    it->second->data.resize(size);
    it->second->synced = std::min<size_t>(it->second->synced, size);
    return absl::OkStatus();
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Inode>> current_, durable_;
  bool fail_syncs_ = false;
  std::string fail_new_files_under_;
  bool hold_next_sync_ = false;
  bool sync_held_ = false;
  std::condition_variable sync_cv_;
  std::chrono::microseconds append_delay_{0};
  int generation_ = 0;
};

}  // namespace bandit::server
