// Loss functions of online kernel selection (Li & Liao, ECML-PKDD 2022), with the constants the
// paper's parameter choices need: Assumption 1 (smoothness: |l'|^nu <= C0 * l) for OKS++, and
// Assumption 3 (Lipschitz) for IOKS. l(a, y) with a = f(x) the prediction, y the label/target.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "bandit/v1/oks.pb.h"

namespace bandit::oks {

enum class LossKind { kLogistic, kSquare, kSquaredHinge, kAbsolute, kHinge };

struct LossInfo {
  absl::string_view name;
  bool smooth;     // satisfies Assumption 1 (OKS++ allowed)
  int nu;          // Assumption 1 exponent (1 or 2); 0 if not smooth
  double c0;       // Assumption 1 constant C0
  bool lipschitz;  // globally Lipschitz in f(x) (Assumption 3 without the ball restriction)
  bool margin;     // a margin loss in y * f(x): only meaningful for labels in {-1, +1}
};

const LossInfo& Info(LossKind kind);
// Maps the proto enum (UNSPECIFIED -> logistic).
LossKind FromProto(bandit::v1::OksLoss loss);

// l(a, y).
double Loss(LossKind kind, double a, double y);
// dl/da at (a, y) (a subgradient for the non-smooth losses: sign(0) = 0, hinge kink -> 0).
double Derivative(LossKind kind, double a, double y);

}  // namespace bandit::oks
