// CRC-32 as zlib's crc32() computes it (ISO-HDLC: reflected polynomial 0xEDB88320, initial and
// final XOR 0xFFFFFFFF), so every journal frame and snapshot written before stays readable, but
// computed by Intel's ISA-L (carry-less multiplication folding where the CPU has it). Every
// journal record is checksummed once on append; a Select record carrying its decision log
// context is ~8 KB, and zlib's table-driven loop took about a third of such a round (measured
// when ISA-L replaced it).
#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"

namespace bandit::server {

// Same value as zlib's crc32(0, data, size).
uint32_t Crc32(absl::string_view data);

// The CRC-32 of the bytes `crc` was computed over followed by `data` (zlib's crc32(crc, data,
// size)): Crc32Extend(Crc32(a), b) == Crc32(a + b). Lets a file written in pieces be
// checksummed without the pieces in one buffer.
uint32_t Crc32Extend(uint32_t crc, absl::string_view data);

// zlib's crc32() alone (the reference the fast path is tested against).
uint32_t Crc32Portable(absl::string_view data);

}  // namespace bandit::server
