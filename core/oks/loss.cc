#include "core/oks/loss.h"

#include <algorithm>
#include <cmath>

namespace bandit::oks {

const LossInfo& Info(LossKind kind) {
  // Section 3: logistic satisfies Assumption 1 with nu = 1, C0 = 1; square and squared hinge with
  // nu = 2, C0 = 4. Absolute, hinge and logistic are Lipschitz in f(x) (Assumption 3).
  static const LossInfo kLogistic{"logistic", true, 1, 1.0, true, true};
  static const LossInfo kSquare{"square", true, 2, 4.0, false, false};
  static const LossInfo kSquaredHinge{"squared_hinge", true, 2, 4.0, false, true};
  static const LossInfo kAbsolute{"absolute", false, 0, 0.0, true, false};
  static const LossInfo kHinge{"hinge", false, 0, 0.0, true, true};
  switch (kind) {
    case LossKind::kLogistic:
      return kLogistic;
    case LossKind::kSquare:
      return kSquare;
    case LossKind::kSquaredHinge:
      return kSquaredHinge;
    case LossKind::kAbsolute:
      return kAbsolute;
    case LossKind::kHinge:
      return kHinge;
  }
  return kLogistic;
}

LossKind FromProto(bandit::v1::OksLoss loss) {
  switch (loss) {
    case bandit::v1::OKS_SQUARE:
      return LossKind::kSquare;
    case bandit::v1::OKS_SQUARED_HINGE:
      return LossKind::kSquaredHinge;
    case bandit::v1::OKS_ABSOLUTE:
      return LossKind::kAbsolute;
    case bandit::v1::OKS_HINGE:
      return LossKind::kHinge;
    default:
      return LossKind::kLogistic;
  }
}

double Loss(LossKind kind, double a, double y) {
  switch (kind) {
    case LossKind::kLogistic: {
      // ln(1 + exp(-m)), computed without overflow.
      const double m = y * a;
      return m > 0 ? std::log1p(std::exp(-m)) : -m + std::log1p(std::exp(m));
    }
    case LossKind::kSquare:
      return (a - y) * (a - y);
    case LossKind::kSquaredHinge: {
      const double h = std::max(0.0, 1.0 - y * a);
      return h * h;
    }
    case LossKind::kAbsolute:
      return std::abs(a - y);
    case LossKind::kHinge:
      return std::max(0.0, 1.0 - y * a);
  }
  return 0.0;
}

double Derivative(LossKind kind, double a, double y) {
  switch (kind) {
    case LossKind::kLogistic: {
      // -y * exp(-m) / (1 + exp(-m)) = -y * sigmoid(-m).
      const double m = y * a;
      const double s = m > 0 ? std::exp(-m) / (1.0 + std::exp(-m)) : 1.0 / (1.0 + std::exp(m));
      return -y * s;
    }
    case LossKind::kSquare:
      return 2.0 * (a - y);
    case LossKind::kSquaredHinge:
      return -2.0 * y * std::max(0.0, 1.0 - y * a);
    case LossKind::kAbsolute:
      return a > y ? 1.0 : (a < y ? -1.0 : 0.0);
    case LossKind::kHinge:
      return y * a < 1.0 ? -y : 0.0;
  }
  return 0.0;
}

}  // namespace bandit::oks
