// bandit-sim runner for the GLB environments (GLB-OMD Section 5, DOMD-GLB Section 5):
//   bandit-sim --env=logistic|poisson|gaussian|drift|piecewise --algos=a,b,c --d=5 --arms=30
//              --S=3 --T=3000 --seeds=10 --out=FILE.json [--plot=FILE.png]
// Algorithms (all built through CreatePolicy): glb_omd, domd_glb, glm_ucb (MLE + local-Hessian
// bonus), glm_ucb_dm (MLE + kappa-scaled design-matrix bonus), linucb, eps_greedy (GLM MLE),
// glb_omd_diag and linucb_diag (the diagonal-covariance forms, same parameters), linucb_sketch<l>
// and glb_omd_sketch<l> (the sketched covariance of sketch size l, e.g. linucb_sketch16),
// sw_glm_ucb (sliding-window GLM-UCB, the nonstationary baseline); the GLB-OMD paper's baselines
// gloc, ecolog (logistic), rs_glincb, ofuglb, ofulog_r (logistic), glm_ucb_filippi (Filippi et
// al.'s own mean-scale rule and radius). --region_grid=N (d = 2): after the last round of seed 1,
// which points of an N x N grid over [-S-1/2, S+1/2]^2 lie in each algorithm's confidence set
// (GLB-OMD Fig. 3). --reward_bound=R for rs_glincb / glm_ucb_filippi (default 1 / 100 Poisson).
// The DOMD-GLB paper's Fig. 1 baselines (core/glb/restart_glb.h, baselines/discounted_glm_ucb.h,
// baselines/master_glm_ucb.h): restart_glb, d_glucb,
// sc_d_glucb, bvd_glm_ucb, scb_weight_ucb, scb_pw_weight_ucb, master_glm_ucb (tuned gamma / H from
// the env's P_T or Gamma_T and T; lambda = d for them even with --lambda=theory: see
// docs/algorithms.md). --master_order=12 (MASTER's block order n), --proj_steps=20
// (projected-gradient iterations of the projection step; the config default is 50).
// Other flags: --lambda=NUMBER|theory (default d), --radius=MULT (default 1; 0.2 for drift and
// piecewise, as in the DOMD-GLB paper), --delta=0.05, --dispersion=1 (gaussian), --gamma=G
// (DOMD-GLB; default: Theorem 2 / 3 tuned from the env's P_T / Gamma_T), --window=W
// (sw_glm_ucb; default T^(2/3)), --eps=0.1, --linucb_alpha=1, --nnz=K (sparse arms of K terms,
// like hashed features; default dense).
#include <chrono>
#include <cmath>
#include <functional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/sim/sim.h"
#include "core/glb/ecolog.h"
#include "core/glb/glb_omd.h"
#include "core/glb/glm_ucb.h"
#include "core/glb/gloc.h"
#include "bench/sim/baselines/likelihood_ucb.h"
#include "core/glb/link.h"
#include "bench/sim/baselines/sim_policies.h"
#include "core/registry.h"
#include "core/sim/glb_env.h"

