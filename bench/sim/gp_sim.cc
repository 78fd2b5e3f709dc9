// bandit-sim --env=gp: the BKB reproduction (Calandriello et al. 2019). Arms uniform in
// [0,1]^d, f ~ GP(0, Gaussian kernel) on the arm set, Gaussian noise; BKB against exact GP-UCB.
//
//   bandit-sim --env=gp --algos=bkb,gp_ucb --arms=1000 --d=3 --T=2000 --seeds=5 --out=FILE.json
//
// Flags (defaults): --bandwidth=0.25 (env and policy kernel) --noise=0.1 (env and xi)
// --lambda (default xi^2) --q_bar=5 (or "theory": Theorem 3.1 with the horizon T) --epsilon=0.5
// --delta=0.1 --f_bound=1 --radius_multiplier=0.1 --diagnostics=false (BKB only: every T/100
// rounds, the exact sigma_t^2 of every arm against sigma~_t^2 and d_eff = sum_s sigma_t^2(x_s)).
// Output per algo: regret_mean/std (final cumulative pseudo-regret over seeds), regret_curve and
// regret_curve_std (100 points), seconds_per_round (Select + Update only) and its 100-point
// curve, and for BKB dict_size_curve (+ deff_curve, variance_ratio_{min,max}_curve).
#include <chrono>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/sim/sim.h"
#include "core/kernel/bkb.h"
#include "core/kernel/gp_ucb.h"
#include "core/registry.h"
#include "core/sim/gp_env.h"

