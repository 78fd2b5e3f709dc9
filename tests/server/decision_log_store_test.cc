// How the decision log holds its decisions: each as its encoded LoggedDecision in shared
// chunks. Checked against protobuf's own serialization byte for byte, against the decoded
// snapshot path (the payload a snapshot file carries parses as the same InstanceSnapshot, and a
// snapshot written the previous way, as a whole message, loads to the same log), that a frozen
// log (a snapshot in progress) is unaffected by retention moving on, and that the memory it
// holds, measured by the allocator, stays within its max_bytes plus a small per-event index.
#include <malloc.h>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>

#include "server/env/file_system.h"
#include "server/instance/decision_log/decision_log.h"
#include "server/instance/instance.h"
#include "server/service/decision_service.h"
#include "server/storage/crc32.h"
#include "server/storage/snapshot_store.h"
#include "tests/common/temp_dir.h"
#include "tests/server/fault_injection_fs.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

namespace v1 = bandit::v1;
using google::protobuf::util::MessageDifferencer;
using testing::Create;

// A context and, built independently through the generated setters, the LoggedDecision it
// stands for.
struct Case {
  std::vector<Vector> candidates;
  Vector x;
  std::vector<std::string> arm_ids;
  std::vector<double> probabilities;
  ArgmaxPosteriors posteriors;
  std::string event_id, chosen_arm_id, policy;
  DecisionLog::Context context;
  v1::LoggedDecision expected;
};

void MakeCase(std::mt19937_64& rng, uint64_t seq, Case* c) {
  std::uniform_int_distribution<int> kind(0, 2), small(0, 4);
  std::normal_distribution<double> g;
  DecisionLog::Context& ctx = c->context;
  v1::LoggedDecision& e = c->expected;
  c->event_id = seq % 7 == 0 ? "" : absl::StrCat("00000000000000ab-", absl::Hex(seq));
  c->policy = seq % 5 == 0 ? "" : "linucb";
  ctx.event_seq = seq;
  e.set_event_seq(seq);
  ctx.event_id = c->event_id;
  e.set_event_id(c->event_id);
  ctx.decided_at_ms = seq % 3 == 0 ? 0 : 1'700'000'000'000 + static_cast<int64_t>(seq);
  e.set_decided_at_ms(ctx.decided_at_ms);
  int actions = 0;
  switch (kind(rng)) {
    case 0: {
      const int n = small(rng), dim = 1 + small(rng);
      for (int i = 0; i < n; ++i)
        c->candidates.push_back(Vector::NullaryExpr(dim, [&] { return g(rng); }));
      ctx.candidates = c->candidates;
      ctx.num_candidates = n;
      ctx.candidate_dim = n > 0 ? dim : 0;
      e.set_num_candidates(ctx.num_candidates);
      e.set_candidate_dim(ctx.candidate_dim);
      for (const auto& v : c->candidates)
        e.mutable_candidates()->Add(v.data(), v.data() + v.size());
      actions = n;
      break;
    }
    case 1:
      c->x = Vector::NullaryExpr(small(rng), [&] { return g(rng); });
      ctx.x = &c->x;
      e.mutable_x()->Add(c->x.data(), c->x.data() + c->x.size());
      actions = small(rng);
      break;
    default:
      for (int i = small(rng); i > 0; --i)
        c->arm_ids.push_back(i == 2 ? "" : absl::StrCat("arm", i));
      ctx.arm_ids = c->arm_ids;
      for (const auto& id : c->arm_ids) e.add_arm_ids(id);
      actions = static_cast<int>(c->arm_ids.size());
      break;
  }
  ctx.num_actions = actions;
  e.set_num_actions(actions);
  ctx.chosen_index = actions == 0 ? -1 : static_cast<int>(seq % static_cast<uint64_t>(actions));
  e.set_chosen_index(ctx.chosen_index);
  c->chosen_arm_id = seq % 2 ? "chosen" : "";
  ctx.chosen_arm_id = c->chosen_arm_id;
  e.set_chosen_arm_id(c->chosen_arm_id);
  if (seq % 4 != 1) {
    ctx.propensity = seq % 4 == 2 ? 0.0 : 0.25;  // 0 is present, not omitted
    e.set_propensity(*ctx.propensity);
  }
  if (actions > 0 && seq % 3 == 1) {
    for (int i = 0; i < actions; ++i) c->probabilities.push_back(1.0 / actions);
    ctx.probabilities = c->probabilities;
    e.mutable_probabilities()->Add(c->probabilities.begin(), c->probabilities.end());
  } else if (actions > 0 && seq % 3 == 2) {
    ctx.one_hot_actions = actions;
    e.mutable_probabilities()->Resize(actions, 0.0);
    e.set_probabilities(ctx.chosen_index, 1.0);
  } else if (!c->arm_ids.empty() || seq % 6 == 0) {
    // Thompson sampling's posteriors in place of the vector (field 18, after the outcome).
    c->posteriors.beta = seq % 2 == 0;
    c->posteriors.first = Vector::NullaryExpr(actions, [&] { return 1 + std::abs(g(rng)); });
    c->posteriors.second = Vector::NullaryExpr(actions, [&] { return 1 + std::abs(g(rng)); });
    ctx.posteriors = &c->posteriors;
    v1::ArgmaxPosteriors* q = e.mutable_posteriors();
    q->set_family(c->posteriors.beta ? v1::ArgmaxPosteriors::BETA : v1::ArgmaxPosteriors::NORMAL);
    q->mutable_first()->Add(c->posteriors.first.data(),
                            c->posteriors.first.data() + c->posteriors.first.size());
    q->mutable_second()->Add(c->posteriors.second.data(),
                             c->posteriors.second.data() + c->posteriors.second.size());
  }
  ctx.policy = c->policy;
  e.set_policy(c->policy);
}

