// bandit-durability-bench: journal throughput per durability mode (concurrent writers, group
// commit) and recovery time for many instances, in-process on the real filesystem; with
// --postgres_dsn also on PostgreSQL, side by side with the files (`always`, pipelined and
// statement-per-round-trip group commits; recovery of the same instances from each backend).
//
//   bandit-durability-bench --dir=/tmp/x [--instances=10000] [--updates_per_instance=20]
//                           [--threads=1,8,64] [--seconds=3] [--postgres_dsn=...] --out=FILE.json
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <google/protobuf/text_format.h>
#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/service/decision_service.h"
#include "server/service/persistence.h"
#include "server/storage/postgres/postgres_storage.h"

#include <libpq-fe.h>

using namespace bandit::server;
namespace v1 = bandit::v1;
using SteadyClock = std::chrono::steady_clock;

ABSL_FLAG(std::string, dir, "/tmp/bandit-durability-bench",
          "Scratch directory on the filesystem under test (removed at the end)");
ABSL_FLAG(int64_t, instances, 10000, "Instances for the recovery and snapshot measurements");
ABSL_FLAG(int64_t, updates_per_instance, 20, "Rounds journaled per instance before recovery");
ABSL_FLAG(std::vector<std::string>, threads, std::vector<std::string>({"1", "8", "64"}),
          "Writer thread counts for the throughput measurement");
ABSL_FLAG(double, seconds, 3, "Seconds per throughput measurement");
ABSL_FLAG(std::string, out, "", "Write the JSON here (default: stdout)");
ABSL_FLAG(std::string, postgres_dsn, "",
          "Also measure the PostgreSQL backend on this database (libpq connection string)");

// Setup steps must succeed; a benchmark over a half-built state would measure nothing.
static void Must(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::cerr << what << ": " << s << "\n";
    std::exit(1);
  }
}

static v1::CreateInstanceRequest Create(const std::string& name) {
  v1::CreateInstanceRequest req;
  req.set_name(name);
  google::protobuf::TextFormat::ParseFromString(
      "policy { glb_omd { dimension: 5 } } pending { capacity: 1000000 }", req.mutable_config());
  return req;
}

static v1::SelectRequest Select(const std::string& name, int i) {
  v1::SelectRequest sel;
  sel.set_instance(name);
  for (int a = 0; a < 10; ++a) {
    auto* c = sel.add_candidates();
    for (int j = 0; j < 5; ++j) c->add_values(((a * 5 + j + i) % 7 - 3) / 10.0);
  }
  return sel;
}

// Updates acknowledged per second with `threads` writers, each doing select+update and waiting
// for durability as the gRPC layer does before acknowledging.
// Where a run keeps its state: files under --dir, or PostgreSQL (--postgres_dsn; every table of
// the schema and its function are dropped first so every run starts empty and migrates again).
struct Backend {
  std::string name;  // file, postgres, postgres-no-pipeline
  std::string dir, dsn;
};

static void DropTables(const std::string& dsn) {
  PGconn* c = PQconnectdb(dsn.c_str());
  PGresult* r = PQexec(c,
                       "SET client_min_messages TO warning; DROP TABLE IF EXISTS "
                       "bandit_journal, bandit_snapshots, bandit_schema_version, bandit_nodes, "
                       "bandit_leases, bandit_diverged; DROP FUNCTION IF EXISTS bandit_fence");
  if (PQresultStatus(r) != PGRES_COMMAND_OK) {
    std::cerr << "dropping the tables: " << PQerrorMessage(c) << "\n";
    std::exit(1);
  }
  PQclear(r);
  PQfinish(c);
}

static std::unique_ptr<Storage> MakeStorage(const Backend& b, Durability mode) {
  if (b.name == "file") {
    FileStorageOptions fo;
    fo.dir = b.dir;
    fo.durability = mode;
    return std::make_unique<FileStorage>(std::move(fo));
  }
  PostgresStorageOptions po;
  po.dsn = b.dsn;
  po.durability = mode;
  po.pipeline = b.name == "postgres";
  return std::make_unique<PostgresStorage>(std::move(po));
}

static void Clear(const Backend& b) {
  if (b.name == "file")
    std::filesystem::remove_all(b.dir);
  else
    DropTables(b.dsn);
}

static absl::StatusOr<std::unique_ptr<Persistence>> Open(const Backend& b, Durability mode,
                                                         DecisionService* svc,
                                                         RecoveryReport* report = nullptr) {
  PersistenceOptions o;
  o.snapshot_every_changes = 1 << 30;
  o.snapshot_interval_ms = 1 << 30;
  return Persistence::Open(MakeStorage(b, mode), o, svc, report);
}

