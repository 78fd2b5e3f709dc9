// Select + Update per round for the classic policies.
//   K-armed (epsilon-greedy, UCB1, Thompson Bernoulli/Gaussian) over K = 10, 100, 1000 arms;
//   Thompson with propensity off (M = 0) and by Monte Carlo (M = 1000);
//   Thompson's default quadrature propensity after t0 = 0, 10^4, 10^5 earlier rounds (flat in t),
//   for the served arm and for every arm (the full vector the decision log records);
//   LinUCB over d = 5, 20, 100 and 10, 100, 1000 candidates per Select.
// Run: build/bin/bandit-microbench --benchmark_filter=Classic
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
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
  c.mutable_thompson()->set_propensity_method(bandit::v1::ThompsonConfig::MONTE_CARLO);
  c.mutable_thompson()->set_propensity_samples(static_cast<int>(state.range(1)));
  RunKArmed(state, c);
}
void BM_Classic_ThompsonGaussian(benchmark::State& state) {
  bandit::v1::PolicyConfig c;
  c.mutable_thompson()->set_likelihood(bandit::v1::ThompsonConfig::GAUSSIAN);
  c.mutable_thompson()->set_propensity_method(bandit::v1::ThompsonConfig::MONTE_CARLO);
  c.mutable_thompson()->set_propensity_samples(static_cast<int>(state.range(1)));
  RunKArmed(state, c);
}

// Select + Update with the quadrature propensity, K = range(0) arms, after t0 = range(1)
// earlier rounds. The t0 rounds run on a twin without propensity (same decisions: the
// propensity method does not touch the random stream) whose state is then restored. The
// quadrature keeps per-arm data between Selects, rebuilt after a Restore as arms are needed:
// the first round after the Restore is reported apart (counter first_round_us, wall time), and
// kWarmRounds more run untimed, so that the timed rounds measure the steady state (one arm's
// data rebuilt per round).
// want_all: the Select asks for every arm's probability (what the decision log records).
void RunThompsonQuadrature(benchmark::State& state, bandit::v1::PolicyConfig config,
                           bool want_all = false) {
  const int k = static_cast<int>(state.range(0));
  const int64_t t0 = state.range(1);
  config.set_num_arms(k);
  auto warm_config = config;
  warm_config.mutable_thompson()->set_propensity_samples(0);
  auto warm = MakeOrDie(warm_config);
  Rng env(1);
  const bool gaussian = config.thompson().likelihood() == bandit::v1::ThompsonConfig::GAUSSIAN;
  auto reward = [&](int arm) {
    const double mean = 0.3 + 0.4 * arm / k;
    return gaussian ? env.Normal(mean, 0.5) : (env.Bernoulli(mean) ? 1.0 : 0.0);
  };
  Observation obs;
  SelectContext ctx;
  for (int64_t t = 0; t < t0; ++t) {
    auto d = warm->Select(ctx);
    obs.arm_id = d->arm_id;
    obs.reward = reward(d->arm);
    if (!warm->Update(obs).ok()) std::abort();
  }
  bandit::v1::PolicyState saved;
  warm->Save(&saved);
  auto p = MakeOrDie(config);
  if (!p->Restore(saved).ok()) std::abort();
  ctx.want_scores = want_all;
  auto round = [&] {
    auto d = p->Select(ctx);
    obs.arm_id = d->arm_id;
    obs.reward = reward(d->arm);
    if (!p->Update(obs).ok()) std::abort();
  };
  const auto start = std::chrono::steady_clock::now();
  round();
  state.counters["first_round_us"] =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  constexpr int kWarmRounds = 20;
  for (int i = 0; i < kWarmRounds; ++i) round();
  double propensity_sum = 0;
  for (auto _ : state) {
    auto d = p->Select(ctx);
    propensity_sum += d->propensity;
    obs.arm_id = d->arm_id;
    obs.reward = reward(d->arm);
    benchmark::DoNotOptimize(p->Update(obs));
  }
  state.counters["mean_propensity"] = propensity_sum / std::max<int64_t>(1, state.iterations());
  state.SetItemsProcessed(state.iterations());
}
void BM_Classic_ThompsonBernoulliQuadrature(benchmark::State& state) {
  bandit::v1::PolicyConfig c;
  c.mutable_thompson();
  RunThompsonQuadrature(state, c);
}
void BM_Classic_ThompsonGaussianQuadrature(benchmark::State& state) {
  bandit::v1::PolicyConfig c;
  c.mutable_thompson()->set_likelihood(bandit::v1::ThompsonConfig::GAUSSIAN);
  RunThompsonQuadrature(state, c);
}
void BM_Classic_ThompsonBernoulliAllProbabilities(benchmark::State& state) {
  bandit::v1::PolicyConfig c;
  c.mutable_thompson();
  RunThompsonQuadrature(state, c, /*want_all=*/true);
}
void BM_Classic_ThompsonGaussianAllProbabilities(benchmark::State& state) {
  bandit::v1::PolicyConfig c;
  c.mutable_thompson()->set_likelihood(bandit::v1::ThompsonConfig::GAUSSIAN);
  RunThompsonQuadrature(state, c, /*want_all=*/true);
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
BENCHMARK(BM_Classic_ThompsonBernoulliQuadrature)
    ->ArgsProduct({{10, 100, 1000}, {0, 10000, 100000}});
BENCHMARK(BM_Classic_ThompsonGaussianQuadrature)
    ->ArgsProduct({{10, 100, 1000}, {0, 10000, 100000}});
BENCHMARK(BM_Classic_ThompsonBernoulliAllProbabilities)
    ->ArgsProduct({{10, 100, 1000}, {0, 10000, 100000}});
BENCHMARK(BM_Classic_ThompsonGaussianAllProbabilities)
    ->ArgsProduct({{10, 100, 1000}, {0, 10000, 100000}});
BENCHMARK(BM_Classic_LinUcb)->ArgsProduct({{5, 20, 100}, {10, 100, 1000}});

}  // namespace
}  // namespace bandit