v1::DecisionLogConfig Config(int64_t max_events, int64_t max_bytes) {
  v1::DecisionLogConfig c;
  c.set_enabled(true);
  c.set_max_events(max_events);
  c.set_max_bytes(max_bytes);
  return c;
}

std::string Frame(const v1::LoggedDecision& d) {
  // InstanceSnapshot.decision_log (field 11) as protobuf writes it.
  v1::InstanceSnapshot s;
  *s.add_decision_log() = d;
  return s.SerializeAsString();
}

TEST(DecisionLogStore, EachDecisionIsItsProtobufSerializationByteForByte) {
  std::mt19937_64 rng(3);
  DecisionLog log(Config(1'000'000, int64_t{1} << 40));
  std::vector<std::unique_ptr<Case>> cases;
  for (uint64_t seq = 1; seq <= 400; ++seq) {
    cases.push_back(std::make_unique<Case>());
    MakeCase(rng, seq, cases.back().get());
    ASSERT_EQ(log.Append(cases.back()->context, 5), 0);
  }
  // Outcomes, including the values proto3 writes or omits by their bits.
  const double rewards[] = {0.0, -0.0, 1.5, -2.0, std::numeric_limits<double>::denorm_min()};
  for (uint64_t seq = 1; seq <= 400; seq += 3) {
    const double r = rewards[seq % 5];
    const auto outcome = static_cast<v1::DecisionOutcome>(seq % 5);
    const int64_t at = seq % 2 ? 0 : 9000 + static_cast<int64_t>(seq);
    log.SetOutcome(seq, outcome, r, at);
    cases[seq - 1]->expected.set_outcome(outcome);
    cases[seq - 1]->expected.set_reward(r);
    cases[seq - 1]->expected.set_outcome_at_ms(at);
  }
  std::string expected_frames;
  int64_t expected_bytes = 0;
  for (const auto& c : cases) {
    expected_frames += Frame(c->expected);
    expected_bytes += static_cast<int64_t>(c->expected.ByteSizeLong());
  }
  EXPECT_EQ(log.bytes(), expected_bytes);
  const auto frozen = log.Freeze();
  std::string frames(frozen->size(), '\0');
  frozen->WriteTo(frames.data());
  EXPECT_EQ(frames, expected_frames);
  size_t i = 0;
  log.Visit(0, 0, 0, [&](const DecisionLog::Entry& e) {
    v1::LoggedDecision d;
    DecisionLog::Decode(e, &d);
    EXPECT_TRUE(MessageDifferencer::Equals(d, cases[i]->expected)) << i;
    EXPECT_EQ(DecisionLog::EncodedSize(e), cases[i]->expected.ByteSizeLong()) << i;
    ++i;
    return true;
  });
  EXPECT_EQ(i, cases.size());
  // The decoded form appended back holds the same bytes.
  DecisionLog again(Config(1'000'000, int64_t{1} << 40));
  for (const auto& c : cases) again.Append(c->expected, 5);
  std::string frames_again(again.Freeze()->size(), '\0');
  again.Freeze()->WriteTo(frames_again.data());
  EXPECT_EQ(frames_again, expected_frames);
}

