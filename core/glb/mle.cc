#include "core/glb/mle.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace bandit::glb {

void GlmHistory::Add(const Eigen::VectorXd& x, double r) {
  if (window_ > 0 && size() >= window_) {
    std::copy(x.data(), x.data() + d_, x_.begin() + head_ * d_);
    r_[head_] = r;
    head_ = (head_ + 1) % window_;
    return;
  }
  x_.insert(x_.end(), x.data(), x.data() + d_);
  r_.push_back(r);
}

void GlmHistory::Save(StateWriter& w, absl::string_view prefix) const {
  w.Put(absl::StrCat(prefix, "_x"), Eigen::MatrixXd(X()));
  w.Put(absl::StrCat(prefix, "_r"), Eigen::VectorXd(r()));
  w.PutInt(absl::StrCat(prefix, "_head"), head_);
}

absl::Status GlmHistory::Restore(const StateReader& rd, absl::string_view prefix) {
  Eigen::MatrixXd x;
  Eigen::VectorXd r;
  int64_t head;
  if (auto s = rd.Get(absl::StrCat(prefix, "_r"), &r); !s.ok()) return s;
  if (auto s = rd.Get(absl::StrCat(prefix, "_x"), &x, d_, r.size()); !s.ok()) return s;
  if (auto s = rd.GetInt(absl::StrCat(prefix, "_head"), &head); !s.ok()) return s;
  if (window_ > 0 && r.size() > window_)
    return absl::InvalidArgumentError(absl::StrCat("state history has ", r.size(),
                                                   " rounds, expected at most window = ", window_));
  if (head < 0 || (head > 0 && head >= std::max<int64_t>(window_, 1)))
    return absl::InvalidArgumentError(
        absl::StrCat("state history_head is ", head, ", out of range"));
  if (!x.allFinite() || !r.allFinite())
    return absl::InvalidArgumentError("state history has non-finite values, expected finite");
  x_.assign(x.data(), x.data() + x.size());
  r_.assign(r.data(), r.data() + r.size());
  head_ = head;
  return absl::OkStatus();
}

double GlmObjective(const GlmLink& link, const GlmHistory& data, double lambda,
                    const Eigen::VectorXd& theta) {
  const Eigen::VectorXd z = data.X().transpose() * theta;
  const auto r = data.r();
  double f = 0.5 * lambda * theta.squaredNorm();
  for (int64_t i = 0; i < z.size(); ++i) f += link.Loss(z[i], r[i]);
  return f;
}

namespace {

// Gradient and Hessian of the regularized objective at theta.
void GradHess(const GlmLink& link, const GlmHistory& data, double lambda,
              const Eigen::VectorXd& theta, Eigen::VectorXd* grad, Eigen::MatrixXd* hess) {
  const auto X = data.X();
  const auto r = data.r();
  const Eigen::VectorXd z = X.transpose() * theta;
  Eigen::VectorXd a(z.size()), w(z.size());
  for (int64_t i = 0; i < z.size(); ++i) {
    a[i] = link.LossGrad(z[i], r[i]);
    w[i] = link.LossHess(z[i]);
  }
  if (grad) *grad = X * a + lambda * theta;
  if (hess) {
    hess->noalias() = (X.array().rowwise() * w.transpose().array()).matrix() * X.transpose();
    hess->diagonal().array() += lambda;
  }
}

}  // namespace

MleFit FitGlmMle(const GlmLink& link, const GlmHistory& data, double lambda,
                 const Eigen::VectorXd& warm, double S) {
  MleFit fit;
  Eigen::VectorXd theta = warm;
  const int d = data.d();
  Eigen::VectorXd grad(d);
  Eigen::MatrixXd hess(d, d);
  double f = GlmObjective(link, data, lambda, theta);
  bool hess_at_theta = false;
  for (int it = 0; it < 50; ++it) {
    GradHess(link, data, lambda, theta, &grad, &hess);
    hess_at_theta = true;
    const Eigen::VectorXd step = hess.llt().solve(grad);
    const double dec2 = grad.dot(step);  // Newton decrement^2
    fit.iterations = it + 1;
    if (dec2 / 2 <= 1e-16 * std::max(1.0, std::abs(f))) {
      fit.converged = true;
      break;
    }
    double s = 1.0;
    Eigen::VectorXd cand = theta - step;
    double fc = GlmObjective(link, data, lambda, cand);
    for (int ls = 0; ls < 40 && !(fc <= f - 1e-4 * s * dec2); ++ls) {
      s *= 0.5;
      cand = theta - s * step;
      fc = GlmObjective(link, data, lambda, cand);
    }
    if (!(fc < f)) {  // no progress possible at machine precision
      fit.converged = dec2 / 2 <= 1e-10 * std::max(1.0, std::abs(f));
      break;
    }
    theta = std::move(cand);
    f = fc;
    hess_at_theta = false;
  }
  if (const double n = theta.norm(); n > S) {
    theta *= S / n;
    hess_at_theta = false;
  }
  if (!hess_at_theta) GradHess(link, data, lambda, theta, nullptr, &hess);
  fit.theta = std::move(theta);
  fit.hessian = std::move(hess);
  return fit;
}

}  // namespace bandit::glb
