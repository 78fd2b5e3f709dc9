#include "server/storage/snapshot_store.h"

#include <algorithm>
#include <cstring>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/storage/crc32.h"

namespace bandit::server {
namespace {

constexpr absl::string_view kMagic = "BSNP";
constexpr uint32_t kFormat = 1;
constexpr absl::string_view kSuffix = ".snap";

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
uint32_t Crc(absl::string_view d) { return Crc32(d); }

// Hands a message's serialization to `piece` in pieces of up to kPieceBytes, from one small
// buffer (the message's sizes must be cached: ByteSizeLong() was called, and the message has not
// changed since). Two calls hand over the same bytes.
void SerializeInPieces(const google::protobuf::MessageLite& message,
                       absl::FunctionRef<void(absl::string_view)> piece) {
  constexpr int kPieceBytes = 1 << 16;
  class PieceSink final : public google::protobuf::io::CopyingOutputStream {
   public:
    explicit PieceSink(absl::FunctionRef<void(absl::string_view)> piece) : piece_(piece) {}
    bool Write(const void* buffer, int size) override {
      piece_(absl::string_view(static_cast<const char*>(buffer), static_cast<size_t>(size)));
      return true;
    }

   private:
    absl::FunctionRef<void(absl::string_view)> piece_;
  };
  PieceSink sink(piece);
  google::protobuf::io::CopyingOutputStreamAdaptor adaptor(&sink, kPieceBytes);
  {
    google::protobuf::io::CodedOutputStream out(&adaptor);
    message.SerializeWithCachedSizes(&out);
  }
  adaptor.Flush();
}

// A ReadableFile as protobuf's input stream (a read error is kept for the caller).
class FileInput final : public google::protobuf::io::CopyingInputStream {
 public:
  explicit FileInput(ReadableFile* file) : file_(file) {}
  int Read(void* buffer, int size) override {
    auto n = file_->Read(static_cast<char*>(buffer), static_cast<size_t>(size));
    if (!n.ok()) {
      status_ = n.status();
      return -1;
    }
    return static_cast<int>(*n);
  }
  const absl::Status& status() const { return status_; }

 private:
  ReadableFile* const file_;
  absl::Status status_;
};

}  // namespace

void EncodedFields::Add(int field, const google::protobuf::MessageLite& message) {
  using google::protobuf::io::CodedOutputStream;
  const size_t body = message.ByteSizeLong();
  const uint32_t tag = (static_cast<uint32_t>(field) << 3) | 2;  // length-delimited
  const size_t head = CodedOutputStream::VarintSize32(tag) + CodedOutputStream::VarintSize64(body);
  const size_t need = head + body;
  if (chunks_.empty() || chunks_.back().capacity() - chunks_.back().size() < need) {
    chunks_.emplace_back();
    chunks_.back().reserve(std::max(kChunkBytes, need));
  }
  std::string& chunk = chunks_.back();
  const size_t at = chunk.size();
  chunk.resize(at + need);  // within the reserved capacity: no reallocation
  auto* out = reinterpret_cast<uint8_t*>(chunk.data() + at);
  out = CodedOutputStream::WriteVarint32ToArray(tag, out);
  out = CodedOutputStream::WriteVarint64ToArray(body, out);
  message.SerializeWithCachedSizesToArray(out);
  size_ += need;
}

void EncodedFields::ForEachPiece(absl::FunctionRef<void(absl::string_view)> piece) const {
  for (const std::string& chunk : chunks_) piece(chunk);
  if (then_ != nullptr) then_->ForEachPiece(piece);
}

std::string SnapshotStore::Encode(const bandit::v1::InstanceSnapshot& snap,
                                  const EncodedSnapshotFields* extra) {
  // Serialized in place after the header (a snapshot with a decision log runs to tens of MB; a
  // separate payload string cost a second copy of it).
  const size_t fields_size = snap.ByteSizeLong();
  const size_t payload_size = fields_size + (extra != nullptr ? extra->size() : 0);
  std::string out(kMagic);
  PutU32(&out, kFormat);
  PutU32(&out, 0);  // the checksum, below
  const size_t header_size = out.size();
  out.resize(header_size + payload_size);
  snap.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data() + header_size));
  if (extra != nullptr) extra->WriteTo(out.data() + header_size + fields_size);
  const uint32_t crc = Crc(absl::string_view(out).substr(header_size));
  for (int i = 0; i < 4; ++i) out[header_size - 4 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  return out;
}

