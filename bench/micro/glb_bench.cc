// Per-round cost (Select + Update) of the GLB policies.
//   GlbOmd/d/arms:        GLB-OMD at d = 5, 20, 100 with 10/50/100/1000 candidates (O(d^3 + d^2 arms))
//   GlbOmdAtRound/t:      GLB-OMD (d = 5, 30 arms) after t = 10^3 and 10^5 rounds: flat in t
//   DomdGlb/d/arms:       DOMD-GLB, same grid as GLB-OMD (refactorizes H every round)
//   GlmUcbAtRound/t:      GLM-UCB (MLE on all past rounds, d = 5, 30 arms) after t rounds: O(t)
//   bandit-microbench --benchmark_filter=Glb
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "core/registry.h"
#include "core/rng.h"

namespace bandit {
namespace {

struct Stream {
  std::vector<std::vector<Vector>> sets;  // pool of candidate sets, reused cyclically
  Vector theta_star;
  Rng rng{42};
  size_t next = 0;

  Stream(int d, int arms, double S, int pool = 32) {
    Rng g(7);
    theta_star = Vector(d);
    for (int j = 0; j < d; ++j) theta_star[j] = g.Normal();
    theta_star *= S / theta_star.norm();
    sets.resize(pool);
    for (auto& s : sets) {
      s.resize(arms);
      for (auto& x : s) {
        x = Vector(d);
        for (int j = 0; j < d; ++j) x[j] = g.Normal();
        x /= x.norm();
      }
    }
  }
  // One Select + Update round.
  void Round(Policy& p) {
    const auto& c = sets[next++ % sets.size()];
    SelectContext ctx;
    ctx.candidates = c;
    auto d = p.Select(ctx);
    Observation obs;
    obs.features = c[d->arm];
    obs.reward = rng.Bernoulli(1.0 / (1.0 + std::exp(-obs.features.dot(theta_star)))) ? 1.0 : 0.0;
    (void)p.Update(obs);
  }
};

bandit::v1::PolicyConfig OmdConfig(int d) {
  bandit::v1::PolicyConfig c;
  c.mutable_glb_omd()->set_dimension(d);
  c.mutable_glb_omd()->set_s(3);
  return c;
}

bandit::v1::PolicyConfig DomdConfig(int d) {
  bandit::v1::PolicyConfig c;
  c.mutable_domd_glb()->set_dimension(d);
  c.mutable_domd_glb()->set_s(3);
  c.mutable_domd_glb()->set_gamma(0.99);
  return c;
}

bandit::v1::PolicyConfig UcbConfig(int d) {
  bandit::v1::PolicyConfig c;
  c.mutable_glm_ucb()->set_dimension(d);
  c.mutable_glm_ucb()->set_s(3);
  return c;
}

void RunGrid(benchmark::State& state, const bandit::v1::PolicyConfig& config) {
  const int d = static_cast<int>(state.range(0)), arms = static_cast<int>(state.range(1));
  auto p = *CreatePolicy(config, 1);
  Stream s(d, arms, 3.0);
  for (int t = 0; t < 200; ++t) s.Round(*p);  // past the first rounds
  for (auto _ : state) s.Round(*p);
  state.counters["d"] = d;
  state.counters["arms"] = arms;
}

void BM_GlbOmd(benchmark::State& state) {
  RunGrid(state, OmdConfig(static_cast<int>(state.range(0))));
}
void BM_DomdGlb(benchmark::State& state) {
  RunGrid(state, DomdConfig(static_cast<int>(state.range(0))));
}

void AtRound(benchmark::State& state, const bandit::v1::PolicyConfig& config) {
  const int64_t t0 = state.range(0);
  auto p = *CreatePolicy(config, 1);
  Stream s(5, 30, 3.0);
  for (int64_t t = 0; t < t0; ++t) s.Round(*p);
  // Measure a bounded number of rounds so the state stays at ~t0 rounds.
  for (auto _ : state) s.Round(*p);
  state.counters["t"] = static_cast<double>(t0);
  state.counters["state_bytes"] = static_cast<double>(p->StateBytes());
}

void BM_GlbOmdAtRound(benchmark::State& state) { AtRound(state, OmdConfig(5)); }
void BM_GlmUcbAtRound(benchmark::State& state) { AtRound(state, UcbConfig(5)); }

BENCHMARK(BM_GlbOmd)
    ->ArgsProduct({{5, 20, 100}, {10, 50, 100, 1000}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DomdGlb)
    ->ArgsProduct({{5, 20, 100}, {10, 50, 100, 1000}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GlbOmdAtRound)->Arg(1000)->Arg(100000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GlmUcbAtRound)->Arg(1000)->Arg(3000)->Iterations(200)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace bandit
