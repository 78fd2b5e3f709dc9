#include "core/glb/link.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/validate.h"

namespace bandit::glb {

absl::StatusOr<GlmLink> GlmLink::FromProto(absl::string_view field, bandit::v1::Link link,
                                           bool has_dispersion, double dispersion) {
  switch (link) {
    case bandit::v1::LINK_UNSPECIFIED:
    case bandit::v1::LOGISTIC:
    case bandit::v1::POISSON:
      if (has_dispersion && dispersion != 1.0)
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".dispersion is ", dispersion,
            ", expected it unset (or 1): only the Gaussian link has a free dispersion"));
      return GlmLink(link == bandit::v1::POISSON ? LinkKind::kPoisson : LinkKind::kLogistic, 1.0);
    case bandit::v1::GAUSSIAN: {
      const double g = has_dispersion ? dispersion : 1.0;
      if (!std::isfinite(g) || g <= 0)
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".dispersion is ", g, ", expected a finite number > 0"));
      return GlmLink(LinkKind::kGaussian, g);
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(field, ".link is ", static_cast<int>(link),
                                                     ", expected LOGISTIC, POISSON or GAUSSIAN"));
  }
}

absl::string_view GlmLink::name() const {
  switch (kind_) {
    case LinkKind::kLogistic:
      return "logistic";
    case LinkKind::kPoisson:
      return "poisson";
    case LinkKind::kGaussian:
      return "gaussian";
  }
  return "?";
}

double GlmLink::Mu(double z) const {
  switch (kind_) {
    case LinkKind::kLogistic:
      return z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z));
    case LinkKind::kPoisson:
      return std::exp(z);
    case LinkKind::kGaussian:
      return z;
  }
  return 0;
}

double GlmLink::MuPrime(double z) const {
  switch (kind_) {
    case LinkKind::kLogistic: {
      const double s = Mu(z);
      return s * (1.0 - s);
    }
    case LinkKind::kPoisson:
      return std::exp(z);
    case LinkKind::kGaussian:
      return 1.0;
  }
  return 0;
}

double GlmLink::M(double z) const {
  switch (kind_) {
    case LinkKind::kLogistic:  // softplus, stable for large |z|
      return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
    case LinkKind::kPoisson:
      return std::exp(z);
    case LinkKind::kGaussian:
      return 0.5 * z * z;
  }
  return 0;
}

absl::Status GlmLink::CheckReward(absl::string_view field, double r) const {
  if (!IsInputNumber(r))
    return absl::InvalidArgumentError(absl::StrCat(field, " is ", r, ", ", kInputNumberExpected));
  switch (kind_) {
    case LinkKind::kLogistic:
      if (r < 0 || r > 1)
        return absl::InvalidArgumentError(
            absl::StrCat(field, " is ", r, ", expected a number in [0, 1] for the logistic link"));
      break;
    case LinkKind::kPoisson:
      if (r < 0)
        return absl::InvalidArgumentError(
            absl::StrCat(field, " is ", r, ", expected a number >= 0 for the Poisson link"));
      break;
    case LinkKind::kGaussian:
      break;
  }
  return absl::OkStatus();
}

double GlmLink::SelfConcordance() const { return kind_ == LinkKind::kGaussian ? 0.0 : 1.0; }

double GlmLink::LMu(double S) const {
  switch (kind_) {
    case LinkKind::kLogistic:
      return 0.25;
    case LinkKind::kPoisson:
      return std::exp(S);
    case LinkKind::kGaussian:
      return 1.0;
  }
  return 1.0;
}

double GlmLink::CMu(double S) const {
  switch (kind_) {
    case LinkKind::kLogistic:
      return MuPrime(S);
    case LinkKind::kPoisson:
      return std::exp(-S);
    case LinkKind::kGaussian:
      return 1.0;
  }
  return 1.0;
}

double GlmLink::NoiseScale(double S) const {
  switch (kind_) {
    case LinkKind::kLogistic:
      return 0.5;
    case LinkKind::kPoisson:
      return std::sqrt(std::exp(S));
    case LinkKind::kGaussian:
      return std::sqrt(g_);
  }
  return 1.0;
}

}  // namespace bandit::glb
