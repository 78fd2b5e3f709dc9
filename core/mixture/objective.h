// The small objective interface behind Mixture-Greedy (Algorithm 1). An Objective owns its
// reference data (FD: mu_data, Sigma_data; KD: the reference mean feature) and, bound to the
// per-arm statistics of round t-1, yields a convex loss over the simplex with its gradient
// (Appendix A.2; counts are treated as fixed while solving eq. 5).
#pragma once

#include <memory>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "bandit/v1/mixture.pb.h"
#include "core/mixture/stats.h"
#include "core/state_io.h"

namespace bandit::mixture {

using Vector = Eigen::VectorXd;
using Matrix = Eigen::MatrixXd;

// A loss over the simplex at fixed statistics.
class BoundLoss {
 public:
  virtual ~BoundLoss() = default;
  // Value at alpha; fills *grad (size m) when grad != nullptr.
  virtual double Eval(const Vector& alpha, Vector* grad) const = 0;
  double Value(const Vector& alpha) const { return Eval(alpha, nullptr); }
};

// base(alpha) + lin' alpha: the linear fidelity term (Section 5.3, eq. 12) and the Mixture-UCB
// bonus are added this way.
class LinearPlus final : public BoundLoss {
 public:
  LinearPlus(std::unique_ptr<BoundLoss> base, Vector lin)
      : base_(std::move(base)), lin_(std::move(lin)) {}
  double Eval(const Vector& alpha, Vector* grad) const override {
    const double v = base_->Eval(alpha, grad);
    if (grad) *grad += lin_;
    return v + lin_.dot(alpha);
  }

 private:
  std::unique_ptr<BoundLoss> base_;
  Vector lin_;
};

// alpha' K alpha + b' alpha + c (eq. 12; RKE and KD are of this form).
class QuadraticLoss final : public BoundLoss {
 public:
  QuadraticLoss(Matrix K, Vector b, double c) : K_(std::move(K)), b_(std::move(b)), c_(c) {}
  double Eval(const Vector& alpha, Vector* grad) const override {
    const Vector Ka = K_ * alpha;
    if (grad) *grad = 2.0 * Ka + b_;  // Appendix A.2: grad = 2 K alpha + w b
    return alpha.dot(Ka) + b_.dot(alpha) + c_;
  }
  const Matrix& K() const { return K_; }

 private:
  Matrix K_;
  Vector b_;
  double c_;
};

class Objective {
 public:
  virtual ~Objective() = default;
  virtual bandit::v1::MixtureObjective kind() const = 0;
  virtual absl::string_view name() const = 0;
  // Whether the statistics must keep the second moments S_i.
  virtual bool NeedsSecondMoment() const = 0;
  // Loss -> the metric in its natural units (FD: loss; Vendi: exp(-loss); RKE: 1/loss; KD: loss).
  virtual double Score(double loss) const = 0;
  virtual bool HigherIsBetter() const = 0;
  // The plug-in loss at the given statistics (every arm in the support must have n_i > 0).
  virtual std::unique_ptr<BoundLoss> Bind(const MixtureStats& stats) const = 0;
  // Default EG step size for these statistics (documented per objective).
  virtual double DefaultStepSize(const MixtureStats& stats) const = 0;
  // Default Delta_L for Mixture-UCB.
  virtual double DefaultUcbDelta() const { return 1.0; }

  // Reference data (FD, KD). Samples are rows of a matrix (n x d), already mapped to features
  // for KD by the caller. Objectives without a reference keep nothing.
  virtual void Save(StateWriter& w) const {}
  virtual absl::Status Restore(const StateReader& r) { return absl::OkStatus(); }
  virtual int64_t Bytes() const { return 0; }
  virtual std::unique_ptr<Objective> Clone() const = 0;
};

}  // namespace bandit::mixture
