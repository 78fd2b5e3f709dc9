// The real file system (not the fault-injection one): blocks reserved ahead of appends
// (fallocate with FALLOC_FL_KEEP_SIZE) never show as data, a reopened file keeps what it held,
// closing gives the reserve back, and a journal written through it with preallocated segments
// reads back every record and nothing after them. Checked against the kernel's own view
// (stat) and against frames encoded independently of the journal's buffer.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/env/file_system.h"
#include "server/storage/journal.h"
#include "tests/common/temp_dir.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

namespace v1 = bandit::v1;

using bandit::testing::TempDir;

struct FileStat {
  int64_t size = 0;
  int64_t allocated = 0;  // bytes of blocks the file holds
};

FileStat Stat(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return {static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_blocks) * 512};
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(PosixFile, ReservedBlocksNeverShowAsDataAndCloseGivesThemBack) {
  TempDir dir("posix_file_test");
  FileSystem* fs = PosixFileSystem();
  const std::string path = dir.path() + "/f";
  std::mt19937_64 rng(1);
  const std::string a = RandomBytes(rng, 10000), b = RandomBytes(rng, 20000),
                    c = RandomBytes(rng, 5000);
  constexpr int64_t kReserve = int64_t{8} << 20;
  {
    auto f = fs->NewAppendableFile(path);
    ASSERT_TRUE(f.ok()) << f.status();
    (*f)->Preallocate(kReserve);
    ASSERT_TRUE((*f)->Append(a).ok());
    ASSERT_TRUE((*f)->Append(b).ok());
    const FileStat open = Stat(path);
    EXPECT_EQ(open.size, 30000);  // the reserve is not part of the file
    auto read = fs->ReadFile(path);
    ASSERT_TRUE(read.ok());
    EXPECT_TRUE(*read == a + b);
    const bool reserved = open.allocated >= kReserve;  // false where fallocate is unsupported
    ASSERT_TRUE((*f)->Close().ok());
    if (reserved) {
      EXPECT_LT(Stat(path).allocated, 30000 + (int64_t{1} << 16));
    }
  }
  // Reopened for appending: continues after what the file holds; closing after a reserve must
  // not cut the file back to what this handle wrote.
  {
    auto f = fs->NewAppendableFile(path);
    ASSERT_TRUE(f.ok()) << f.status();
    (*f)->Preallocate(40000 + kReserve);
    ASSERT_TRUE((*f)->Append(c).ok());
    ASSERT_TRUE((*f)->Close().ok());
  }
  auto read = fs->ReadFile(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->size(), 35000u);
  EXPECT_TRUE(*read == a + b + c);
  EXPECT_LT(Stat(path).allocated, 35000 + (int64_t{1} << 16));
  // Destroyed without Close (an error path): the same.
  {
    auto f = fs->NewAppendableFile(path);
    ASSERT_TRUE(f.ok());
    (*f)->Preallocate(kReserve);
    ASSERT_TRUE((*f)->Append(a).ok());
  }
  read = fs->ReadFile(path);
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(*read == a + b + c + a);
  EXPECT_LT(Stat(path).allocated, 45000 + (int64_t{1} << 16));
}

TEST(PosixFile, FileWrittenAtomicallyFromPiecesHoldsExactlyThePieces) {
  TempDir dir("posix_file_test");
  FileSystem* fs = PosixFileSystem();
  std::mt19937_64 rng(2);
  std::vector<std::string> pieces;
  std::string whole;
  for (int i = 0; i < 50; ++i) {
    pieces.push_back(RandomBytes(rng, rng() % 70000));
    whole += pieces.back();
  }
  ASSERT_TRUE(WriteFileAtomically(fs, dir.path(), "w", whole.size(), [&](WritableFile& f) {
                for (const auto& p : pieces)
                  if (auto s = f.Append(p); !s.ok()) return s;
                return absl::OkStatus();
              }).ok());
  auto read = fs->ReadFile(dir.path() + "/w");
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(*read == whole);
  EXPECT_EQ(Stat(dir.path() + "/w").size, static_cast<int64_t>(whole.size()));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/w.tmp"));
}

