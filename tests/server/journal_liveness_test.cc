// Every call waiting for durability is answered by whoever makes its record durable (writer
// pass, rotation) or fails the journal. The interleavings are forced, not hoped for: the fake
// disk holds the writer in its fsync, a waiter callback keeps it parked between passes, and the
// test drives the rotation step right after its flush.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "server/storage/journal.h"
#include "tests/server/fault_injection_fs.h"

namespace bandit::server {

class JournalTestPeer {
 public:
  static absl::StatusOr<uint64_t> RotateFlushed(Journal& j) { return j.RotateFlushed(); }
};

namespace BANDIT_UNITY_ID {

// What a waiter was told, if anything yet.
struct Answer {
  std::mutex mu;
  std::optional<absl::Status> status;
  std::function<void(absl::Status)> Callback() {
    return [this](absl::Status s) {
      std::lock_guard<std::mutex> lock(mu);
      status = std::move(s);
    };
  }
  std::optional<absl::Status> Get() {
    std::lock_guard<std::mutex> lock(mu);
    return status;
  }
};

bandit::v1::JournalRecord Record(const std::string& instance) {
  bandit::v1::JournalRecord rec;
  rec.set_instance(instance);
  rec.set_uid(7);
  return rec;
}

// Holds the journal's writer thread between two passes: record `first` is appended, the writer
// is held in its fsync until a waiter for it is registered, then that waiter (running on the
// writer thread, journal lock released) keeps the writer there until Unpark(). Meanwhile
// nothing but the test touches the buffer.
class ParkedWriter {
 public:
  ParkedWriter(FaultInjectionFs* fs, Journal* journal) {
    fs->HoldNextSync();
    auto rec = Record("first");
    auto seq = journal->Append(&rec);
    EXPECT_TRUE(seq.ok()) << seq.status();
    fs->AwaitSyncHeld();  // the writer took record 1 and is inside its fsync
    journal->WhenDurable(*seq, [this](absl::Status s) {
      first_status_ = s;
      parked_.Notify();
      unpark_.WaitForNotification();
    });
    fs->ReleaseSync();
    parked_.WaitForNotification();  // record 1 durable, writer parked before its next pass
  }
  ~ParkedWriter() { Unpark(); }
  void Unpark() {
    if (!unpark_.HasBeenNotified()) unpark_.Notify();
  }
  const absl::Status& first_status() const { return first_status_; }

 private:
  absl::Status first_status_;
  absl::Notification parked_, unpark_;
};

// The reported hang: a record appended (and its waiter registered) after the rotation's flush
// returned is written and fsynced by the rotation itself; its waiter must be answered then, not
// whenever the next write happens to wake the writer.
TEST(JournalLiveness, RotationThatWritesAWaitingRecordAnswersItsWaiter) {
  FaultInjectionFs fs;
  auto journal = Journal::Open(&fs, "/data/journal", Durability::kAlways, 1);
  ASSERT_TRUE(journal.ok()) << journal.status();
  Journal& j = **journal;
  ParkedWriter writer(&fs, &j);
  EXPECT_TRUE(writer.first_status().ok());

  ASSERT_TRUE(j.Flush().ok());  // the rotation's flush: record 1 is already synced
  auto rec = Record("late");
  auto seq = j.Append(&rec);
  ASSERT_TRUE(seq.ok());
  ASSERT_EQ(*seq, 2u);
  Answer late;
  j.WhenDurable(*seq, late.Callback());
  ASSERT_FALSE(late.Get().has_value()) << "record 2 is only buffered yet";

  auto boundary = JournalTestPeer::RotateFlushed(j);
  ASSERT_TRUE(boundary.ok()) << boundary.status();
  EXPECT_EQ(*boundary, 3u);
  // The rotation made record 2 durable (the writer is still parked and never saw it) ...
  const std::string* old_segment = fs.Data("/data/journal/journal-00000000000000000001.log");
  ASSERT_NE(old_segment, nullptr);
  auto first = Record("first");
  first.set_seq(1);
  EXPECT_EQ(*old_segment, Journal::EncodeFrame(first) + Journal::EncodeFrame(rec));
  EXPECT_EQ(fs.Data("/data/journal/journal-00000000000000000003.log")->size(), 0u);
  // ... so its waiter has its answer by the time the rotation returns.
  auto answer = late.Get();
  ASSERT_TRUE(answer.has_value()) << "waiter of a record the rotation made durable never answered";
  EXPECT_TRUE(answer->ok()) << *answer;
}

// The same interleaving when the rotation's fsync fails: the journal is failed, and the waiter
// learns it (UNAVAILABLE) instead of waiting for a writer pass that will never come.
TEST(JournalLiveness, RotationThatFailsAnswersWaitersUnavailable) {
  FaultInjectionFs fs;
  auto journal = Journal::Open(&fs, "/data/journal", Durability::kAlways, 1);
  ASSERT_TRUE(journal.ok()) << journal.status();
  Journal& j = **journal;
  ParkedWriter writer(&fs, &j);

  auto rec = Record("late");
  ASSERT_TRUE(j.Append(&rec).ok());
  Answer late;
  j.WhenDurable(rec.seq(), late.Callback());
  fs.FailSyncs(true);
  auto boundary = JournalTestPeer::RotateFlushed(j);
  EXPECT_EQ(boundary.status().code(), absl::StatusCode::kUnavailable) << boundary.status();

  auto answer = late.Get();
  ASSERT_TRUE(answer.has_value()) << "waiter of a failed journal never answered";
  EXPECT_EQ(answer->code(), absl::StatusCode::kUnavailable) << *answer;
  EXPECT_EQ(j.health().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace bandit::server
