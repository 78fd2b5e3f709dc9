// The update journal: every state change is appended (with a sequence number and checksums)
// before it is acknowledged. A writer thread batches appends (group commit): in `always` mode a
// caller is acknowledged once the fsync covering its record has finished; `everysec` fsyncs once a
// second (a timer of the injected Clock); `none` leaves flushing to the OS. Segments (journal-<first seq>.log) are rotated at
// snapshot rounds and deleted once every instance's snapshot covers them.
//
// Frame: u32 payload_len | u16 name_len | name | u32 crc(header bytes) | u32 crc(payload) | payload
// The instance name sits in its own checksummed header so a damaged payload can be blamed on
// exactly one instance.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bandit/v1/storage.pb.h"
#include "server/env/clock.h"
#include "server/env/file_system.h"
#include "server/storage/durability.h"

namespace bandit::server {

struct JournalObserver {
  std::function<void(double seconds)> on_fsync;
  std::function<void(const absl::Status&)> on_error;
};

// The journal's buffer of encoded frames: bytes appended without being zero-filled first
// (std::string's resize writes zeros that an 8 KB frame then overwrites at once; C++20 has no
// resize_and_overwrite).
class FrameBuffer {
 public:
  // Room for `n` more bytes at the end (their contents undefined until written); the pointer is
  // valid until the next Extend.
  char* Extend(size_t n);
  const char* data() const { return data_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  void clear() { size_ = 0; }
  void swap(FrameBuffer& other) noexcept;
  absl::string_view view() const { return absl::string_view(data_.get(), size_); }

 private:
  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

class Journal {
 public:
  static absl::StatusOr<std::unique_ptr<Journal>> Open(FileSystem* fs, const std::string& dir,
                                                       Durability mode, uint64_t next_seq,
                                                       JournalObserver observer = {},
                                                       const Clock* clock = SystemClock::Get());
  ~Journal();

  // Assigns the next sequence number to `rec`, encodes and buffers it. UNAVAILABLE once the
  // journal has failed. Callers append under the lock of the instance they change, so journal
  // order equals the order changes were applied.
  absl::StatusOr<uint64_t> Append(bandit::v1::JournalRecord* rec);
  // Appends `recs` with consecutive sequence numbers under one lock (Storage::AppendAll); all
  // or none. Returns the last sequence number (0 when `recs` is empty).
  absl::StatusOr<uint64_t> AppendAll(absl::Span<bandit::v1::JournalRecord* const> recs);
  // Calls done(status) when record `seq` is as durable as the mode promises (immediately for
  // everysec/none), on the thread that made it durable (the writer, a rotation) or inline.
  // Status is UNAVAILABLE if storage failed or the journal closed first. Never dropped.
  void WhenDurable(uint64_t seq, std::function<void(absl::Status)> done);
  absl::Status WaitDurable(uint64_t seq);
  // Flushes and fsyncs everything appended so far (shutdown, snapshots), whatever the mode.
  absl::Status Flush();
  // Starts a new segment; returns the first sequence number it will hold.
  absl::StatusOr<uint64_t> Rotate();
  // Deletes segments whose records all have seq < `seq`.
  absl::Status DropSegmentsBefore(uint64_t seq);
  absl::Status health() const;
  Durability mode() const { return mode_; }

  // Reads every segment in order. `apply` gets each intact record. A torn tail of the last
  // segment is truncated away; a record whose payload checksum fails is reported through
  // `corrupt(instance, seq_hint, message)` and skipped; a damaged header in the middle stops
  // reading and reports corrupt("", ...) (instance unknown). Returns the next sequence number.
  struct ReadResult {
    uint64_t next_seq = 1;
    int64_t records = 0;
    int64_t truncated_bytes = 0;
  };
  static absl::StatusOr<ReadResult> ReadAll(
      FileSystem* fs, const std::string& dir,
      const std::function<void(const bandit::v1::JournalRecord&)>& apply,
      const std::function<void(const std::string& instance, const std::string& message)>& corrupt);

  static std::string EncodeFrame(const bandit::v1::JournalRecord& rec);
  // The same frame, encoded at the end of `out`.
  static void AppendFrame(const bandit::v1::JournalRecord& rec, std::string* out);
  static void AppendFrame(const bandit::v1::JournalRecord& rec, FrameBuffer* out);

  // everysec/none: the writer hands the buffer to write(2) at least this often (a process
  // crash loses at most this much of acknowledged work; `always` is unaffected). A batching
  // delay of the writer thread, not a timer: it does not go through the Clock ...
  static constexpr std::chrono::milliseconds kWriteLinger{2};
  // ... or as soon as this many bytes are buffered.
  static constexpr size_t kEagerWriteBytes = 1 << 20;
  // A segment's file reserves its blocks this far ahead of what was written (fallocate, the
  // file's size unchanged): ext4 then allocates once per step instead of per appended page
  // (measured when this was added). Given back when the segment is closed.
  static constexpr uint64_t kPreallocateBytes = uint64_t{8} << 20;

 private:
  Journal(FileSystem* fs, std::string dir, Durability mode, uint64_t next_seq,
          JournalObserver observer);
  friend class JournalTestPeer;  // drives the rotation step after its flush (tests/server)

  absl::Status OpenSegment(uint64_t first_seq);
  // Rotate() after its Flush(): writes what is still buffered into the old segment, fsyncs it,
  // opens the next one.
  absl::StatusOr<uint64_t> RotateFlushed();
  absl::StatusOr<uint64_t> SwitchSegmentLocked();  // requires mu_, writer not in I/O
  void WriterLoop();
  void Fail(const absl::Status& s);  // requires mu_

  using DurableCallback = std::function<void(absl::Status)>;
  // Waiters taken under mu_, answered after it is released (a callback finishes an RPC and may
  // call back into the journal).
  struct Answers {
    absl::Status status;
    std::vector<DurableCallback> callbacks;
    void Send();
  };
  // The one place waiters are answered (group commit as in LevelDB: whoever makes records
  // durable answers their waiters in that same step). Requires mu_; called after every change
  // of durable_seq_ or health_ (writer pass, rotation, close). Takes every waiter whose record
  // is now durable, or all of them once the journal has failed, and wakes Flush/WaitDurable.
  Answers TakeAnswersLocked();

  FileSystem* const fs_;
  const std::string dir_;
  const Durability mode_;
  const JournalObserver observer_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, durable_cv_;
  FrameBuffer buffer_;          // encoded, not yet written
  FrameBuffer spare_;           // the writer's: the last written batch's storage, reused as buffer_
  uint64_t next_seq_;           // next to assign
  uint64_t buffered_last_ = 0;  // last seq in buffer_
  uint64_t written_seq_ = 0;    // last seq handed to write()
  uint64_t durable_seq_ = 0;    // last seq as durable as the mode promises
  uint64_t synced_seq_ = 0;     // last seq covered by an fsync
  std::multimap<uint64_t, DurableCallback> waiters_;  // by seq
  absl::Status health_;
  bool stop_ = false;
  bool flush_requested_ = false;
  std::unique_ptr<WritableFile> file_;
  // The current segment's bytes handed to file_ and the end of its reserved blocks; like file_,
  // touched by the writer during its I/O and otherwise under mu_.
  uint64_t segment_bytes_ = 0;
  uint64_t segment_reserved_ = 0;
  // Writes `data` to the current segment, reserving blocks ahead first.
  absl::Status AppendToSegment(absl::string_view data);
  std::map<uint64_t, std::string> segments_;  // first seq -> file name
  bool io_in_progress_ = false;  // the writer is writing/syncing a batch outside the lock
  std::thread writer_;
  // everysec: fsyncs what was written in the last second (Flush), once per second of the
  // Clock. Declared last: destroyed (and a running tick waited for) before the writer stops.
  std::unique_ptr<Timer> every_second_;
};

}  // namespace bandit::server
