// Vowpal Wabbit's contextual-bandit learner (policy vw), policy only, in process: one round is a
// Select over 50 actions (a 20-feature context in 2 namespaces, 10 features per action, the
// vectors already hashed with `-q ::` as the feature space builds them: 435 terms per action)
// plus the Update of the chosen one. Personalizer's learning policy and SquareCB, 2^18.
// Run: build/bin/bandit-microbench --benchmark_filter=Vw
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

void RunVwRound(benchmark::State& state, const std::string& arguments) {
  bandit::v1::PolicyConfig config;
  config.mutable_vw()->set_arguments(arguments);
  auto policy = CreatePolicy(config, 7);
  if (!policy.ok()) std::abort();
  features::FeatureSpaceOptions o;
  o.bits = 18;
  o.interactions = {"::"};
  auto space = *features::FeatureSpace::Create(o);
  // One round's vectors, decided on again and again (featurization is not what is measured
  // here). In the server a Select's vectors were just written by its featurization, so they are
  // in cache; cycling pre-built rounds (260 KB each) would measure the cache misses of reading
  // them back instead.
  std::vector<std::vector<SparseVector>> rounds;
  rounds.push_back(RoundVectors(space, 0));
  Rng env(1);
  Observation obs;
  size_t r = 0;
  for (auto _ : state) {
    const auto& xs = rounds[r++ % rounds.size()];
    SelectContext ctx;
    ctx.sparse_candidates = xs;
    auto d = (*policy)->Select(ctx);
    obs.sparse_features = xs[d->arm];
    obs.memo = d->memo;
    obs.reward = env.Bernoulli(d->arm % 5 == 0 ? 0.6 : 0.2) ? 1.0 : 0.0;
    benchmark::DoNotOptimize((*policy)->Update(obs));
  }
  state.counters["terms_per_action"] = static_cast<double>(rounds[0][0].size());
}

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
