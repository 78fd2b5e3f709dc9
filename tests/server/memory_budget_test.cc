// The node's memory budget (server/instance/memory_budget.h): what each operation is admitted
// against, what a refusal says, and that a refused call leaves everything as it was.
#include "server/instance/memory_budget.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/registry.h"
#include "server/service/decision_service.h"
#include "server/service/persistence.h"
#include "tests/server/fault_injection_fs.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using ::absl::StatusCode;
using testing::Create;
using testing::Exported;
namespace v1 = bandit::v1;

// Every refusal names the size asked for, the budget and what is left.
void ExpectRefusal(const absl::Status& s, int64_t budget) {
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), " needs ")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat(budget, " bytes"))) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "--max_memory_bytes")) << s;
}

DecisionService Service(int64_t budget, const Clock* clock) {
  ServiceLimits limits;
  limits.max_memory_bytes = budget;
  return DecisionService(clock, limits);
}

// The charge of one instance, measured on a service without a limit.
int64_t ChargeOf(const v1::CreateInstanceRequest& req) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  EXPECT_TRUE(svc.CreateInstance(req, &out).ok());
  return svc.memory()->used();
}

v1::SelectRequest SelectOver(const std::string& name, int candidates, int dim) {
  v1::SelectRequest req;
  req.set_instance(name);
  for (int c = 0; c < candidates; ++c) {
    auto* v = req.add_candidates();
    for (int j = 0; j < dim; ++j) v->add_values(0.01 * (c + 1) * (j + 1));
  }
  return req;
}

TEST(MemoryBudget, ReserveAdmitAndChargeKeepTheTotalsByKind) {
  MemoryBudget b(1000);
  EXPECT_TRUE(b.Reserve(600, MemoryKind::kPolicy, MemoryOp::kCreate, "x").ok());
  ExpectRefusal(b.Reserve(401, MemoryKind::kPolicy, MemoryOp::kCreate, "y"), 1000);
  EXPECT_TRUE(absl::StrContains(b.Reserve(401, MemoryKind::kPending, MemoryOp::kSelect, "y")
                                    .message(),
                                "y needs 401 bytes, but the node's memory budget "
                                "(--max_memory_bytes) is 1000 bytes of which 400 are left"));
  EXPECT_TRUE(b.Admit(400, MemoryOp::kSelect, "z").ok());
  EXPECT_EQ(b.used(), 600);
  b.Charge(150, MemoryKind::kLog);
  b.Charge(-100, MemoryKind::kPolicy);
  EXPECT_EQ(b.used(), 650);
  EXPECT_EQ(b.used(MemoryKind::kPolicy), 500);
  EXPECT_EQ(b.used(MemoryKind::kLog), 150);
  EXPECT_EQ(b.left(), 350);
  EXPECT_EQ(b.refusals(MemoryOp::kCreate), 1);
  EXPECT_EQ(b.refusals(MemoryOp::kSelect), 1);
  MemoryBudget unlimited(0);
  EXPECT_TRUE(unlimited.Reserve(int64_t{1} << 60, MemoryKind::kPolicy, MemoryOp::kCreate, "x").ok());
}

TEST(MemoryBudget, FlagParsing) {
  EXPECT_EQ(*ParseMemoryBytes("0"), 0);
  EXPECT_EQ(*ParseMemoryBytes("12345"), 12345);
  EXPECT_EQ(*ParseMemoryBytes("3K"), 3 << 10);
  EXPECT_EQ(*ParseMemoryBytes("5M"), 5 << 20);
  EXPECT_EQ(*ParseMemoryBytes("2G"), int64_t{2} << 30);
  for (const char* bad : {"-1", "1.5G", "G", "12T", "abc"})
    EXPECT_EQ(ParseMemoryBytes(bad).status().code(), StatusCode::kInvalidArgument) << bad;
}

