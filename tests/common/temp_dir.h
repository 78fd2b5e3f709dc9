// Temp directories for tests: a fresh directory under the system's temp directory ($TMPDIR,
// else /tmp), unique per call (mkdtemp), so parallel runs and leftovers of a crashed run never
// collide. TempDir removes it with everything in it when destroyed (also when an assertion ends
// the test early); NewTempDir is for the process wrappers that remove their own directory.
// Free of gtest, for headers the benchmarks share.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace bandit::testing {

// A new empty directory named `prefix`-XXXXXX; throws std::runtime_error if none can be made.
inline std::string NewTempDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp(" + tmpl + ") failed");
  return tmpl;
}

class TempDir {
 public:
  // `prefix` names the directory after its test, to tell leftovers apart.
  explicit TempDir(const std::string& prefix = "bandit-test") : path_(NewTempDir(prefix)) {}
  ~TempDir() {
    std::error_code ec;  // best effort: a test's failure is reported already
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // `name` inside the directory.
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace bandit::testing
