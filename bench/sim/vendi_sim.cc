// env "vendi_exact": what the random-feature form of log-Vendi costs against the paper's exact
// Gram-matrix form (eq. 9-11, core/mixture/vendi_exact.h), on one pooled sample set of the
// synthetic generators (core/sim/generators_env.h).
//   bandit-sim --env=vendi_exact [--arms=4] [--d=16] [--per_arm=100] [--Rs=16,...,1024]
//     [--draws=3] [--bandwidth=0.5*sqrt(2d)] [--eg_steps=300] [--env_seed=1] --out=FILE.json
// For each R and each of `draws` independent feature draws (unit-normalized Gaussian RFF, as the
// policies use): |L_R(a) - L(a)| at the uniform mixture and at the exact minimizer a*, the
// minimizer a*_R of the RFF form (EG, step 1, `eg_steps` steps from uniform) with its exact
// excess loss L(a*_R) - L(a*) and |a*_R - a*|_1, and the CPU time of one value+gradient
// evaluation of each form (N = arms * per_arm pooled samples; exact O(N^3), RFF O(R^3)).
#include <time.h>

#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/sim/sim.h"
#include "core/mixture/eg_solver.h"
#include "core/mixture/features.h"
#include "core/mixture/stats.h"
#include "core/mixture/vendi_exact.h"
#include "core/mixture/vendi_objective.h"
#include "core/sim/generators_env.h"