// A snapshot or import whose Thompson entry holds posteriors the export could not compute from
// is refused, naming the entry and what was expected, and the log keeps what it held.
TEST(DecisionLogStore, RestoreRefusesPosteriorsOutOfRangeAndKeepsTheLog) {
  DecisionLog log(Config(100, int64_t{1} << 20));
  google::protobuf::RepeatedPtrField<v1::LoggedDecision> in;
  v1::LoggedDecision* good = in.Add();
  good->set_event_seq(1);
  good->set_num_actions(2);
  good->mutable_posteriors()->set_family(v1::ArgmaxPosteriors::BETA);
  good->mutable_posteriors()->mutable_first()->Add(2.0);
  good->mutable_posteriors()->mutable_first()->Add(3.0);
  good->mutable_posteriors()->mutable_second()->Add(4.0);
  good->mutable_posteriors()->mutable_second()->Add(5.0);
  ASSERT_TRUE(log.Restore(in).ok());
  ASSERT_EQ(log.events(), 1);
  auto refused = [&](const std::function<void(v1::LoggedDecision*)>& damage,
                     const std::string& expected) {
    google::protobuf::RepeatedPtrField<v1::LoggedDecision> two = in;
    v1::LoggedDecision* bad = two.Add();
    *bad = *good;
    bad->set_event_seq(2);
    damage(bad);
    const absl::Status s = log.Restore(two);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(s.message(), expected);
    EXPECT_EQ(log.events(), 1);
  };
  refused([](v1::LoggedDecision* d) { d->mutable_posteriors()->clear_family(); },
          "decision_log[1].posteriors: family is 0, expected BETA (1) or NORMAL (2)");
  refused([](v1::LoggedDecision* d) { d->set_num_actions(3); },
          "decision_log[1].posteriors: they cover 2 actions, expected num_actions = 3");
  refused(
      [](v1::LoggedDecision* d) {
        d->mutable_posteriors()->set_family(v1::ArgmaxPosteriors::NORMAL);
        d->mutable_posteriors()->set_second(1, -1.0);
      },
      "decision_log[1].posteriors: posterior 1 is Normal(3, -1), expected a finite mean and a "
      "finite sd above 0");
  refused([](v1::LoggedDecision* d) { d->mutable_posteriors()->mutable_second()->RemoveLast(); },
          "decision_log[1].posteriors: posteriors have 2 first parameters and 1 second ones, "
          "expected one of each per action");
}

