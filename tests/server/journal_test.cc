// Journal on the fault-injection file system: what it promises per mode, how it reads back
// torn and damaged segments, compaction, and its failed state.
#include "server/storage/journal.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "tests/server/fault_injection_fs.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

namespace v1 = bandit::v1;

v1::JournalRecord Record(const std::string& instance) {
  v1::JournalRecord r;
  r.set_instance(instance);
  r.set_uid(1);
  r.set_reset(true);
  return r;
}

struct Read {
  std::vector<uint64_t> seqs;
  std::vector<std::pair<std::string, std::string>> corrupt;
  Journal::ReadResult result;
};

Read ReadBack(FaultInjectionFs* fs, const std::string& dir) {
  Read out;
  auto r = Journal::ReadAll(
      fs, dir, [&](const v1::JournalRecord& rec) { out.seqs.push_back(rec.seq()); },
      [&](const std::string& instance, const std::string& why) {
        out.corrupt.emplace_back(instance, why);
      });
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) out.result = *r;
  return out;
}

std::string OnlySegment(FaultInjectionFs& fs) {
  std::string path;
  for (const auto& p : fs.Paths())
    if (absl::StrContains(p, "/j/journal-")) path = p;
  return path;
}

TEST(Journal, AlwaysAcknowledgesOnlyWhatSurvivesAPowerCut) {
  FaultInjectionFs fs;
  ASSERT_TRUE(fs.CreateDirs("/j").ok());
  ASSERT_TRUE(fs.SyncDir("/").ok());
  {
    auto j = Journal::Open(&fs, "/j", Durability::kAlways, 1);
    ASSERT_TRUE(j.ok()) << j.status();
    for (int i = 0; i < 5; ++i) {
      auto rec = Record("a");
      auto seq = (*j)->Append(&rec);
      ASSERT_TRUE(seq.ok());
      EXPECT_EQ(*seq, static_cast<uint64_t>(i + 1));
      EXPECT_EQ(rec.seq(), *seq);
      ASSERT_TRUE((*j)->WaitDurable(*seq).ok());
    }
    fs.Crash();  // before the journal is closed: only what was fsynced remains
  }
  const Read read = ReadBack(&fs, "/j");
  EXPECT_EQ(read.seqs, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(read.result.next_seq, 6u);
  EXPECT_TRUE(read.corrupt.empty());
}

TEST(Journal, WhenDurableAnswersEveryWaiterInOrderOfTheirRecords) {
  FaultInjectionFs fs;
  auto j = Journal::Open(&fs, "/j", Durability::kAlways, 10);
  ASSERT_TRUE(j.ok());
  std::vector<absl::Notification> done(20);
  std::vector<absl::Status> status(20);
  for (int i = 0; i < 20; ++i) {
    auto rec = Record("a");
    auto seq = (*j)->Append(&rec);
    ASSERT_TRUE(seq.ok());
    (*j)->WhenDurable(*seq, [&, i](absl::Status s) {
      status[i] = s;
      done[i].Notify();
    });
  }
  for (int i = 0; i < 20; ++i) {
    done[i].WaitForNotification();
    EXPECT_TRUE(status[i].ok()) << status[i];
  }
}

TEST(Journal, TornTailOfTheNewestSegmentIsCutAndReadingContinuesAfterIt) {
  FaultInjectionFs fs;
  {
    auto j = Journal::Open(&fs, "/j", Durability::kNone, 1);
    ASSERT_TRUE(j.ok());
    for (int i = 0; i < 3; ++i) {
      auto rec = Record("a");
      ASSERT_TRUE((*j)->Append(&rec).ok());
    }
    ASSERT_TRUE((*j)->Flush().ok());
  }
  const std::string path = OnlySegment(fs);
  ASSERT_FALSE(path.empty());
  const size_t full = fs.Data(path)->size();
  fs.Data(path)->resize(full - 3);  // the last frame lost its final bytes
  Read read = ReadBack(&fs, "/j");
  EXPECT_EQ(read.seqs, (std::vector<uint64_t>{1, 2}));
  EXPECT_GT(read.result.truncated_bytes, 0);
  EXPECT_TRUE(read.corrupt.empty());
  // The cut is made on disk: a journal opened after recovery appends after record 2.
  {
    auto j = Journal::Open(&fs, "/j", Durability::kNone, read.result.next_seq);
    ASSERT_TRUE(j.ok());
    auto rec = Record("b");
    ASSERT_TRUE((*j)->Append(&rec).ok());
    ASSERT_TRUE((*j)->Flush().ok());
  }
  read = ReadBack(&fs, "/j");
  EXPECT_EQ(read.seqs, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(read.result.truncated_bytes, 0);
}

TEST(Journal, DamagedPayloadIsBlamedOnItsInstanceAndSkipped) {
  FaultInjectionFs fs;
  {
    auto j = Journal::Open(&fs, "/j", Durability::kNone, 1);
    ASSERT_TRUE(j.ok());
    for (const char* name : {"a", "victim", "b"}) {
      auto rec = Record(name);
      ASSERT_TRUE((*j)->Append(&rec).ok());
    }
    ASSERT_TRUE((*j)->Flush().ok());
  }
  const std::string path = OnlySegment(fs);
  const std::string frame_a = Journal::EncodeFrame([] {
    auto r = Record("a");
    r.set_seq(1);
    return r;
  }());
  std::string* data = fs.Data(path);
  ASSERT_EQ(data->substr(0, frame_a.size()), frame_a);
  // The last byte of the victim's payload (its frame follows a's).
  const std::string frame_v = Journal::EncodeFrame([] {
    auto r = Record("victim");
    r.set_seq(2);
    return r;
  }());
  (*data)[frame_a.size() + frame_v.size() - 1] ^= 0x01;
  const Read read = ReadBack(&fs, "/j");
  EXPECT_EQ(read.seqs, (std::vector<uint64_t>{1, 3}));
  ASSERT_EQ(read.corrupt.size(), 1u);
  EXPECT_EQ(read.corrupt[0].first, "victim");
}

TEST(Journal, DamagedHeaderInAnOlderSegmentCannotBeAttributed) {
  FaultInjectionFs fs;
  {
    auto j = Journal::Open(&fs, "/j", Durability::kNone, 1);
    ASSERT_TRUE(j.ok());
    auto rec = Record("a");
    ASSERT_TRUE((*j)->Append(&rec).ok());
    ASSERT_TRUE((*j)->Rotate().ok());
    rec = Record("b");
    ASSERT_TRUE((*j)->Append(&rec).ok());
    ASSERT_TRUE((*j)->Flush().ok());
  }
  std::string* first = fs.Data("/j/" + [&] {
    std::string n;
    for (const auto& p : fs.Paths())
      if (absl::StrContains(p, "/j/journal-") && n.empty()) n = p.substr(3);
    return n;
  }());
  ASSERT_NE(first, nullptr);
  (*first)[1] ^= 0x10;  // the length field of the first frame's header
  const Read read = ReadBack(&fs, "/j");
  EXPECT_EQ(read.seqs, (std::vector<uint64_t>{2}));
  ASSERT_EQ(read.corrupt.size(), 1u);
  EXPECT_EQ(read.corrupt[0].first, "");
  EXPECT_NE(read.corrupt[0].second.find("header checksum"), std::string::npos);
}

TEST(Journal, DropSegmentsBeforeKeepsEverySegmentWithALaterRecord) {
  FaultInjectionFs fs;
  auto j = Journal::Open(&fs, "/j", Durability::kNone, 1);
  ASSERT_TRUE(j.ok());
  std::vector<uint64_t> boundaries;
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i < 2; ++i) {
      auto rec = Record("a");
      ASSERT_TRUE((*j)->Append(&rec).ok());
    }
    auto b = (*j)->Rotate();
    ASSERT_TRUE(b.ok());
    boundaries.push_back(*b);
  }
  EXPECT_EQ(boundaries, (std::vector<uint64_t>{3, 5, 7}));
  ASSERT_TRUE((*j)->DropSegmentsBefore(4).ok());  // records 1-2 go; 3 is below, 4 is not
  ASSERT_TRUE((*j)->Flush().ok());
  Read read = ReadBack(&fs, "/j");
  EXPECT_EQ(read.seqs, (std::vector<uint64_t>{3, 4, 5, 6}));
  ASSERT_TRUE((*j)->DropSegmentsBefore(5).ok());  // every record of 3-4 is below 5
  read = ReadBack(&fs, "/j");
  EXPECT_EQ(read.seqs, (std::vector<uint64_t>{5, 6}));
}

TEST(Journal, AFailedSyncIsNeverRetriedSilently) {
  FaultInjectionFs fs;
  int errors = 0;
  JournalObserver observer;
  observer.on_error = [&](const absl::Status&) { ++errors; };
  auto j = Journal::Open(&fs, "/j", Durability::kAlways, 1, observer);
  ASSERT_TRUE(j.ok());
  fs.FailSyncs(true);
  auto rec = Record("a");
  auto seq = (*j)->Append(&rec);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ((*j)->WaitDurable(*seq).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*j)->health().code(), absl::StatusCode::kUnavailable);
  fs.FailSyncs(false);
  rec = Record("a");
  EXPECT_EQ((*j)->Append(&rec).status().code(), absl::StatusCode::kUnavailable);
  absl::Notification answered;
  (*j)->WhenDurable(*seq, [&](absl::Status s) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    answered.Notify();
  });
  answered.WaitForNotification();
  EXPECT_EQ(errors, 1);
}

TEST(Journal, ParsesDurabilityNames) {
  for (Durability d : {Durability::kAlways, Durability::kEverySec, Durability::kNone}) {
    auto parsed = ParseDurability(DurabilityName(d));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_EQ(ParseDurability("sometimes").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bandit::server