static double Throughput(const Backend& b, Durability mode, int threads, double seconds) {
  Clear(b);
  DecisionService svc;
  auto p = Open(b, mode, &svc);
  if (!p.ok()) {
    std::cerr << p.status() << "\n";
    std::exit(1);
  }
  v1::Instance out;
  for (int t = 0; t < std::min(threads, 8); ++t)
    Must(svc.CreateInstance(Create(absl::StrCat("i", t)), &out), "create");
  std::atomic<bool> stop{false};
  std::atomic<int64_t> done{0};
  std::vector<std::thread> ws;
  for (int t = 0; t < threads; ++t)
    ws.emplace_back([&, t] {
      const std::string name = absl::StrCat("i", t % 8);
      for (int i = 0; !stop; ++i) {
        v1::Decision d;
        uint64_t written_seq = 0;
        if (!svc.Select(Select(name, i), &d, &written_seq).ok()) continue;
        v1::UpdateRequest up;
        up.set_instance(name);
        up.set_event_id(d.event_id());
        up.set_reward(i % 2);
        v1::UpdateResponse r;
        if (!svc.Update(up, &r, &written_seq).ok()) continue;
        // What the gRPC layer does: wait for this call's own newest record.
        if ((*p)->storage()->WaitDurable(written_seq).ok()) ++done;
      }
    });
  const auto t0 = SteadyClock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& w : ws) w.join();
  const double el = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  return done / el;
}

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "journal throughput per durability mode and recovery time, in-process on a real "
      "filesystem");
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int64_t instances = absl::GetFlag(FLAGS_instances);
  const int64_t per = absl::GetFlag(FLAGS_updates_per_instance);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  std::vector<int> thread_counts;
  for (const auto& s : absl::GetFlag(FLAGS_threads)) {
    int n;
    if (!absl::SimpleAtoi(s, &n) || n < 1) {
      std::cerr << "--threads=" << s << " is not a positive thread count\n";
      return 2;
    }
    thread_counts.push_back(n);
  }
  const std::string dsn = absl::GetFlag(FLAGS_postgres_dsn);
  std::vector<Backend> backends = {{"file", dir, ""}};
  if (!dsn.empty()) {
    backends.push_back({"postgres", "", dsn});
    backends.push_back({"postgres-no-pipeline", "", dsn});
  }
  nlohmann::json doc;
  doc["machine"] = {{"nproc", std::thread::hardware_concurrency()}};
  // 1. Journal throughput per mode, modes (and backends, in `always`) alternated per thread
  // count (side by side).
  for (int threads : thread_counts)
    for (Durability mode : {Durability::kNone, Durability::kEverySec, Durability::kAlways})
      for (const Backend& b : backends) {
        if (b.name == "postgres-no-pipeline" && mode != Durability::kAlways) continue;
        const double ups = Throughput(b, mode, threads, seconds);
        doc["throughput"].push_back({{"backend", b.name},
                                     {"mode", DurabilityName(mode)},
                                     {"threads", threads},
                                     {"updates_per_second", ups}});
        std::cerr << b.name << " " << DurabilityName(mode) << " threads=" << threads << ": " << ups
                  << " updates/s\n";
      }
  if (!dsn.empty()) backends.pop_back();  // recovery reads the same way with or without
  // 2. Recovery of many instances: from the journal alone, then from snapshots.
  for (const Backend& b : backends) {
    Clear(b);
    {
      DecisionService svc;
      auto p = Open(b, Durability::kNone, &svc);
      Must(p.status(), "open");
      v1::Instance out;
      for (int64_t n = 0; n < instances; ++n) {
        const std::string name = absl::StrCat("inst-", n);
        Must(svc.CreateInstance(Create(name), &out), "create");
        for (int i = 0; i < per; ++i) {
          v1::Decision d;
          Must(svc.Select(Select(name, i), &d), "select");
          v1::UpdateRequest up;
          up.set_instance(name);
          up.set_event_id(d.event_id());
          up.set_reward(i % 2);
          v1::UpdateResponse r;
          Must(svc.Update(up, &r), "update");
        }
      }
      Must((*p)->storage()->Flush(), "flush");
    }
    auto recover = [&](const char* label, DecisionService& svc) {
      RecoveryReport report;
      const auto t0 = SteadyClock::now();
      auto p = Open(b, Durability::kAlways, &svc, &report);
      Must(p.status(), "recover");
      const double el = std::chrono::duration<double>(SteadyClock::now() - t0).count();
      doc["recovery"].push_back({{"backend", b.name},
                                 {"from", label},
                                 {"instances", svc.registry().size()},
                                 {"journal_records", report.journal_records},
                                 {"snapshots", report.snapshots_loaded},
                                 {"seconds", el}});
      std::cerr << b.name << ": recovery from " << label << ": " << svc.registry().size()
                << " instances in " << el << " s\n";
      return p;
    };
    {
      DecisionService svc;
      auto p = recover("journal", svc);
      const auto t0 = SteadyClock::now();
      auto n = (*p)->SnapshotAll();
      const int64_t written = n.ok() ? *n : -1;
      const double el = std::chrono::duration<double>(SteadyClock::now() - t0).count();
      doc["snapshot_round"].push_back(
          {{"backend", b.name}, {"instances", written}, {"seconds", el}});
      std::cerr << b.name << ": snapshot round of " << written << " instances in " << el << " s\n";
    }
    {
      DecisionService svc;
      Must(recover("snapshots", svc).status(), "recover");
    }
    Clear(b);
  }
  std::filesystem::remove_all(dir);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty())
    std::cout << doc.dump(1) << "\n";
  else
    std::ofstream(out) << doc.dump(1) << "\n";
  return 0;
}
