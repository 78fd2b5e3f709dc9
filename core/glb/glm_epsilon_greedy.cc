#include "core/glb/glm_epsilon_greedy.h"

#include <cmath>

#include "core/state_io.h"

namespace bandit::glb {

absl::StatusOr<std::unique_ptr<Policy>> GlmEpsilonGreedy::Make(
    const bandit::v1::PolicyConfig& config, uint64_t seed) {
  const auto& c = config.glm_epsilon_greedy();
  auto p = ParseParams("glm_epsilon_greedy", c);
  if (!p.ok()) return p.status();
  const double eps = c.has_epsilon() ? c.epsilon() : 0.1;
  if (auto s = CheckRange("glm_epsilon_greedy.epsilon", eps, 0.0, 1.0); !s.ok()) return s;
  return std::unique_ptr<Policy>(new GlmEpsilonGreedy(*p, eps, seed));
}

GlmEpsilonGreedy::GlmEpsilonGreedy(const GlbParams& p, double epsilon, uint64_t seed)
    : p_(p), epsilon_(epsilon), rng_(seed), data_(p.d, 0) {
  theta_ = Vector::Zero(p.d);
}

absl::StatusOr<Decision> GlmEpsilonGreedy::Select(const SelectContext& ctx) {
  if (auto s = CheckCandidates(ctx.candidates, p_.d, p_.max_feature_norm); !s.ok()) return s;
  const int n = static_cast<int>(ctx.candidates.size());
  Vector logit(n);
  int greedy = 0;
  for (int i = 0; i < n; ++i) {
    logit[i] = ctx.candidates[i].dot(theta_);
    if (logit[i] > logit[greedy]) greedy = i;
  }
  Decision d;
  const bool explore = rng_.Uniform() < epsilon_;
  d.arm = explore ? static_cast<int>(rng_.UniformInt(n)) : greedy;
  d.propensity = epsilon_ / n + (d.arm == greedy ? 1.0 - epsilon_ : 0.0);
  d.estimated_gap = p_.link.Mu(logit[greedy]) - p_.link.Mu(logit[d.arm]);
  if (ctx.want_scores) {
    d.scores = Vector::Constant(n, epsilon_ / n);
    d.scores[greedy] += 1.0 - epsilon_;
    d.score_kind = bandit::v1::PROBABILITY;
  }
  d.diagnostics = {{"mean", p_.link.Mu(logit[d.arm])}, {"explore", explore ? 1.0 : 0.0}};
  return d;
}

absl::Status GlmEpsilonGreedy::Update(const Observation& obs) {
  if (auto s = CheckFeatures(obs.features, p_.d, p_.max_feature_norm); !s.ok()) return s;
  if (auto s = p_.link.CheckReward("reward", obs.reward); !s.ok()) return s;
  data_.Add(obs.features, obs.reward);
  const double lambda = p_.lambda * std::log(2.0 + static_cast<double>(data_.size()));
  theta_ = FitGlmMle(p_.link, data_, lambda, theta_, p_.S).theta;
  ++t_;
  return absl::OkStatus();
}

void GlmEpsilonGreedy::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  data_.Save(w);
  w.Put("theta", theta_);
  w.PutInt("t", t_);
  w.PutRng(rng_);
}

absl::Status GlmEpsilonGreedy::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  GlmHistory data = data_;
  Vector theta;
  int64_t t;
  Rng rng;
  if (auto s = data.Restore(r); !s.ok()) return s;
  if (auto s = r.Get("theta", &theta, p_.d); !s.ok()) return s;
  if (auto s = r.GetInt("t", &t); !s.ok()) return s;
  if (auto s = r.GetRng(&rng); !s.ok()) return s;
  if (!theta.allFinite())
    return absl::InvalidArgumentError("state theta has non-finite values, expected finite");
  data_ = std::move(data);
  theta_ = std::move(theta);
  t_ = t;
  rng_ = rng;
  return absl::OkStatus();
}

int64_t GlmEpsilonGreedy::StateBytes() const {
  return data_.Bytes() + theta_.size() * sizeof(double) + sizeof(t_) + sizeof(rng_);
}

std::vector<std::pair<std::string, double>> GlmEpsilonGreedy::Summary() const {
  return {
      {"rounds", static_cast<double>(t_)}, {"epsilon", epsilon_}, {"theta_norm", theta_.norm()}};
}

absl::Status GlmEpsilonGreedy::Reconfigure(Policy& fresh) {
  auto* next = dynamic_cast<GlmEpsilonGreedy*>(&fresh);
  if (next == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat("glm_epsilon_greedy cannot become policy '", fresh.name(), "' live"));
  const GlbParams& q = next->p_;
  if (q.d != p_.d || q.link.kind() != p_.link.kind() || q.link.g() != p_.link.g() || q.S != p_.S ||
      q.R != p_.R || q.lambda != p_.lambda || q.delta != p_.delta ||
      q.radius_multiplier != p_.radius_multiplier || q.max_feature_norm != p_.max_feature_norm)
    return absl::FailedPreconditionError(
        "glm_epsilon_greedy changes only its epsilon live (its fit depends on the other "
        "parameters)");
  epsilon_ = next->epsilon_;
  return absl::OkStatus();
}

}  // namespace bandit::glb
