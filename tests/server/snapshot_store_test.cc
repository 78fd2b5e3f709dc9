// SnapshotStore on the fault-injection file system: the file format round-trips and refuses
// damage precisely, a write is atomic across a crash, and LoadAll sorts good from bad.
#include "server/storage/snapshot_store.h"

#include <gtest/gtest.h>

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