// A snapshot file is written from the frozen log's pieces (never gathered in one buffer): the
// file must hold exactly the snapshot format with protobuf's own serialization of every
// decision and zlib's checksum, on the fault-injection and on the real file system, across
// several of the writer's buffers and with one decision larger than a buffer.
TEST(DecisionLogStore, ASnapshotFileWrittenFromThePiecesHoldsTheSnapshotFormatExactly) {
  std::mt19937_64 rng(9);
  DecisionLog log(Config(1'000'000, int64_t{1} << 40));
  std::vector<std::unique_ptr<Case>> cases;
  for (uint64_t seq = 1; seq <= 600; ++seq) {
    auto c = std::make_unique<Case>();
    MakeCase(rng, seq, c.get());
    if (seq % 2 == 0 || seq == 301) {  // large contexts: ~2.8 MB in all, one of ~1.3 MB
      const int n = seq == 301 ? 80 : 30, dim = seq == 301 ? 2000 : 20;
      c->candidates.assign(n, Vector::Constant(dim, 0.25 + static_cast<double>(seq)));
      c->context.candidates = c->candidates;
      c->context.x = nullptr;
      c->context.arm_ids = {};
      c->context.num_candidates = n;
      c->context.candidate_dim = dim;
      c->context.num_actions = n;
      c->context.chosen_index = static_cast<int>(seq % static_cast<uint64_t>(n));
      c->context.probabilities = {};
      c->context.one_hot_actions = 0;
      v1::LoggedDecision& e = c->expected;
      e.clear_x();
      e.clear_arm_ids();
      e.clear_candidates();
      e.clear_probabilities();
      e.set_num_candidates(n);
      e.set_candidate_dim(dim);
      for (const auto& v : c->candidates)
        e.mutable_candidates()->Add(v.data(), v.data() + v.size());
      e.set_num_actions(n);
      e.set_chosen_index(c->context.chosen_index);
    }
    ASSERT_EQ(log.Append(c->context, 5), 0);
    cases.push_back(std::move(c));
  }
  for (uint64_t seq = 2; seq <= 600; seq += 7) {
    log.SetOutcome(seq, v1::OUTCOME_REWARDED, 0.5 * static_cast<double>(seq), 77);
    cases[seq - 1]->expected.set_outcome(v1::OUTCOME_REWARDED);
    cases[seq - 1]->expected.set_reward(0.5 * static_cast<double>(seq));
    cases[seq - 1]->expected.set_outcome_at_ms(77);
  }
  v1::InstanceSnapshot snap;
  snap.set_format_version(1);
  snap.set_name("big");
  snap.set_uid(42);
  snap.mutable_stats()->set_rounds(600);
  snap.set_last_journal_seq(1234);
  std::string payload = snap.SerializeAsString();
  for (const auto& c : cases) payload += Frame(c->expected);
  ASSERT_GT(payload.size(), size_t{5} << 19);  // 2.5 MiB: several of the writer's 1 MiB buffers
  std::string expected("BSNP");
  for (uint32_t v : {uint32_t{1}, Crc32Portable(payload)})
    for (int i = 0; i < 4; ++i) expected.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  expected += payload;

  const auto frozen = log.Freeze();
  EXPECT_TRUE(SnapshotStore::Encode(snap, frozen.get()) == expected);
  FaultInjectionFs fake;
  SnapshotStore in_memory(&fake, "/s");
  ASSERT_TRUE(in_memory.Init().ok());
  ASSERT_TRUE(in_memory.Write(snap, frozen.get()).ok());
  const std::string* written = fake.Data("/s/big.snap");
  ASSERT_NE(written, nullptr);
  EXPECT_EQ(written->size(), expected.size());
  EXPECT_TRUE(*written == expected);

  const bandit::testing::TempDir dir("decision_log_store_test");
  SnapshotStore on_disk(PosixFileSystem(), dir.path());
  ASSERT_TRUE(on_disk.Init().ok());
  ASSERT_TRUE(on_disk.Write(snap, frozen.get()).ok());
  auto read = PosixFileSystem()->ReadFile(dir.File("big.snap"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->size(), expected.size());
  EXPECT_TRUE(*read == expected);
  auto decoded = SnapshotStore::Decode(*read);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->decision_log_size(), 600);
  EXPECT_TRUE(MessageDifferencer::Equals(decoded->decision_log(300), cases[300]->expected));
}

