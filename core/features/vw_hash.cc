#include "core/features/vw_hash.h"

#include <murmurhash.h>

namespace bandit::features {

uint32_t MurmurHash3(std::string_view data, uint32_t seed) {
  uint32_t out[1];
  lmmh_x86_32(data.data(), static_cast<unsigned int>(data.size()), seed, out);
  return out[0];
}

uint32_t HashString(std::string_view s, uint32_t seed) {
  // VW trims bytes <= 0x20 that are not negative as a char (so UTF-8 continuation bytes stay).
  auto blank = [](char c) { return static_cast<unsigned char>(c) <= 0x20; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  uint64_t number = 0;  // VW accumulates in size_t and truncates to 32 bits at the end
  for (char c : s) {
    if (c < '0' || c > '9') return MurmurHash3(s, seed);
    number = 10 * number + static_cast<uint64_t>(c - '0');
  }
  return static_cast<uint32_t>(number) + seed;
}

}  // namespace bandit::features
