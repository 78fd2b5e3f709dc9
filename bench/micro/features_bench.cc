// Named features: the cost of Vowpal Wabbit's featurization and of a whole named round.
//   Features/Featurize: one request of 50 actions x 20 features (5 string, 15 numeric, in one
//     namespace) and a shared context of 20 features in one namespace, with -q UA: JSON parse
//     of every document + the merged, interacted sparse vector of every action, at 2^18. Also
//     without the interaction (linear terms only). Reported per action.
//   Features/Round: Select + Update through DecisionService (no storage) at the same shape:
//     LinUCB full-matrix at 2^8 over named inputs, beside the same policy fed the hashed
//     vectors as dense candidates (what the featurization adds to a round); the
//     diagonal-covariance LinUCB and GLB-OMD at 2^18 over named inputs (sparse vectors).
//   Features/Policy: the diagonal policies alone at 2^18, Select over the 50 hashed sparse
//     vectors + Update (the round without parsing and hashing).
// Run: build/bin/bandit-microbench --benchmark_filter=Features
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>

#include "absl/strings/str_cat.h"
#include "core/features/feature_space.h"
#include "core/registry.h"
#include "server/env/clock.h"
#include "server/service/decision_service.h"

namespace bandit {
namespace {

constexpr int kActions = 50;

std::string Context() {
  std::string s = R"({"User":{)";
  for (int i = 0; i < 20; ++i)
    absl::StrAppend(&s, i ? "," : "", "\"u", i, "\":", i < 5 ? absl::StrCat("\"v", i, "\"")
                                                           : absl::StrCat(0.1 * i));
  return s + "}}";
}

std::string Action(int a) {
  std::string s = R"({"Action":{)";
  for (int i = 0; i < 20; ++i)
    absl::StrAppend(&s, i ? "," : "", "\"f", i, "\":",
                    i < 5 ? absl::StrCat("\"item", a, "_", i, "\"") : absl::StrCat(0.01 * (a + i)));
  return s + "}}";
}

void Featurize(benchmark::State& state, std::vector<std::string> interactions) {
  features::FeatureSpaceOptions o;
  o.bits = 18;
  o.interactions = std::move(interactions);
  auto space = features::FeatureSpace::Create(o);
  if (!space.ok()) std::abort();
  const std::string context = Context();
  std::vector<std::string> actions;
  for (int a = 0; a < kActions; ++a) actions.push_back(Action(a));
  features::InputLimits limits;
  features::ParsedFeatures shared, action;
  features::SparseFeatures out;
  int64_t terms = 0;
  for (auto _ : state) {
    shared.Clear();
    if (!space->Parse(context, "context", limits, false, &shared).ok()) std::abort();
    for (const auto& json : actions) {
      action.Clear();
      if (!space->Parse(json, "action", limits, false, &action).ok()) std::abort();
      space->Featurize(action, &shared, false, &out);
      terms = static_cast<int64_t>(out.index.size());
      benchmark::DoNotOptimize(out.index.data());
    }
  }
  state.counters["terms_per_action"] = static_cast<double>(terms);
  state.counters["actions"] =
      benchmark::Counter(kActions, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(Featurize, Features_Featurize_qUA, std::vector<std::string>{"UA"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Featurize, Features_Featurize_linear, std::vector<std::string>{})
    ->Unit(benchmark::kMicrosecond);

constexpr char kNamedFull8[] =
    "policy { linucb { alpha: 0.5 } } feature_space { bits: 8 interactions: 'UA' }";
constexpr char kDenseFull256[] = "policy { linucb { alpha: 0.5 dimension: 256 } }";
constexpr char kNamedDiagonal18[] =
    "policy { linucb { alpha: 0.5 covariance: COVARIANCE_DIAGONAL } } "
    "feature_space { bits: 18 interactions: 'UA' }";
constexpr char kNamedGlbDiagonal18[] =
    "policy { glb_omd { lambda: 1 radius_multiplier: 0.01 max_feature_norm: 1e6 "
    "covariance: COVARIANCE_DIAGONAL } } feature_space { bits: 18 interactions: 'UA' }";

void Round(benchmark::State& state, const char* config) {
  const bool named = std::string(config).find("feature_space") != std::string::npos;
  server::ManualClock clock;
  server::DecisionService svc(&clock);
  bandit::v1::CreateInstanceRequest create;
  create.set_name("x");
  if (!google::protobuf::TextFormat::ParseFromString(config, create.mutable_config()))
    std::abort();
  bandit::v1::Instance inst;
  if (!svc.CreateInstance(create, &inst).ok()) std::abort();
  bandit::v1::SelectRequest req;
  req.set_instance("x");
  req.set_context(Context());
  for (int a = 0; a < kActions; ++a) {
    auto* n = req.add_actions();
    n->set_id(absl::StrCat("item", a));
    n->set_features(Action(a));
  }
  if (!named) {
    // The same request as hashed vectors, for the dense API.
    features::FeatureSpaceOptions o;
    o.bits = 8;
    o.interactions = {"UA"};
    auto space = *features::FeatureSpace::Create(o);
    features::ParsedFeatures shared;
    features::InputLimits limits;
    if (!space.Parse(req.context(), "c", limits, false, &shared).ok()) std::abort();
    bandit::v1::SelectRequest dense;
    dense.set_instance("x");
    for (const auto& a : req.actions()) {
      features::ParsedFeatures action;
      if (!space.Parse(a.features(), "a", limits, false, &action).ok()) std::abort();
      features::SparseFeatures f;
      space.Featurize(action, &shared, false, &f);
      std::vector<double> v(256, 0.0);
      for (size_t k = 0; k < f.index.size(); ++k) v[f.index[k]] += f.value[k];
      dense.add_candidates()->mutable_values()->Add(v.begin(), v.end());
    }
    req = std::move(dense);
  }
  bandit::v1::Decision d;
  bandit::v1::UpdateRequest up;
  up.set_instance("x");
  bandit::v1::UpdateResponse r;
  int64_t i = 0;
  for (auto _ : state) {
    if (!svc.Select(req, &d).ok()) std::abort();
    up.set_event_id(d.event_id());
    up.set_reward((d.arm_index() + i++) % 3 == 0 ? 1.0 : 0.0);
    if (!svc.Update(up, &r).ok()) std::abort();
  }
}
BENCHMARK_CAPTURE(Round, Features_Round_named_linucb_2e8, kNamedFull8)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Round, Features_Round_dense_linucb_256, kDenseFull256)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Round, Features_Round_named_linucb_diagonal_2e18, kNamedDiagonal18)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Round, Features_Round_named_glb_omd_diagonal_2e18, kNamedGlbDiagonal18)
    ->Unit(benchmark::kMicrosecond);

void PolicyRound(benchmark::State& state, const char* policy) {
  features::FeatureSpaceOptions o;
  o.bits = 18;
  o.interactions = {"UA"};
  auto space = *features::FeatureSpace::Create(o);
  features::InputLimits limits;
  features::ParsedFeatures shared;
  if (!space.Parse(Context(), "c", limits, false, &shared).ok()) std::abort();
  std::vector<SparseVector> xs;
  for (int a = 0; a < kActions; ++a) {
    features::ParsedFeatures action;
    if (!space.Parse(Action(a), "a", limits, false, &action).ok()) std::abort();
    features::SparseFeatures f;
    space.Featurize(action, &shared, false, &f);
    xs.push_back(SparseVector{f.index, f.value});
  }
  bandit::v1::PolicyConfig config;
  if (!google::protobuf::TextFormat::ParseFromString(policy, &config)) std::abort();
  auto p = CreatePolicy(config, 1);
  if (!p.ok()) std::abort();
  SelectContext ctx;
  ctx.sparse_candidates = xs;
  Observation obs;
  int64_t i = 0;
  for (auto _ : state) {
    auto d = (*p)->Select(ctx);
    if (!d.ok()) std::abort();
    obs.sparse_features = xs[d->arm];
    obs.reward = (d->arm + i++) % 3 == 0 ? 1.0 : 0.0;
    if (!(*p)->Update(obs).ok()) std::abort();
  }
}
BENCHMARK_CAPTURE(PolicyRound, Features_Policy_linucb_diagonal_2e18,
                  "linucb { dimension: 262144 alpha: 0.5 covariance: COVARIANCE_DIAGONAL }")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(PolicyRound, Features_Policy_glb_omd_diagonal_2e18,
                  "glb_omd { dimension: 262144 lambda: 1 radius_multiplier: 0.01 "
                  "max_feature_norm: 1e6 covariance: COVARIANCE_DIAGONAL }")
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace bandit
