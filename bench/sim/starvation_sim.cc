// env "bkb_fig2": the BKB paper's variance-starvation illustration (Calandriello et al. 2019,
// Fig. 2) with exact GP-UCB's posterior beside BKB's.
//   bandit-sim --env=bkb_fig2 [--arms=501] [--bandwidth=0.1] [--noise=0.1] [--q_bar=5]
//     [--evals=6,63,215] [--lo=0] [--hi=0.5] [--seed=1] --out=FILE.json
// f is drawn from GP(0, k) on an evenly spaced grid of `arms` points of [0, 1] (Cholesky of the
// Gram matrix + 1e-9 I), k Gaussian with length scale h = --bandwidth. The paper writes
// "bandwidth sigma^2 = 100"; we read it as the inverse squared length scale, h = 0.1 (a
// length scale of 10 on [0, 1] would make f nearly constant). For each t in --evals, t
// evaluations at points drawn uniformly in [lo, hi] (snapped to the grid) with noise N(0, xi^2)
// are given to a fresh BKB and a fresh exact GP-UCB (same data) through their public API
// (Update by arm id, then PosteriorMean / PosteriorVariance). Output per t: f, both posterior
// means and standard deviations on the grid, the evaluation points and BKB's dictionary.
// Standard deviations are reported in the GP's own units, sqrt(lambda * sigma^2) with lambda =
// xi^2 (core/kernel/kernel_ucb.h keeps sigma^2 divided by lambda, the scale of eq. 4).
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/sim/sim.h"
#include "core/kernel/bkb.h"
#include "core/kernel/gp_ucb.h"
#include "core/kernel/kernel.h"
#include "core/registry.h"
#include "core/rng.h"

