// The folded CRC-32 against zlib's own crc32() (the format every journal frame and snapshot was
// written with): every length around the fold boundaries, every alignment, random buffers.
#include "server/storage/crc32.h"

#include <zlib.h>

#include <random>
#include <string>

#include <gtest/gtest.h>

namespace bandit::server {
namespace {

uint32_t Zlib(absl::string_view d) {
  return static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(d.data()), static_cast<uInt>(d.size())));
}

TEST(Crc32, KnownValue) {
  // The CRC-32 check value of the ISO-HDLC polynomial (zlib's).
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926u);
  std::string long_digits;
  for (int i = 0; i < 100; ++i) long_digits += "123456789";
  EXPECT_EQ(Crc32(long_digits), Zlib(long_digits));
  EXPECT_EQ(Crc32(""), 0u);
}

TEST(Crc32, MatchesZlibAtEveryLengthAndAlignment) {
  std::mt19937 rng(42);
  std::string buf(4096 + 64, '\0');
  for (char& c : buf) c = static_cast<char>(rng());
  for (size_t offset = 0; offset < 16; ++offset)
    for (size_t n = 0; n <= 1100; ++n) {
      const absl::string_view d(buf.data() + offset, n);
      ASSERT_EQ(Crc32(d), Zlib(d)) << "offset " << offset << " length " << n;
    }
}

TEST(Crc32, MatchesZlibOnLargeRandomBuffers) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::string buf(rng() % 200000, '\0');
    for (char& c : buf) c = static_cast<char>(rng());
    ASSERT_EQ(Crc32(buf), Zlib(buf)) << "length " << buf.size();
    ASSERT_EQ(Crc32Portable(buf), Zlib(buf));
  }
  // All zeros and all ones (the folds' degenerate inputs).
  for (char fill : {'\0', '\xff'}) {
    const std::string buf(8192, fill);
    EXPECT_EQ(Crc32(buf), Zlib(buf));
  }
}

}  // namespace
}  // namespace bandit::server
