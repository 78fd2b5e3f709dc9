#include "server/storage/crc32.h"

#include <isa-l/crc.h>
#include <zlib.h>

namespace bandit::server {
namespace {

// ISA-L's AVX-512 kernel (crc32_gzip_refl_by16_10, taken for 256 bytes and more on CPUs with
// VPCLMULQDQ) returns without VZEROUPPER: the upper halves of the ZMM registers stay "dirty" on
// the calling thread. Every SSE instruction that thread runs afterwards (Eigen and the rest of the
// project are built for SSE2) then pays for the merge with the dirty upper state: the policies'
// arithmetic ran about twice as slowly after the first such record (a journaled GLB-OMD round
// with a shadow: 45 instead of 22 us of CPU, measured when this was found). Clearing the state after the call
// (as compiled AVX code does before it returns) removes the penalty. VZEROUPPER exists wherever
// the OS enables AVX, the only case in which ISA-L runs a kernel that leaves such state.
void ClearUpperVectorState() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool avx = __builtin_cpu_supports("avx");
  if (avx) asm volatile("vzeroupper" ::: "memory");
#endif
}

}  // namespace

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

uint32_t Crc32(absl::string_view data) { return Crc32Extend(0, data); }

uint32_t Crc32Extend(uint32_t crc, absl::string_view data) {
  // RFC 1952's CRC (reflected 0xEDB88320, initial and final inversion): zlib's value, computed
  // by ISA-L's kernels (PCLMULQDQ folding, chosen for the CPU at run time). Like zlib's, it
  // takes the previous result as its starting value (the inversions undo each other).
  const uint32_t result =
      crc32_gzip_refl(crc, reinterpret_cast<const unsigned char*>(data.data()), data.size());
  ClearUpperVectorState();
  return result;
}

}  // namespace bandit::server
