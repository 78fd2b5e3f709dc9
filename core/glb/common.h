// Pieces shared by the GLB policies: parameter parsing, input validation, the OMD step of
// GLB-OMD Appendix A.3 and the optimistic arm rule x'theta + beta ||x||_{H^{-1}} (GLB-OMD eq. (6),
// DOMD-GLB eq. (3)).
#pragma once

#include <span>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/glb/link.h"
#include "core/policy.h"
#include "core/state_io.h"

namespace bandit::glb {

inline constexpr int kMaxDimension = 1024;

// Parameters common to the GLB policies (after defaults).
struct GlbParams {
  int d = 0;
  GlmLink link;
  double S = 1.0;           // ||theta*|| <= S
  double R = 1.0;           // self-concordance / reward bound
  double lambda = 1.0;      // regularizer
  bool lambda_set = false;  // lambda given explicitly in the config
  double delta = 0.05;
  double radius_multiplier = 1.0;
  double max_feature_norm = 1.0;
  double eta() const { return 1.0 + R * S; }  // step size eta = 1 + R S (both papers)
};

// Parses the fields every GLB config shares. Fields a config does not have keep their defaults.
// `max_dimension`: a larger bound for the diagonal forms, whose state is O(d).
template <typename C>
absl::StatusOr<GlbParams> ParseParams(absl::string_view field, const C& c,
                                      int max_dimension = kMaxDimension);

// The candidates of a Select: non-empty, each of dimension d, finite, ||x|| <= max_norm.
absl::Status CheckCandidates(std::span<const Vector> candidates, int d, double max_norm);
// The chosen features of an Update.
absl::Status CheckFeatures(const Vector& x, int d, double max_norm);
// INVALID_ARGUMENT naming `field` (built only on an error) unless ||x|| = sqrt(norm2) is finite
// and at most max_norm: the sparse-input forms' check, from a norm they sum as they read x.
absl::Status CheckNorm(absl::FunctionRef<std::string()> field, double norm2, double max_norm);

// (A + c x x')^{-1} from A^{-1} by Sherman-Morrison, in place; c >= 0.
void ShermanMorrisonAdd(Matrix& a_inv, const Vector& x, double c);

// GLB-OMD and DOMD-GLB keep the same learned state (theta_t, H_t, H_t^{-1}, t) under the same
// keys. Restore checks shapes (d x d), finiteness and t >= 0, and writes its outputs only when
// everything is valid (a policy's state is unchanged by a failed Restore).
void SaveOmdState(StateWriter& w, const Vector& theta, const Matrix& h, const Matrix& h_inv,
                  int64_t t);
absl::Status RestoreOmdState(const StateReader& r, int d, Vector* theta, Matrix* h, Matrix* h_inv,
                             int64_t* t);

// argmax_i x_i' theta + beta ||x_i||_{H^{-1}} (lowest index on ties). Fills `ucb` (size n),
// and `mean_logit` (x_i' theta).
int ArgmaxUcb(std::span<const Vector> candidates, const Vector& theta, const Matrix& h_inv,
              double beta, Vector* ucb, Vector* mean_logit);

// A deterministic UCB choice of `arm` over the candidates' optimistic scores `ucb`: propensity 1,
// the model's estimated gap, and the scores when asked for. Callers add their diagnostics.
Decision OptimisticDecision(int arm, const Vector& ucb, double estimated_gap, bool want_scores);

// OptimisticDecision for GLM scores: the gap and the mean through the link, with the UCB
// diagnostics (ucb, mean, bonus, beta).
Decision UcbDecision(const GlmLink& link, int arm, const Vector& ucb, const Vector& logit,
                     double beta, bool want_scores);

// GLB-OMD Theorem 1 radius, beta_t(delta) =
//   sqrt(4 lambda S^2 + 2 eta ln(1/delta) + d (6 eta^2 + eta) ln(1 + L_mu t / (lambda g))).
// (The paper's display prints ln(1 + L_mu / (lambda g)); its O(.) form and Lemma 3 carry the t.)
double GlbOmdBeta(const GlbParams& p, double lambda, int64_t t);

}  // namespace bandit::glb

// ---- template implementation ----
#include <cmath>

#include "core/validate.h"

namespace bandit::glb {

template <typename C>
absl::StatusOr<GlbParams> ParseParams(absl::string_view field, const C& c, int max_dimension) {
  GlbParams p;
  if (c.dimension() < 1 || c.dimension() > max_dimension)
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".dimension is ", c.dimension(), ", expected 1..", max_dimension));
  p.d = c.dimension();
  bool has_disp = false;
  double disp = 1.0;
  if constexpr (requires { c.has_dispersion(); }) {
    has_disp = c.has_dispersion();
    disp = c.dispersion();
  }
  // Configs of logistic-only policies (ECOLog, OFULog-r) have no link field: logistic.
  bandit::v1::Link proto_link = bandit::v1::LOGISTIC;
  if constexpr (requires { c.link(); }) proto_link = c.link();
  auto link = GlmLink::FromProto(field, proto_link, has_disp, disp);
  if (!link.ok()) return link.status();
  p.link = *link;
  p.R = p.link.SelfConcordance();
  if constexpr (requires { c.has_s(); }) {
    if (c.has_s()) p.S = c.s();
    if (auto s = CheckPositive(absl::StrCat(field, ".s"), p.S); !s.ok()) return s;
  }
  if constexpr (requires { c.has_r(); }) {
    if (c.has_r()) p.R = c.r();
    if (auto s = CheckRange(absl::StrCat(field, ".r"), p.R, 0.0, 1e6); !s.ok()) return s;
  }
  p.lambda = p.d;  // papers' experiments (GLB-OMD Appendix E.1): lambda = d
  if constexpr (requires { c.has_lambda(); }) {  // OFUGLB has no regularizer
    if (c.has_lambda()) {
      p.lambda = c.lambda();
      p.lambda_set = true;
    }
  }
  if (auto s = CheckPositive(absl::StrCat(field, ".lambda"), p.lambda); !s.ok()) return s;
  if constexpr (requires { c.has_delta(); }) {
    if (c.has_delta()) p.delta = c.delta();
    if (!(p.delta > 0 && p.delta < 1))
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".delta is ", p.delta, ", expected a number in (0, 1)"));
  }
  if constexpr (requires { c.has_radius_multiplier(); }) {
    if (c.has_radius_multiplier()) p.radius_multiplier = c.radius_multiplier();
    if (auto s =
            CheckRange(absl::StrCat(field, ".radius_multiplier"), p.radius_multiplier, 0.0, 1e6);
        !s.ok())
      return s;
  }
  if constexpr (requires { c.has_max_feature_norm(); }) {
    if (c.has_max_feature_norm()) p.max_feature_norm = c.max_feature_norm();
    if (auto s = CheckPositive(absl::StrCat(field, ".max_feature_norm"), p.max_feature_norm);
        !s.ok())
      return s;
  }
  return p;
}

}  // namespace bandit::glb