namespace bandit::sim {

namespace {

struct GpParams {
  int arms, d, T, seeds;
  double bandwidth, noise, epsilon, delta, f_bound, mult;
  std::optional<double> lambda;
  std::string q_bar;
  bool diagnostics;
};

absl::StatusOr<bandit::v1::PolicyConfig> MakeConfig(const std::string& algo, const GpParams& p,
                                                    const GpEnv& env) {
  bandit::v1::PolicyConfig c;
  bandit::v1::KernelSpec* k;
  if (algo == "bkb") {
    auto* b = c.mutable_bkb();
    k = b->mutable_kernel();
    if (p.lambda) b->set_lambda(*p.lambda);
    b->set_noise(p.noise);
    b->set_delta(p.delta);
    b->set_f_bound(p.f_bound);
    b->set_epsilon(p.epsilon);
    b->set_radius_multiplier(p.mult);
    if (p.q_bar == "theory") {
      b->set_horizon(p.T);
    } else {
      double q;
      if (!absl::SimpleAtod(p.q_bar, &q))
        return absl::InvalidArgumentError(
            absl::StrCat("--q_bar=", p.q_bar, " is not a number or 'theory'"));
      b->set_q_bar(q);
    }
  } else if (algo == "gp_ucb") {
    auto* g = c.mutable_gp_ucb();
    k = g->mutable_kernel();
    if (p.lambda) g->set_lambda(*p.lambda);
    g->set_noise(p.noise);
    g->set_delta(p.delta);
    g->set_f_bound(p.f_bound);
    g->set_radius_multiplier(p.mult);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--algos: unknown '", algo, "', expected bkb or gp_ucb"));
  }
  k->set_kind(bandit::v1::KernelSpec::GAUSSIAN);
  k->set_bandwidth(p.bandwidth);
  env.FillArms(&c);
  return c;
}

absl::StatusOr<nlohmann::json> RunGp(absl::string_view env_name, const SimArgs& args) {
  GpParams p;
  auto arms = args.Int("arms", 1000);
  auto d = args.Int("d", 3);
  auto T = args.Int("T", 2000);
  auto seeds = args.Int("seeds", 5);
  auto bw = args.Double("bandwidth", 0.25);
  auto noise = args.Double("noise", 0.1);
  auto eps = args.Double("epsilon", 0.5);
  auto delta = args.Double("delta", 0.1);
  auto fb = args.Double("f_bound", 1.0);
  auto mult = args.Double("radius_multiplier", 0.1);
  for (const absl::Status& s :
       {arms.status(), d.status(), T.status(), seeds.status(), bw.status(), noise.status(),
        eps.status(), delta.status(), fb.status(), mult.status()})
    if (!s.ok()) return s;
  p.arms = static_cast<int>(*arms);
  p.d = static_cast<int>(*d);
  p.T = static_cast<int>(*T);
  p.seeds = static_cast<int>(*seeds);
  p.bandwidth = *bw;
  p.noise = *noise;
  p.epsilon = *eps;
  p.delta = *delta;
  p.f_bound = *fb;
  p.mult = *mult;
  if (args.Has("lambda")) {
    auto l = args.Double("lambda", 0);
    if (!l.ok()) return l.status();
    p.lambda = *l;
  }
  p.q_bar = args.String("q_bar", "5");
  p.diagnostics = args.String("diagnostics", "false") == "true";
  if (p.T < 100 || p.seeds < 1)
    return absl::InvalidArgumentError("--T must be >= 100 and --seeds >= 1");
  const std::vector<std::string> algos = args.List("algos", "bkb,gp_ucb");
  const Kernel kernel = Kernel::Gaussian(p.bandwidth);

  nlohmann::json doc;
  doc["env"] = std::string(env_name);
  doc["params"] = {{"arms", p.arms},
                   {"d", p.d},
                   {"T", p.T},
                   {"seeds", p.seeds},
                   {"bandwidth", p.bandwidth},
                   {"noise", p.noise},
                   {"epsilon", p.epsilon},
                   {"delta", p.delta},
                   {"f_bound", p.f_bound},
                   {"radius_multiplier", p.mult},
                   {"q_bar", p.q_bar},
                   {"lambda", p.lambda ? *p.lambda : p.noise * p.noise}};
  doc["results"] = nlohmann::json::array();
  const int npts = 100;
  for (const std::string& algo : algos) {
    std::vector<std::vector<double>> regret_curves, time_curves, pulled_curves, dict_curves,
        deff_curves, rmin_curves, rmax_curves;
    std::vector<double> finals, spr;
    for (int s = 0; s < p.seeds; ++s) {
      auto env = GpEnv::Make(p.arms, p.d, kernel, p.noise, 1000 + s);
      if (!env.ok()) return env.status();
      auto config = MakeConfig(algo, p, *env);
      if (!config.ok()) return config.status();
      auto policy = CreatePolicy(*config, 7 + s);
      if (!policy.ok()) return policy.status();
      auto* kp = dynamic_cast<KernelUcbPolicy*>(policy->get());
      auto* bkb = dynamic_cast<Bkb*>(policy->get());
      Rng noise_rng(5000 + s);
      std::vector<double> regret(p.T), secs(p.T);
      std::vector<double> dict, deff, rmin, rmax, pulled;
      double cum = 0;
      const int every = p.T / npts;
      for (int t = 0; t < p.T; ++t) {
        const auto t0 = std::chrono::steady_clock::now();
        auto dec = (*policy)->Select({});
        if (!dec.ok()) return dec.status();
        Observation obs;
        obs.arm_id = dec->arm_id;
        obs.reward = env->Reward(dec->arm, noise_rng);
        if (auto st = (*policy)->Update(obs); !st.ok()) return st;
        secs[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        cum += env->Regret(dec->arm);
        regret[t] = cum;
        if ((t + 1) % every == 0) pulled.push_back((kp->counts().array() > 0).count());
        if (bkb && (t + 1) % every == 0) {
          dict.push_back(bkb->dictionary_size());
          if (p.diagnostics) {
            Vector em, ev;
            ExactGpPosterior(kernel, env->features(), Vector::Ones(p.arms), kp->counts(),
                             kp->sums(), kp->params().lambda, &em, &ev);
            const Vector& av = kp->PosteriorVariance();
            const Vector ratio = av.cwiseQuotient(ev);
            rmin.push_back(ratio.minCoeff());
            rmax.push_back(ratio.maxCoeff());
            deff.push_back(kp->counts().dot(ev));  // d_eff = sum_s sigma_t^2(x_s) (eq. 5)
          }
        }
      }
      finals.push_back(cum);
      double total = 0;
      for (double x : secs) total += x;
      spr.push_back(total / p.T);
      // Mean seconds per round within each of the npts windows.
      std::vector<double> tc;
      for (int k = 0; k < npts; ++k) {
        const int a = k * p.T / npts, b = (k + 1) * p.T / npts;
        double w = 0;
        for (int t = a; t < b; ++t) w += secs[t];
        tc.push_back(w / std::max(1, b - a));
      }
      regret_curves.push_back(Downsample(regret, npts));
      time_curves.push_back(tc);
      pulled_curves.push_back(pulled);
      if (bkb) {
        dict_curves.push_back(dict);
        if (p.diagnostics) {
          deff_curves.push_back(deff);
          rmin_curves.push_back(rmin);
          rmax_curves.push_back(rmax);
        }
      }
    }
    auto [rm, rs] = MeanStd(finals);
    auto [cm, cs] = CurveMeanStd(regret_curves);
    auto [tm, ts] = CurveMeanStd(time_curves);
    nlohmann::json r = {{"algo", algo},
                        {"regret_mean", rm},
                        {"regret_std", rs},
                        {"regret_curve", cm},
                        {"regret_curve_std", cs},
                        {"seconds_per_round", MeanStd(spr).first},
                        {"seconds_per_round_curve", tm},
                        {"pulled_arms_curve", CurveMeanStd(pulled_curves).first}};
    if (!dict_curves.empty()) {
      auto [dm, ds] = CurveMeanStd(dict_curves);
      r["dict_size_curve"] = dm;
      r["dict_size_curve_std"] = ds;
    }
    if (!deff_curves.empty()) {
      r["deff_curve"] = CurveMeanStd(deff_curves).first;
      // Extremes over seeds of sigma~^2 / sigma^2 over all arms (Theorem 3.1: in [1/alpha, alpha]).
      std::vector<double> lo(npts, 1e300), hi(npts, -1e300);
      for (size_t s = 0; s < rmin_curves.size(); ++s)
        for (int k = 0; k < npts; ++k) {
          lo[k] = std::min(lo[k], rmin_curves[s][k]);
          hi[k] = std::max(hi[k], rmax_curves[s][k]);
        }
      r["variance_ratio_min_curve"] = lo;
      r["variance_ratio_max_curve"] = hi;
      r["alpha"] = (1 + p.epsilon) / (1 - p.epsilon);
    }
    doc["results"].push_back(r);
  }
  return doc;
}

}  // namespace

// Registered in bench/sim/registry.cc.
absl::StatusOr<nlohmann::json> RunGpEnv(absl::string_view env, const SimArgs& args) {
  return RunGp(env, args);
}

}  // namespace bandit::sim
