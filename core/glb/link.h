// Canonical exponential-family links of the GLB papers (GLB-OMD eq. (1); DOMD-GLB Section 3.1):
//   Pr[r | z] = exp((r z - m(z)) / g(tau) + h(r, tau)),  mu = m',  loss l(z, r) = (m(z) - r z) / g.
// Logistic (Bernoulli, g = 1), Poisson (g = 1), Gaussian (identity, g = dispersion = noise variance).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bandit/v1/glb.pb.h"

namespace bandit::glb {

enum class LinkKind { kLogistic, kPoisson, kGaussian };

class GlmLink {
 public:
  GlmLink() = default;
  GlmLink(LinkKind kind, double dispersion) : kind_(kind), g_(dispersion) {}
  // `field` names the config (e.g. "glb_omd") for messages. Dispersion only for Gaussian.
  static absl::StatusOr<GlmLink> FromProto(absl::string_view field, bandit::v1::Link link,
                                           bool has_dispersion, double dispersion);

  LinkKind kind() const { return kind_; }
  absl::string_view name() const;
  double g() const { return g_; }  // dispersion g(tau)

  double Mu(double z) const;       // mean reward mu(z) = m'(z)
  double MuPrime(double z) const;  // mu'(z) = m''(z)
  double M(double z) const;        // log-partition m(z)
  // Per-round negative log-likelihood l(z, r) = (m(z) - r z) / g and its z-derivatives.
  double Loss(double z, double r) const { return (M(z) - r * z) / g_; }
  double LossGrad(double z, double r) const { return (Mu(z) - r) / g_; }
  double LossHess(double z) const { return MuPrime(z) / g_; }

  // INVALID_ARGUMENT unless r is in the link's support: logistic [0, 1], Poisson [0, inf),
  // Gaussian any finite value.
  absl::Status CheckReward(absl::string_view field, double r) const;

  // Self-concordance constant R (|mu''| <= R mu'): logistic 1, Poisson 1, Gaussian 0.
  double SelfConcordance() const;
  // L_mu = k_mu = sup mu' and c_mu = inf mu' over z in [-S, S] (Assumption 2).
  double LMu(double S) const;
  double CMu(double S) const;
  // Sub-Gaussian constant of the reward noise when ||theta|| <= S (for the design-matrix bonus):
  // logistic 1/2, Gaussian sqrt(g), Poisson sqrt(e^S) (variance bound).
  double NoiseScale(double S) const;

 private:
  LinkKind kind_ = LinkKind::kLogistic;
  double g_ = 1.0;
};

}  // namespace bandit::glb
