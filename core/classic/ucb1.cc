#include "core/classic/ucb1.h"

#include <cmath>

#include "core/state_io.h"
#include "core/validate.h"

namespace bandit {

absl::StatusOr<std::unique_ptr<Policy>> Ucb1::Make(const bandit::v1::PolicyConfig& config,
                                                   uint64_t /*seed: deterministic policy*/) {
  const auto& c = config.ucb1();
  double explore;
  if (auto s =
          OptionalParam("ucb1.exploration", c.has_exploration(), c.exploration(), 1.0, &explore,
                        [](absl::string_view f, double v) { return CheckRange(f, v, 0.0, 1e12); });
      !s.ok())
    return s;
  auto arms = ArmSet::FromConfig(config, ArmFeatures::kNone);
  if (!arms.ok()) return arms.status();
  return std::unique_ptr<Policy>(new Ucb1(*std::move(arms), explore));
}

Ucb1::Ucb1(ArmSet arms, double c) : arms_(std::move(arms)), c_(c) {
  stats_ = ArmMeans(arms_.size());
}

Vector Ucb1::Indices() const {
  const int k = arms_.size();
  Vector idx(k);
  // n >= 1 whenever some arm has n_i >= 1, so ln n >= 0.
  const double log_n = n_ > 0 ? std::log(static_cast<double>(n_)) : 0.0;
  for (int i = 0; i < k; ++i)
    idx[i] = stats_.counts[i] == 0
                 ? kUntriedScore
                 : stats_.means[i] + c_ * std::sqrt(2.0 * log_n / stats_.counts[i]);  // Fig. 1
  return idx;
}

absl::StatusOr<Decision> Ucb1::Select(const SelectContext& ctx) {
  const int k = arms_.size();
  if (k == 0)
    return absl::FailedPreconditionError("the arm set is empty, expected at least one arm");
  const std::span<const char> allowed = ctx.allowed_arms;
  if (auto s = CheckAllowedArms(allowed, k); !s.ok()) return s;
  const Vector idx = Indices();
  int best = NthAllowed(allowed, 0);
  for (int i = best + 1; i < k; ++i)  // strict: lowest slot wins ties (untried arms in order)
    if (IsAllowed(allowed, i) && idx[i] > idx[best]) best = i;
  ++rounds_;
  Decision d;
  d.arm = best;
  d.arm_id = arms_.id(best);
  d.propensity = 1.0;
  if (stats_.counts[best] > 0) {
    double max_mean = -std::numeric_limits<double>::infinity();
    for (int i = 0; i < k; ++i)
      if (IsAllowed(allowed, i) && stats_.counts[i] > 0)
        max_mean = std::max(max_mean, stats_.means[i]);
    d.estimated_gap = max_mean - stats_.means[best];
  }  // else: no estimate for an untried arm, gap stays NaN
  if (ctx.want_scores) {
    d.scores = idx;
    d.score_kind = bandit::v1::UPPER_CONFIDENCE_BOUND;
  }
  d.diagnostics = {
      {"ucb", idx[best]}, {"mean", stats_.means[best]}, {"pulls", stats_.counts[best]}};
  return d;
}

absl::Status Ucb1::Update(const Observation& obs) {
  if (auto s = CheckFinite("reward", obs.reward); !s.ok()) return s;
  auto slot = arms_.Find(obs.arm_id);
  if (!slot)
    return absl::NotFoundError(absl::StrCat("arm id '", obs.arm_id, "' is not in the arm set"));
  stats_.Observe(*slot, obs.reward);
  ++n_;
  return absl::OkStatus();
}

std::optional<double> Ucb1::EstimatedMean(int arm) const {
  if (arm < 0 || arm >= arms_.size() || stats_.counts[arm] == 0) return std::nullopt;
  return stats_.means[arm];
}

absl::Status Ucb1::AddArm(const bandit::v1::ArmSpec& arm) {
  if (auto s = arms_.CheckAdd(arm); !s.ok()) return s;
  arms_.Add(arm);
  stats_.AddSlot();
  return absl::OkStatus();
}

absl::Status Ucb1::RemoveArm(absl::string_view arm_id) {
  auto slot = arms_.Remove(arm_id);
  if (!slot.ok()) return slot.status();
  stats_.EraseSlot(*slot);
  return absl::OkStatus();
}

void Ucb1::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  arms_.Save(w);
  stats_.Save(w);
  w.PutInt("n", n_);
  w.PutInt("rounds", rounds_);
}

absl::Status Ucb1::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  ArmSet arms = arms_;
  if (auto s = arms.Restore(r); !s.ok()) return s;
  ArmMeans stats;
  int64_t n, rounds;
  if (auto s = stats.Restore(r, arms.size()); !s.ok()) return s;
  if (auto s = r.GetInt("n", &n); !s.ok()) return s;
  if (auto s = r.GetInt("rounds", &rounds); !s.ok()) return s;
  arms_ = std::move(arms);
  stats_ = std::move(stats);
  n_ = n;
  rounds_ = rounds;
  return absl::OkStatus();
}

int64_t Ucb1::StateBytes() const {
  return arms_.Bytes() + stats_.Bytes() + sizeof(n_) + sizeof(rounds_);
}

std::vector<std::pair<std::string, double>> Ucb1::Summary() const {
  return {{"updates", static_cast<double>(n_)}, {"rounds", static_cast<double>(rounds_)}};
}

}  // namespace bandit