// The smallest of MemTotal and the cgroup limits that apply, read from a fake root.
TEST(MemoryBudget, AvailableMemoryIsTheSmallestOfMachineAndCgroup) {
  const std::string root = ::testing::TempDir() + "/memroot";
  std::filesystem::remove_all(root);
  auto write = [&](const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root + path).parent_path());
    std::ofstream(root + path) << text;
  };
  write("/proc/meminfo", "MemTotal:       16384000 kB\nMemFree:         1000 kB\n");
  EXPECT_EQ(AvailableMemoryBytes(root), int64_t{16384000} * 1024);
  write("/proc/self/cgroup", "0::/app.slice/banditd.service\n");
  write("/sys/fs/cgroup/app.slice/banditd.service/memory.max", "max\n");
  EXPECT_EQ(AvailableMemoryBytes(root), int64_t{16384000} * 1024);  // "max": no limit
  write("/sys/fs/cgroup/app.slice/banditd.service/memory.max", "2147483648\n");
  EXPECT_EQ(AvailableMemoryBytes(root), int64_t{2147483648});
  // cgroup v1, a smaller limit.
  write("/proc/self/cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n");
  write("/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "1073741824\n");
  EXPECT_EQ(AvailableMemoryBytes(root), int64_t{1073741824});
  // v1's "no limit" is a huge number.
  write("/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(AvailableMemoryBytes(root), int64_t{16384000} * 1024);
  EXPECT_EQ(AvailableMemoryBytes(root + "/nothing"), 0);
}

// A node's instances are charged exactly what they hold; creates are admitted until the next
// one's declared footprint no longer fits, and the node keeps serving the ones it has.
TEST(MemoryBudgetService, CreatesUntilTheBudgetRefusesAndKeepsServing) {
  const std::string config = "policy { linucb { dimension: 64 } }";
  const int64_t each = ChargeOf(Create("i0", config));
  // LinUCB's state, (d^2 + 2d) doubles and a counter, is most of it.
  ASSERT_GE(each, (64 * 64 + 2 * 64) * 8 + 8);
  const int64_t budget = 7 * each + each / 2;
  ManualClock clock;
  DecisionService svc = Service(budget, &clock);
  int created = 0;
  absl::Status refused;
  for (int i = 0; i < 20; ++i) {
    v1::Instance out;
    absl::Status s = svc.CreateInstance(Create(absl::StrCat("i", i), config), &out);
    if (!s.ok()) {
      ExpectRefusal(s, budget);
      // Nothing was kept of it.
      v1::GetInstanceRequest get;
      get.set_name(absl::StrCat("i", i));
      EXPECT_EQ(svc.GetInstance(get, &out).code(), StatusCode::kNotFound);
      refused = s;
      continue;
    }
    ++created;
  }
  EXPECT_EQ(created, 7);
  EXPECT_EQ(svc.memory()->used(), 7 * each);
  EXPECT_LE(svc.memory()->used(), budget);
  EXPECT_EQ(svc.memory()->refusals(MemoryOp::kCreate), 13);
  EXPECT_TRUE(absl::StrContains(refused.message(), "instance 'i19' (its config declares "))
      << refused;
  // Every instance it has still serves.
  for (int i = 0; i < 7; ++i) {
    v1::Decision d;
    const absl::Status s = svc.Select(SelectOver(absl::StrCat("i", i), 2, 64), &d);
    EXPECT_TRUE(s.ok()) << s;
  }
  // Deleting one frees its charge; a create then fits again.
  v1::DeleteInstanceRequest del;
  del.set_name("i0");
  ASSERT_TRUE(svc.DeleteInstance(del).ok());
  v1::Instance out;
  EXPECT_TRUE(svc.CreateInstance(Create("again", config), &out).ok());
}

// The declared footprint refuses an instance whose policy would not fit before it is built:
// a LinUCB of dimension 4096 declares 134 MB.
TEST(MemoryBudgetService, AHugeConfigIsRefusedBeforeItIsBuilt) {
  ManualClock clock;
  DecisionService svc = Service(64 << 20, &clock);
  v1::Instance out;
  absl::Status s = svc.CreateInstance(Create("big", "policy { linucb { dimension: 4096 } }"), &out);
  ExpectRefusal(s, 64 << 20);
  const int64_t declared = (int64_t{4096} * 4096 + 2 * 4096) * 8 + 8;
  EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("needs ")));
  EXPECT_GT(std::stoll(std::string(s.message().substr(s.message().find("needs ") + 6))),
            declared);
  EXPECT_EQ(svc.memory()->used(), 0);  // nothing was charged, nothing was built to charge
}