namespace bandit::sim {

namespace {

struct AlgoResult {
  std::vector<std::vector<double>> curves;
  std::vector<double> finals, spr, spr_last, bytes;
};

bandit::v1::Link ProtoLink(glb::LinkKind k) {
  switch (k) {
    case glb::LinkKind::kPoisson:
      return bandit::v1::POISSON;
    case glb::LinkKind::kGaussian:
      return bandit::v1::GAUSSIAN;
    default:
      return bandit::v1::LOGISTIC;
  }
}

// Membership test of an algorithm's confidence set after its last update (GLB-OMD Fig. 3), or
// null for algorithms without one. Ellipsoidal sets {||theta - c||_M <= beta} (and ||theta|| <= S
// where the algorithm constrains to the ball); likelihood-ratio sets exactly.
std::function<bool(const Eigen::VectorXd&)> RegionTest(const Policy& p, double S) {
  auto ellipsoid = [S](Eigen::VectorXd c, Eigen::MatrixXd m, double beta, bool ball) {
    return [=](const Eigen::VectorXd& th) {
      const Eigen::VectorXd d = th - c;
      return d.dot(m * d) <= beta * beta && (!ball || th.norm() <= S * (1 + 1e-9));
    };
  };
  if (auto* g = dynamic_cast<const glb::GlbOmd*>(&p))
    return ellipsoid(g->theta(), g->h(), g->Beta(), true);
  if (auto* g = dynamic_cast<const glb::GlmUcb*>(&p))
    return ellipsoid(g->theta(), g->w_inverse().inverse(), g->Radius(), false);
  if (auto* g = dynamic_cast<const glb::Gloc*>(&p))
    return ellipsoid(g->theta_hat(), g->v_inverse().inverse(), g->Beta(), false);
  if (auto* g = dynamic_cast<const glb::Ecolog*>(&p))
    return ellipsoid(g->theta(), g->w(), g->Beta(), true);
  if (auto* g = dynamic_cast<const glb::LikelihoodUcb*>(&p))
    return [g](const Eigen::VectorXd& th) { return g->InConfidenceSet(th); };
  return nullptr;
}

}  // namespace

absl::StatusOr<nlohmann::json> RunGlb(absl::string_view env_name, const SimArgs& args) {
  auto kind = ParseGlbEnv(env_name);
  if (!kind.ok()) return kind.status();
  const bool nonstat = *kind == GlbEnvKind::kDrift || *kind == GlbEnvKind::kPiecewise;
  GlbEnvConfig ec;
  ec.kind = *kind;
  auto d = args.Int("d", 5);
  auto arms = args.Int("arms", 30);
  auto S = args.Double("S", 3.0);
  auto T = args.Int("T", nonstat ? 5000 : 3000);
  auto seeds = args.Int("seeds", nonstat ? 20 : 10);
  auto radius = args.Double("radius", nonstat ? 0.2 : 1.0);
  auto delta = args.Double("delta", 0.05);
  auto disp = args.Double("dispersion", 1.0);
  auto eps = args.Double("eps", 0.1);
  auto lin_alpha = args.Double("linucb_alpha", 1.0);
  auto region_grid = args.Int("region_grid", 0);
  if (!region_grid.ok()) return region_grid.status();
  const bool has_reward_bound = args.Has("reward_bound");
  auto reward_bound = args.Double("reward_bound", 100.0);
  if (!reward_bound.ok()) return reward_bound.status();
  for (const absl::Status& s :
       {d.status(), arms.status(), S.status(), T.status(), seeds.status(), radius.status(),
        delta.status(), disp.status(), eps.status(), lin_alpha.status()})
    if (!s.ok()) return s;
  if (*d < 1 || *arms < 1 || *T < 2 || *seeds < 1 || *S <= 0)
    return absl::InvalidArgumentError(
        "expected --d >= 1, --arms >= 1, --T >= 2, --seeds >= 1, --S > 0");
  ec.d = static_cast<int>(*d);
  ec.arms = static_cast<int>(*arms);
  auto nnz = args.Int("nnz", 0);
  if (!nnz.ok()) return nnz.status();
  ec.nnz = static_cast<int>(*nnz);
  ec.S = *S;
  ec.T = *T;
  ec.dispersion = *disp;
  const std::string lambda_arg = args.String("lambda", "d");
  const bool theory_lambda = lambda_arg == "theory";
  double lambda = static_cast<double>(*d);
  if (!theory_lambda && args.Has("lambda")) {
    auto l = args.Double("lambda", lambda);
    if (!l.ok()) return absl::InvalidArgumentError("--lambda expects a number or 'theory'");
    lambda = *l;
  }
  auto master_order = args.Int("master_order", 12);
  auto proj_steps = args.Int("proj_steps", 20);
  if (!master_order.ok()) return master_order.status();
  if (!proj_steps.ok()) return proj_steps.status();
  auto window = args.Int("window", std::llround(std::pow(static_cast<double>(*T), 2.0 / 3.0)));
  if (!window.ok()) return window.status();
  const std::vector<std::string> algos = args.List(
      "algos", nonstat ? "domd_glb,glb_omd,sw_glm_ucb" : "glb_omd,glm_ucb,linucb,eps_greedy");

  const GlbEnv probe(ec, 1);
  const glb::GlmLink link = probe.link();
  const double path_length = probe.PathLength();
  const int64_t changes = probe.NumChanges();
  const bool has_gamma = args.Has("gamma");
  auto gamma = args.Double("gamma", 0.0);
  if (!gamma.ok()) return gamma.status();

  std::function<absl::StatusOr<bandit::v1::SimPolicyConfig>(const std::string&)> make_config;
  make_config = [&](const std::string& algo) -> absl::StatusOr<bandit::v1::SimPolicyConfig> {
    // linucb_sketch<l>, glb_omd_sketch<l>: the same config with covariance:
    // COVARIANCE_SKETCHED and sketch_size l.
    if (const size_t at = algo.find("_sketch"); at != std::string::npos) {
      const std::string base = algo.substr(0, at);
      int l = 0;
      if ((base != "linucb" && base != "glb_omd") || !absl::SimpleAtoi(algo.substr(at + 7), &l))
        return absl::InvalidArgumentError(absl::StrCat(
            "algorithm '", algo, "': expected linucb_sketch<l> or glb_omd_sketch<l>"));
      auto c = make_config(base);
      if (!c.ok()) return c.status();
      bandit::v1::PolicyConfig* served = c->mutable_served();
      if (served->has_glb_omd()) {
        served->mutable_glb_omd()->set_covariance(bandit::v1::COVARIANCE_SKETCHED);
        served->mutable_glb_omd()->set_sketch_size(l);
      } else {
        served->mutable_linucb()->set_covariance(bandit::v1::COVARIANCE_SKETCHED);
        served->mutable_linucb()->set_sketch_size(l);
      }
      return c;
    }
    // glb_omd_diag, linucb_diag: the same config with covariance: COVARIANCE_DIAGONAL.
    if (algo == "glb_omd_diag" || algo == "linucb_diag") {
      auto c = make_config(algo.substr(0, algo.size() - 5));
      if (!c.ok()) return c.status();
      bandit::v1::PolicyConfig* served = c->mutable_served();
      if (served->has_glb_omd())
        served->mutable_glb_omd()->set_covariance(bandit::v1::COVARIANCE_DIAGONAL);
      else
        served->mutable_linucb()->set_covariance(bandit::v1::COVARIANCE_DIAGONAL);
      return c;
    }
    // A served policy's config goes into `c`; a simulation-only baseline's replaces it in `sim`.
    bandit::v1::SimPolicyConfig sim;
    bandit::v1::PolicyConfig& c = *sim.mutable_served();
    const auto plink = ProtoLink(link.kind());
    if (algo == "glb_omd") {
      auto* g = c.mutable_glb_omd();
      g->set_dimension(ec.d);
      g->set_link(plink);
      g->set_s(ec.S);
      if (theory_lambda)
        g->set_theory_lambda(true);
      else
        g->set_lambda(lambda);
      g->set_delta(*delta);
      g->set_radius_multiplier(*radius);
      if (plink == bandit::v1::GAUSSIAN) g->set_dispersion(*disp);
    } else if (algo == "domd_glb") {
      auto* g = c.mutable_domd_glb();
      g->set_dimension(ec.d);
      g->set_link(plink);
      g->set_s(ec.S);
      if (theory_lambda)
        g->set_theory_lambda(true);
      else
        g->set_lambda(lambda);
      g->set_delta(*delta);
      g->set_radius_multiplier(*radius);
      if (plink == bandit::v1::GAUSSIAN) g->set_dispersion(*disp);
      if (has_gamma) {
        g->set_gamma(*gamma);
      } else {
        g->set_horizon(ec.T);
        if (ec.kind == GlbEnvKind::kPiecewise)
          g->set_num_changes(std::max<int64_t>(changes, 1));
        else
          g->set_path_length(ec.kind == GlbEnvKind::kDrift ? path_length : 0.0);
      }
    } else if (algo == "glm_ucb" || algo == "glm_ucb_dm" || algo == "sw_glm_ucb" ||
               algo == "glm_ucb_filippi") {
      auto* g = c.mutable_glm_ucb();
      g->set_dimension(ec.d);
      g->set_link(plink);
      g->set_s(ec.S);
      g->set_lambda(lambda);
      g->set_delta(*delta);
      g->set_radius_multiplier(*radius);
      if (plink == bandit::v1::GAUSSIAN) g->set_dispersion(*disp);
      if (algo == "glm_ucb_dm") g->set_bonus(bandit::v1::GlmUcbConfig::DESIGN_MATRIX);
      if (algo == "sw_glm_ucb") g->set_window(*window);
      if (algo == "glm_ucb_filippi") {
        g->set_bonus(bandit::v1::GlmUcbConfig::FILIPPI);
        g->set_horizon(ec.T);
        if (has_reward_bound) g->set_reward_bound(*reward_bound);
      }
    } else if (algo == "gloc") {
      auto* g = c.mutable_gloc();
      g->set_dimension(ec.d);
      g->set_link(plink);
      g->set_s(ec.S);
      g->set_lambda(lambda);  // no separate theory lambda in the paper: lambda = d in both runs
      g->set_delta(*delta);
      g->set_radius_multiplier(*radius);
      if (plink == bandit::v1::GAUSSIAN) g->set_dispersion(*disp);
    } else if (algo == "ecolog") {
      auto* g = c.mutable_ecolog();
      g->set_dimension(ec.d);
      g->set_s(ec.S);
      g->set_lambda(lambda);
      g->set_delta(*delta);
      g->set_radius_multiplier(*radius);
    } else if (algo == "rs_glincb") {
      auto* g = sim.mutable_rs_glincb();
      g->set_dimension(ec.d);
      g->set_link(plink);
      g->set_s(ec.S);
      if (theory_lambda)
        g->set_theory_lambda(true);
      else
        g->set_lambda(lambda);
      g->set_delta(*delta);
      g->set_radius_multiplier(*radius);
      g->set_horizon(ec.T);
      if (has_reward_bound) g->set_reward_bound(*reward_bound);
    } else if (algo == "ofuglb") {
      auto* g = sim.mutable_ofuglb();
      g->set_dimension(ec.d);
      g->set_link(plink);
      g->set_s(ec.S);
      g->set_delta(*delta);
      g->set_radius_multiplier(*radius);
    } else if (algo == "ofulog_r") {
      auto* g = sim.mutable_ofulog_r();
      g->set_dimension(ec.d);
      g->set_s(ec.S);
      g->set_lambda(lambda);  // lambda_t = lambda log(1 + t)
      g->set_delta(*delta);
      g->set_radius_multiplier(*radius);
    } else if (algo == "restart_glb") {
      auto* g = c.mutable_restart_glb();
      g->set_dimension(ec.d);
      g->set_link(plink);
      g->set_s(ec.S);
      g->set_lambda(theory_lambda ? static_cast<double>(ec.d) : lambda);
      g->set_delta(*delta);
      g->set_radius_multiplier(*radius);
      if (plink == bandit::v1::GAUSSIAN) g->set_dispersion(*disp);
      g->set_horizon(ec.T);
      g->set_path_length(path_length);
    } else if (algo == "d_glucb" || algo == "sc_d_glucb" || algo == "bvd_glm_ucb" ||
               algo == "scb_weight_ucb" || algo == "scb_pw_weight_ucb") {
      bandit::v1::DiscountedGlmUcbConfig* g = algo == "d_glucb"       ? sim.mutable_d_glucb()
                                              : algo == "sc_d_glucb"  ? sim.mutable_sc_d_glucb()
                                              : algo == "bvd_glm_ucb" ? sim.mutable_bvd_glm_ucb()
                                              : algo == "scb_weight_ucb"
                                                  ? sim.mutable_scb_weight_ucb()
                                                  : sim.mutable_scb_pw_weight_ucb();
      g->set_dimension(ec.d);
      g->set_link(plink);
      g->set_s(ec.S);
      g->set_lambda(theory_lambda ? static_cast<double>(ec.d) : lambda);
      g->set_delta(*delta);
      g->set_radius_multiplier(*radius);
      if (plink == bandit::v1::GAUSSIAN) g->set_dispersion(*disp);
      g->set_projection_steps(static_cast<int>(*proj_steps));
      if (has_gamma) {
        g->set_gamma(*gamma);
      } else {
        g->set_horizon(ec.T);
        g->set_path_length(path_length);
        g->set_num_changes(std::max<int64_t>(changes, 1));
      }
    } else if (algo == "master_glm_ucb") {
      auto* g = sim.mutable_master_glm_ucb();
      g->set_dimension(ec.d);
      g->set_link(plink);
      g->set_s(ec.S);
      g->set_lambda(theory_lambda ? static_cast<double>(ec.d) : lambda);
      g->set_delta(*delta);
      g->set_radius_multiplier(*radius);
      if (plink == bandit::v1::GAUSSIAN) g->set_dispersion(*disp);
      g->set_horizon(ec.T);
      g->set_block_order(static_cast<int>(*master_order));
    } else if (algo == "linucb") {
      auto* g = c.mutable_linucb();
      g->set_dimension(ec.d);
      g->set_lambda(lambda);
      g->set_alpha(*lin_alpha);
    } else if (algo == "eps_greedy") {
      auto* g = c.mutable_glm_epsilon_greedy();
      g->set_dimension(ec.d);
      g->set_link(plink);
      g->set_s(ec.S);
      g->set_lambda(lambda);
      g->set_epsilon(*eps);
      if (plink == bandit::v1::GAUSSIAN) g->set_dispersion(*disp);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--algos: unknown algorithm '", algo,
          "', expected glb_omd|glb_omd_diag|domd_glb|glm_ucb|glm_ucb_dm|glm_ucb_filippi|sw_glm_ucb|"
          "linucb|linucb_diag|"
          "eps_greedy|gloc|ecolog|rs_glincb|ofuglb|ofulog_r|restart_glb|d_glucb|sc_d_glucb|"
          "bvd_glm_ucb|scb_weight_ucb|scb_pw_weight_ucb|master_glm_ucb"));
    }
    return sim;
  };

  nlohmann::json results = nlohmann::json::array();
  nlohmann::json algo_params = nlohmann::json::object();
  nlohmann::json region = nlohmann::json::object();
  using Clock = std::chrono::steady_clock;
  for (const auto& algo : algos) {
    auto config = make_config(algo);
    if (!config.ok()) return config.status();
    AlgoResult res;
    for (int64_t s = 0; s < *seeds; ++s) {
      const uint64_t seed = static_cast<uint64_t>(s) + 1;
      auto policy = CreateSimPolicy(*config, seed);
      if (!policy.ok())
        return absl::InvalidArgumentError(absl::StrCat(algo, ": ", policy.status().message()));
      if (s == 0) algo_params[algo] = (*policy)->Summary();
      GlbEnv env(ec, seed);
      std::vector<double> curve(ec.T);
      double cum = 0, secs = 0, secs_last = 0;
      const int64_t last_from = ec.T - std::max<int64_t>(1, ec.T / 10);
      for (int64_t t = 0; t < ec.T; ++t) {
        const auto& cands = env.NextRound();
        SelectContext ctx;
        ctx.candidates = cands;
        const auto t0 = Clock::now();
        auto dec = (*policy)->Select(ctx);
        if (!dec.ok())
          return absl::InternalError(absl::StrCat(algo, " Select: ", dec.status().message()));
        const auto t1 = Clock::now();
        Observation obs;
        obs.features = cands[dec->arm];
        obs.reward = env.Reward(dec->arm);
        const auto t2 = Clock::now();
        if (auto st = (*policy)->Update(obs); !st.ok())
          return absl::InternalError(absl::StrCat(algo, " Update: ", st.message()));
        const auto t3 = Clock::now();
        const double dt = std::chrono::duration<double>((t1 - t0) + (t3 - t2)).count();
        secs += dt;
        if (t >= last_from) secs_last += dt;
        cum += env.Regret(dec->arm);
        curve[t] = cum;
      }
      res.curves.push_back(std::move(curve));
      res.finals.push_back(cum);
      res.spr.push_back(secs / ec.T);
      res.spr_last.push_back(secs_last / (ec.T - last_from));
      res.bytes.push_back(static_cast<double>((*policy)->StateBytes()));
      if (s == 0 && *region_grid > 0 && ec.d == 2) {
        if (auto inside = RegionTest(**policy, ec.S)) {
          const int n = static_cast<int>(*region_grid);
          const double lo = -ec.S - 0.5, hi = ec.S + 0.5;
          std::vector<int> cells;
          cells.reserve(n * n);
          for (int i = 0; i < n; ++i)      // rows: theta_2
            for (int j = 0; j < n; ++j) {  // columns: theta_1
              Eigen::VectorXd th(2);
              th << lo + (hi - lo) * j / (n - 1), lo + (hi - lo) * i / (n - 1);
              cells.push_back(inside(th) ? 1 : 0);
            }
          const Eigen::VectorXd w = (*policy)->Weights();
          region[algo] = {
              {"grid", n},
              {"lo", lo},
              {"hi", hi},
              {"inside", cells},
              {"theta_star_inside", inside(env.theta())},
              {"center", std::vector<double>(w.data(), w.data() + w.size())},
              {"theta_star", std::vector<double>(env.theta().data(), env.theta().data() + 2)}};
        }
      }
    }
    auto [mean_curve, std_curve] = CurveMeanStd(res.curves);
    auto [rm, rs] = MeanStd(res.finals);
    auto [sm, ss] = MeanStd(res.spr);
    auto [lm, ls] = MeanStd(res.spr_last);
    auto [bm, bs] = MeanStd(res.bytes);
    results.push_back({{"algo", algo},
                       {"regret_mean", rm},
                       {"regret_std", rs},
                       {"regret_curve", Downsample(mean_curve)},
                       {"regret_curve_std", Downsample(std_curve)},
                       {"seconds_per_round", sm},
                       {"seconds_per_round_std", ss},
                       {"seconds_per_round_last10pct", lm},
                       {"state_bytes", bm}});
  }
  nlohmann::json params = {
      {"d", ec.d},
      {"arms", ec.arms},
      {"nnz", ec.nnz},
      {"S", ec.S},
      {"T", ec.T},
      {"seeds", *seeds},
      {"link", std::string(link.name())},
      {"lambda", theory_lambda ? nlohmann::json("theory") : nlohmann::json(lambda)},
      {"radius_multiplier", *radius},
      {"delta", *delta},
      {"path_length", path_length},
      {"num_changes", changes},
      {"window", *window},
      {"algo_summary_seed1", algo_params}};
  if (link.kind() == glb::LinkKind::kGaussian) params["dispersion"] = *disp;
  if (has_gamma) params["gamma"] = *gamma;
  nlohmann::json doc{{"env", std::string(env_name)}, {"params", params}, {"results", results}};
  if (!region.empty()) doc["confidence_regions"] = region;
  return doc;
}

}  // namespace bandit::sim
