// A server "process" for the in-process durability tests: a DecisionService with its
// Persistence on a fault-injection file system in `always` (a crash drops whatever was not
// fsynced).
#pragma once

#include <cstdlib>
#include <memory>

#include <gtest/gtest.h>

#include "server/service/decision_service.h"
#include "server/service/persistence.h"
#include "server/storage/file_storage.h"
#include "tests/server/fault_injection_fs.h"

namespace bandit::server::testing {

struct FileNode {
  FileNode(FaultInjectionFs* fs, const Clock* clock) : svc(clock) {
    PersistenceOptions o;
    o.snapshot_every_changes = 1'000'000;
    o.snapshot_interval_ms = 1'000'000'000;
    FileStorageOptions fo;
    fo.dir = "/data";
    fo.durability = Durability::kAlways;
    fo.fs = fs;
    fo.clock = clock;
    auto p = Persistence::Open(std::make_unique<FileStorage>(std::move(fo)), o, &svc, &report);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) std::abort();
    persistence = *std::move(p);
  }
  DecisionService svc;
  RecoveryReport report;
  std::unique_ptr<Persistence> persistence;
};

}  // namespace bandit::server::testing
