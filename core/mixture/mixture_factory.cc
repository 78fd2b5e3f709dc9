#include "core/mixture/mixture_factory.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/mixture/fd_objective.h"
#include "core/mixture/kd_objective.h"
#include "core/mixture/mixture_eps_greedy.h"
#include "core/mixture/mixture_greedy.h"
#include "core/mixture/mixture_ucb.h"
#include "core/mixture/one_arm_greedy.h"
#include "core/mixture/oracle.h"
#include "core/mixture/rke_objective.h"
#include "core/mixture/vendi_objective.h"

namespace bandit {

using bandit::v1::MixtureConfig;
using namespace bandit::mixture;  // NOLINT

absl::StatusOr<std::unique_ptr<Policy>> MakeMixture(const bandit::v1::PolicyConfig& config,
                                                    uint64_t seed) {
  const MixtureConfig& c = config.mixture();
  bandit::v1::PolicyConfig arm_config = config;
  if (config.arms_size() == 0 && config.num_arms() == 0 && c.num_arms() > 0)
    arm_config.set_num_arms(c.num_arms());
  auto arms = ArmSet::FromConfig(arm_config, ArmFeatures::kNone);
  if (!arms.ok()) return arms.status();
  if (c.num_arms() > 0 && c.num_arms() != arms->size())
    return absl::InvalidArgumentError(absl::StrCat("mixture.num_arms is ", c.num_arms(),
                                                   " but the arm set has ", arms->size(),
                                                   " arms, expected them to agree (or 0)"));
  auto params = ParseParams(c, arms->size());
  if (!params.ok()) return params.status();
  const int64_t d = params->dimension;

  // Reference data.
  const bool has_stats = c.reference_mean_size() > 0 || c.reference_covariance_size() > 0;
  const bool has_samples = c.reference_samples_size() > 0;
  Matrix samples;
  if (has_samples) {
    if (c.reference_samples_size() % d != 0)
      return absl::InvalidArgumentError(
          absl::StrCat("mixture.reference_samples has ", c.reference_samples_size(),
                       " values, expected a multiple of dimension = ", d, " (row-major n x d)"));
    samples =
        Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
            c.reference_samples().data(), c.reference_samples_size() / d, d);
    if (!samples.allFinite())
      return absl::InvalidArgumentError(
          "mixture.reference_samples contains NaN or Inf, expected finite values");
  }

  Rng rng(seed);
  FeatureMap features;
  if (params->objective == bandit::v1::FD) {
    features = FeatureMap::Identity(d);
  } else if (params->random_features > 0) {
    auto f = FeatureMap::RandomFourier(d, params->random_features, params->bandwidth, rng);
    if (!f.ok()) return f.status();
    features = *std::move(f);
  } else {
    features = FeatureMap::Cosine(d);
  }

  std::unique_ptr<Objective> objective;
  switch (params->objective) {
    case bandit::v1::FD: {
      if (has_stats && has_samples)
        return absl::InvalidArgumentError(
            "mixture.reference_samples and reference_mean/covariance are both set, expected one");
      if (has_samples) {
        auto fd = FdObjective::FromSamples(samples);
        if (!fd.ok()) return fd.status();
        objective = *std::move(fd);
      } else {
        if (!has_stats)
          return absl::InvalidArgumentError(
              "objective FD needs reference_mean and reference_covariance (or reference_samples)");
        if (c.reference_covariance_size() != d * d)
          return absl::InvalidArgumentError(
              absl::StrCat("mixture.reference_covariance has ", c.reference_covariance_size(),
                           " values, expected d*d = ", d * d, " (row-major d x d)"));
        const Vector mu =
            Eigen::Map<const Vector>(c.reference_mean().data(), c.reference_mean_size());
        const Matrix sigma = Eigen::Map<
            const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
            c.reference_covariance().data(), d, d);
        if (auto s = FdObjective::CheckReference(mu, sigma, d); !s.ok()) return s;
        objective = std::make_unique<FdObjective>(mu, sigma);
      }
      break;
    }
    case bandit::v1::KD: {
      if (has_stats)
        return absl::InvalidArgumentError(
            "mixture.reference_mean/covariance are FD-only, expected reference_samples for KD");
      if (!has_samples)
        return absl::InvalidArgumentError("objective KD needs reference_samples (row-major n x d)");
      Vector mu = Vector::Zero(features.dim()), phi;
      for (int64_t r = 0; r < samples.rows(); ++r) {
        const Vector x = samples.row(r).transpose();
        if (auto s = features.Check(absl::StrCat("mixture.reference_samples row ", r), x); !s.ok())
          return s;
        features.Map(x, &phi);
        mu += phi;
      }
      objective = std::make_unique<KdObjective>(mu / static_cast<double>(samples.rows()));
      break;
    }
    case bandit::v1::VENDI:
    case bandit::v1::RKE:
      if (has_stats || has_samples)
        return absl::InvalidArgumentError(
            absl::StrCat("mixture reference data is set but objective ",
                         params->objective == bandit::v1::VENDI ? "VENDI" : "RKE",
                         " uses none, expected no reference_mean/covariance/samples"));
      if (params->objective == bandit::v1::VENDI)
        objective = std::make_unique<VendiObjective>();
      else
        objective = std::make_unique<RkeObjective>();
      break;
    default:
      return absl::InvalidArgumentError("mixture.objective is not FD, VENDI, RKE or KD");
  }

  std::unique_ptr<Policy> p;
  switch (params->algorithm) {
    case MixtureConfig::MIXTURE_UCB:
      p.reset(new MixtureUcb(*std::move(arms), *std::move(params), std::move(features),
                             std::move(objective), rng));
      break;
    case MixtureConfig::ONE_ARM_GREEDY:
      p.reset(new OneArmGreedy(*std::move(arms), *std::move(params), std::move(features),
                               std::move(objective), rng));
      break;
    case MixtureConfig::EPSILON_GREEDY:
      p.reset(new MixtureEpsGreedy(*std::move(arms), *std::move(params), std::move(features),
                                   std::move(objective), rng));
      break;
    case MixtureConfig::ONE_ARM_ORACLE: {
      // The paper's One-Arm Oracle (Fig. 2): the fixed mixture e_i of the named arm.
      const std::vector<std::string> ids = arms->ids();
      const auto it = std::find(ids.begin(), ids.end(), c.oracle_arm());
      if (it == ids.end())
        return absl::InvalidArgumentError(absl::StrCat("mixture.oracle_arm '", c.oracle_arm(),
                                                       "' is not an arm id, expected one of the ",
                                                       ids.size(), " arms' ids"));
      params->oracle_weights =
          Vector::Unit(static_cast<Eigen::Index>(ids.size()), it - ids.begin());
      p.reset(new MixtureOracle(*std::move(arms), *std::move(params), std::move(features),
                                std::move(objective), rng));
      break;
    }
    case MixtureConfig::MIXTURE_ORACLE:
      p.reset(new MixtureOracle(*std::move(arms), *std::move(params), std::move(features),
                                std::move(objective), rng));
      break;
    default:
      p.reset(new MixtureGreedy(*std::move(arms), *std::move(params), std::move(features),
                                std::move(objective), rng));
      break;
  }
  return p;
}

}  // namespace bandit
