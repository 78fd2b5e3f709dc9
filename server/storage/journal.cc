#include "server/storage/journal.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/storage/crc32.h"

namespace bandit::server {
namespace {

constexpr absl::string_view kSegmentPrefix = "journal-";
constexpr absl::string_view kSegmentSuffix = ".log";
constexpr uint32_t kMaxPayload = 256u << 20;

uint32_t Crc(absl::string_view data) { return Crc32(data); }

void PutU32(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void PutU16(char* out, uint16_t v) {
  out[0] = static_cast<char>(v & 0xff);
  out[1] = static_cast<char>(v >> 8);
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
uint16_t GetU16(const char* p) {
  return static_cast<uint16_t>(static_cast<unsigned char>(p[0]) |
                               (static_cast<unsigned char>(p[1]) << 8));
}

std::string SegmentName(uint64_t first_seq) {
  return absl::StrFormat("%s%020d%s", kSegmentPrefix, first_seq, kSegmentSuffix);
}

bool ParseSegmentName(const std::string& name, uint64_t* first_seq) {
  if (name.size() <= kSegmentPrefix.size() + kSegmentSuffix.size()) return false;
  if (!absl::StartsWith(name, kSegmentPrefix) || !absl::EndsWith(name, kSegmentSuffix))
    return false;
  return absl::SimpleAtoi(
      absl::string_view(name).substr(kSegmentPrefix.size(),
                                     name.size() - kSegmentPrefix.size() - kSegmentSuffix.size()),
      first_seq);
}

// A file read front to back through a window: Need(n) makes n bytes from the current offset
// available (fewer only at the end of the file), Skip moves past them. The window grows to the
// largest frame read (1 MiB at a time), and the bytes before the offset are dropped as it moves
// on.
class FileWindow {
 public:
  explicit FileWindow(ReadableFile* file) : file_(file) {}

  absl::StatusOr<size_t> Need(size_t n) {
    constexpr size_t kReadBytes = size_t{1} << 20;
    while (buffer_.size() - at_ < n && !eof_) {
      if (at_ > 0) {  // keep only what is ahead of the offset
        buffer_.erase(0, at_);
        at_ = 0;
      }
      // At most kReadBytes more per read: a frame header that claims more than the file holds
      // (a torn tail) costs what the file has, not what the header claims.
      const size_t held = buffer_.size();
      const size_t want = kReadBytes;
      buffer_.resize(held + want);
      auto got = file_->Read(buffer_.data() + held, want);
      if (!got.ok()) {
        buffer_.resize(held);
        return got.status();
      }
      buffer_.resize(held + *got);
      if (*got == 0) eof_ = true;
    }
    return std::min(n, buffer_.size() - at_);
  }
  const char* data() const { return buffer_.data() + at_; }
  void Skip(size_t n) {
    at_ += n;
    offset_ += n;
  }
  uint64_t offset() const { return offset_; }
  // The bytes from the offset to the end of the file (reads, and drops, the rest).
  absl::StatusOr<uint64_t> BytesToEnd() {
    uint64_t n = buffer_.size() - at_;
    std::string scratch(size_t{1} << 16, '\0');
    while (!eof_) {
      auto got = file_->Read(scratch.data(), scratch.size());
      if (!got.ok()) return got.status();
      if (*got == 0) eof_ = true;
      n += *got;
    }
    return n;
  }

 private:
  ReadableFile* const file_;
  std::string buffer_;
  size_t at_ = 0;
  uint64_t offset_ = 0;
  bool eof_ = false;
};

}  // namespace

std::string Journal::EncodeFrame(const bandit::v1::JournalRecord& rec) {
  std::string frame;
  AppendFrame(rec, &frame);
  return frame;
}

char* FrameBuffer::Extend(size_t n) {
  if (size_ + n > capacity_) {
    const size_t capacity = std::max({2 * capacity_, size_ + n, size_t{4096}});
    auto data = std::make_unique_for_overwrite<char[]>(capacity);
    if (size_ > 0) std::memcpy(data.get(), data_.get(), size_);
    data_ = std::move(data);
    capacity_ = capacity;
  }
  char* p = data_.get() + size_;
  size_ += n;
  return p;
}

void FrameBuffer::swap(FrameBuffer& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  std::swap(capacity_, other.capacity_);
}

namespace {

// The size of `rec`'s frame. Computes (and caches in the record) the sizes WriteFrame uses.
size_t FrameSize(const bandit::v1::JournalRecord& rec) {
  return 4 + 2 + std::min<size_t>(rec.instance().size(), 0xffff) + 8 + rec.ByteSizeLong();
}

// `rec`'s frame at `p` (FrameSize(rec) bytes, FrameSize called first).
void WriteFrame(const bandit::v1::JournalRecord& rec, char* p) {
  // Encoded in place: a Select record carrying a decision log context is ~8 KB, and
  // serializing it into a string of its own, then into the frame, then into the buffer cost
  // three copies and allocations per record (measured when this was added).
  const size_t payload_size = rec.GetCachedSize();
  const std::string& name = rec.instance();
  const size_t name_size = std::min<size_t>(name.size(), 0xffff);
  const size_t header_size = 4 + 2 + name_size;
  PutU32(p, static_cast<uint32_t>(payload_size));
  PutU16(p + 4, static_cast<uint16_t>(name_size));
  std::memcpy(p + 6, name.data(), name_size);
  char* payload = p + header_size + 8;
  rec.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(payload));
  PutU32(p + header_size, Crc(absl::string_view(p, header_size)));
  PutU32(p + header_size + 4, Crc(absl::string_view(payload, payload_size)));
}

}  // namespace

void Journal::AppendFrame(const bandit::v1::JournalRecord& rec, std::string* out) {
  const size_t size = FrameSize(rec);
  const size_t start = out->size();
  out->resize(start + size);
  WriteFrame(rec, out->data() + start);
}

void Journal::AppendFrame(const bandit::v1::JournalRecord& rec, FrameBuffer* out) {
  WriteFrame(rec, out->Extend(FrameSize(rec)));
}

Journal::Journal(FileSystem* fs, std::string dir, Durability mode, uint64_t next_seq,
                 JournalObserver observer)
    : fs_(fs),
      dir_(std::move(dir)),
      mode_(mode),
      observer_(std::move(observer)),
      next_seq_(next_seq) {
  written_seq_ = durable_seq_ = synced_seq_ = next_seq - 1;
}

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(FileSystem* fs, const std::string& dir,
                                                       Durability mode, uint64_t next_seq,
                                                       JournalObserver observer,
                                                       const Clock* clock) {
  if (auto s = fs->CreateDirs(dir); !s.ok()) return s;
  std::unique_ptr<Journal> j(new Journal(fs, dir, mode, next_seq, std::move(observer)));
  auto names = fs->ListDir(dir);
  if (!names.ok()) return names.status();
  for (const auto& n : *names) {
    uint64_t first;
    if (ParseSegmentName(n, &first)) j->segments_[first] = n;
  }
  // Always start a fresh segment: earlier segments stay read-only until compaction.
  if (auto s = j->OpenSegment(next_seq); !s.ok()) return s;
  j->writer_ = std::thread([jp = j.get()] { jp->WriterLoop(); });
  // everysec's promise (at most about a second of acknowledged work lost in a power cut): the
  // writer only write(2)s; this timer makes whatever was appended durable once a second. Flush
  // returns at once when nothing new was appended.
  if (mode == Durability::kEverySec)
    j->every_second_ = clock->Every(1000, [jp = j.get()] { (void)jp->Flush(); });
  return j;
}

Journal::~Journal() {
  every_second_.reset();  // no tick runs (or will run) from here on
  (void)Flush();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (file_) (void)file_->Close();
  // A record appended after the final flush is not durable and never will be: its waiter is
  // told so rather than left hanging.
  Answers answers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (health_.ok())
      health_ = absl::UnavailableError("the journal was closed (server shutting down)");
    answers = TakeAnswersLocked();
  }
  answers.Send();
}

absl::Status Journal::OpenSegment(uint64_t first_seq) {
  const std::string name = SegmentName(first_seq);
  auto f = fs_->NewAppendableFile(dir_ + "/" + name);
  if (!f.ok()) return f.status();
  if (auto s = fs_->SyncDir(dir_); !s.ok()) return s;
  file_ = *std::move(f);
  segment_bytes_ = segment_reserved_ = 0;
  segments_[first_seq] = name;
  return absl::OkStatus();
}

absl::Status Journal::AppendToSegment(absl::string_view data) {
  segment_bytes_ += data.size();
  if (segment_bytes_ > segment_reserved_) {
    segment_reserved_ = segment_bytes_ + kPreallocateBytes;
    file_->Preallocate(segment_reserved_);
  }
  return file_->Append(data);
}

absl::StatusOr<uint64_t> Journal::Append(bandit::v1::JournalRecord* rec) {
  return AppendAll(absl::MakeConstSpan(&rec, 1));
}

absl::StatusOr<uint64_t> Journal::AppendAll(absl::Span<bandit::v1::JournalRecord* const> recs) {
  if (recs.empty()) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (!health_.ok()) return health_;
  const size_t before = buffer_.size();
  for (bandit::v1::JournalRecord* rec : recs) {
    rec->set_seq(next_seq_++);
    AppendFrame(*rec, &buffer_);
  }
  buffered_last_ = recs.back()->seq();
  // Wake the writer only when it has new work it would otherwise not see: the writer takes the
  // whole buffer each pass and re-checks it before sleeping, so only the empty -> non-empty
  // edge needs a wake-up (and, in everysec/none, where the writer lingers, a buffer grown
  // large). A wake-up per record cost a context switch per RPC at 64 in flight (measured when
  // this was added).
  const bool wake = before == 0 || (mode_ != Durability::kAlways && before < kEagerWriteBytes &&
                                    buffer_.size() >= kEagerWriteBytes);
  if (wake) work_cv_.notify_one();
  return buffered_last_;
}

void Journal::WhenDurable(uint64_t seq, std::function<void(absl::Status)> done) {
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = health_;
    if (status.ok() && mode_ == Durability::kAlways && seq > durable_seq_) {
      waiters_.emplace(seq, std::move(done));
      return;
    }
  }
  done(status);
}

