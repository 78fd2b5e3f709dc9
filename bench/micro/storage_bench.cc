// The journal's per-record checksum: ISA-L's CRC-32 (what the journal, snapshots and the
// PostgreSQL rows use) against zlib's crc32() on the same bytes. 8.3 KB is a Select record that
// carries a 50 x 20 decision-log context.
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "server/storage/crc32.h"

namespace {

std::string RandomBytes(size_t n) {
  std::mt19937 rng(1);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

void BM_Storage_Crc32Isal(benchmark::State& state) {
  const std::string data = RandomBytes(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(bandit::server::Crc32(data));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Storage_Crc32Isal)->Arg(256)->Arg(8500)->Arg(1 << 20);

void BM_Storage_Crc32Zlib(benchmark::State& state) {
  const std::string data = RandomBytes(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(bandit::server::Crc32Portable(data));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Storage_Crc32Zlib)->Arg(256)->Arg(8500)->Arg(1 << 20);

}  // namespace
