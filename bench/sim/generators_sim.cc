// bandit-sim runner for the mixture-of-generators environment (Dibaei Nia & Farnia,
// Section 6 / Appendix E analogue on synthetic data, core/sim/generators_env.h):
//   bandit-sim --env=generators --objective=fd|vendi|rke|kd
//              --algos=mixture_greedy,mixture_ucb,one_arm_greedy,eps_greedy,oracle
//              --arms=4 --d=16 --T=3000 --seeds=10 --out=FILE.json
// Other flags: --M=10 (warm start per arm), --S=10 (EG steps per round), --eta=AUTO (EG step),
// --D=64 (random Fourier features of the policies; 0 = cosine kernel), --eval_D=128 (features of
// the evaluator), --bandwidth=s*sqrt(2d), --ref_n=1000 (reference samples given to KD policies),
// --pop_n=20000 (samples per arm for the population statistics / oracle), --points=100,
// --eps=0.1, --ucb_beta=2, --ucb_delta=DEFAULT, --env_seed=1, --mode_sd=0.5, --mode_radius=5.
// More algorithms: one_arm_oracle (the paper's Fig. 2 baseline: only the generator with the best
// population score alone), mixture_ucb:DELTA (Mixture-UCB with Delta_L = DELTA, for the Fig. 6
// sweep; several may be listed).
// --eval_kernel=gaussian|cosine: the evaluator's kernel (cosine = x/|x|, for Fig. 9's cosine run;
// use it with --D=0 so the policies use the cosine kernel too).
// --fidelity=1 scores every sample's fidelity (reported) without using it (w = 0);
// --fidelity_weight=w > 0 exercises the linear fidelity term (Section 5.3): every sample gets a
// Precision-type fidelity psi(x) in {0, 1} (Kynkaenniemi et al. 2019: 1 when x lies inside the
// k-NN ball, k = --fidelity_k (3), of at least one of --fidelity_ref (1000) reference samples),
// passed with the Update; policies minimize H = F + w sum a_i (1 - theta_i), the oracle is the
// population minimizer of H, and each result reports the mean fidelity of the collected samples.
// Scoring: one evaluator per run (its own features drawn from env_seed, the same for every
// algorithm and seed) keeps per-arm statistics of all samples an algorithm collected; the score of
// the collected samples is the objective at a_i = n_i / N, in natural units (FD and KD lower is
// better; Vendi and the RKE mode count higher is better). population_gap_curve = F(p_t) - F(a*)
// under the population statistics, p_t the algorithm's sampling distribution (loss units).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/sim/sim.h"
#include "core/mixture/fd_objective.h"
#include "core/mixture/features.h"
#include "core/mixture/kd_objective.h"
#include "core/mixture/oracle.h"
#include "core/mixture/rke_objective.h"
#include "core/mixture/stats.h"
#include "core/mixture/vendi_objective.h"
#include "core/registry.h"
#include "core/sim/generators_env.h"

namespace bandit::sim {

namespace {

using bandit::v1::MixtureConfig;
using mixture::FeatureMap;
using mixture::MixtureStats;
using mixture::Objective;

struct Evaluator {
  FeatureMap features;
  std::unique_ptr<Objective> objective;
};

absl::StatusOr<bandit::v1::MixtureObjective> ParseObjective(const std::string& s) {
  if (s == "fd") return bandit::v1::FD;
  if (s == "vendi") return bandit::v1::VENDI;
  if (s == "rke") return bandit::v1::RKE;
  if (s == "kd") return bandit::v1::KD;
  return absl::InvalidArgumentError(
      absl::StrCat("--objective=", s, " is unknown, expected fd|vendi|rke|kd"));
}

absl::StatusOr<MixtureConfig::Algorithm> ParseAlgo(const std::string& s) {
  if (s == "one_arm_oracle") return MixtureConfig::ONE_ARM_ORACLE;
  if (s.rfind("mixture_ucb:", 0) == 0) return MixtureConfig::MIXTURE_UCB;
  if (s == "mixture_greedy") return MixtureConfig::MIXTURE_GREEDY;
  if (s == "mixture_ucb") return MixtureConfig::MIXTURE_UCB;
  if (s == "one_arm_greedy") return MixtureConfig::ONE_ARM_GREEDY;
  if (s == "eps_greedy") return MixtureConfig::EPSILON_GREEDY;
  if (s == "eps_greedy_mixture") return MixtureConfig::EPSILON_GREEDY;
  if (s == "oracle") return MixtureConfig::MIXTURE_ORACLE;
  return absl::InvalidArgumentError(absl::StrCat(
      "--algos: unknown algorithm '", s,
      "', expected mixture_greedy|mixture_ucb|mixture_ucb:DELTA|one_arm_greedy|eps_greedy|"
      "eps_greedy_mixture|oracle|one_arm_oracle"));
}

// Precision-type fidelity (Kynkaenniemi et al. 2019, improved precision): psi(x) = 1 when x is
// within the k-th-nearest-neighbour radius of some reference sample.
class PrecisionFidelity {
 public:
  PrecisionFidelity(std::vector<Eigen::VectorXd> ref, int k)
      : ref_(std::move(ref)), r2_(ref_.size()) {
    for (size_t a = 0; a < ref_.size(); ++a) {
      std::vector<double> d2;
      for (size_t b = 0; b < ref_.size(); ++b)
        if (a != b) d2.push_back((ref_[a] - ref_[b]).squaredNorm());
      std::nth_element(d2.begin(), d2.begin() + (k - 1), d2.end());
      r2_[a] = d2[k - 1];
    }
  }
  double operator()(const Eigen::VectorXd& x) const {
    for (size_t a = 0; a < ref_.size(); ++a)
      if ((x - ref_[a]).squaredNorm() <= r2_[a]) return 1.0;
    return 0.0;
  }

