// Runs the real banditd binary on port 0 in a fresh data directory, reads back the bound ports,
// and stops it (SIGTERM, or SIGKILL for crash tests).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/common/temp_dir.h"

namespace bandit::testing {

inline std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

class ServerProcess {
 public:
  // extra_args are appended to the banditd command line. data_dir empty = a fresh temp dir.
  explicit ServerProcess(std::vector<std::string> extra_args = {}, std::string data_dir = "") {
    if (data_dir.empty()) {
      data_dir = bandit::testing::NewTempDir("banditd-test");
      owns_dir_ = true;
    }
    data_dir_ = data_dir;
    Start(std::move(extra_args));
  }
  ~ServerProcess() {
    Stop(SIGTERM);
    if (owns_dir_) std::filesystem::remove_all(data_dir_);
  }

  void Start(std::vector<std::string> extra_args) {
    extra_args_ = extra_args;
    const std::string port_file = data_dir_ + "/ports";
    std::filesystem::remove(port_file);
    std::vector<std::string> args = {EnvOr("BANDITD", "build/bin/banditd"), "--listen=127.0.0.1:0",
                                     "--metrics_listen=127.0.0.1:0",
                                     "--data_dir=" + data_dir_ + "/data",
                                     "--port_file=" + port_file};
    for (auto& a : extra_args) args.push_back(a);
    pid_ = fork();
    if (pid_ == 0) {
      const std::string log = data_dir_ + "/banditd.log";
      freopen(log.c_str(), "a", stderr);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 1000; ++i) {  // up to 10 s
      std::ifstream f(port_file);
      if (f >> port_ >> metrics_port_) return;
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_status_ = status;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // Sends `sig` and waits for exit; returns the raw wait status (or -1 if not running).
  int Stop(int sig) {
    if (pid_ <= 0) return exit_status_;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_status_ = status;
    return status;
  }

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }
  const std::string& dir() const { return data_dir_; }
  std::string Log() const {
    std::ifstream f(data_dir_ + "/banditd.log");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

 private:
  std::string data_dir_;
  bool owns_dir_ = false;
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  int exit_status_ = -1;
};

// A plain HTTP/1.0 GET on 127.0.0.1:`port` (the metrics endpoint); the raw response, or "" if
// nothing listens.
inline std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{5, 0};  // a server that stops answering fails the test instead of hanging it
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  (void)!send(fd, req.data(), req.size(), MSG_NOSIGNAL);  // a closed peer is no SIGPIPE
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(fd);
  return out;
}

}  // namespace bandit::testing
