// SnapshotStore on the fault-injection file system: the file format round-trips and refuses
// damage precisely, a write is atomic across a crash, and LoadAll sorts good from bad.
#include "server/storage/snapshot_store.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "tests/server/fault_injection_fs.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

bandit::v1::InstanceSnapshot Snap(const std::string& name, int64_t rounds) {
  bandit::v1::InstanceSnapshot s;
  s.set_format_version(1);
  s.set_name(name);
  s.set_uid(42);
  s.mutable_stats()->set_rounds(rounds);
  s.set_last_journal_seq(7);
  return s;
}

TEST(SnapshotStore, EncodeDecodeRoundTripsAndRefusesDamage) {
  const auto snap = Snap("a", 3);
  const std::string bytes = SnapshotStore::Encode(snap);
  auto back = SnapshotStore::Decode(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), snap.SerializeAsString());

  EXPECT_EQ(SnapshotStore::Decode("BSN").status().code(), absl::StatusCode::kInvalidArgument);
  std::string flipped = bytes;
  flipped.back() ^= 0x01;
  EXPECT_NE(SnapshotStore::Decode(flipped).status().message().find("checksum"),
            absl::string_view::npos);
  std::string future = bytes;
  future[4] = 9;  // format version
  EXPECT_NE(SnapshotStore::Decode(future).status().message().find("format 9"),
            absl::string_view::npos);
}

// Pending decisions encoded one at a time (EncodedFields, in chunks, a record larger than a
// chunk included), then other encoded fields: Write's file is Encode's bytes, and both decode
// to the message holding every record in order, as if they had been its own fields.
TEST(SnapshotStore, EncodedFieldsStreamIntoTheSameBytesAsTheWholeMessage) {
  bandit::v1::InstanceSnapshot whole = Snap("big", 5);
  // A policy state larger than the stream's buffer (serialized through it in pieces).
  whole.mutable_policy()->add_tensors()->mutable_data()->Resize(70'000, 0.25);
  EncodedFields pending;
  for (int i = 0; i < 400; ++i) {
    bandit::v1::PendingDecisionRecord r;
    r.set_event_id(absl::StrCat("e", i));
    r.set_arm(i % 7);
    // Mostly small records; every 100th is larger than a chunk (its own chunk).
    const int n = i % 100 == 99 ? static_cast<int>(EncodedFields::kChunkBytes / 8) + 3 : 500;
    for (int j = 0; j < n; ++j) r.add_features(i + j * 1e-3);
    pending.Add(bandit::v1::InstanceSnapshot::kPendingFieldNumber, r);
    *whole.add_pending() = r;
  }
  EncodedFields tail;  // stands for the decision log's encoded entries
  bandit::v1::LoggedDecision d;
  d.set_event_seq(77);
  tail.Add(bandit::v1::InstanceSnapshot::kDecisionLogFieldNumber, d);
  *whole.add_decision_log() = d;
  pending.Then(&tail);

  bandit::v1::InstanceSnapshot fields = Snap("big", 5);
  *fields.mutable_policy() = whole.policy();
  EXPECT_EQ(pending.size(), pending.own_size() + tail.size());
  const std::string encoded = SnapshotStore::Encode(fields, &pending);
  auto back = SnapshotStore::Decode(encoded);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), whole.SerializeAsString());

  FaultInjectionFs fs;
  SnapshotStore store(&fs, "/s");
  ASSERT_TRUE(store.Init().ok());
  ASSERT_TRUE(store.Write(fields, &pending).ok());
  ASSERT_NE(fs.Data("/s/big.snap"), nullptr);
  EXPECT_TRUE(*fs.Data("/s/big.snap") == encoded);
  int loaded = 0;
  ASSERT_TRUE(store
                  .LoadEach(
                      [&](bandit::v1::InstanceSnapshot&& snap) {
                        ++loaded;
                        EXPECT_EQ(snap.SerializeAsString(), whole.SerializeAsString());
                      },
                      [](const std::string& instance, const std::string& why) {
                        ADD_FAILURE() << instance << ": " << why;
                      })
                  .ok());
  EXPECT_EQ(loaded, 1);
}

TEST(SnapshotStore, WriteIsAtomicAcrossACrash) {
  FaultInjectionFs fs;
  SnapshotStore store(&fs, "/s");
  ASSERT_TRUE(store.Init().ok());
  ASSERT_TRUE(fs.SyncDir("/").ok());
  ASSERT_TRUE(store.Write(Snap("a", 1)).ok());
  ASSERT_TRUE(store.Write(Snap("a", 2)).ok());
  fs.Crash();
  auto loaded = store.LoadAll();
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->snapshots.size(), 1u);
  EXPECT_EQ(loaded->snapshots[0].stats().rounds(), 2);  // the newest complete write
  EXPECT_TRUE(loaded->invalid.empty());
}

TEST(SnapshotStore, LoadAllSeparatesGoodFromDamagedAndMisnamed) {
  FaultInjectionFs fs;
  SnapshotStore store(&fs, "/s");
  ASSERT_TRUE(store.Init().ok());
  ASSERT_TRUE(store.Write(Snap("good", 1)).ok());
  ASSERT_TRUE(store.Write(Snap("bad", 1)).ok());
  fs.Data("/s/bad.snap")->back() ^= 0x40;
  // A file whose content names another instance.
  ASSERT_TRUE(
      WriteFileAtomically(&fs, "/s", "alias.snap", SnapshotStore::Encode(Snap("good", 9))).ok());
  // Leftovers of an interrupted write are not snapshots.
  auto tmp = fs.NewWritableFile("/s/good.snap.tmp");
  ASSERT_TRUE(tmp.ok());
  auto loaded = store.LoadAll();
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->snapshots.size(), 1u);
  EXPECT_EQ(loaded->snapshots[0].name(), "good");
  ASSERT_EQ(loaded->invalid.size(), 2u);
  std::map<std::string, std::string> invalid(loaded->invalid.begin(), loaded->invalid.end());
  EXPECT_NE(invalid["bad"].find("checksum"), std::string::npos);
  EXPECT_NE(invalid["alias"].find("names instance 'good'"), std::string::npos);

  ASSERT_TRUE(store.Remove("good").ok());
  loaded = store.LoadAll();
  ASSERT_TRUE(loaded.ok());
  EXPECT_TRUE(loaded->snapshots.empty());
}

}  // namespace
}  // namespace bandit::server
