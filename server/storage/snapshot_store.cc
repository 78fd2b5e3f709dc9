#include "server/storage/snapshot_store.h"

#include <algorithm>
#include <cstring>

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

}  // namespace

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

absl::Status SnapshotStore::Write(const bandit::v1::InstanceSnapshot& snap,
                                  const EncodedSnapshotFields* extra) {
  // Encode()'s bytes, streamed: the message's own fields (the policy state: small) are
  // serialized, the already-encoded fields (a decision log of up to its max_bytes, 64 MiB by
  // default) go from where they lie through one small reused buffer into the file. Gathering
  // them in one string first cost an allocation of the whole file, its page faults, its
  // zero-fill and a copy out of cache, at every snapshot (docs/performance.md, "The decision
  // log's cost at the sizes users send"). The checksum in the header comes first: one pass of
  // the CRC over the pieces (cheap next to writing them), then one pass writing them.
  const std::string fields = snap.SerializeAsString();
  uint32_t crc = Crc32Extend(0, fields);
  if (extra != nullptr)
    extra->ForEachPiece([&crc](absl::string_view piece) { crc = Crc32Extend(crc, piece); });
  std::string header(kMagic);
  PutU32(&header, kFormat);
  PutU32(&header, crc);
  const uint64_t size = header.size() + fields.size() + (extra != nullptr ? extra->size() : 0);
  return WriteFileAtomically(
      fs_, dir_, absl::StrCat(snap.name(), kSuffix), size, [&](WritableFile& file) {
        // Whole buffers per write(2): the kernel's cost per call is far above its cost per
        // byte, and a buffer this size stays in the CPU's cache between writes.
        constexpr size_t kWriteBytes = size_t{1} << 20;
        std::string buffer;
        buffer.reserve(kWriteBytes);
        absl::Status status;
        auto add = [&](absl::string_view piece) {
          while (status.ok() && !piece.empty()) {
            const size_t n = std::min(piece.size(), kWriteBytes - buffer.size());
            buffer.append(piece.data(), n);
            piece.remove_prefix(n);
            if (buffer.size() == kWriteBytes) {
              status = file.Append(buffer);
              buffer.clear();
            }
          }
        };
        add(header);
        add(fields);
        if (extra != nullptr) extra->ForEachPiece(add);
        if (status.ok() && !buffer.empty()) status = file.Append(buffer);
        return status;
      });
}

absl::Status SnapshotStore::Remove(const std::string& instance) {
  if (auto s = fs_->Remove(absl::StrCat(dir_, "/", instance, kSuffix)); !s.ok()) return s;
  return fs_->SyncDir(dir_);
}

absl::StatusOr<SnapshotStore::Loaded> SnapshotStore::LoadAll() {
  Loaded out;
  auto names = fs_->ListDir(dir_);
  if (!names.ok()) return names.status();
  for (const auto& n : *names) {
    if (n.size() <= kSuffix.size() || !absl::EndsWith(n, kSuffix))
      continue;  // temp files of an interrupted write are ignored
    const std::string instance = n.substr(0, n.size() - kSuffix.size());
    auto data = fs_->ReadFile(dir_ + "/" + n);
    if (!data.ok()) return data.status();
    auto snap = Decode(*data);
    if (!snap.ok()) {
      out.invalid.emplace_back(instance, std::string(snap.status().message()));
    } else if (snap->name() != instance) {
      out.invalid.emplace_back(instance,
                               absl::StrCat("snapshot file names instance '", snap->name(), "'"));
    } else {
      out.snapshots.push_back(*std::move(snap));
    }
  }
  return out;
}

}  // namespace bandit::server
