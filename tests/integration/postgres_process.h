// A real PostgreSQL server for tests, started from the Debian package's binaries
// (/usr/lib/postgresql/<version>/bin: initdb, pg_ctl) into a fresh temporary directory. It listens
// only on a unix socket inside that directory (no TCP port to collide with anything), trusts
// local connections, and runs as the unprivileged `postgres` user when the tests run as root
// (PostgreSQL refuses to run as root). Stop() and Start() let tests take it away under load.
#pragma once

#include <libpq-fe.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/common/temp_dir.h"

namespace bandit::testing {

class PostgresProcess {
 public:
  // Creates and starts a cluster. Throws std::runtime_error (with the server log) on failure.
  // durable_fsync=false (tests): PostgreSQL does not fsync. That only matters for a machine
  // crash, which no test simulates: a stop -m immediate keeps the WAL in the page cache and
  // replays it as after a crash. Benchmarks keep fsync on.
  explicit PostgresProcess(bool durable_fsync = false) : fsync_(durable_fsync) {
    bin_ = FindBinDir();
    dir_ = bandit::testing::NewTempDir("bandit-pg");
    if (geteuid() == 0) {
      const passwd* pw = getpwnam("postgres");
      if (pw == nullptr)
        throw std::runtime_error(
            "running as root and there is no `postgres` user to run "
            "PostgreSQL as (scripts/deps.sh installs the postgresql package)");
      run_as_ = "postgres";
      if (chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0)
        throw std::runtime_error("cannot chown " + dir_ + " to postgres");
    }
    chmod(dir_.c_str(), 0700);
    // --no-sync: the cluster's initial files need not survive a machine crash in a test.
    Run({bin_ + "/initdb", "-D", data(), "-U", "bandit", "--auth=trust", "-E", "UTF8", "--no-sync",
         "--no-instructions"},
        "initdb");
    Start();
  }
  ~PostgresProcess() {
    if (running_) Stop("immediate");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PostgresProcess(const PostgresProcess&) = delete;
  PostgresProcess& operator=(const PostgresProcess&) = delete;

  void Start() {
    // Small footprint (the test machine is shared); the socket lives in our directory.
    const std::string opts =
        absl::StrCat("-c listen_addresses='' -k ", dir_, " -p ", kPort,
                     " -c shared_buffers=16MB -c max_connections=40 -c max_wal_size=256MB",
                     " -c log_min_messages=warning -c fsync=", fsync_ ? "on" : "off");
    Run({bin_ + "/pg_ctl", "-D", data(), "-l", dir_ + "/server.log", "-o", opts, "-w", "-t", "60",
         "start"},
        "pg_ctl start");
    running_ = true;
  }
  // mode: "immediate" (like a crash: no checkpoint, WAL replay at the next start), "fast".
  void Stop(const std::string& mode = "fast") {
    Run({bin_ + "/pg_ctl", "-D", data(), "-m", mode, "-w", "-t", "60", "stop"}, "pg_ctl stop");
    running_ = false;
  }

  // A libpq connection string for database `db` (the bootstrap database is `postgres`).
  std::string Dsn(const std::string& db = "postgres") const {
    return absl::StrCat("host=", dir_, " port=", kPort, " user=bandit dbname=", db);
  }

  // A fresh, empty database; every test takes its own.
  std::string CreateDatabase() {
    const std::string name = absl::StrCat("t", ++databases_);
    Exec(absl::StrCat("CREATE DATABASE ", name));
    return Dsn(name);
  }

  // Runs one SQL command on database `db`; throws on error. Returns the first value of the
  // first row ("" when there is none).
  std::string Exec(const std::string& sql, const std::string& db = "postgres") const {
    return ExecOn(Dsn(db), sql);
  }
  static std::string ExecOn(const std::string& dsn, const std::string& sql) {
    PGconn* conn = PQconnectdb(dsn.c_str());
    if (PQstatus(conn) != CONNECTION_OK) {
      std::string why = PQerrorMessage(conn);
      PQfinish(conn);
      throw std::runtime_error("cannot connect to the test PostgreSQL: " + why);
    }
    PGresult* res = PQexec(conn, sql.c_str());
    const auto status = PQresultStatus(res);
    std::string value;
    if (status == PGRES_TUPLES_OK && PQntuples(res) > 0 && PQnfields(res) > 0)
      value = PQgetvalue(res, 0, 0);
    std::string why = PQresultErrorMessage(res);
    PQclear(res);
    PQfinish(conn);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      throw std::runtime_error("SQL failed: " + sql + ": " + why);
    return value;
  }

  const std::string& dir() const { return dir_; }
  std::string data() const { return dir_ + "/data"; }
  std::string ServerLog() const {
    std::ifstream f(dir_ + "/server.log");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

 private:
  static constexpr int kPort = 5432;  // names the socket file only: no TCP listener

  static std::string FindBinDir() {
    if (const char* env = std::getenv("BANDIT_PG_BIN")) return env;
    for (const char* v : {"15", "16", "17", "14", "13"}) {
      const std::string d = std::string("/usr/lib/postgresql/") + v + "/bin";
      if (std::filesystem::exists(d + "/initdb")) return d;
    }
    throw std::runtime_error(
        "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (install the postgresql "
        "package: scripts/deps.sh)");
  }

  // Runs a command (as `postgres` when we are root) and waits; throws with its output and the
  // server log when it fails.
  void Run(std::vector<std::string> args, const std::string& what) const {
    if (!run_as_.empty()) args.insert(args.begin(), {"/usr/sbin/runuser", "-u", run_as_, "--"});
    const std::string out = dir_ + "/cmd.out";
    const pid_t pid = fork();
    if (pid == 0) {
      if (freopen(out.c_str(), "w", stdout) == nullptr) _exit(126);
      dup2(fileno(stdout), fileno(stderr));
      if (chdir(dir_.c_str()) != 0) _exit(126);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::ifstream f(out);
      throw std::runtime_error(absl::StrCat(what, " failed (", absl::StrJoin(args, " "), "): ",
                                            std::string(std::istreambuf_iterator<char>(f), {}),
                                            "\nserver log:\n", ServerLog()));
    }
  }

  std::string bin_;
  std::string dir_;
  std::string run_as_;
  bool fsync_;
  bool running_ = false;
  int databases_ = 0;
};

// One server per test binary, started on first use and stopped at exit.
inline PostgresProcess& SharedPostgres() {
  static PostgresProcess* pg = [] {
    auto* p = new PostgresProcess();
    std::atexit([] { delete &SharedPostgres(); });
    return p;
  }();
  return *pg;
}

}  // namespace bandit::testing