namespace bandit::sim {

absl::StatusOr<nlohmann::json> RunBkbFig2(absl::string_view env, const SimArgs& args) {
  auto arms = args.Int("arms", 501);
  auto h = args.Double("bandwidth", 0.1);
  auto noise = args.Double("noise", 0.1);
  auto q_bar = args.Double("q_bar", 5.0);
  auto lo = args.Double("lo", 0.0);
  auto hi = args.Double("hi", 0.5);
  auto seed = args.Int("seed", 1);
  for (const absl::Status& s : {arms.status(), h.status(), noise.status(), q_bar.status(),
                                lo.status(), hi.status(), seed.status()})
    if (!s.ok()) return s;
  if (*arms < 2 || !(*h > 0) || !(*noise > 0) || !(*q_bar >= 1) ||
      !(*lo >= 0 && *lo < *hi && *hi <= 1))
    return absl::InvalidArgumentError(
        "expected --arms >= 2, --bandwidth > 0, --noise > 0, --q_bar >= 1, 0 <= --lo < --hi <= 1");
  std::vector<int64_t> evals;
  for (const auto& e : args.List("evals", "6,63,215")) {
    int64_t v;
    if (!absl::SimpleAtoi(e, &v) || v < 1)
      return absl::InvalidArgumentError(
          absl::StrCat("--evals entry '", e, "' is not an integer >= 1"));
    evals.push_back(v);
  }
  const int A = static_cast<int>(*arms);
  Eigen::MatrixXd X(1, A);
  std::vector<double> grid(A);
  for (int i = 0; i < A; ++i) X(0, i) = grid[i] = static_cast<double>(i) / (A - 1);
  const Kernel kernel = Kernel::Gaussian(*h);
  Eigen::MatrixXd K = kernel.Cross(X, X);
  K.diagonal().array() += 1e-9;
  Eigen::LLT<Eigen::MatrixXd> llt(K);
  Rng rng(static_cast<uint64_t>(*seed));
  Eigen::VectorXd z(A);
  for (int i = 0; i < A; ++i) z[i] = rng.Normal();
  const Eigen::VectorXd f = llt.matrixL() * z;

  const double lambda = *noise * *noise;
  auto make_config = [&](bool bkb) {
    bandit::v1::PolicyConfig pc;
    for (int i = 0; i < A; ++i) {
      auto* a = pc.add_arms();
      a->set_id(absl::StrCat(i));
      a->add_features(grid[i]);
    }
    if (bkb) {
      auto* c = pc.mutable_bkb();
      c->mutable_kernel()->set_kind(bandit::v1::KernelSpec::GAUSSIAN);
      c->mutable_kernel()->set_bandwidth(*h);
      c->set_lambda(lambda);
      c->set_noise(*noise);
      c->set_q_bar(*q_bar);
    } else {
      auto* c = pc.mutable_gp_ucb();
      c->mutable_kernel()->set_kind(bandit::v1::KernelSpec::GAUSSIAN);
      c->mutable_kernel()->set_bandwidth(*h);
      c->set_lambda(lambda);
      c->set_noise(*noise);
    }
    return pc;
  };
  auto to_std = [&](const Eigen::VectorXd& var) {
    std::vector<double> sd(var.size());
    for (Eigen::Index i = 0; i < var.size(); ++i) sd[i] = std::sqrt(std::max(0.0, lambda * var[i]));
    return sd;
  };
  nlohmann::json panels = nlohmann::json::array();
  for (int64_t t : evals) {
    auto bkb = CreatePolicy(make_config(true), static_cast<uint64_t>(*seed) * 31 + t);
    auto gp = CreatePolicy(make_config(false), static_cast<uint64_t>(*seed) * 31 + t);
    if (!bkb.ok()) return bkb.status();
    if (!gp.ok()) return gp.status();
    Rng data(static_cast<uint64_t>(*seed) * 1009 + t);
    std::vector<double> xs, ys;
    for (int64_t s = 0; s < t; ++s) {
      const double u = *lo + (*hi - *lo) * data.Uniform();
      const int slot = static_cast<int>(std::lround(u * (A - 1)));
      const double y = f[slot] + *noise * data.Normal();
      Observation obs;
      obs.arm_id = absl::StrCat(slot);
      obs.reward = y;
      if (auto st = (*bkb)->Update(obs); !st.ok()) return st;
      if (auto st = (*gp)->Update(obs); !st.ok()) return st;
      xs.push_back(grid[slot]);
      ys.push_back(y);
    }
    const auto& b = static_cast<const Bkb&>(**bkb);
    const auto& g = static_cast<const GpUcb&>(**gp);
    const Eigen::VectorXd& bm = b.PosteriorMean();
    const Eigen::VectorXd& gm = g.PosteriorMean();
    std::vector<double> dict;
    for (int i = 0; i < A; ++i)
      if (b.dictionary()[i] > 0) dict.push_back(grid[i]);
    // Largest ratio of exact to BKB standard deviation on the unexplored half (starvation would
    // make BKB's far-away variance collapse; Theorem 3.1 keeps the ratio within a constant).
    const std::vector<double> bsd = to_std(b.PosteriorVariance()),
                              gsd = to_std(g.PosteriorVariance());
    double worst = 0;
    for (int i = 0; i < A; ++i) worst = std::max(worst, std::max(bsd[i] / gsd[i], gsd[i] / bsd[i]));
    panels.push_back({{"t", t},
                      {"x", xs},
                      {"y", ys},
                      {"dictionary", dict},
                      {"bkb_mean", std::vector<double>(bm.data(), bm.data() + A)},
                      {"bkb_std", bsd},
                      {"gp_mean", std::vector<double>(gm.data(), gm.data() + A)},
                      {"gp_std", gsd},
                      {"max_std_ratio", worst}});
  }
  nlohmann::json params = {{"arms", A},       {"bandwidth", *h},
                           {"noise", *noise}, {"lambda", lambda},
                           {"q_bar", *q_bar}, {"lo", *lo},
                           {"hi", *hi},       {"seed", *seed},
                           {"evals", evals},  {"std_units", "GP units: sqrt(lambda * sigma~^2)"}};
  return nlohmann::json{{"env", std::string(env)},
                        {"params", params},
                        {"grid", grid},
                        {"f", std::vector<double>(f.data(), f.data() + A)},
                        {"panels", panels}};
}

}  // namespace bandit::sim