absl::StatusOr<bandit::v1::InstanceSnapshot> SnapshotStore::Decode(absl::string_view data) {
  if (data.size() < 12 || data.substr(0, 4) != kMagic)
    return absl::InvalidArgumentError("snapshot does not start with the BSNP header");
  if (GetU32(data.data() + 4) != kFormat)
    return absl::InvalidArgumentError(absl::StrCat("snapshot format ", GetU32(data.data() + 4),
                                                   " is not supported, expected ", kFormat));
  const absl::string_view payload = data.substr(12);
  if (Crc(payload) != GetU32(data.data() + 8))
    return absl::InvalidArgumentError("snapshot checksum mismatch: the data is damaged");
  bandit::v1::InstanceSnapshot snap;
  if (!snap.ParseFromArray(payload.data(), static_cast<int>(payload.size())))
    return absl::InvalidArgumentError("snapshot payload is not an InstanceSnapshot");
  return snap;
}

absl::Status SnapshotStore::Init() { return fs_->CreateDirs(dir_); }

void EncodedSnapshotFields::WriteTo(char* out) const {
  ForEachPiece([&out](absl::string_view piece) {
    if (piece.empty()) return;
    std::memcpy(out, piece.data(), piece.size());
    out += piece.size();
  });
}

uint64_t SnapshotStore::EncodedSize(const bandit::v1::InstanceSnapshot& snap,
                                    const EncodedSnapshotFields* extra) {
  return kMagic.size() + 8 + snap.ByteSizeLong() + (extra != nullptr ? extra->size() : 0);
}

void SnapshotStore::Stream(const bandit::v1::InstanceSnapshot& snap,
                           const EncodedSnapshotFields* extra,
                           absl::FunctionRef<void(absl::string_view)> piece) {
  // The message's own fields (the policy state: a full covariance runs to d^2 doubles) are
  // serialized through a small buffer, twice: once for the checksum in the header, once to
  // `piece`; the already-encoded fields (pending decisions, a decision log of up to its
  // max_bytes) are read twice where they lie. Serializing twice costs less than holding the
  // serialized state beside the state, which a snapshot at the memory budget cannot afford.
  (void)snap.ByteSizeLong();  // caches the sizes both passes use
  uint32_t crc = 0;
  auto extend = [&crc](absl::string_view p) { crc = Crc32Extend(crc, p); };
  SerializeInPieces(snap, extend);
  if (extra != nullptr) extra->ForEachPiece(extend);
  std::string header(kMagic);
  PutU32(&header, kFormat);
  PutU32(&header, crc);
  piece(header);
  SerializeInPieces(snap, piece);
  if (extra != nullptr) extra->ForEachPiece(piece);
}

absl::Status SnapshotStore::Write(const bandit::v1::InstanceSnapshot& snap,
                                  const EncodedSnapshotFields* extra) {
  return WriteFileAtomically(
      fs_, dir_, absl::StrCat(snap.name(), kSuffix), EncodedSize(snap, extra),
      [&](WritableFile& file) {
        // Whole buffers per write(2): the kernel's cost per call is far above its cost per
        // byte, and a buffer this size stays in the CPU's cache between writes.
        constexpr size_t kWriteBytes = size_t{1} << 20;
        std::string buffer;
        buffer.reserve(kWriteBytes);
        absl::Status status;
        Stream(snap, extra, [&](absl::string_view piece) {
          while (status.ok() && !piece.empty()) {
            const size_t n = std::min(piece.size(), kWriteBytes - buffer.size());
            buffer.append(piece.data(), n);
            piece.remove_prefix(n);
            if (buffer.size() == kWriteBytes) {
              status = file.Append(buffer);
              buffer.clear();
            }
          }
        });
        if (status.ok() && !buffer.empty()) status = file.Append(buffer);
        return status;
      });
}