absl::Status Journal::WaitDurable(uint64_t seq) {
  std::unique_lock<std::mutex> lock(mu_);
  if (mode_ != Durability::kAlways) return health_;
  durable_cv_.wait(lock, [&] { return !health_.ok() || durable_seq_ >= seq; });
  return health_;
}

absl::Status Journal::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  if (writer_.get_id() == std::thread::id()) return health_;
  // Done once an fsync covers everything appended before this call. (Waiting for the request
  // flag to clear instead starved under steady appends: the writer cleared it only on finding
  // the buffer empty.) The flag is raised again on every wake-up, so a concurrent Flush whose
  // request the writer already consumed still gets its own fsync.
  const uint64_t target = next_seq_ - 1;
  while (health_.ok() && synced_seq_ < target) {
    flush_requested_ = true;
    work_cv_.notify_one();
    durable_cv_.wait(lock);
  }
  return health_;
}

void Journal::Fail(const absl::Status& s) {
  if (!health_.ok()) return;
  health_ = absl::UnavailableError(absl::StrCat(
      "storage failed, writes are refused until the server is restarted: ", s.message()));
}

void Journal::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || !buffer_.empty() || flush_requested_; });
    if (mode_ != Durability::kAlways) {
      // Linger: let records accumulate for one write(2), unless a flush, a stop or a large
      // buffer asks for it now.
      work_cv_.wait_for(lock, kWriteLinger, [&] {
        return stop_ || flush_requested_ || buffer_.empty() || buffer_.size() >= kEagerWriteBytes;
      });
    }
    if (buffer_.empty() && !flush_requested_) {
      if (stop_) break;
      continue;
    }
    // Double-buffered: appends continue into the spare's capacity while this batch is written
    // (a fresh string per batch grew by reallocation and faulted in new pages every pass).
    FrameBuffer data;
    data.swap(spare_);
    data.clear();
    data.swap(buffer_);
    const uint64_t last = data.empty() ? written_seq_ : buffered_last_;
    // everysec syncs when its timer asks (Flush), once a second.
    const bool sync = mode_ == Durability::kAlways || flush_requested_;
    const bool was_flush = flush_requested_;
    const bool healthy = health_.ok();
    io_in_progress_ = true;  // Rotate() waits for this before it touches file_
    lock.unlock();

    absl::Status s;
    if (healthy && !data.empty()) s = AppendToSegment(data.view());
    double fsync_seconds = -1;
    if (s.ok() && sync) {
      const auto t0 = std::chrono::steady_clock::now();
      s = file_->Sync();
      fsync_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (fsync_seconds >= 0 && observer_.on_fsync) observer_.on_fsync(fsync_seconds);
    if (!s.ok() && observer_.on_error) observer_.on_error(s);

    // Kept for the next pass unless one huge record (an imported instance) inflated it.
    if (data.capacity() <= 4 * kEagerWriteBytes) spare_.swap(data);

    lock.lock();
    io_in_progress_ = false;
    if (!s.ok()) Fail(s);
    written_seq_ = last;
    if (s.ok() && sync) synced_seq_ = std::max(synced_seq_, last);
    if (s.ok() && (sync || mode_ != Durability::kAlways))
      durable_seq_ = std::max(durable_seq_, last);
    if (was_flush) flush_requested_ = false;  // this sync covered what the request was for
    Answers answers = TakeAnswersLocked();
    lock.unlock();
    answers.Send();
    lock.lock();
  }
}

