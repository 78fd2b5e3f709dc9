// A server "process" for the in-process durability tests: a DecisionService with its
// Persistence on a fault-injection file system in `always` (a crash drops whatever was not
// fsynced), and the crash-and-restart harness that compares one with an uninterrupted twin.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "server/env/clock.h"
#include "server/service/decision_service.h"
#include "server/service/persistence.h"
#include "server/storage/file_storage.h"
#include "tests/server/fault_injection_fs.h"
#include "tests/server/server_test_util.h"

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

// Exact replay across a crash, against an uninterrupted twin. Instance "x" (`config`) is served
// by a FileNode and by a DecisionService without storage, each with its own clock (which `play`
// advances alike). Rounds [0, rounds) run on both, with a snapshot after round rounds / 2 (so
// recovery is a snapshot and then journal replay); the journal is flushed and the machine
// crashes; a node restarted on what survived and the twin run rounds [rounds, 2 * rounds).
// Round t is `play(svc, clock, t, &open)`, whose result must be the same on both sides; `open`
// (an `Open`) is each side's own record of what is left to answer (decisions awaiting a reward,
// say). Then `check(restarted, twin)`.
template <typename Open, typename Play, typename Check>
void ReplaysAsATwinAfterACrash(const std::string& config, int rounds, Play play, Check check) {
  ManualClock clock, twin_clock;
  FaultInjectionFs fs;
  DecisionService twin(&twin_clock);
  bandit::v1::Instance out;
  ASSERT_TRUE(twin.CreateInstance(Create("x", config), &out).ok());
  Open open_a{}, open_twin{};
  {
    FileNode a(&fs, &clock);
    ASSERT_TRUE(a.svc.CreateInstance(Create("x", config), &out).ok());
    for (int t = 0; t < rounds; ++t) {
      ASSERT_EQ(play(a.svc, clock, t, &open_a), play(twin, twin_clock, t, &open_twin)) << t;
      if (t == rounds / 2) {
        ASSERT_TRUE(a.persistence->SnapshotAll().ok());
      }
    }
    ASSERT_TRUE(a.persistence->storage()->Flush().ok());
    fs.Crash();
  }
  FileNode b(&fs, &clock);
  for (int t = rounds; t < 2 * rounds; ++t)
    ASSERT_EQ(play(b.svc, clock, t, &open_a), play(twin, twin_clock, t, &open_twin)) << t;
  check(b.svc, twin);
}

}  // namespace bandit::server::testing