namespace bandit::sim {
namespace {

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Mean CPU seconds of one value + gradient evaluation (repeated until 0.2 s have passed).
double TimeEval(const mixture::BoundLoss& loss, const Eigen::VectorXd& a) {
  Eigen::VectorXd g;
  int reps = 0;
  const double start = CpuSeconds();
  double now = start;
  while (reps < 2 || now - start < 0.2) {
    loss.Eval(a, &g);
    ++reps;
    now = CpuSeconds();
  }
  return (now - start) / reps;
}

}  // namespace

absl::StatusOr<nlohmann::json> RunVendiExact(absl::string_view env, const SimArgs& args) {
  auto arms = args.Int("arms", 4);
  auto d = args.Int("d", 16);
  auto per_arm = args.Int("per_arm", 100);
  auto draws = args.Int("draws", 3);
  auto eg_steps = args.Int("eg_steps", 300);
  auto env_seed = args.Int("env_seed", 1);
  for (const absl::Status& s : {arms.status(), d.status(), per_arm.status(), draws.status(),
                                eg_steps.status(), env_seed.status()})
    if (!s.ok()) return s;
  if (*arms < 2 || *d < 1 || *per_arm < 2 || *draws < 1 || *eg_steps < 1)
    return absl::InvalidArgumentError(
        "expected --arms >= 2, --d >= 1, --per_arm >= 2, --draws >= 1, --eg_steps >= 1");
  auto bandwidth = args.Double("bandwidth", 0.5 * std::sqrt(2.0 * static_cast<double>(*d)));
  if (!bandwidth.ok()) return bandwidth.status();
  std::vector<int> Rs;
  for (const auto& r : args.List("Rs", "16,32,64,128,256,512,1024")) {
    int v;
    if (!absl::SimpleAtoi(r, &v) || v < 1 || v > 4096)
      return absl::InvalidArgumentError(absl::StrCat("--Rs entry '", r, "' is not in 1..4096"));
    Rs.push_back(v);
  }
  GeneratorsEnvConfig ec;
  ec.arms = static_cast<int>(*arms);
  ec.d = static_cast<int>(*d);
  ec.env_seed = static_cast<uint64_t>(*env_seed);
  auto genv = GeneratorsEnv::Make(ec);
  if (!genv.ok()) return genv.status();
  const int m = genv->arms();
  Rng rng(static_cast<uint64_t>(*env_seed) * 7 + 1);
  Eigen::MatrixXd samples(m * *per_arm, ec.d);
  std::vector<int> arm_of;
  for (int i = 0; i < m; ++i)
    for (int64_t r = 0; r < *per_arm; ++r) {
      samples.row(arm_of.size()) = genv->Sample(i, rng).transpose();
      arm_of.push_back(i);
    }
  const mixture::ExactVendiLoss exact(
      mixture::VendiGram(samples, mixture::VendiKernel::kGaussian, *bandwidth), arm_of, m);
  const Eigen::VectorXd uniform = Eigen::VectorXd::Constant(m, 1.0 / m);
  const auto sol =
      mixture::ExponentiatedGradient(exact, uniform, static_cast<int>(*eg_steps), 1.0, 1e-12, true);
  const Eigen::VectorXd a_star = sol.alpha;
  const double l_star = exact.Value(a_star), l_uniform = exact.Value(uniform);
  const double exact_time = TimeEval(exact, uniform);

  nlohmann::json rows = nlohmann::json::array();
  for (int R : Rs) {
    std::vector<double> err_u, err_s, excess, l1, times;
    std::vector<double> alpha_mean(m, 0.0);
    for (int64_t draw = 0; draw < *draws; ++draw) {
      Rng frng(static_cast<uint64_t>(*env_seed) * 1000 + static_cast<uint64_t>(R) * 17 +
               static_cast<uint64_t>(draw));
      auto fm = mixture::FeatureMap::RandomFourier(ec.d, R, *bandwidth, frng);
      if (!fm.ok()) return fm.status();
      mixture::MixtureStats stats(m, R, true);
      Eigen::VectorXd phi;
      for (Eigen::Index j = 0; j < samples.rows(); ++j) {
        fm->Map(samples.row(j).transpose(), &phi);
        stats.Add(arm_of[j], phi, std::nullopt);
      }
      auto rf = mixture::VendiObjective().Bind(stats);
      err_u.push_back(std::abs(rf->Value(uniform) - l_uniform));
      err_s.push_back(std::abs(rf->Value(a_star) - l_star));
      const auto rs = mixture::ExponentiatedGradient(*rf, uniform, static_cast<int>(*eg_steps), 1.0,
                                                     1e-12, false);
      excess.push_back(exact.Value(rs.alpha) - l_star);
      l1.push_back((rs.alpha - a_star).lpNorm<1>());
      for (int i = 0; i < m; ++i) alpha_mean[i] += rs.alpha[i] / static_cast<double>(*draws);
      times.push_back(TimeEval(*rf, uniform));
    }
    rows.push_back({{"R", R},
                    {"abs_err_uniform", MeanStd(err_u).first},
                    {"abs_err_uniform_std", MeanStd(err_u).second},
                    {"abs_err_at_alpha_star", MeanStd(err_s).first},
                    {"abs_err_at_alpha_star_std", MeanStd(err_s).second},
                    {"exact_excess_of_rff_minimizer", MeanStd(excess).first},
                    {"alpha_l1_distance", MeanStd(l1).first},
                    {"alpha_rff_mean", alpha_mean},
                    {"cpu_seconds_per_eval", MeanStd(times).first}});
  }
  nlohmann::json params = {{"arms", m},
                           {"d", ec.d},
                           {"per_arm", *per_arm},
                           {"N", samples.rows()},
                           {"draws", *draws},
                           {"bandwidth", *bandwidth},
                           {"eg_steps", *eg_steps},
                           {"env_seed", *env_seed}};
  nlohmann::json ex = {{"loss_uniform", l_uniform},
                       {"vendi_uniform", std::exp(-l_uniform)},
                       {"loss_alpha_star", l_star},
                       {"vendi_alpha_star", std::exp(-l_star)},
                       {"alpha_star", std::vector<double>(a_star.data(), a_star.data() + m)},
                       {"cpu_seconds_per_eval", exact_time}};
  return nlohmann::json{
      {"env", std::string(env)}, {"params", params}, {"exact", ex}, {"rff", rows}};
}

}  // namespace bandit::sim