// Pending decisions count their bytes: one instance's may fill its share of the budget (half
// of it), then its Selects are refused; the refused Select changes nothing, the node's other
// instances go on deciding, and a reward frees room for the next decision.
TEST(MemoryBudgetService, PendingDecisionsFillTheInstanceShareThenSelectIsRefused) {
  const std::string config =
      "policy { linucb { dimension: 256 } } pending { capacity: 1000000 reward_wait_ms: 100000000 }";
  const int64_t each = ChargeOf(Create("p", config));
  const int64_t budget = 2 * each + (4 << 20);
  const int64_t share = budget / 2;
  ManualClock clock;
  DecisionService svc = Service(budget, &clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("p", config), &out).ok());
  ASSERT_TRUE(svc.CreateInstance(Create("q", config), &out).ok());
  const v1::SelectRequest sel = SelectOver("p", 4, 256);
  std::vector<std::string> events;
  absl::Status s;
  for (int i = 0; i < 100000; ++i) {
    v1::Decision d;
    s = svc.Select(sel, &d);
    if (!s.ok()) break;
    events.push_back(d.event_id());
  }
  ExpectRefusal(s, budget);
  EXPECT_TRUE(absl::StrContains(s.message(), "a new decision of instance 'p' needs ")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("the most one instance's may hold, ",
                                                          share)))
      << s;
  // What it holds is within its share, and within a few decisions of it (each holds its 256
  // features, 2 KiB, and the table's per-decision share).
  const int64_t pending = svc.memory()->used(MemoryKind::kPending);
  EXPECT_LE(pending, share);
  EXPECT_GT(pending, share - 16 * 1024);
  EXPECT_GT(pending, static_cast<int64_t>(events.size()) * 256 * 8);
  EXPECT_LE(svc.memory()->used(), budget);
  EXPECT_EQ(svc.memory()->refusals(MemoryOp::kSelect), 1);
  // A refused Select leaves the state byte-identical.
  const std::string before = Exported(svc, "p");
  v1::Decision d;
  ExpectRefusal(svc.Select(sel, &d), budget);
  EXPECT_EQ(Exported(svc, "p"), before);
  // The other instance decides.
  EXPECT_TRUE(svc.Select(SelectOver("q", 4, 256), &d).ok());
  // Rewards free what their decisions held; Select then succeeds again.
  for (int i = 0; i < 10; ++i) {
    v1::UpdateRequest up;
    up.set_instance("p");
    up.set_event_id(events[i]);
    up.set_reward(1);
    v1::UpdateResponse r;
    ASSERT_TRUE(svc.Update(up, &r).ok());
  }
  EXPECT_TRUE(svc.Select(sel, &d).ok());
}

// Past the instances' shares, the node's budget refuses decisions of every instance once the
// next would not fit.
TEST(MemoryBudgetService, DecisionsOfManyInstancesStopAtTheNodeBudget) {
  const std::string config =
      "policy { linucb { dimension: 256 } } pending { capacity: 1000000 reward_wait_ms: 100000000 }";
  const int64_t each = ChargeOf(Create("p0", config));
  const int64_t budget = 3 * each + (3 << 20);
  ManualClock clock;
  DecisionService svc = Service(budget, &clock);
  v1::Instance out;
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(svc.CreateInstance(Create(absl::StrCat("p", i), config), &out).ok());
  // p0 fills its share (half the budget, about 1.9 MiB); p1 then meets the node's budget
  // (about 1.1 MiB left), and p2 at once.
  std::vector<absl::Status> refusals;
  std::vector<int> decided;
  for (int i = 0; i < 3; ++i) {
    const v1::SelectRequest sel = SelectOver(absl::StrCat("p", i), 4, 256);
    absl::Status last;
    int n = 0;
    for (; n < 100000; ++n) {
      v1::Decision d;
      last = svc.Select(sel, &d);
      if (!last.ok()) break;
    }
    ExpectRefusal(last, budget);
    refusals.push_back(last);
    decided.push_back(n);
  }
  EXPECT_TRUE(absl::StrContains(refusals[0].message(), "the most one instance's may hold"))
      << refusals[0];
  for (int i = 1; i < 3; ++i) {
    EXPECT_TRUE(absl::StrContains(refusals[i].message(), " bytes of which ")) << refusals[i];
    EXPECT_TRUE(absl::StrContains(refusals[i].message(),
                                  absl::StrCat("a new decision of instance 'p", i, "'")))
        << refusals[i];
  }
  EXPECT_GT(decided[0], decided[1]);
  EXPECT_GT(decided[1], 0);
  EXPECT_EQ(decided[2], 0);
  EXPECT_LE(svc.memory()->used(), budget);
  EXPECT_GT(svc.memory()->used(), budget - 16 * 1024);
}

