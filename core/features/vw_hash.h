// Vowpal Wabbit's feature hashing, bit for bit: a feature's weight index is MurmurHash3 x86_32 of
// its name seeded by its namespace's hash (VW's `hashstring`: surrounding whitespace trimmed, a
// name of digits only is its number plus the seed), interactions fold indices with the FNV prime.
// In VW the hash is the format: the same input must land on the same weight index.
#pragma once

#include <cstdint>
#include <string_view>

namespace bandit::features {

// FNV-like prime VW folds interaction indices with (vw/core/constant.h: FNV_PRIME).
inline constexpr uint32_t kFnvPrime = 16777619;
// Index of VW's constant feature before masking (vw/core/constant.h: CONSTANT).
inline constexpr uint64_t kConstantFeature = 11650396;
// VW's reserved namespace of the constant feature and the slot namespace of CCB.
inline constexpr unsigned char kConstantNamespace = 128;
inline constexpr unsigned char kCcbSlotNamespace = 139;
// CCB's slot-index namespace: the feature "index<k>" of slot k (VW's CCB_ID_NAMESPACE, hashed
// as the namespace "_id", printed as "_ccb_slot_index").
inline constexpr unsigned char kCcbIdNamespace = 140;
inline constexpr unsigned char kDefaultNamespace = ' ';
inline constexpr unsigned char kWildcardNamespace = ':';

// MurmurHash3 x86_32 (Debian's libmurmurhash): VW's uniform_hash / `hashall`.
uint32_t MurmurHash3(std::string_view data, uint32_t seed);

// VW's default `hashstring`: leading and trailing bytes <= 0x20 are trimmed; what remains, if it
// is all ASCII digits (or empty), is read as a decimal number and added to the seed (mod 2^32);
// otherwise it is MurmurHash3'd with the seed.
uint32_t HashString(std::string_view s, uint32_t seed);

// The weight index of a quadratic interaction as VW computes it: (second ^ FNV * first), both
// the features' parse-time indices; a cubic one folds again. The caller masks to the hash space.
inline uint64_t InteractionIndex(uint64_t first, uint64_t second) {
  return second ^ (uint64_t{kFnvPrime} * first);
}

}  // namespace bandit::features
