// Per-round cost of the mixture policies (Select + Update) at steady state, by objective and
// feature dimension, and its flatness in t (state is constant in t, so the cost is too).
//   bandit-microbench --benchmark_filter=Mixture
#include <benchmark/benchmark.h>

#include "core/registry.h"
#include "core/sim/generators_env.h"

namespace bandit {
namespace {

using bandit::v1::MixtureConfig;

std::unique_ptr<Policy> Make(const sim::GeneratorsEnv& env, bandit::v1::MixtureObjective obj,
                             MixtureConfig::Algorithm algo, int D, int S) {
  bandit::v1::PolicyConfig pc;
  pc.set_num_arms(env.arms());
  auto* c = pc.mutable_mixture();
  c->set_algorithm(algo);
  c->set_objective(obj);
  c->set_dimension(env.dim());
  c->set_eg_steps(S);
  c->set_warm_start(5);
  if (obj == bandit::v1::FD) {
    const Eigen::VectorXd mu = env.ReferenceMean();
    const Eigen::MatrixXd cov = env.ReferenceCovariance();
    for (int j = 0; j < env.dim(); ++j) c->add_reference_mean(mu[j]);
    for (int r = 0; r < env.dim(); ++r)
      for (int k = 0; k < env.dim(); ++k) c->add_reference_covariance(cov(r, k));
  } else {
    c->set_random_features(D);
    c->set_bandwidth(0.5 * std::sqrt(2.0 * env.dim()));
  }
  if (obj == bandit::v1::KD) {
    Rng rng(7);
    for (int r = 0; r < 500; ++r) {
      const Eigen::VectorXd y = env.SampleReference(rng);
      for (int j = 0; j < env.dim(); ++j) c->add_reference_samples(y[j]);
    }
  }
  return *CreatePolicy(pc, 1);
}

// args: objective, D (features; d for FD), warm-up rounds before timing.
void BM_MixtureGreedyRound(benchmark::State& state) {
  const auto obj = static_cast<bandit::v1::MixtureObjective>(state.range(0));
  const int D = static_cast<int>(state.range(1));
  sim::GeneratorsEnvConfig ec;
  ec.arms = 4;
  ec.d = obj == bandit::v1::FD ? D : 16;
  auto env = *sim::GeneratorsEnv::Make(ec);
  auto p = Make(env, obj, MixtureConfig::MIXTURE_GREEDY, D, 10);
  Rng rng(3);
  auto step = [&] {
    auto d = p->Select({});
    Observation o;
    o.arm_id = d->arm_id;
    o.sample = GeneratedSample{env.Sample(d->arm, rng), std::nullopt};
    (void)p->Update(o);
  };
  for (int64_t t = 0; t < state.range(2); ++t) step();
  for (auto _ : state) step();
  state.counters["state_bytes"] = static_cast<double>(p->StateBytes());
}

BENCHMARK(BM_MixtureGreedyRound)
    ->ArgNames({"objective", "D", "warmup"})
    ->Args({bandit::v1::FD, 16, 100})
    ->Args({bandit::v1::FD, 16, 10000})
    ->Args({bandit::v1::FD, 64, 100})
    ->Args({bandit::v1::VENDI, 64, 100})
    ->Args({bandit::v1::VENDI, 64, 10000})
    ->Args({bandit::v1::VENDI, 256, 100})
    ->Args({bandit::v1::RKE, 64, 100})
    ->Args({bandit::v1::KD, 64, 100})
    ->Args({bandit::v1::KD, 64, 10000})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace bandit