// A decision log counts its bytes as held; at its retention bound it drops old entries into
// the chunks it has, so a full log never refuses a Select while the rest fits.
TEST(MemoryBudgetService, TheDecisionLogIsBoundedByRetentionWithinTheBudget) {
  const std::string config =
      "policy { linucb { dimension: 16 } } pending { capacity: 10 reward_wait_ms: 1 } "
      "decision_log { enabled: true max_bytes: 262144 }";
  const int64_t budget = ChargeOf(Create("l", config)) + (2 << 20);
  ManualClock clock;
  DecisionService svc = Service(budget, &clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("l", config), &out).ok());
  const v1::SelectRequest sel = SelectOver("l", 10, 16);
  int64_t peak_log = 0;
  for (int i = 0; i < 5000; ++i) {
    v1::Decision d;
    clock.Advance(2);  // each decision's wait passes before the next: pending stays small
    const absl::Status s = svc.Select(sel, &d);
    ASSERT_TRUE(s.ok()) << "decision " << i << ": " << s;
    peak_log = std::max(peak_log, svc.memory()->used(MemoryKind::kLog));
  }
  const v1::InstanceStats stats = testing::Stats(svc, "l");
  EXPECT_GT(stats.decision_log_evicted(), 0);
  // What it holds: the retained entries, an index entry each, at most one chunk beyond.
  EXPECT_LE(peak_log, 262144 + stats.decision_log_events() * 64 + (256 << 10) + (256 << 10));
  EXPECT_LE(svc.memory()->used(), budget);
}

// AddArms, AddShadow and Reset are admitted by the footprint the change implies, before it is
// applied; refused, they leave the instance byte-identical.
TEST(MemoryBudgetService, ChangesAreAdmittedBeforeTheyAreApplied) {
  const std::string config = "policy { epsilon_greedy { epsilon: 0.1 } num_arms: 60 }";
  auto play = [](DecisionService& svc) {
    testing::PlayRounds(svc, "c", 0, 20, [](const v1::Decision&, int i, v1::UpdateRequest* u) {
      u->set_reward(i % 2);
    });
  };
  int64_t each = 0;  // what the instance holds after its rounds (its tables keep their size)
  {
    ManualClock clock;
    DecisionService svc(&clock);
    v1::Instance out;
    ASSERT_TRUE(svc.CreateInstance(Create("c", config), &out).ok());
    play(svc);
    each = svc.memory()->used();
  }
  v1::PolicyConfig policy = Create("c", config).config().policy();
  const int64_t policy_bytes = *DeclaredStateBytes(policy);
  v1::PolicyConfig thompson;
  thompson.mutable_thompson();
  thompson.set_num_arms(60);
  const int64_t shadow_bytes = *DeclaredStateBytes(thompson);
  v1::AddShadowRequest shadow;
  shadow.set_name("c");
  shadow.set_shadow("s");
  shadow.mutable_config()->mutable_policy()->mutable_thompson();
  v1::AddArmsRequest add;
  add.set_name("c");
  for (int i = 0; i < 500; ++i) add.add_arms()->set_id(absl::StrCat("new-arm-", i));
  v1::ResetInstanceRequest reset;
  reset.set_name("c");

  {  // One byte short of each change.
    const int64_t budget = each + std::min(policy_bytes, shadow_bytes) - 1;
    ManualClock clock;
    DecisionService svc = Service(budget, &clock);
    v1::Instance out;
    ASSERT_TRUE(svc.CreateInstance(Create("c", config), &out).ok());
    play(svc);
    ASSERT_EQ(svc.memory()->used(), each);
    const std::string before = Exported(svc, "c");
    ExpectRefusal(svc.AddArms(add, &out), budget);
    ExpectRefusal(svc.AddShadow(shadow, &out), budget);
    ExpectRefusal(svc.ResetInstance(reset, &out), budget);
    EXPECT_EQ(Exported(svc, "c"), before);
    EXPECT_EQ(svc.memory()->refusals(MemoryOp::kAddArms), 1);
    EXPECT_EQ(svc.memory()->refusals(MemoryOp::kAddShadow), 1);
    EXPECT_EQ(svc.memory()->refusals(MemoryOp::kConfigChange), 1);
    EXPECT_LE(svc.memory()->used(), budget);
  }
  {  // With room, each is applied and charged as measured.
    ManualClock clock;
    DecisionService svc = Service(each + (1 << 20), &clock);
    v1::Instance out;
    ASSERT_TRUE(svc.CreateInstance(Create("c", config), &out).ok());
    ASSERT_TRUE(svc.AddShadow(shadow, &out).ok());
    EXPECT_GE(svc.memory()->used(MemoryKind::kShadows), shadow_bytes);
    ASSERT_TRUE(svc.AddArms(add, &out).ok());
    ASSERT_TRUE(svc.ResetInstance(reset, &out).ok());
    const InstanceState::Memory m = (*svc.registry().Get("c"))->MemoryBytes();
    EXPECT_EQ(svc.memory()->used(), m.total());
    EXPECT_EQ(svc.memory()->used(MemoryKind::kPolicy), m.policy);
  }
}