absl::StatusOr<uint64_t> Journal::Rotate() {
  if (auto s = Flush(); !s.ok()) return s;
  return RotateFlushed();
}

absl::StatusOr<uint64_t> Journal::RotateFlushed() {
  std::unique_lock<std::mutex> lock(mu_);
  // The writer may have taken a new batch after Flush() returned and be writing it to the
  // current file outside the lock: wait until it is done, then hold the lock (the writer cannot
  // start another batch) while the file is switched. Without this wait the old file could be
  // closed and destroyed under a running write.
  durable_cv_.wait(lock, [&] { return !io_in_progress_; });
  const absl::StatusOr<uint64_t> boundary = SwitchSegmentLocked();
  // Records appended after the flush were just written and fsynced here (or the journal failed):
  // their waiters are answered now. The writer would not: it finds an empty buffer and sleeps.
  Answers answers = TakeAnswersLocked();
  lock.unlock();
  answers.Send();
  return boundary;
}

absl::StatusOr<uint64_t> Journal::SwitchSegmentLocked() {
  if (!health_.ok()) return health_;
  // Everything appended before Rotate's Flush is in the old segment and fsynced; what was
  // appended since is still buffered and goes into the old segment now (the boundary below is
  // after it). Appends after this lock land in the new segment.
  if (!buffer_.empty()) {
    if (auto s = AppendToSegment(buffer_.view()); !s.ok()) {
      Fail(s);
      return health_;
    }
    buffer_.clear();
    written_seq_ = buffered_last_;
  }
  if (auto s = file_->Sync(); !s.ok()) {
    Fail(s);
    return health_;
  }
  durable_seq_ = std::max(durable_seq_, written_seq_);
  synced_seq_ = std::max(synced_seq_, written_seq_);
  (void)file_->Close();
  const uint64_t boundary = next_seq_;
  if (auto s = OpenSegment(boundary); !s.ok()) {
    Fail(s);
    return health_;
  }
  return boundary;
}

