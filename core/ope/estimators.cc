#include "core/ope/estimators.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

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
  AddTerms(e.target[e.logged_action], e.logged_propensity, e.reward, e.target.dot(e.q),
           e.q[e.logged_action]);
}

void Estimators::AddTerms(double target_logged, double logged_propensity, double reward, double dm,
                          double q_logged) {
  double w = target_logged / logged_propensity;
  nonzero_ += w > 0;
  largest_weight_ = std::max(largest_weight_, w);
  if (max_weight_ > 0 && w > max_weight_) {
    w = max_weight_;
    ++clipped_;
  }
  const double r = reward;
  ++n_;
  ips_.Add(w * r);
  dm_.Add(dm);
  dr_.Add(dm + w * (r - q_logged));
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
  l = std::sqrt(lambda) * Eigen::MatrixXd::Identity(dim, dim);
  solved = false;
}

double DirectModel::Ridge::Predict(const Vector& z) { return z.dot(Coefficients()); }

void DirectModel::Ridge::Learn(const Vector& z, double r) {
  a.noalias() += z * z.transpose();
  b += r * z;
  // l l^T + z z^T by plane rotations, column by column (the rank-one Cholesky update; Golub and
  // Van Loan, Matrix Computations, 4th ed., Section 6.5.4): an update, never a downdate, so every
  // new diagonal is at least the old one (>= sqrt(lambda)) and the rotations are well defined.
  Vector& x = z_scratch;
  x = z;
  const Eigen::Index n = l.rows();
  for (Eigen::Index k = 0; k < n; ++k) {
    const double lkk = l(k, k);
    const double rkk = std::sqrt(lkk * lkk + x[k] * x[k]);
    const double c = rkk / lkk, s = x[k] / lkk;
    l(k, k) = rkk;
    const Eigen::Index rest = n - k - 1;
    if (rest == 0) break;
    auto col = l.col(k).tail(rest);
    auto xs = x.tail(rest);
    col = (col + s * xs) / c;
    xs = c * xs - s * col;
  }
  solved = false;
}

const Vector& DirectModel::Ridge::Coefficients() {
  if (!solved) {
    coefficients = b;
    l.triangularView<Eigen::Lower>().solveInPlace(coefficients);
    l.transpose().triangularView<Eigen::Upper>().solveInPlace(coefficients);
    solved = true;
  }
  return coefficients;
}