// A Select record of the decision log's size (50 candidates x 20 doubles, ~8.3 KB).
v1::JournalRecord SelectRecord(std::mt19937_64& rng, int i) {
  std::normal_distribution<double> g;
  v1::JournalRecord r;
  r.set_instance(i % 3 == 0 ? "a" : "instance-b");
  r.set_now_ms(1000 + i);
  r.set_event_id(absl::StrCat("00ab-", i));
  auto* sel = r.mutable_select();
  sel->set_instance(r.instance());
  for (int c = 0; c < 50; ++c) {
    auto* cand = sel->add_candidates();
    for (int k = 0; k < 20; ++k) cand->add_values(g(rng));
  }
  return r;
}

TEST(PosixFile, JournalSegmentsWithReservedBlocksReadBackEveryRecordAndNothingMore) {
  TempDir dir("posix_file_test");
  FileSystem* fs = PosixFileSystem();
  const std::string jdir = dir.path() + "/j";
  std::mt19937_64 rng(3);
  // More than one preallocation step (8 MiB) of records, a rotation in the middle.
  constexpr int kRecords = 1500;
  std::vector<v1::JournalRecord> written;
  {
    auto j = Journal::Open(fs, jdir, Durability::kNone, 1);
    ASSERT_TRUE(j.ok()) << j.status();
    for (int i = 0; i < kRecords; ++i) {
      v1::JournalRecord rec = SelectRecord(rng, i);
      ASSERT_TRUE((*j)->Append(&rec).ok());
      written.push_back(rec);
      if (i == 700) {
        ASSERT_TRUE((*j)->Rotate().ok());
      }
    }
    ASSERT_TRUE((*j)->Flush().ok());
  }
  std::vector<v1::JournalRecord> read;
  int corrupt = 0;
  auto r = Journal::ReadAll(
      fs, jdir, [&](const v1::JournalRecord& rec) { read.push_back(rec); },
      [&](const std::string&, const std::string&) { ++corrupt; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(corrupt, 0);
  EXPECT_EQ(r->truncated_bytes, 0);
  ASSERT_EQ(read.size(), written.size());
  for (size_t i = 0; i < read.size(); ++i)
    ASSERT_EQ(read[i].SerializeAsString(), written[i].SerializeAsString()) << i;
  // The segments hold exactly the frames (encoded here one by one, through std::string), no
  // reserved tail; the last segment (opened at close, empty) holds nothing.
  int64_t frame_bytes = 0;
  for (const auto& rec : written) frame_bytes += Journal::EncodeFrame(rec).size();
  int64_t file_bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(jdir)) {
    const FileStat st = Stat(e.path().string());
    file_bytes += st.size;
    EXPECT_LT(st.allocated, st.size + (int64_t{1} << 16)) << e.path();
  }
  EXPECT_EQ(file_bytes, frame_bytes);
}

TEST(PosixFile, JournalFrameBufferHoldsTheSameFramesAsStrings) {
  std::mt19937_64 rng(4);
  FrameBuffer buffer;
  std::string expected;
  for (int i = 0; i < 40; ++i) {  // grows the buffer several times from empty
    v1::JournalRecord rec = SelectRecord(rng, i);
    rec.set_seq(static_cast<uint64_t>(i) + 1);
    Journal::AppendFrame(rec, &buffer);
    expected += Journal::EncodeFrame(rec);
    ASSERT_TRUE(buffer.view() == expected) << i;
  }
  FrameBuffer other;
  other.swap(buffer);
  EXPECT_TRUE(buffer.empty());
  EXPECT_TRUE(other.view() == expected);
  other.clear();
  EXPECT_TRUE(other.empty());
  EXPECT_GE(other.capacity(), expected.size());  // kept for reuse
}

}  // namespace
}  // namespace bandit::server