TEST(DecisionLogStore, AFrozenLogOutlivesRetentionAndChunkReuse) {
  std::mt19937_64 rng(5);
  // Small bounds: the log turns over many chunks below.
  DecisionLog log(Config(50, int64_t{1} << 40));
  std::vector<std::unique_ptr<Case>> cases;
  uint64_t seq = 0;
  auto append = [&](int n) {
    for (int i = 0; i < n; ++i) {
      auto c = std::make_unique<Case>();
      MakeCase(rng, ++seq, c.get());
      // Large enough contexts that chunks fill and get reused.
      c->candidates.assign(40, Vector::Constant(20, 0.5 + static_cast<double>(seq)));
      c->context.candidates = c->candidates;
      log.Append(c->context, 5);
    }
  };
  append(120);
  const auto frozen = log.Freeze();
  google::protobuf::RepeatedPtrField<v1::LoggedDecision> at_freeze;
  frozen->AddTo(&at_freeze);
  std::string bytes_at_freeze(frozen->size(), '\0');
  frozen->WriteTo(bytes_at_freeze.data());
  append(2000);  // every frozen decision evicted many times over; chunks recycled
  EXPECT_EQ(log.events(), 50);
  std::string bytes_after(frozen->size(), '\0');
  frozen->WriteTo(bytes_after.data());
  EXPECT_EQ(bytes_after, bytes_at_freeze);
  google::protobuf::RepeatedPtrField<v1::LoggedDecision> after;
  frozen->AddTo(&after);
  ASSERT_EQ(after.size(), at_freeze.size());
  for (int i = 0; i < after.size(); ++i)
    EXPECT_TRUE(MessageDifferencer::Equals(after[i], at_freeze[i])) << i;
  // And the live log still reads back what it holds: the last 50, in order.
  uint64_t expect_seq = seq - 49;
  log.Visit(0, 0, 0, [&](const DecisionLog::Entry& e) {
    v1::LoggedDecision d;
    DecisionLog::Decode(e, &d);
    EXPECT_EQ(d.event_seq(), expect_seq);
    EXPECT_EQ(d.candidates(0), 0.5 + static_cast<double>(expect_seq));
    ++expect_seq;
    return true;
  });
}

// Bytes the allocator has handed out and not taken back (heap and mmapped blocks).
// Defined by the sanitizers' runtimes (ASan, TSan), whose allocator glibc's mallinfo2 does not
// see; absent (null) in a normal build.
extern "C" size_t __sanitizer_get_current_allocated_bytes() __attribute__((weak));

int64_t AllocatedBytes() {
  if (__sanitizer_get_current_allocated_bytes != nullptr)
    return static_cast<int64_t>(__sanitizer_get_current_allocated_bytes());
  const struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd);
}

