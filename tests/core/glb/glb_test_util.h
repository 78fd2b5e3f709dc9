// Helpers shared by the GLB tests (header only; the *_test.cc files form test_core_glb).
#pragma once

#include <google/protobuf/text_format.h>

#include <memory>
#include <vector>

#include <gtest/gtest.h>
#include <Eigen/Dense>

#include "bench/sim/baselines/sim_policies.h"
#include "core/policy.h"
#include "core/registry.h"
#include "core/sim/glb_env.h"

namespace bandit::glb::testing {

// Slow, independent solver of  min_{||theta|| <= S} g'(theta - theta0) + 1/2 (theta - theta0)' Q (theta - theta0)
// by projected gradient descent with Euclidean projection (step 1/L, many iterations).
inline Eigen::VectorXd SlowQuadraticOverBall(const Eigen::MatrixXd& Q, const Eigen::VectorXd& g,
                                             const Eigen::VectorXd& theta0, double S,
                                             int iters = 200000) {
  const double L = Q.eigenvalues().real().maxCoeff();
  Eigen::VectorXd th = theta0;
  for (int i = 0; i < iters; ++i) {
    th -= (g + Q * (th - theta0)) / L;
    const double n = th.norm();
    if (n > S) th *= S / n;
  }
  return th;
}

// Runs `rounds` rounds of `policy` in `env`; returns cumulative pseudo-regret. Optionally records arms.
inline double Run(Policy& policy, sim::GlbEnv& env, int64_t rounds,
                  std::vector<int>* arms = nullptr) {
  double regret = 0;
  for (int64_t t = 0; t < rounds; ++t) {
    const auto& c = env.NextRound();
    SelectContext ctx;
    ctx.candidates = c;
    auto d = policy.Select(ctx);
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return regret;
    Observation obs;
    obs.features = c[d->arm];
    obs.reward = env.Reward(d->arm);
    auto s = policy.Update(obs);
    EXPECT_TRUE(s.ok()) << s;
    regret += env.Regret(d->arm);
    if (arms) arms->push_back(d->arm);
  }
  return regret;
}

// Expected regret of the uniformly random policy over the same rounds.
inline double UniformRegret(sim::GlbEnv& env, int64_t rounds, int arms) {
  double r = 0;
  for (int64_t t = 0; t < rounds; ++t) {
    env.NextRound();
    for (int a = 0; a < arms; ++a) r += env.Regret(a) / arms;
  }
  return r;
}

inline std::unique_ptr<Policy> MustCreate(const bandit::v1::SimPolicyConfig& c, uint64_t seed) {
  auto p = CreateSimPolicy(c, seed);  // a served policy or a simulation-only baseline
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}
inline std::unique_ptr<Policy> MustCreate(const bandit::v1::PolicyConfig& c, uint64_t seed) {
  auto p = CreatePolicy(c, seed);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

// A config in text: a served policy's (PolicyConfig) or a simulation-only baseline's
// (SimPolicyConfig).
inline bandit::v1::SimPolicyConfig SimConfig(const std::string& text) {
  bandit::v1::SimPolicyConfig c;
  google::protobuf::TextFormat::Parser quiet;  // a served policy's text is tried second
  quiet.RecordErrorsTo(nullptr);
  if (quiet.ParseFromString(text, &c)) return c;
  c.Clear();
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, c.mutable_served())) << text;
  return c;
}

}  // namespace bandit::glb::testing
