#include "core/classic/ucb1.h"

#include <cmath>

#include "core/state_io.h"
#include "core/validate.h"

namespace bandit {

absl::StatusOr<std::unique_ptr<Policy>> Ucb1::Make(const bandit::v1::PolicyConfig& config,
                                                   uint64_t /*seed: deterministic policy*/) {
  const auto& c = config.ucb1();
  double explore;
  if (auto s = OptionalParam("ucb1.exploration", c.has_exploration(), c.exploration(), 1.0,
                             &explore,
                             [](absl::string_view f, double v) { return CheckRange(f, v, 0.0, 1e12); });
      !s.ok())
    return s;
  auto arms = ArmSet::FromConfig(config, ArmFeatures::kNone);
  if (!arms.ok()) return arms.status();
  return std::unique_ptr<Policy>(new Ucb1(*std::move(arms), explore));
}

Ucb1::Ucb1(ArmSet arms, double c) : arms_(std::move(arms)), c_(c) {
  counts_ = Vector::Zero(arms_.size());
  means_ = Vector::Zero(arms_.size());
}

Vector Ucb1::Indices() const {
  const int k = arms_.size();
  Vector idx(k);
  // n >= 1 whenever some arm has n_i >= 1, so ln n >= 0.
  const double log_n = n_ > 0 ? std::log(static_cast<double>(n_)) : 0.0;
  for (int i = 0; i < k; ++i)
    idx[i] = counts_[i] == 0 ? kUntriedScore
                             : means_[i] + c_ * std::sqrt(2.0 * log_n / counts_[i]);  // Fig. 1
  return idx;
}

absl::StatusOr<Decision> Ucb1::Select(const SelectContext& ctx) {
  const int k = arms_.size();
  if (k == 0) return absl::FailedPreconditionError("the arm set is empty, expected at least one arm");
  const Vector idx = Indices();
  int best = 0;
  for (int i = 1; i < k; ++i)
    if (idx[i] > idx[best]) best = i;  // strict: lowest slot wins ties (untried arms in order)
  ++rounds_;
  Decision d;
  d.arm = best;
  d.arm_id = arms_.id(best);
  d.propensity = 1.0;
  if (counts_[best] > 0) {
    double max_mean = -std::numeric_limits<double>::infinity();
    for (int i = 0; i < k; ++i)
      if (counts_[i] > 0) max_mean = std::max(max_mean, means_[i]);
    d.estimated_gap = max_mean - means_[best];
  }  // else: no estimate for an untried arm, gap stays NaN
  if (ctx.want_scores) {
    d.scores = idx;
    d.score_kind = bandit::v1::UPPER_CONFIDENCE_BOUND;
  }
  d.diagnostics = {{"ucb", idx[best]}, {"mean", means_[best]}, {"pulls", counts_[best]}};
  return d;
}

absl::Status Ucb1::Update(const Observation& obs) {
  if (auto s = CheckFinite("reward", obs.reward); !s.ok()) return s;
  auto slot = arms_.Find(obs.arm_id);
  if (!slot) return absl::NotFoundError(absl::StrCat("arm id '", obs.arm_id, "' is not in the arm set"));
  const int i = *slot;
  counts_[i] += 1.0;
  means_[i] += (obs.reward - means_[i]) / counts_[i];
  ++n_;
  return absl::OkStatus();
}

std::optional<double> Ucb1::EstimatedMean(int arm) const {
  if (arm < 0 || arm >= arms_.size() || counts_[arm] == 0) return std::nullopt;
  return means_[arm];
}

absl::Status Ucb1::AddArm(const bandit::v1::ArmSpec& arm) {
  if (auto s = arms_.CheckAdd(arm); !s.ok()) return s;
  const int slot = arms_.Add(arm);
  counts_.conservativeResize(slot + 1);
  means_.conservativeResize(slot + 1);
  counts_[slot] = 0;
  means_[slot] = 0;
  return absl::OkStatus();
}

absl::Status Ucb1::RemoveArm(absl::string_view arm_id) {
  auto slot = arms_.Remove(arm_id);
  if (!slot.ok()) return slot.status();
  EraseSlot(counts_, *slot);
  EraseSlot(means_, *slot);
  return absl::OkStatus();
}

void Ucb1::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  arms_.Save(w);
  w.Put("counts", counts_);
  w.Put("means", means_);
  w.PutInt("n", n_);
  w.PutInt("rounds", rounds_);
}

absl::Status Ucb1::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  ArmSet arms = arms_;
  if (auto s = arms.Restore(r); !s.ok()) return s;
  Vector counts, means;
  int64_t n, rounds;
  if (auto s = r.Get("counts", &counts, arms.size()); !s.ok()) return s;
  if (auto s = r.Get("means", &means, arms.size()); !s.ok()) return s;
  if (auto s = r.GetInt("n", &n); !s.ok()) return s;
  if (auto s = r.GetInt("rounds", &rounds); !s.ok()) return s;
  arms_ = std::move(arms);
  counts_ = std::move(counts);
  means_ = std::move(means);
  n_ = n;
  rounds_ = rounds;
  return absl::OkStatus();
}

int64_t Ucb1::StateBytes() const {
  return arms_.Bytes() + (counts_.size() + means_.size()) * static_cast<int64_t>(sizeof(double)) +
         sizeof(n_) + sizeof(rounds_);
}

std::vector<std::pair<std::string, double>> Ucb1::Summary() const {
  return {{"updates", static_cast<double>(n_)}, {"rounds", static_cast<double>(rounds_)}};
}

}  // namespace bandit
