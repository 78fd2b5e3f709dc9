// What bandit-loadgen sends: the policy config of the instance under load, a pool of requests
// and the reward model that answers its decisions.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bandit/v1/service.pb.h"
#include "core/policy.h"

namespace bandit::loadgen {

namespace v1 = bandit::v1;

// Small deterministic generator (no std distributions: the same stream on every platform).
struct Gen {
  std::mt19937_64 e;
  explicit Gen(uint64_t seed) : e(seed) {}
  double Uniform() { return static_cast<double>(e() >> 11) * 0x1.0p-53; }
  double Normal() {  // Box-Muller
    double u1 = Uniform(), u2 = Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
};

// Pre-built requests (a pool of 64, reused cyclically) and a reward model.
struct Workload {
  bandit::ContextKind kind = bandit::ContextKind::kCandidates;
  int d = 20, arms = 50;
  std::vector<double> theta;                // logistic reward model over features
  std::vector<v1::SelectRequest> requests;  // pool, reused cyclically

  double Reward(const v1::SelectRequest& req, const v1::Decision& dec, Gen& g) const {
    double z = 0.0;
    if (kind == bandit::ContextKind::kCandidates) {
      const int a = dec.arm_index();
      if (a >= 0 && a < req.candidates_size()) {
        const auto& v = req.candidates(a).values();
        for (int j = 0; j < v.size() && j < d; ++j) z += v[j] * theta[j];
      }
    } else if (kind == bandit::ContextKind::kPoint) {
      // Kernel selection: the label y = sign of the model.
      for (int j = 0; j < req.x_size() && j < d; ++j) z += req.x(j) * theta[j];
      return z >= 0 ? 1.0 : -1.0;
    } else {
      z = 4.0 * (static_cast<double>(dec.arm_index() + 1) / (arms + 1)) - 2.0;
    }
    return g.Uniform() < 1.0 / (1.0 + std::exp(-z)) ? 1.0 : 0.0;
  }
};

Workload MakeWorkload(bandit::ContextKind kind, int d, int arms, const std::string& instance,
                      uint64_t seed);

// ||theta*|| of the reward models (Workload, and the in-process environment).
inline constexpr double kThetaNorm = 3.0;

// A registered example (core/registry.h: PolicyExample::config) at the load's sizes: its policy's
// `dimension` (when it has one) set to d and its `s` (the bound on ||theta*||) to kThetaNorm,
// num_arms (when set) to `arms`, and arms with features replaced by `arms` arms of d features.
// The result may still be refused by the policy (e.g. other fields sized for the example's
// dimension); CreatePolicy says.
absl::StatusOr<v1::PolicyConfig> SizedExample(absl::string_view example, int d, int arms, Gen& g);
// The `dimension` of the config's policy (0 when it has none), read by reflection.
int ConfigDimension(const v1::PolicyConfig& config);

// The config of the instance under load: `policy_config` (text-format bandit.v1.PolicyConfig)
// if given, else the first registered example of the policy named `policy` (any registered
// policy), sized by SizedExample. INVALID_ARGUMENT otherwise.
absl::StatusOr<v1::PolicyConfig> MakePolicyConfig(const std::string& policy,
                                                  const std::string& policy_config, int d, int arms,
                                                  Gen& g);

}  // namespace bandit::loadgen
