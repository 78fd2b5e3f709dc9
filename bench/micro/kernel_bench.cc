// Select latency of BKB and exact GP-UCB against the number of arms A (up to 10^5).
// The state is fixed by hand (P pulled arms, for BKB the first m of them in the dictionary) and
// restored before every timed Select, so each Select recomputes the posterior of all A arms from
// scratch (what happens after every Update). d = 3, Gaussian kernel, bandwidth 0.25.
//   BM_BkbSelect/A/m      O(A m d + A m^2 + P m^2 + m^3)
//   BM_GpUcbSelect/A/P    O(A P d + A P^2 + P^3)
#include <benchmark/benchmark.h>

#include "core/kernel/bkb.h"
#include "core/kernel/gp_ucb.h"
#include "core/registry.h"

namespace bandit {
namespace {

bandit::v1::PolicyConfig Config(bool bkb, int A, uint64_t seed) {
  bandit::v1::PolicyConfig c;
  bandit::v1::KernelSpec* k =
      bkb ? c.mutable_bkb()->mutable_kernel() : c.mutable_gp_ucb()->mutable_kernel();
  k->set_bandwidth(0.25);
  Rng rng(seed);
  for (int j = 0; j < A; ++j) {
    auto* a = c.add_arms();
    a->set_id(std::to_string(j));
    for (int i = 0; i < 3; ++i) a->add_features(rng.Uniform());
  }
  return c;
}

// counts 1..3 and sums on the first P arms; dictionary = first m arms (BKB only).
bandit::v1::PolicyState MakeState(Policy& p, int P, int m) {
  bandit::v1::PolicyState s;
  p.Save(&s);
  Rng rng(9);
  for (auto& t : *s.mutable_tensors()) {
    if (t.name() == "counts")
      for (int i = 0; i < P; ++i) t.set_data(i, 1 + (i % 3));
    if (t.name() == "sums")
      for (int i = 0; i < P; ++i) t.set_data(i, rng.Normal());
    if (t.name() == "dictionary")
      for (int i = 0; i < m; ++i) t.set_data(i, 1.0);
  }
  return s;
}

void Run(benchmark::State& state, bool bkb, int A, int P, int m) {
  auto p = CreatePolicy(Config(bkb, A, 1), 1);
  if (!p.ok()) {
    state.SkipWithError(std::string(p.status().message()).c_str());
    return;
  }
  const auto st = MakeState(**p, P, m);
  for (auto _ : state) {
    state.PauseTiming();
    if (!(*p)->Restore(st).ok()) state.SkipWithError("restore failed");
    state.ResumeTiming();
    auto d = (*p)->Select({});
    benchmark::DoNotOptimize(d);
  }
  state.counters["A"] = A;
  state.counters[bkb ? "m" : "P"] = bkb ? m : P;
}

void BM_BkbSelect(benchmark::State& state) {
  const int A = static_cast<int>(state.range(0)), m = static_cast<int>(state.range(1));
  Run(state, true, A, std::min(A, 4 * m), m);  // 4m pulled arms, m of them in S_t
}
void BM_GpUcbSelect(benchmark::State& state) {
  const int A = static_cast<int>(state.range(0)), P = static_cast<int>(state.range(1));
  Run(state, false, A, P, 0);
}

BENCHMARK(BM_BkbSelect)
    ->ArgsProduct({{1000, 10000, 100000}, {25, 50, 100}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);
BENCHMARK(BM_GpUcbSelect)
    ->ArgsProduct({{1000, 10000, 100000}, {100, 200, 400}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);

}  // namespace
}  // namespace bandit
