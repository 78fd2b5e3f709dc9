#include "core/oks/exact_hypotheses.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace bandit::oks {

ExactHypotheses::ExactHypotheses(std::vector<KernelSpec> kernels, int dim, int64_t budget)
    : kernels_(std::move(kernels)), dim_(dim), budget_(budget) {
  sv_.resize(kernels_.size());
  coef_.resize(kernels_.size());
  norm2_.assign(kernels_.size(), 0.0);
}

double ExactHypotheses::Kernel(int i, const double* a, const Eigen::VectorXd& x) const {
  Eigen::Map<const Eigen::VectorXd> v(a, dim_);
  const KernelSpec& k = kernels_[i];
  if (k.kind == ShiftInvariantKernel::kGaussian)
    return std::exp(-(v - x).squaredNorm() / (2.0 * k.sigma * k.sigma));
  return std::exp(-(v - x).lpNorm<1>() / k.sigma);
}

double ExactHypotheses::EvalRaw(int i, const Eigen::VectorXd& x) const {
  const auto& sv = sv_[i];
  const auto& a = coef_[i];
  double f = 0.0;
  for (size_t j = 0; j < a.size(); ++j) f += a[j] * Kernel(i, sv.data() + j * dim_, x);
  return f;
}

double ExactHypotheses::Eval(int i, const Eigen::VectorXd& x) const { return EvalRaw(i, x); }

void ExactHypotheses::Step(int i, const Eigen::VectorXd& x, double step, double bound) {
  if (step == 0.0) return;  // zero gradient: f unchanged, no support vector needed
  auto& sv = sv_[i];
  auto& a = coef_[i];
  double& n2 = norm2_[i];
  if (budget_ > 0 && static_cast<int64_t>(a.size()) >= budget_) {
    // Budget full: drop the oldest support vector, keeping ||f||^2 exact.
    const Eigen::VectorXd x0 = Eigen::Map<const Eigen::VectorXd>(sv.data(), dim_);
    const double a0 = a[0];
    const double f0 = EvalRaw(i, x0);
    n2 = n2 - 2.0 * a0 * f0 + a0 * a0;  // kappa(x0, x0) = 1
    sv.erase(sv.begin(), sv.begin() + dim_);
    a.erase(a.begin());
    n2 = std::max(n2, 0.0);
  }
  // f <- f - step * kappa(x, .)   (Algorithm 1 line 7 / the inner point of eq. (2))
  const double fx = EvalRaw(i, x);
  sv.insert(sv.end(), x.data(), x.data() + dim_);
  a.push_back(-step);
  n2 = std::max(n2 - 2.0 * step * fx + step * step, 0.0);
  // eq. (2): projection onto the ball {||f||_H <= U} is a rescaling.
  if (n2 > bound * bound) {
    const double scale = bound / std::sqrt(n2);
    for (double& c : a) c *= scale;
    n2 = bound * bound;
  }
}

int64_t ExactHypotheses::total_support() const {
  int64_t n = 0;
  for (const auto& a : coef_) n += static_cast<int64_t>(a.size());
  return n;
}

double ExactHypotheses::DirectNormSq(int i) const {
  const auto& a = coef_[i];
  double s = 0.0;
  for (size_t j = 0; j < a.size(); ++j) {
    const Eigen::VectorXd xj = SupportVector(i, static_cast<int64_t>(j));
    for (size_t k = 0; k < a.size(); ++k)
      s += a[j] * a[k] * Kernel(i, sv_[i].data() + k * dim_, xj);
  }
  return s;
}

Eigen::VectorXd ExactHypotheses::SupportVector(int i, int64_t j) const {
  return Eigen::Map<const Eigen::VectorXd>(sv_[i].data() + j * dim_, dim_);
}

int64_t ExactHypotheses::Bytes() const {
  int64_t b = static_cast<int64_t>(norm2_.size() * sizeof(double));
  for (size_t i = 0; i < coef_.size(); ++i)
    b += static_cast<int64_t>((sv_[i].size() + coef_[i].size()) * sizeof(double));
  return b;
}

void ExactHypotheses::Save(StateWriter& w) const {
  for (size_t i = 0; i < coef_.size(); ++i) {
    const int64_t n = static_cast<int64_t>(coef_[i].size());
    w.Put(absl::StrCat("k", i, "_sv"),
          Eigen::MatrixXd(Eigen::Map<const Eigen::MatrixXd>(sv_[i].data(), dim_, n)));
    w.Put(absl::StrCat("k", i, "_coef"),
          Eigen::VectorXd(Eigen::Map<const Eigen::VectorXd>(coef_[i].data(), n)));
  }
  w.Put("norm2", Eigen::VectorXd(Eigen::Map<const Eigen::VectorXd>(norm2_.data(), norm2_.size())));
}

absl::Status ExactHypotheses::Restore(const StateReader& r) {
  const int k = num_kernels();
  std::vector<std::vector<double>> sv(k), coef(k);
  for (int i = 0; i < k; ++i) {
    Eigen::MatrixXd m;
    Eigen::VectorXd a;
    if (auto s = r.Get(absl::StrCat("k", i, "_sv"), &m, dim_, -1); !s.ok()) return s;
    if (auto s = r.Get(absl::StrCat("k", i, "_coef"), &a, m.cols()); !s.ok()) return s;
    if (budget_ > 0 && a.size() > budget_)
      return absl::InvalidArgumentError(absl::StrCat("state has ", a.size(),
                                                     " support vectors for kernel ", i,
                                                     ", expected at most the budget ", budget_));
    if (!m.allFinite() || !a.allFinite())
      return absl::InvalidArgumentError(
          absl::StrCat("state support vectors of kernel ", i, " are not finite"));
    sv[i].assign(m.data(), m.data() + m.size());
    coef[i].assign(a.data(), a.data() + a.size());
  }
  Eigen::VectorXd n2;
  if (auto s = r.Get("norm2", &n2, k); !s.ok()) return s;
  if (!n2.allFinite() || (n2.array() < 0).any())
    return absl::InvalidArgumentError("state norm2 must be finite and >= 0");
  sv_ = std::move(sv);
  coef_ = std::move(coef);
  norm2_.assign(n2.data(), n2.data() + k);
  return absl::OkStatus();
}

}  // namespace bandit::oks
