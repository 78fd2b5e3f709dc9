// Vowpal Wabbit's contextual-bandit learner (policy vw), policy only, in process: one round is a
// Select over 50 actions (a 20-feature context in 2 namespaces, 10 features per action, the
// vectors already hashed with `-q ::` as the feature space builds them: 435 terms per action)
// plus the Update of the chosen one. Personalizer's learning policy and SquareCB, 2^18.
// Beside them, on the same vectors, LinUCB's sketched covariance (sketch sizes 8 to 64) and its
// diagonal one: these rounds cycle through the workload's 117 distinct contexts (after 2,000
// rounds of warm-up), since what a sketch costs grows with the coordinates it has seen; VW's
// Personalizer round is run that way too for the side-by-side ratio.
// Run: build/bin/bandit-microbench --benchmark_filter='Vw|Sketched'
//      (`--benchmark_repetitions=5` for medians)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/features/feature_space.h"
#include "core/registry.h"
#include "core/rng.h"

namespace bandit {
namespace {

// 50 actions' vectors for one round: the context and the actions as JSON, hashed by the
// feature space of the arguments.
std::vector<SparseVector> RoundVectors(const features::FeatureSpace& space, int round) {
  features::InputLimits limits;
  features::ParsedFeatures shared, action;
  std::string context = R"({"User":{)";
  for (int f = 0; f < 10; ++f)
    absl::StrAppend(&context, f ? "," : "", R"("u)", f, R"(":"v)", (round * 7 + f * 3) % 13,
                    R"(")");
  absl::StrAppend(&context, R"(},"Context":{)");
  for (int f = 0; f < 10; ++f)
    absl::StrAppend(&context, f ? "," : "", R"("c)", f, R"(":)", 0.1 * ((round + f) % 9));
  absl::StrAppend(&context, "}}");
  if (!space.Parse(context, "context", limits, false, &shared).ok()) std::abort();
  std::vector<SparseVector> out(50);
  for (int a = 0; a < 50; ++a) {
    std::string json = R"({"Action":{)";
    for (int f = 0; f < 10; ++f)
      absl::StrAppend(&json, f ? "," : "", R"("a)", f, R"(":"x)", (a * 11 + f) % 97, R"(")");
    absl::StrAppend(&json, "}}");
    action.Clear();
    if (!space.Parse(json, "action", limits, false, &action).ok()) std::abort();
    space.Featurize(action, &shared, &out[a].index, &out[a].value);
  }
  return out;
}

// Select + Update rounds over the first `contexts` rounds of the workload, cycled, after `warmup`
// rounds that let the policy see the coordinates its choices bring.
void RunRounds(benchmark::State& state, const bandit::v1::PolicyConfig& config, int contexts,
               int warmup) {
  auto policy = CreatePolicy(config, 7);
  if (!policy.ok()) std::abort();
  features::FeatureSpaceOptions o;
  o.bits = 18;
  o.interactions = {"::"};
  auto space = *features::FeatureSpace::Create(o);
  std::vector<std::vector<SparseVector>> rounds;
  for (int i = 0; i < contexts; ++i) rounds.push_back(RoundVectors(space, i));
  Rng env(1);
  Observation obs;
  size_t r = 0;
  const auto round = [&] {
    const auto& xs = rounds[r++ % rounds.size()];
    SelectContext ctx;
    ctx.sparse_candidates = xs;
    auto d = (*policy)->Select(ctx);
    obs.sparse_features = xs[d->arm];
    obs.memo = d->memo;
    obs.reward = env.Bernoulli(d->arm % 5 == 0 ? 0.6 : 0.2) ? 1.0 : 0.0;
    benchmark::DoNotOptimize((*policy)->Update(obs));
  };
  for (int i = 0; i < warmup; ++i) round();
  for (auto _ : state) round();
  state.counters["terms_per_action"] = static_cast<double>(rounds[0][0].size());
  for (const auto& [key, value] : (*policy)->Summary())
    if (key == "seen_coordinates") state.counters["seen_coordinates"] = value;
}

void RunVwRound(benchmark::State& state, const std::string& arguments) {
  bandit::v1::PolicyConfig config;
  config.mutable_vw()->set_arguments(arguments);
  // One round's vectors, decided on again and again (featurization is not what is measured
  // here). In the server a Select's vectors were just written by its featurization, so they are
  // in cache; cycling pre-built rounds (260 KB each) would measure the cache misses of reading
  // them back instead.
  RunRounds(state, config, /*contexts=*/1, /*warmup=*/0);
}

// Every round of the workload's cycle (117 contexts: 13 user patterns x 9 numeric ones), after
// 2,000 rounds of warm-up.
void RunCyclingRound(benchmark::State& state, const bandit::v1::PolicyConfig& config) {
  RunRounds(state, config, /*contexts=*/117, /*warmup=*/2000);
}

void BM_VwRoundPersonalizerCycling(benchmark::State& state) {
  bandit::v1::PolicyConfig config;
  config.mutable_vw()->set_arguments(
      "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q :: -b 18");
  RunCyclingRound(state, config);
}
BENCHMARK(BM_VwRoundPersonalizerCycling)->Unit(benchmark::kMicrosecond);

void BM_LinUcbSketchedRound(benchmark::State& state) {
  bandit::v1::PolicyConfig config;
  config.mutable_linucb()->set_dimension(1 << 18);
  config.mutable_linucb()->set_alpha(0.25);
  config.mutable_linucb()->set_covariance(bandit::v1::COVARIANCE_SKETCHED);
  config.mutable_linucb()->set_sketch_size(static_cast<int>(state.range(0)));
  RunCyclingRound(state, config);
}
BENCHMARK(BM_LinUcbSketchedRound)
    ->Arg(8)
    ->Arg(16)
    ->Arg(32)
    ->Arg(64)
    ->Unit(benchmark::kMicrosecond);

void BM_LinUcbDiagonalRoundCycling(benchmark::State& state) {
  bandit::v1::PolicyConfig config;
  config.mutable_linucb()->set_dimension(1 << 18);
  config.mutable_linucb()->set_alpha(0.25);
  config.mutable_linucb()->set_covariance(bandit::v1::COVARIANCE_DIAGONAL);
  RunCyclingRound(state, config);
}
BENCHMARK(BM_LinUcbDiagonalRoundCycling)->Unit(benchmark::kMicrosecond);

void BM_VwRoundPersonalizer(benchmark::State& state) {
  RunVwRound(state,
             "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q :: -b 18");
}
BENCHMARK(BM_VwRoundPersonalizer);

void BM_VwRoundSquareCb(benchmark::State& state) {
  RunVwRound(state, "--cb_explore_adf --squarecb -q :: -b 18");
}
BENCHMARK(BM_VwRoundSquareCb);

}  // namespace
}  // namespace bandit