absl::Status Journal::DropSegmentsBefore(uint64_t seq) {
  std::vector<std::string> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Segment i holds seqs in [first_i, first_{i+1}); drop it when first_{i+1} <= seq.
    for (auto it = segments_.begin(); it != segments_.end();) {
      auto next = std::next(it);
      if (next == segments_.end() || next->first > seq) break;
      doomed.push_back(it->second);
      it = segments_.erase(it);
    }
  }
  for (const auto& name : doomed)
    if (auto s = fs_->Remove(dir_ + "/" + name); !s.ok()) return s;
  if (!doomed.empty()) return fs_->SyncDir(dir_);
  return absl::OkStatus();
}

Journal::Answers Journal::TakeAnswersLocked() {
  Answers answers;
  answers.status = health_;
  while (!waiters_.empty() && (!health_.ok() || waiters_.begin()->first <= durable_seq_)) {
    answers.callbacks.push_back(std::move(waiters_.begin()->second));
    waiters_.erase(waiters_.begin());
  }
  durable_cv_.notify_all();
  return answers;
}

void Journal::Answers::Send() {
  for (auto& done : callbacks) done(status);
  callbacks.clear();
}

absl::Status Journal::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return health_;
}

absl::StatusOr<Journal::ReadResult> Journal::ReadAll(
    FileSystem* fs, const std::string& dir,
    const std::function<void(const bandit::v1::JournalRecord&)>& apply,
    const std::function<void(const std::string&, const std::string&)>& corrupt) {
  ReadResult result;
  auto names = fs->ListDir(dir);
  if (!names.ok()) return names.status();
  std::map<uint64_t, std::string> segments;
  for (const auto& n : *names) {
    uint64_t first;
    if (ParseSegmentName(n, &first)) segments[first] = n;
  }
  uint64_t max_seq = 0;
  for (auto it = segments.begin(); it != segments.end(); ++it) {
    const bool last_segment = std::next(it) == segments.end();
    const std::string path = dir + "/" + it->second;
    // Read through a window as large as the largest frame, not whole: recovery holds one record
    // at a time beside the instances it rebuilds (a segment runs to the changes of a whole
    // snapshot interval).
    auto file = fs->NewReadableFile(path);
    if (!file.ok()) return file.status();
    FileWindow in(file->get());
    for (;;) {
      auto have = in.Need(1);
      if (!have.ok()) return have.status();
      if (*have == 0) break;
      const uint64_t pos = in.offset();
      auto torn_or_corrupt = [&](const std::string& why) -> absl::Status {
        // An incomplete or garbled frame at the very end of the newest segment is a write the
        // crash interrupted (never acknowledged in `always`): cut it off. Anywhere else it is
        // corruption we cannot attribute.
        if (last_segment) {
          auto remaining = in.BytesToEnd();
          if (!remaining.ok()) return remaining.status();
          result.truncated_bytes = static_cast<int64_t>(*remaining);
          return fs->Truncate(path, pos);
        }
        corrupt("", absl::StrCat(it->second, " at byte ", pos, ": ", why));
        return absl::OkStatus();
      };
      have = in.Need(6);
      if (!have.ok()) return have.status();
      if (*have < 6) {
        if (auto s = torn_or_corrupt("truncated frame header"); !s.ok()) return s;
        break;
      }
      const uint32_t len = GetU32(in.data());
      const uint16_t name_len = GetU16(in.data() + 4);
      const size_t header_len = 6 + name_len;
      have = in.Need(header_len + 8);
      if (!have.ok()) return have.status();
      if (*have < header_len + 8) {
        if (auto s = torn_or_corrupt("truncated frame header"); !s.ok()) return s;
        break;
      }
      if (Crc(absl::string_view(in.data(), header_len)) != GetU32(in.data() + header_len) ||
          len > kMaxPayload) {
        if (auto s = torn_or_corrupt("frame header checksum mismatch"); !s.ok()) return s;
        break;
      }
      const std::string instance(in.data() + 6, name_len);
      have = in.Need(header_len + 8 + len);
      if (!have.ok()) return have.status();
      if (*have < header_len + 8 + len) {
        if (auto s = torn_or_corrupt("truncated frame payload"); !s.ok()) return s;
        break;
      }
      const uint32_t payload_crc = GetU32(in.data() + header_len + 4);
      const absl::string_view payload(in.data() + header_len + 8, len);
      bandit::v1::JournalRecord rec;
      if (Crc(payload) != payload_crc ||
          !rec.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
        corrupt(instance,
                absl::StrCat(it->second, " at byte ", pos, ": record payload checksum mismatch"));
      } else {
        max_seq = std::max(max_seq, rec.seq());
        ++result.records;
        apply(rec);
      }
      in.Skip(header_len + 8 + len);
    }
  }
  result.next_seq = max_seq + 1;
  return result;
}

}  // namespace bandit::server