// Memory measured by the allocator, not by the log's own accounting: a log at its max_bytes
// holds about that much (plus a per-event index entry and at most a few chunks), for large
// and for small decisions (where decoded protobuf objects cost about 10x their encoded size).
TEST(DecisionLogStore, HeldMemoryIsBoundedByMaxBytesMeasuredByTheAllocator) {
  struct Shape {
    int candidates, dim, arms;
    int64_t max_bytes;
  };
  for (const Shape shape : {Shape{50, 20, 0, int64_t{4} << 20}, Shape{0, 0, 2, int64_t{1} << 20}}) {
    SCOPED_TRACE(shape.candidates);
    std::vector<Vector> candidates(shape.candidates, Vector::Constant(shape.dim, 0.25));
    std::vector<std::string> arms;
    for (int a = 0; a < shape.arms; ++a) arms.push_back(absl::StrCat("arm-", a));
    const std::vector<double> probabilities = {0.9, 0.1};
    const int64_t before = AllocatedBytes();
    {
      DecisionLog log(Config(100'000'000, shape.max_bytes));
      for (uint64_t seq = 1; seq <= 200'000; ++seq) {
        const std::string id = absl::StrCat("00000000000000ab-", absl::Hex(seq));
        DecisionLog::Context c;
        c.event_seq = seq;
        c.event_id = id;
        c.decided_at_ms = 1'700'000'000'000 + static_cast<int64_t>(seq);
        c.candidates = candidates;
        c.num_candidates = shape.candidates;
        c.candidate_dim = shape.dim;
        c.arm_ids = arms;
        c.num_actions = shape.candidates + shape.arms;
        c.propensity = 0.9;
        if (shape.arms > 0) c.probabilities = probabilities;
        c.policy = shape.arms > 0 ? "epsilon_greedy" : "linucb";
        log.Append(c, 0);
        log.SetOutcome(seq, v1::OUTCOME_REWARDED, 0.5, 7);
        // Enough rounds for several turnovers of the whole log.
        if (seq >= 20'000 && log.appended_bytes() > 4 * shape.max_bytes) break;
      }
      const int64_t held = AllocatedBytes() - before;
      const int64_t index = log.events() * static_cast<int64_t>(sizeof(DecisionLog::Entry));
      EXPECT_LE(log.bytes(), shape.max_bytes);
      // Fields 1-14 of each decision (at most bytes()), the index (deque blocks add ~1/8), at
      // most three partly used or spare chunks.
      EXPECT_LE(held, log.bytes() + index * 9 / 8 +
                          3 * static_cast<int64_t>(DecisionLog::kMaxChunkBytes) + (64 << 10))
          << "events " << log.events() << ", bytes " << log.bytes();
      EXPECT_GT(held, log.bytes() / 2);  // the measure sees the log at all
    }
  }
}

// A snapshot's payload with the log appended as held parses as the snapshot decoded the usual
// way; a snapshot stored the previous way (one whole message) restores the same log.
TEST(DecisionLogStore, SnapshotPayloadParsesAsTheDecodedSnapshotAndOldPayloadsLoad) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("c",
                                        "policy { glm_epsilon_greedy { dimension: 3 link: "
                                        "GAUSSIAN epsilon: 0.3 } } seed: 11 decision_log "
                                        "{ enabled: true max_events: 40 }"),
                                 &out)
                  .ok());
  for (int i = 0; i < 100; ++i) {
    v1::SelectRequest sel;
    sel.set_instance("c");
    for (int c = 0; c < 3; ++c) {
      auto* v = sel.add_candidates();
      for (int k = 0; k < 3; ++k) v->add_values(0.5 * std::sin(0.3 * i + c + 0.1 * k));
    }
    v1::Decision d;
    const absl::Status selected = svc.Select(sel, &d);
    ASSERT_TRUE(selected.ok()) << selected;
    clock.Advance(3);
    if (i % 3 == 0) {
      v1::UpdateRequest up;
      up.set_instance("c");
      up.set_event_id(d.event_id());
      up.set_reward(-0.5 * i);
      v1::UpdateResponse r;
      ASSERT_TRUE(svc.Update(up, &r).ok());
    }
  }
  auto inst = svc.registry().Get("c");
  ASSERT_TRUE(inst.ok());
  const v1::InstanceSnapshot decoded = (*inst)->Snapshot();
  ASSERT_EQ(decoded.decision_log_size(), 40);
  const Instance::StorableSnapshot image = (*inst)->SnapshotForStorage();
  ASSERT_NE(image.log, nullptr);
  EXPECT_EQ(image.state.decision_log_size(), 0);
  auto parsed = SnapshotStore::Decode(SnapshotStore::Encode(image.state, image.encoded()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(MessageDifferencer::Equals(*parsed, decoded));
  // The previous writer's payload: the whole message, serialized by protobuf.
  auto old = SnapshotStore::Decode(SnapshotStore::Encode(decoded));
  ASSERT_TRUE(old.ok());
  auto restored = Instance::FromSnapshot(*old, &clock, InstanceLimits{});
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(MessageDifferencer::Equals((*restored)->Snapshot(), decoded));
  const Instance::StorableSnapshot again = (*restored)->SnapshotForStorage();
  EXPECT_EQ(SnapshotStore::Encode(again.state, again.encoded()),
            SnapshotStore::Encode(image.state, image.encoded()));
}

}  // namespace
}  // namespace bandit::server