// Recovery loads instances within the budget, in name order, and refuses the rest by name
// (RESOURCE_EXHAUSTED, counted) without touching their stored state: a restart with room
// loads them again, every one as it was.
TEST(MemoryBudgetService, RestartLoadsNothingOverTheBudgetAndLosesNothing) {
  FaultInjectionFs fs;
  ManualClock clock;
  const std::string config = "policy { linucb { dimension: 32 } }";
  const int64_t each = ChargeOf(Create("r0", config));
  auto open = [&](DecisionService* svc, RecoveryReport* report) {
    PersistenceOptions o;
    o.data_dir = "/data";
    o.fs = &fs;
    o.clock = &clock;
    o.snapshot_every_changes = 1'000'000;
    o.snapshot_interval_ms = 1'000'000'000;
    auto p = Persistence::Open(o, svc, report);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  };
  std::vector<std::string> exported;
  {
    DecisionService svc = Service(0, &clock);
    RecoveryReport report;
    auto p = open(&svc, &report);
    ASSERT_NE(p, nullptr);
    for (int i = 0; i < 5; ++i) {
      v1::Instance out;
      ASSERT_TRUE(svc.CreateInstance(Create(absl::StrCat("r", i), config), &out).ok());
      for (int k = 0; k < 3; ++k) {
        v1::Decision d;
        ASSERT_TRUE(svc.Select(SelectOver(absl::StrCat("r", i), 2, 32), &d).ok());
        v1::UpdateRequest up;
        up.set_instance(absl::StrCat("r", i));
        up.set_event_id(d.event_id());
        up.set_reward(k);
        v1::UpdateResponse r;
        ASSERT_TRUE(svc.Update(up, &r).ok());
      }
      exported.push_back(Exported(svc, absl::StrCat("r", i)));
    }
  }
  {
    const int64_t budget = 3 * each + each / 2;
    DecisionService svc = Service(budget, &clock);
    RecoveryReport report;
    auto p = open(&svc, &report);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(svc.registry().size(), 3);
    EXPECT_LE(svc.memory()->used(), budget);
    ASSERT_EQ(report.refused.size(), 2u);
    EXPECT_EQ(svc.memory()->refusals(MemoryOp::kRecovery), 2);
    // Refused on the footprint their stored configs declare, before they were built.
    for (const auto& [name, why] : report.refused)
      EXPECT_TRUE(absl::StrContains(why, "the footprint its stored config declares")) << why;
    for (int i = 0; i < 5; ++i) {
      v1::GetInstanceRequest get;
      get.set_name(absl::StrCat("r", i));
      v1::Instance out;
      const absl::Status s = svc.GetInstance(get, &out);
      if (i < 3) {
        EXPECT_TRUE(s.ok()) << s;
        EXPECT_EQ(Exported(svc, get.name()), exported[i]);
      } else {
        EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
        EXPECT_TRUE(absl::StrContains(s.message(), "was not loaded at start")) << s;
      }
    }
  }
  {
    DecisionService svc = Service(0, &clock);
    RecoveryReport report;
    auto p = open(&svc, &report);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(svc.registry().size(), 5);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(Exported(svc, absl::StrCat("r", i)), exported[i]);
  }
}

}  // namespace
}  // namespace bandit::server
