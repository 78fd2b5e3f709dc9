#include "core/classic/epsilon_greedy.h"

#include <algorithm>
#include <limits>

#include "core/validate.h"

namespace bandit {

absl::StatusOr<std::unique_ptr<Policy>> EpsilonGreedy::Make(const bandit::v1::PolicyConfig& config,
                                                            uint64_t seed) {
  const auto& c = config.epsilon_greedy();
  if (auto s = CheckRange("epsilon_greedy.epsilon", c.epsilon(), 0.0, 1.0); !s.ok()) return s;
  if (auto s = CheckRange("epsilon_greedy.decay", c.decay(), 0.0, 1e12); !s.ok()) return s;
  auto arms = ArmSet::FromConfig(config, ArmFeatures::kNone);
  if (!arms.ok()) return arms.status();
  return std::unique_ptr<Policy>(new EpsilonGreedy(*std::move(arms), c.epsilon(), c.decay(), seed));
}

EpsilonGreedy::EpsilonGreedy(ArmSet arms, double epsilon, double decay, uint64_t seed)
    : arms_(std::move(arms)), epsilon_(epsilon), decay_(decay), rng_(seed) {
  stats_ = ArmMeans(arms_.size());
}

double EpsilonGreedy::CurrentEpsilon() const {
  return epsilon_ / (1.0 + decay_ * static_cast<double>(t_));
}

Vector EpsilonGreedy::Probabilities(std::span<const char> allowed) const {
  const int k = arms_.size();
  const double eps = CurrentEpsilon();
  const double best = BestAllowedMean(allowed);
  const int n = CountAllowed(allowed, k);
  int ties = 0;
  for (int i = 0; i < k; ++i) ties += IsAllowed(allowed, i) && stats_.means[i] == best;
  Vector p = Vector::Zero(k);
  for (int i = 0; i < k; ++i) {
    if (!IsAllowed(allowed, i)) continue;
    p[i] = eps / n;
    if (stats_.means[i] == best) p[i] += (1.0 - eps) / ties;
  }
  return p;
}

double EpsilonGreedy::BestAllowedMean(std::span<const char> allowed) const {
  double best = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < arms_.size(); ++i)
    if (IsAllowed(allowed, i)) best = std::max(best, stats_.means[i]);
  return best;
}

absl::StatusOr<Decision> EpsilonGreedy::Select(const SelectContext& ctx) {
  const int k = arms_.size();
  if (k == 0)
    return absl::FailedPreconditionError("the arm set is empty, expected at least one arm");
  const std::span<const char> allowed = ctx.allowed_arms;
  if (auto s = CheckAllowedArms(allowed, k); !s.ok()) return s;
  const Vector p = Probabilities(allowed);
  const double best = BestAllowedMean(allowed);
  Decision d;
  if (rng_.Uniform() < CurrentEpsilon()) {
    d.arm = NthAllowed(allowed, static_cast<int>(rng_.UniformInt(CountAllowed(allowed, k))));
  } else {
    int ties = 0;
    for (int i = 0; i < k; ++i) ties += IsAllowed(allowed, i) && stats_.means[i] == best;
    int pick = static_cast<int>(rng_.UniformInt(ties));
    for (int i = 0; i < k; ++i)
      if (IsAllowed(allowed, i) && stats_.means[i] == best && pick-- == 0) {
        d.arm = i;
        break;
      }
  }
  ++t_;
  d.arm_id = arms_.id(d.arm);
  d.propensity = p[d.arm];
  d.estimated_gap = best - stats_.means[d.arm];
  if (ctx.want_scores) {
    d.scores = p;
    d.score_kind = bandit::v1::PROBABILITY;
  }
  d.diagnostics = {{"mean", stats_.means[d.arm]}, {"pulls", stats_.counts[d.arm]}};
  return d;
}

absl::Status EpsilonGreedy::Update(const Observation& obs) {
  if (auto s = CheckFinite("reward", obs.reward); !s.ok()) return s;
  auto slot = arms_.Find(obs.arm_id);
  if (!slot)
    return absl::NotFoundError(absl::StrCat("arm id '", obs.arm_id, "' is not in the arm set"));
  stats_.Observe(*slot, obs.reward);
  return absl::OkStatus();
}

std::optional<double> EpsilonGreedy::EstimatedMean(int arm) const {
  if (arm < 0 || arm >= arms_.size()) return std::nullopt;
  return stats_.means[arm];
}

absl::Status EpsilonGreedy::AddArm(const bandit::v1::ArmSpec& arm) {
  if (auto s = arms_.CheckAdd(arm); !s.ok()) return s;
  arms_.Add(arm);
  stats_.AddSlot();
  return absl::OkStatus();
}

absl::Status EpsilonGreedy::RemoveArm(absl::string_view arm_id) {
  auto slot = arms_.Remove(arm_id);
  if (!slot.ok()) return slot.status();
  stats_.EraseSlot(*slot);
  return absl::OkStatus();
}

void EpsilonGreedy::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  arms_.Save(w);
  stats_.Save(w);
  w.PutInt("t", t_);
  w.PutRng(rng_);
}

absl::Status EpsilonGreedy::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  ArmSet arms = arms_;
  if (auto s = arms.Restore(r); !s.ok()) return s;
  ArmMeans stats;
  int64_t t;
  Rng rng;
  if (auto s = stats.Restore(r, arms.size()); !s.ok()) return s;
  if (auto s = r.GetInt("t", &t); !s.ok()) return s;
  if (auto s = r.GetRng(&rng); !s.ok()) return s;
  arms_ = std::move(arms);
  stats_ = std::move(stats);
  t_ = t;
  rng_ = rng;
  return absl::OkStatus();
}

int64_t EpsilonGreedy::StateBytes() const {
  return arms_.Bytes() + stats_.Bytes() + sizeof(t_) + sizeof(rng_);
}

absl::Status EpsilonGreedy::Reconfigure(Policy& fresh) {
  auto* next = dynamic_cast<EpsilonGreedy*>(&fresh);
  if (next == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat("epsilon_greedy cannot become policy '", fresh.name(), "' live"));
  if (next->arms_.ids() != arms_.ids())
    return absl::FailedPreconditionError(
        "the new config lists different arms; change arms with AddArms and RemoveArms");
  epsilon_ = next->epsilon_;
  decay_ = next->decay_;
  return absl::OkStatus();
}

}  // namespace bandit
