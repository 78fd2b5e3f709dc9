// Per-round cost (Select + Update) of online kernel selection: the random-feature versions by D
// and variant (flat in t: state is O(K D d)), and the exact versions by the number of rounds
// already seen (O(t) per round) with and without a support budget.
//   bandit-microbench --benchmark_filter=Oks
#include <benchmark/benchmark.h>

#include "core/oks/oks_policy.h"
#include "core/rng.h"

namespace bandit {
namespace {

using bandit::v1::OksConfig;

constexpr int kDim = 16;  // letter_binary's dimension

std::unique_ptr<oks::OnlineKernelSelection> Make(OksConfig::Variant v, int rf, int budget) {
  OksConfig c;
  c.set_variant(v);
  c.set_dimension(kDim);
  c.set_loss(bandit::v1::OKS_LOGISTIC);
  for (double s : {0.25, 0.5, 1.0, 2.0, 4.0, 8.0}) {
    auto* k = c.add_kernels();
    k->set_bandwidth(s);
  }
  c.set_random_features(rf);
  c.set_support_budget(budget);
  c.set_horizon(1 << 20);
  return *oks::OnlineKernelSelection::Create(c, 1, /*allow_unbounded=*/true);
}

struct Point {
  Eigen::VectorXd x;
  double y;
};

Point Next(Rng& rng) {
  Point p{Eigen::VectorXd(kDim), 0};
  for (int j = 0; j < kDim; ++j) p.x[j] = 2 * rng.Uniform() - 1;
  p.y = p.x.head(4).squaredNorm() > 1.3 ? 1.0 : -1.0;
  return p;
}

void RunRound(oks::OnlineKernelSelection& p, Rng& rng) {
  const Point pt = Next(rng);
  SelectContext ctx;
  ctx.point = &pt.x;
  auto d = p.Select(ctx);
  Observation o;
  o.features = pt.x;
  o.memo = d->memo;
  o.reward = pt.y;
  benchmark::DoNotOptimize(p.Update(o));
}

// args: variant, D, warm-up rounds.
void BM_OksRandomFeaturesRound(benchmark::State& state) {
  auto p =
      Make(static_cast<OksConfig::Variant>(state.range(0)), static_cast<int>(state.range(1)), 0);
  Rng rng(3);
  for (int64_t t = 0; t < state.range(2); ++t) RunRound(*p, rng);
  for (auto _ : state) RunRound(*p, rng);
  state.counters["state_bytes"] = static_cast<double>(p->StateBytes());
}
BENCHMARK(BM_OksRandomFeaturesRound)
    ->ArgNames({"variant", "D", "warmup"})
    ->Args({OksConfig::OKS, 400, 1000})
    ->Args({OksConfig::OKS_PP, 400, 1000})
    ->Args({OksConfig::IOKS, 400, 1000})
    ->Args({OksConfig::OKS_PP, 100, 1000})
    ->Args({OksConfig::OKS_PP, 1600, 1000})
    ->Args({OksConfig::OKS_PP, 400, 20000});

// args: variant, support budget (0 = unbounded), warm-up rounds. The timed rounds keep adding
// support vectors, so Iterations is fixed to keep t near the warm-up value.
void BM_OksExactRound(benchmark::State& state) {
  auto p =
      Make(static_cast<OksConfig::Variant>(state.range(0)), 0, static_cast<int>(state.range(1)));
  Rng rng(3);
  for (int64_t t = 0; t < state.range(2); ++t) RunRound(*p, rng);
  for (auto _ : state) RunRound(*p, rng);
  state.counters["state_bytes"] = static_cast<double>(p->StateBytes());
}
BENCHMARK(BM_OksExactRound)
    ->ArgNames({"variant", "budget", "warmup"})
    ->Iterations(500)
    ->Args({OksConfig::OKS_PP, 0, 1000})
    ->Args({OksConfig::OKS_PP, 0, 10000})
    ->Args({OksConfig::IOKS, 0, 10000})
    ->Args({OksConfig::OKS_PP, 500, 10000});

}  // namespace
}  // namespace bandit
