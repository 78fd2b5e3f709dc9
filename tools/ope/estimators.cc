#include "tools/ope/estimators.h"

#include <algorithm>
#include <cmath>

namespace bandit::ope {
namespace {
constexpr double kZ95 = 1.959963984540054;  // two-sided 95 % normal quantile
}

Interval Estimators::Moments::Mean(int64_t n) const {
  Interval out;
  if (n == 0) return out;
  out.value = sum / n;
  const double var = n > 1 ? std::max(0.0, (sum_sq - n * out.value * out.value) / (n - 1)) : 0.0;
  out.se = std::sqrt(var / n);
  out.lo = out.value - kZ95 * out.se;
  out.hi = out.value + kZ95 * out.se;
  return out;
}

void Estimators::Add(const ScoredEvent& e) {
  double w = e.target[e.logged_action] / e.logged_propensity;
  largest_weight_ = std::max(largest_weight_, w);
  if (max_weight_ > 0 && w > max_weight_) {
    w = max_weight_;
    ++clipped_;
  }
  const double r = e.reward;
  ++n_;
  ips_.Add(w * r);
  const double dm = e.target.dot(e.q);
  dm_.Add(dm);
  dr_.Add(dm + w * (r - e.q[e.logged_action]));
  logged_.Add(r);
  w_ += w;
  wr_ += w * r;
  w2_ += w * w;
  w2r_ += w * w * r;
  w2r2_ += w * w * r * r;
}

Interval Estimators::Ips() const { return ips_.Mean(n_); }
Interval Estimators::DirectMethod() const { return dm_.Mean(n_); }
Interval Estimators::DoublyRobust() const { return dr_.Mean(n_); }
Interval Estimators::Logged() const { return logged_.Mean(n_); }

Interval Estimators::Snips() const {
  Interval out;
  if (n_ == 0 || w_ <= 0) return out;
  out.value = wr_ / w_;
  // Delta method: sum w^2 (r - V)^2 / (sum w)^2, expanded into the running sums.
  const double num = w2r2_ - 2 * out.value * w2r_ + out.value * out.value * w2_;
  out.se = std::sqrt(std::max(0.0, num)) / w_;
  out.lo = out.value - kZ95 * out.se;
  out.hi = out.value + kZ95 * out.se;
  return out;
}

double Estimators::EffectiveSampleSize() const { return w2_ > 0 ? w_ * w_ / w2_ : 0.0; }

Vector DirectModel::WithIntercept(const Vector& v) {
  Vector z(v.size() + 1);
  z.head(v.size()) = v;
  z[v.size()] = 1.0;
  return z;
}

void DirectModel::Ridge::Init(int dim, double lambda) {
  a = lambda * Eigen::MatrixXd::Identity(dim, dim);
  b = Vector::Zero(dim);
}

double DirectModel::Ridge::Predict(const Vector& z) const { return z.dot(a.ldlt().solve(b)); }

void DirectModel::Ridge::Learn(const Vector& z, double r) {
  a.noalias() += z * z.transpose();
  b += r * z;
}

Vector DirectModel::Predict(const std::vector<Vector>& actions, const Vector* x,
                            const std::vector<std::string>* arm_ids, int num_actions) {
  Vector q = Vector::Zero(num_actions);
  if (!actions.empty()) {
    if (shared_.a.size() == 0) shared_.Init(static_cast<int>(actions[0].size()) + 1, lambda_);
    // One solve for every candidate.
    const Vector theta = shared_.a.ldlt().solve(shared_.b);
    for (int i = 0; i < num_actions; ++i) q[i] = WithIntercept(actions[i]).dot(theta);
  } else if (x != nullptr && x->size() > 0) {
    if (per_action_.size() < static_cast<size_t>(num_actions)) {
      const size_t old = per_action_.size();
      per_action_.resize(num_actions);
      for (size_t i = old; i < per_action_.size(); ++i)
        per_action_[i].Init(static_cast<int>(x->size()) + 1, lambda_);
    }
    const Vector z = WithIntercept(*x);
    for (int i = 0; i < num_actions; ++i) q[i] = per_action_[i].Predict(z);
  } else if (arm_ids != nullptr) {
    const double mean = rewards_ > 0 ? reward_sum_ / rewards_ : 0.0;
    for (int i = 0; i < num_actions; ++i) {
      double sum = 0;
      int64_t n = 0;
      for (const auto& [id, stats] : arms_)
        if (id == (*arm_ids)[i]) sum = stats.first, n = stats.second;
      q[i] = (sum + lambda_ * mean) / (n + lambda_);
    }
  }
  return q;
}

void DirectModel::Learn(const std::vector<Vector>& actions, const Vector* x,
                        const std::vector<std::string>* arm_ids, int action, double reward) {
  reward_sum_ += reward;
  ++rewards_;
  if (!actions.empty()) {
    if (shared_.a.size() == 0) shared_.Init(static_cast<int>(actions[0].size()) + 1, lambda_);
    shared_.Learn(WithIntercept(actions[action]), reward);
  } else if (x != nullptr && x->size() > 0) {
    if (static_cast<size_t>(action) < per_action_.size())
      per_action_[action].Learn(WithIntercept(*x), reward);
  } else if (arm_ids != nullptr) {
    const std::string& id = (*arm_ids)[action];
    for (auto& [arm, stats] : arms_)
      if (arm == id) {
        stats.first += reward;
        ++stats.second;
        return;
      }
    arms_.push_back({id, {reward, 1}});
  }
}

}  // namespace bandit::ope