Vector DirectModel::Predict(std::span<const Vector> actions, const Vector* x,
                            const std::vector<std::string>* arm_ids, int num_actions) {
  Vector q = Vector::Zero(num_actions);
  if (!actions.empty()) {
    if (shared_.a.size() == 0) shared_.Init(static_cast<int>(actions[0].size()) + 1, lambda_);
    // One solve for every candidate.
    const Vector& theta = shared_.Coefficients();
    // [x, 1] . theta without building [x, 1] (one allocation per candidate, on the server's
    // Select path for every shadow).
    const Eigen::Index d = theta.size() - 1;
    for (int i = 0; i < num_actions; ++i) q[i] = actions[i].dot(theta.head(d)) + theta[d];
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

void DirectModel::Learn(std::span<const Vector> actions, const Vector* x,
                        const std::vector<std::string>* arm_ids, int action, double reward) {
  if (!actions.empty()) {
    LearnCandidate(actions[action], reward);
  } else if (x != nullptr && x->size() > 0) {
    LearnPoint(*x, action, reward);
  } else if (arm_ids != nullptr) {
    LearnArm((*arm_ids)[action], reward);
  } else {
    reward_sum_ += reward;
    ++rewards_;
  }
}

void DirectModel::LearnCandidate(const Vector& features, double reward) {
  reward_sum_ += reward;
  ++rewards_;
  if (shared_.a.size() == 0) shared_.Init(static_cast<int>(features.size()) + 1, lambda_);
  shared_.Learn(WithIntercept(features), reward);
}

void DirectModel::LearnPoint(const Vector& x, int action, double reward) {
  reward_sum_ += reward;
  ++rewards_;
  if (action >= 0 && static_cast<size_t>(action) < per_action_.size())
    per_action_[action].Learn(WithIntercept(x), reward);
}

void DirectModel::LearnArm(const std::string& id, double reward) {
  reward_sum_ += reward;
  ++rewards_;
  for (auto& [arm, stats] : arms_)
    if (arm == id) {
      stats.first += reward;
      ++stats.second;
      return;
    }
  arms_.push_back({id, {reward, 1}});
}

int64_t DirectModel::StateBytes() const {
  int64_t bytes = static_cast<int64_t>(sizeof(double)) *
                  (shared_.a.size() + shared_.b.size() + shared_.l.size());
  for (const auto& r : per_action_)
    bytes += static_cast<int64_t>(sizeof(double)) * (r.a.size() + r.b.size() + r.l.size());
  for (const auto& [id, stats] : arms_) bytes += static_cast<int64_t>(id.size() + sizeof(stats));
  return bytes;
}

namespace {
void SaveTensor(const Eigen::MatrixXd& m, bandit::v1::Tensor* out) {
  out->set_rows(m.rows());
  out->set_cols(m.cols());
  out->mutable_data()->Assign(m.data(), m.data() + m.size());
}
}  // namespace

void DirectModel::SaveRidge(const Ridge& ridge, bandit::v1::DirectModelState::Ridge* r) {
  SaveTensor(ridge.a, r->mutable_a());
  r->mutable_b()->Assign(ridge.b.data(), ridge.b.data() + ridge.b.size());
  SaveTensor(ridge.l, r->mutable_cholesky());
}

absl::Status DirectModel::RestoreRidge(const bandit::v1::DirectModelState::Ridge& r,
                                       Ridge* ridge) {
  const int64_t n = r.b_size();
  if (r.a().rows() != n || r.a().cols() != n || r.a().data_size() != n * n)
    return absl::InvalidArgumentError(absl::StrCat(
        "direct model: a ridge model of ", n, " coefficients has a ", r.a().rows(), " x ",
        r.a().cols(), " matrix of ", r.a().data_size(), " values, expected ", n, " x ", n));
  ridge->a = Eigen::Map<const Eigen::MatrixXd>(r.a().data().data(), n, n);
  ridge->b = Eigen::Map<const Vector>(r.b().data(), n);
  if (!ridge->a.allFinite() || !ridge->b.allFinite())
    return absl::InvalidArgumentError("direct model: expected finite ridge sums");
  if (r.has_cholesky()) {
    const auto& c = r.cholesky();
    if (c.rows() != n || c.cols() != n || c.data_size() != n * n)
      return absl::InvalidArgumentError(absl::StrCat(
          "direct model: a ridge model of ", n, " coefficients has a ", c.rows(), " x ", c.cols(),
          " Cholesky factor of ", c.data_size(), " values, expected ", n, " x ", n));
    ridge->l = Eigen::Map<const Eigen::MatrixXd>(c.data().data(), n, n);
    ridge->l.triangularView<Eigen::StrictlyUpper>().setZero();
    if (!ridge->l.allFinite() || !(ridge->l.diagonal().array() > 0).all())
      return absl::InvalidArgumentError(
          "direct model: expected a finite Cholesky factor with a positive diagonal");
  } else {
    // A state from before the factor was kept: factor a afresh (a = lambda I + sum z z^T is
    // positive definite for lambda > 0).
    Eigen::LLT<Eigen::MatrixXd> llt(ridge->a);
    if (llt.info() != Eigen::Success)
      return absl::InvalidArgumentError(
          "direct model: expected a positive definite ridge matrix (lambda I + sum z z^T)");
    ridge->l = llt.matrixL();
  }
  ridge->solved = false;
  return absl::OkStatus();
}

void DirectModel::Save(bandit::v1::DirectModelState* out) const {
  out->Clear();
  out->set_lambda(lambda_);
  if (shared_.a.size() > 0) SaveRidge(shared_, out->mutable_shared());
  for (const auto& r : per_action_) SaveRidge(r, out->add_per_action());
  for (const auto& [id, stats] : arms_) {
    auto* a = out->add_arms();
    a->set_arm_id(id);
    a->set_reward_sum(stats.first);
    a->set_rewards(stats.second);
  }
  out->set_reward_sum(reward_sum_);
  out->set_rewards(rewards_);
}

absl::Status DirectModel::Restore(const bandit::v1::DirectModelState& in) {
  if (!(in.lambda() > 0) || !std::isfinite(in.lambda()))
    return absl::InvalidArgumentError(
        absl::StrCat("direct model: lambda is ", in.lambda(), ", expected a positive number"));
  if (in.rewards() < 0 || !std::isfinite(in.reward_sum()))
    return absl::InvalidArgumentError("direct model: expected a finite reward sum and count >= 0");
  DirectModel next(in.lambda());
  if (in.has_shared())
    if (auto s = RestoreRidge(in.shared(), &next.shared_); !s.ok()) return s;
  for (const auto& r : in.per_action()) {
    Ridge ridge;
    if (auto s = RestoreRidge(r, &ridge); !s.ok()) return s;
    next.per_action_.push_back(std::move(ridge));
  }
  for (const auto& a : in.arms()) {
    if (a.rewards() < 0 || !std::isfinite(a.reward_sum()))
      return absl::InvalidArgumentError(absl::StrCat("direct model: arm '", a.arm_id(),
                                                     "' has a negative count or a non-finite sum"));
    next.arms_.push_back({a.arm_id(), {a.reward_sum(), a.rewards()}});
  }
  next.reward_sum_ = in.reward_sum();
  next.rewards_ = in.rewards();
  *this = std::move(next);
  return absl::OkStatus();
}

void Estimators::Save(bandit::v1::OpeEstimatorState* out) const {
  out->set_max_weight(max_weight_);
  out->set_events(n_);
  out->set_clipped(clipped_);
  out->set_nonzero(nonzero_);
  out->set_largest_weight(largest_weight_);
  out->set_ips_sum(ips_.sum);
  out->set_ips_sum_sq(ips_.sum_sq);
  out->set_dm_sum(dm_.sum);
  out->set_dm_sum_sq(dm_.sum_sq);
  out->set_dr_sum(dr_.sum);
  out->set_dr_sum_sq(dr_.sum_sq);
  out->set_logged_sum(logged_.sum);
  out->set_logged_sum_sq(logged_.sum_sq);
  out->set_w(w_);
  out->set_wr(wr_);
  out->set_w2(w2_);
  out->set_w2r(w2r_);
  out->set_w2r2(w2r2_);
}

absl::Status Estimators::Restore(const bandit::v1::OpeEstimatorState& in) {
  const double sums[] = {in.max_weight(), in.largest_weight(),
                         in.ips_sum(),    in.ips_sum_sq(),
                         in.dm_sum(),     in.dm_sum_sq(),
                         in.dr_sum(),     in.dr_sum_sq(),
                         in.logged_sum(), in.logged_sum_sq(),
                         in.w(),          in.wr(),
                         in.w2(),         in.w2r(),
                         in.w2r2()};
  for (double v : sums)
    if (!std::isfinite(v))
      return absl::InvalidArgumentError("estimator state: expected finite sums");
  if (in.events() < 0 || in.clipped() < 0 || in.clipped() > in.events() || in.max_weight() < 0 ||
      in.w() < 0 || in.w2() < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "estimator state: ", in.events(), " events, ", in.clipped(), " clipped, max_weight ",
        in.max_weight(), ", expected counts >= 0, clipped <= events and non-negative weights"));
  max_weight_ = in.max_weight();
  n_ = in.events();
  clipped_ = in.clipped();
  nonzero_ = std::clamp<int64_t>(in.nonzero(), 0, in.events());
  largest_weight_ = in.largest_weight();
  ips_ = {in.ips_sum(), in.ips_sum_sq()};
  dm_ = {in.dm_sum(), in.dm_sum_sq()};
  dr_ = {in.dr_sum(), in.dr_sum_sq()};
  logged_ = {in.logged_sum(), in.logged_sum_sq()};
  w_ = in.w();
  wr_ = in.wr();
  w2_ = in.w2();
  w2r_ = in.w2r();
  w2r2_ = in.w2r2();
  return absl::OkStatus();
}

}  // namespace bandit::ope
