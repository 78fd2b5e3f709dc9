// Select + Update per round for the classic policies.
//   K-armed (epsilon-greedy, UCB1, Thompson Bernoulli/Gaussian) over K = 10, 100, 1000 arms;
//   Thompson with its default 1000 propensity samples and with propensity off (M = 0);
//   LinUCB over d = 5, 20, 100 and 10, 100, 1000 candidates per Select.
// Run: build/bin/bandit-microbench --benchmark_filter=Classic
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/registry.h"
#include "core/rng.h"

namespace bandit {
namespace {

std::unique_ptr<Policy> MakeOrDie(const bandit::v1::PolicyConfig& c) {
  auto p = CreatePolicy(c, 7);
  if (!p.ok()) std::abort();
  return std::move(*p);
}

void RunKArmed(benchmark::State& state, bandit::v1::PolicyConfig config) {
  const int k = static_cast<int>(state.range(0));
  config.set_num_arms(k);
  auto p = MakeOrDie(config);
  Rng env(1);
  SelectContext ctx;
  Observation obs;
  for (auto _ : state) {
    auto d = p->Select(ctx);
    obs.arm_id = d->arm_id;
    obs.reward = env.Bernoulli(0.3 + 0.4 * d->arm / k) ? 1.0 : 0.0;
    benchmark::DoNotOptimize(p->Update(obs));
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Classic_EpsilonGreedy(benchmark::State& state) {
  bandit::v1::PolicyConfig c;
  c.mutable_epsilon_greedy()->set_epsilon(0.1);
  RunKArmed(state, c);
}
void BM_Classic_Ucb1(benchmark::State& state) {
  bandit::v1::PolicyConfig c;
  c.mutable_ucb1();
  RunKArmed(state, c);
}
void BM_Classic_ThompsonBernoulli(benchmark::State& state) {
  bandit::v1::PolicyConfig c;
  c.mutable_thompson()->set_propensity_samples(static_cast<int>(state.range(1)));
  RunKArmed(state, c);
}
void BM_Classic_ThompsonGaussian(benchmark::State& state) {
  bandit::v1::PolicyConfig c;
  c.mutable_thompson()->set_likelihood(bandit::v1::ThompsonConfig::GAUSSIAN);
  c.mutable_thompson()->set_propensity_samples(static_cast<int>(state.range(1)));
  RunKArmed(state, c);
}

void BM_Classic_LinUcb(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  bandit::v1::PolicyConfig c;
  c.mutable_linucb()->set_dimension(d);
  auto p = MakeOrDie(c);
  Rng env(1);
  // A fixed pool of candidate sets, cycled, so that generating features is not measured.
  std::vector<std::vector<Vector>> pool(8);
  for (auto& set : pool)
    for (int i = 0; i < n; ++i) {
      Vector x(d);
      for (int j = 0; j < d; ++j) x[j] = env.Normal() / std::sqrt(static_cast<double>(d));
      set.push_back(std::move(x));
    }
  Observation obs;
  SelectContext ctx;
  size_t round = 0;
  for (auto _ : state) {
    ctx.candidates = pool[round++ % pool.size()];
    auto dec = p->Select(ctx);
    obs.features = ctx.candidates[dec->arm];
    obs.reward = obs.features.sum() + 0.1 * env.Normal();
    benchmark::DoNotOptimize(p->Update(obs));
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_Classic_EpsilonGreedy)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_Classic_Ucb1)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_Classic_ThompsonBernoulli)->ArgsProduct({{10, 100, 1000}, {0, 1000}});
BENCHMARK(BM_Classic_ThompsonGaussian)->ArgsProduct({{10, 100, 1000}, {0, 1000}});
BENCHMARK(BM_Classic_LinUcb)->ArgsProduct({{5, 20, 100}, {10, 100, 1000}});

}  // namespace
}  // namespace bandit
