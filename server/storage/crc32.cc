#include "server/storage/crc32.h"

#include <isa-l/crc.h>
#include <zlib.h>

namespace bandit::server {

uint32_t Crc32Portable(absl::string_view data) {
  // zlib takes uInt lengths: feed very large buffers in pieces.
  uint32_t crc = 0;
  const char* p = data.data();
  size_t size = data.size();
  while (size > 0) {
    const size_t n = size > (1u << 30) ? (1u << 30) : size;
    crc =
        static_cast<uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(p), static_cast<uInt>(n)));
    p += n;
    size -= n;
  }
  return crc;
}

uint32_t Crc32(absl::string_view data) {
  // RFC 1952's CRC (reflected 0xEDB88320, initial and final inversion): zlib's value, computed
  // by ISA-L's kernels (PCLMULQDQ folding, chosen for the CPU at run time).
  return crc32_gzip_refl(0, reinterpret_cast<const unsigned char*>(data.data()), data.size());
}

}  // namespace bandit::server