absl::Status SnapshotStore::Remove(const std::string& instance) {
  if (auto s = fs_->Remove(absl::StrCat(dir_, "/", instance, kSuffix)); !s.ok()) return s;
  return fs_->SyncDir(dir_);
}

absl::Status SnapshotStore::LoadEach(
    absl::FunctionRef<void(bandit::v1::InstanceSnapshot&& snap)> loaded,
    absl::FunctionRef<void(const std::string& instance, const std::string& why)> invalid) {
  auto names = fs_->ListDir(dir_);
  if (!names.ok()) return names.status();
  constexpr size_t kReadBytes = size_t{1} << 20;
  std::string buffer(kReadBytes, '\0');
  for (const auto& n : *names) {
    if (n.size() <= kSuffix.size() || !absl::EndsWith(n, kSuffix))
      continue;  // temp files of an interrupted write are ignored
    const std::string instance = n.substr(0, n.size() - kSuffix.size());
    const std::string path = absl::StrCat(dir_, "/", n);
    // First pass: the header and the payload's checksum, read in pieces.
    auto file = fs_->NewReadableFile(path);
    if (!file.ok()) return file.status();
    std::string header;
    uint32_t crc = 0;
    for (;;) {
      auto got = (*file)->Read(buffer.data(), buffer.size());
      if (!got.ok()) return got.status();
      if (*got == 0) break;
      absl::string_view piece(buffer.data(), *got);
      if (header.size() < 12) {
        const size_t take = std::min(piece.size(), 12 - header.size());
        header.append(piece.data(), take);
        piece.remove_prefix(take);
      }
      crc = Crc32Extend(crc, piece);
    }
    if (header.size() < 12 || absl::string_view(header).substr(0, 4) != kMagic) {
      invalid(instance, "snapshot does not start with the BSNP header");
      continue;
    }
    if (GetU32(header.data() + 4) != kFormat) {
      invalid(instance, absl::StrCat("snapshot format ", GetU32(header.data() + 4),
                                     " is not supported, expected ", kFormat));
      continue;
    }
    if (crc != GetU32(header.data() + 8)) {
      invalid(instance, "snapshot checksum mismatch: the data is damaged");
      continue;
    }
    // Second pass: parsed as it is read.
    file = fs_->NewReadableFile(path);
    if (!file.ok()) return file.status();
    FileInput input(file->get());
    google::protobuf::io::CopyingInputStreamAdaptor stream(&input, static_cast<int>(kReadBytes));
    bandit::v1::InstanceSnapshot snap;
    if (!stream.Skip(12) || !snap.ParseFromZeroCopyStream(&stream)) {
      if (!input.status().ok()) return input.status();
      invalid(instance, "snapshot payload is not an InstanceSnapshot");
      continue;
    }
    if (snap.name() != instance) {
      invalid(instance, absl::StrCat("snapshot file names instance '", snap.name(), "'"));
      continue;
    }
    loaded(std::move(snap));
  }
  return absl::OkStatus();
}

absl::StatusOr<SnapshotStore::Loaded> SnapshotStore::LoadAll() {
  Loaded out;
  absl::Status s = LoadEach(
      [&out](bandit::v1::InstanceSnapshot&& snap) { out.snapshots.push_back(std::move(snap)); },
      [&out](const std::string& instance, const std::string& why) {
        out.invalid.emplace_back(instance, why);
      });
  if (!s.ok()) return s;
  return out;
}

}  // namespace bandit::server