 private:
  std::vector<Eigen::VectorXd> ref_;
  std::vector<double> r2_;
};

}  // namespace

absl::StatusOr<nlohmann::json> RunGenerators(absl::string_view env_name, const SimArgs& args) {
  auto objective_kind = ParseObjective(args.String("objective", "fd"));
  if (!objective_kind.ok()) return objective_kind.status();
  const bool fd = *objective_kind == bandit::v1::FD;
  auto arms = args.Int("arms", 4);
  auto d = args.Int("d", 16);
  auto T = args.Int("T", 3000);
  auto seeds = args.Int("seeds", 10);
  auto M = args.Int("M", 10);
  auto S = args.Int("S", 10);
  auto D = args.Int("D", 64);
  auto eval_D = args.Int("eval_D", 128);
  auto ref_n = args.Int("ref_n", 1000);
  auto pop_n = args.Int("pop_n", 20000);
  auto points = args.Int("points", 100);
  auto env_seed = args.Int("env_seed", 1);
  auto mode_sd = args.Double("mode_sd", 0.5);
  auto mode_radius = args.Double("mode_radius", 5.0);
  auto eps = args.Double("eps", 0.1);
  auto ucb_beta = args.Double("ucb_beta", 2.0);
  auto fidelity_weight = args.Double("fidelity_weight", 0.0);
  auto fidelity_k = args.Int("fidelity_k", 3);
  auto fidelity_ref = args.Int("fidelity_ref", 1000);
  const std::string eval_kernel = args.String("eval_kernel", "gaussian");
  if (eval_kernel != "gaussian" && eval_kernel != "cosine")
    return absl::InvalidArgumentError(
        absl::StrCat("--eval_kernel=", eval_kernel, " is unknown, expected gaussian or cosine"));
  for (const absl::Status& s :
       {fidelity_weight.status(), fidelity_k.status(), fidelity_ref.status()})
    if (!s.ok()) return s;
  if (*fidelity_weight < 0 || *fidelity_k < 1 || *fidelity_ref <= *fidelity_k)
    return absl::InvalidArgumentError(
        "expected --fidelity_weight >= 0, --fidelity_k >= 1, --fidelity_ref > --fidelity_k");
  auto fidelity_on = args.Int("fidelity", 0);
  if (!fidelity_on.ok()) return fidelity_on.status();
  const bool with_fidelity = *fidelity_weight > 0 || *fidelity_on != 0;
  for (const absl::Status& s :
       {arms.status(), d.status(), T.status(), seeds.status(), M.status(), S.status(), D.status(),
        eval_D.status(), ref_n.status(), pop_n.status(), points.status(), env_seed.status(),
        mode_sd.status(), mode_radius.status(), eps.status(), ucb_beta.status()})
    if (!s.ok()) return s;
  if (*arms < 1 || *d < 1 || *T < 1 || *seeds < 1 || *M < 1 || *S < 1 || *D < 0 || *eval_D < 1 ||
      *ref_n < 2 || *pop_n < 10 || *points < 1)
    return absl::InvalidArgumentError(
        "expected --arms, --d, --T, --seeds, --M, --S, --eval_D >= 1, --D >= 0, --ref_n >= 2, "
        "--pop_n >= 10, --points >= 1");
  auto bandwidth = args.Double("bandwidth", *mode_sd * std::sqrt(2.0 * static_cast<double>(*d)));
  if (!bandwidth.ok()) return bandwidth.status();
  const bool has_eta = args.Has("eta");
  auto eta = args.Double("eta", 0.0);
  const bool has_delta = args.Has("ucb_delta");
  auto ucb_delta = args.Double("ucb_delta", 0.0);
  if (!eta.ok()) return eta.status();
  if (!ucb_delta.ok()) return ucb_delta.status();
  const std::vector<std::string> algos =
      args.List("algos", "mixture_greedy,mixture_ucb,one_arm_greedy,eps_greedy,oracle");

  GeneratorsEnvConfig ec;
  ec.arms = static_cast<int>(*arms);
  ec.d = static_cast<int>(*d);
  ec.mode_sd = *mode_sd;
  ec.mode_radius = *mode_radius;
  ec.env_seed = static_cast<uint64_t>(*env_seed);
  auto env = GeneratorsEnv::Make(ec);
  if (!env.ok()) return env.status();
  const int m = env->arms();

  // Evaluator: features, objective and population statistics (fixed for the whole run).
  Rng eval_rng(static_cast<uint64_t>(*env_seed) * 7919 + 17);
  Evaluator ev;
  if (fd) {
    ev.features = FeatureMap::Identity(ec.d);
    ev.objective =
        std::make_unique<mixture::FdObjective>(env->ReferenceMean(), env->ReferenceCovariance());
  } else {
    if (eval_kernel == "cosine") {
      ev.features = FeatureMap::Cosine(ec.d);
    } else {
      auto f = FeatureMap::RandomFourier(ec.d, *eval_D, *bandwidth, eval_rng);
      if (!f.ok()) return f.status();
      ev.features = *std::move(f);
    }
    if (*objective_kind == bandit::v1::KD) {
      Eigen::VectorXd mu = Eigen::VectorXd::Zero(ev.features.dim()), phi;
      for (int64_t r = 0; r < *pop_n; ++r) {
        ev.features.Map(env->SampleReference(eval_rng), &phi);
        mu += phi;
      }
      ev.objective = std::make_unique<mixture::KdObjective>(mu / static_cast<double>(*pop_n));
    } else if (*objective_kind == bandit::v1::VENDI) {
      ev.objective = std::make_unique<mixture::VendiObjective>();
    } else {
      ev.objective = std::make_unique<mixture::RkeObjective>();
    }
  }
  // Fidelity scorer (Section 5.3 experiment): its own reference samples.
  std::optional<PrecisionFidelity> fidelity;
  if (with_fidelity) {
    Rng fid_rng(static_cast<uint64_t>(*env_seed) * 15485863 + 5);
    std::vector<Eigen::VectorXd> ref;
    for (int64_t r = 0; r < *fidelity_ref; ++r) ref.push_back(env->SampleReference(fid_rng));
    fidelity.emplace(std::move(ref), static_cast<int>(*fidelity_k));
  }
  MixtureStats pop(m, ev.features.dim(), ev.objective->NeedsSecondMoment());
  Eigen::VectorXd theta = Eigen::VectorXd::Zero(m);  // population mean fidelity per arm
  {
    Eigen::VectorXd phi;
    const int64_t fid_n = std::min<int64_t>(*pop_n, 4000);  // psi costs O(fidelity_ref d)
    for (int i = 0; i < m; ++i)
      for (int64_t r = 0; r < *pop_n; ++r) {
        const Eigen::VectorXd x = env->Sample(i, eval_rng);
        ev.features.Map(x, &phi);
        pop.Add(i, phi, std::nullopt);
        if (fidelity && r < fid_n) theta[i] += (*fidelity)(x) / static_cast<double>(fid_n);
      }
  }
  // H = F + w sum a_i (1 - theta_i) (the policies' plug-in form, mixture_policy.h).
  const Eigen::VectorXd fid_linear =
      with_fidelity ? Eigen::VectorXd(*fidelity_weight * (1.0 - theta.array()).matrix())
                    : Eigen::VectorXd();
  const mixture::OracleSolution oracle =
      mixture::OracleWeights(*ev.objective, pop, fid_linear, 5000);
  const std::unique_ptr<mixture::BoundLoss> base_pop_loss = ev.objective->Bind(pop);
  std::unique_ptr<mixture::BoundLoss> pop_loss = ev.objective->Bind(pop);
  if (with_fidelity)
    pop_loss = std::make_unique<mixture::LinearPlus>(std::move(pop_loss), fid_linear);
  nlohmann::json arm_scores = nlohmann::json::array();
  int best_arm = 0;
  double best_arm_loss = 0;
  for (int i = 0; i < m; ++i) {
    // Best single arm by the loss the algorithms minimize (H = F + fidelity term when w > 0).
    const double l = pop_loss->Value(Eigen::VectorXd::Unit(m, i));
    arm_scores.push_back(ev.objective->Score(base_pop_loss->Value(Eigen::VectorXd::Unit(m, i))));
    if (i == 0 || l < best_arm_loss) best_arm = i, best_arm_loss = l;
  }

  // Reference samples for KD policies (drawn once; the same for every algorithm and seed).
  std::vector<double> ref_samples;
  if (*objective_kind == bandit::v1::KD) {
    Rng ref_rng(static_cast<uint64_t>(*env_seed) * 104729 + 3);
    for (int64_t r = 0; r < *ref_n; ++r) {
      const Eigen::VectorXd y = env->SampleReference(ref_rng);
      ref_samples.insert(ref_samples.end(), y.data(), y.data() + y.size());
    }
  }
  const Eigen::VectorXd ref_mean = env->ReferenceMean();
  const Eigen::MatrixXd ref_cov = env->ReferenceCovariance();

  // Checkpoints: the rounds Downsample() reports.
  std::vector<double> idx(*T);
  for (int64_t t = 0; t < *T; ++t) idx[t] = static_cast<double>(t);
  const std::vector<double> checkpoints =
      Downsample(idx, static_cast<int>(std::min<int64_t>(*points, *T)));
  std::vector<char> is_checkpoint(*T, 0);
  for (double c : checkpoints) is_checkpoint[static_cast<int64_t>(c)] = 1;

  nlohmann::json results = nlohmann::json::array();
  using Clock = std::chrono::steady_clock;
  for (const auto& algo_name : algos) {
    auto algo = ParseAlgo(algo_name);
    if (!algo.ok()) return algo.status();
    std::vector<std::vector<double>> score_curves, gap_curves;
    std::vector<double> finals, spr, fid_means;
    Eigen::VectorXd mean_alpha = Eigen::VectorXd::Zero(m);
    for (int64_t seed = 1; seed <= *seeds; ++seed) {
      bandit::v1::PolicyConfig pc;
      pc.set_num_arms(m);
      auto* mc = pc.mutable_mixture();
      mc->set_algorithm(*algo);
      mc->set_objective(*objective_kind);
      mc->set_dimension(ec.d);
      mc->set_warm_start(static_cast<int>(*M));
      mc->set_eg_steps(static_cast<int>(*S));
      if (has_eta) mc->set_eg_step_size(*eta);
      if (!fd) {
        mc->set_random_features(static_cast<int>(*D));
        mc->set_bandwidth(*bandwidth);
      }
      if (fd) {
        for (int j = 0; j < ec.d; ++j) mc->add_reference_mean(ref_mean[j]);
        for (int r = 0; r < ec.d; ++r)
          for (int c = 0; c < ec.d; ++c) mc->add_reference_covariance(ref_cov(r, c));
      }
      if (!ref_samples.empty())
        *mc->mutable_reference_samples() = {ref_samples.begin(), ref_samples.end()};
      if (*algo == MixtureConfig::EPSILON_GREEDY) {
        mc->set_epsilon(*eps);
        mc->set_epsilon_over_mixture(algo_name == "eps_greedy_mixture");
      }
      if (*algo == MixtureConfig::MIXTURE_UCB) {
        mc->set_ucb_beta(*ucb_beta);
        if (has_delta) mc->set_ucb_delta(*ucb_delta);
        if (algo_name.rfind("mixture_ucb:", 0) == 0) {
          double delta;
          if (!absl::SimpleAtod(algo_name.substr(12), &delta) || !(delta >= 0))
            return absl::InvalidArgumentError(absl::StrCat(
                "--algos entry '", algo_name, "': expected mixture_ucb:DELTA with DELTA >= 0"));
          mc->set_ucb_delta(delta);
        }
      }
      if (*algo == MixtureConfig::MIXTURE_ORACLE)
        for (int i = 0; i < m; ++i) mc->add_oracle_weights(oracle.alpha[i]);
      if (*algo == MixtureConfig::ONE_ARM_ORACLE) mc->set_oracle_arm(absl::StrCat(best_arm));
      if (*fidelity_weight > 0) mc->set_fidelity_weight(*fidelity_weight);
      auto policy = CreatePolicy(pc, static_cast<uint64_t>(seed));
      if (!policy.ok())
        return absl::InvalidArgumentError(absl::StrCat(algo_name, ": ", policy.status().message()));
      Rng env_rng(static_cast<uint64_t>(seed) * 2654435761ULL + 11);
      MixtureStats collected(m, ev.features.dim(), ev.objective->NeedsSecondMoment());
      std::vector<double> curve, gaps;
      double fid_sum = 0;
      double seconds = 0;
      Eigen::VectorXd phi;
      for (int64_t t = 0; t < *T; ++t) {
        const auto start = Clock::now();
        auto dec = (*policy)->Select({});
        if (!dec.ok()) return dec.status();
        const Eigen::VectorXd x = env->Sample(dec->arm, env_rng);
        Observation obs;
        obs.arm = dec->arm;
        obs.arm_id = dec->arm_id;
        obs.sample = GeneratedSample{x, std::nullopt};
        if (fidelity) {
          obs.sample->fidelity = (*fidelity)(x);
          fid_sum += *obs.sample->fidelity;
        }
        if (auto s = (*policy)->Update(obs); !s.ok()) return s;
        seconds += std::chrono::duration<double>(Clock::now() - start).count();
        ev.features.Map(x, &phi);
        collected.Add(dec->arm, phi, std::nullopt);
        if (is_checkpoint[t]) {
          const Eigen::VectorXd emp = collected.counts() / collected.total();
          curve.push_back(ev.objective->Score(ev.objective->Bind(collected)->Value(emp)));
          const bool warm = !dec->diagnostics.empty() && dec->diagnostics[0].first == "warm_start";
          const Eigen::VectorXd p =
              warm ? Eigen::VectorXd::Unit(m, dec->arm) : (*policy)->Weights();
          gaps.push_back(pop_loss->Value(p) - oracle.loss);
        }
      }
      mean_alpha += (*policy)->Weights() / static_cast<double>(*seeds);
      finals.push_back(curve.back());
      fid_means.push_back(fid_sum / static_cast<double>(*T));
      score_curves.push_back(curve);
      gap_curves.push_back(gaps);
      spr.push_back(seconds / static_cast<double>(*T));
    }
    auto [sc_mean, sc_std] = CurveMeanStd(score_curves);
    auto [gap_mean, gap_std] = CurveMeanStd(gap_curves);
    auto [fin_mean, fin_std] = MeanStd(finals);
    auto [spr_mean, spr_std] = MeanStd(spr);
    nlohmann::json r;
    r["algo"] = algo_name;
    r["score_curve"] = sc_mean;
    r["score_curve_std"] = sc_std;
    r["final_score"] = fin_mean;
    r["final_score_std"] = fin_std;
    r["population_gap_curve"] = gap_mean;
    r["population_gap_curve_std"] = gap_std;
    r["final_alpha_mean"] = std::vector<double>(mean_alpha.data(), mean_alpha.data() + m);
    r["seconds_per_round"] = spr_mean;
    r["seconds_per_round_std"] = spr_std;
    if (with_fidelity) r["collected_fidelity"] = MeanStd(fid_means).first;
    results.push_back(r);
  }

  nlohmann::json params;
  params["objective"] = args.String("objective", "fd");
  params["arms"] = m;
  params["d"] = ec.d;
  params["T"] = *T;
  params["seeds"] = *seeds;
  params["M"] = *M;
  params["S"] = *S;
  params["eta"] = has_eta ? nlohmann::json(*eta) : nlohmann::json("objective default");
  if (!fd) {
    params["D"] = *D;
    params["eval_D"] = *eval_D;
    params["bandwidth"] = *bandwidth;
  }
  params["mode_sd"] = ec.mode_sd;
  params["mode_radius"] = ec.mode_radius;
  params["pop_n"] = *pop_n;
  if (*objective_kind == bandit::v1::KD) params["ref_n"] = *ref_n;
  params["env_seed"] = *env_seed;
  params["eval_kernel"] = eval_kernel;
  if (with_fidelity) {
    params["fidelity_weight"] = *fidelity_weight;
    params["fidelity_k"] = *fidelity_k;
    params["fidelity_ref"] = *fidelity_ref;
  }
  params["higher_is_better"] = ev.objective->HigherIsBetter();
  nlohmann::json doc;
  doc["env"] = std::string(env_name);
  doc["params"] = params;
  doc["curve_rounds"] = checkpoints;
  doc["population"] = {
      {"oracle_alpha", std::vector<double>(oracle.alpha.data(), oracle.alpha.data() + m)},
      {"oracle_score", oracle.score},
      {"arm_scores", arm_scores},
      {"best_arm", best_arm},
      {"best_arm_score", arm_scores[best_arm]},
  };
  if (with_fidelity) {
    doc["population"]["arm_fidelity"] = std::vector<double>(theta.data(), theta.data() + m);
    doc["population"]["oracle_loss_with_fidelity"] = oracle.loss;
  }
  doc["results"] = results;
  return doc;
}

}  // namespace bandit::sim
