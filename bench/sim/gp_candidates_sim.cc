// bandit-sim --env=gp_candidates: BKB against exact GP-UCB on fresh candidates every round
// (core/sim/rkhs_candidates_env.h): f a fixed function of the Gaussian kernel's RKHS, n points
// uniform in [0,1]^d drawn anew every round, pseudo-regret against the round's best candidate.
//
//   bandit-sim --env=gp_candidates --algos=bkb,gp_ucb --d=3 --T=5000 --seeds=5 --out=FILE.json
//
// Flags (defaults): --candidates=50 --centers=20 (J, centers of f) --bandwidth=0.5 (env and
// policy kernel) --noise=0.1 (env and xi) --f_bound=1 (||f||_H and F) --lambda (default xi^2)
// --q_bar=5 --epsilon=0.5 --delta=0.1 --radius_multiplier=0.1 (both policies: the same beta
// rule) --lazy_every=50 (algo bkb_lazy = BKB with resample_every = lazy_every) --first_seed=0
// (seed indices first_seed .. first_seed + seeds - 1, so seeds can run as separate processes)
// --deff=true (BKB only: an exact GP posterior is fed the same pulls, untimed, for
// d_eff = sum_s sigma_t^2(x_s) of eq. 5 at the checkpoints; GP-UCB reports its own).
// Output per algo: per-seed curves at 100 checkpoints (cumulative pseudo-regret, mean thread-CPU
// seconds of Select + Update per round in each window, dictionary size, d_eff, distinct points,
// BKB's embedding rebuilds so far; with --deff also the CPU seconds of one exact GP-UCB round,
// Select + Update, on BKB's pulls at each checkpoint) and the mean/std of the final regret.
#include <time.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "bench/sim/sim.h"
#include "core/kernel/candidate_bkb.h"
#include "core/kernel/candidate_gp_ucb.h"
#include "core/registry.h"
#include "core/sim/rkhs_candidates_env.h"

namespace bandit::sim {

namespace {

// CPU seconds of the calling thread: the machine is shared, so wall-clock per round mostly
// measures the other processes; the policies are single-threaded.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Params {
  int d, T, seeds, first_seed, candidates, centers, lazy_every;
  double bandwidth, noise, f_bound, q_bar, epsilon, delta, mult;
  std::optional<double> lambda;
  bool deff;
};

bandit::v1::PolicyConfig BkbConfig(const Params& p, int resample_every) {
  bandit::v1::PolicyConfig c;
  auto* b = c.mutable_bkb();
  b->mutable_kernel()->set_kind(bandit::v1::KernelSpec::GAUSSIAN);
  b->mutable_kernel()->set_bandwidth(p.bandwidth);
  if (p.lambda) b->set_lambda(*p.lambda);
  b->set_noise(p.noise);
  b->set_delta(p.delta);
  b->set_f_bound(p.f_bound);
  b->set_epsilon(p.epsilon);
  b->set_radius_multiplier(p.mult);
  b->set_q_bar(p.q_bar);
  b->set_dimension(p.d);
  b->set_resample_every(resample_every);
  b->set_max_points(std::max<int64_t>(p.T, 1));
  return c;
}

bandit::v1::PolicyConfig GpConfig(const Params& p) {
  bandit::v1::PolicyConfig c;
  auto* g = c.mutable_gp_ucb();
  g->mutable_kernel()->set_kind(bandit::v1::KernelSpec::GAUSSIAN);
  g->mutable_kernel()->set_bandwidth(p.bandwidth);
  if (p.lambda) g->set_lambda(*p.lambda);
  g->set_noise(p.noise);
  g->set_delta(p.delta);
  g->set_f_bound(p.f_bound);
  g->set_radius_multiplier(p.mult);
  g->set_dimension(p.d);
  g->set_max_pulls(std::max<int64_t>(p.T, 1));
  return c;
}

absl::StatusOr<nlohmann::json> RunOne(const std::string& algo, const Params& p, int s) {
  const Kernel kernel = Kernel::Gaussian(p.bandwidth);
  auto env = RkhsCandidatesEnv::Make(p.d, p.centers, kernel, p.f_bound, p.noise, 1000 + s);
  if (!env.ok()) return env.status();
  bandit::v1::PolicyConfig config;
  if (algo == "bkb")
    config = BkbConfig(p, 1);
  else if (algo == "bkb_lazy")
    config = BkbConfig(p, p.lazy_every);
  else if (algo == "gp_ucb")
    config = GpConfig(p);
  else
    return absl::InvalidArgumentError(
        absl::StrCat("--algos: unknown '", algo, "', expected bkb, bkb_lazy or gp_ucb"));
  auto policy = CreatePolicy(config, 7 + s);
  if (!policy.ok()) return policy.status();
  auto* kp = dynamic_cast<CandidateKernelUcb*>(policy->get());
  auto* bkb = dynamic_cast<CandidateBkb*>(policy->get());
  // Exact posterior over the same pulls, for d_eff (not timed).
  std::unique_ptr<Policy> shadow;
  if (bkb && p.deff) {
    auto sh = CreatePolicy(GpConfig(p), 0);
    if (!sh.ok()) return sh.status();
    shadow = *std::move(sh);
  }
  Rng cand_rng(3000 + s), noise_rng(5000 + s);
  std::vector<Vector> cands;
  const int npts = 100;
  std::vector<double> regret, secs, dict, deff, points, sel_secs, rebuilds, shadow_secs;
  double cum = 0, window = 0, window_select = 0;
  for (int t = 0; t < p.T; ++t) {
    const double best = env->Draw(p.candidates, cand_rng, &cands);
    SelectContext ctx;
    ctx.candidates = cands;
    const double t0 = ThreadCpuSeconds();
    auto dec = (*policy)->Select(ctx);
    if (!dec.ok()) return dec.status();
    const double t1 = ThreadCpuSeconds();
    Observation obs;
    obs.features = cands[dec->arm];
    obs.reward = env->Reward(obs.features, noise_rng);
    if (auto st = (*policy)->Update(obs); !st.ok()) return st;
    const double t2 = ThreadCpuSeconds();
    window += t2 - t0;
    window_select += t1 - t0;
    cum += best - env->f(obs.features);
    const int k = static_cast<int>(regret.size());
    const bool checkpoint =
        t + 1 == static_cast<int>(std::lround(static_cast<double>(k + 1) * p.T / npts));
    if (shadow) {
      // At checkpoints the exact posterior also runs a timed GP-UCB round (Select over the same
      // candidates + Update) on BKB's pulls: exact GP-UCB's cost at the same t, same run.
      const double s0 = ThreadCpuSeconds();
      if (checkpoint) {
        auto sd = shadow->Select(ctx);
        if (!sd.ok()) return sd.status();
      }
      if (auto st = shadow->Update(obs); !st.ok()) return st;
      if (checkpoint) shadow_secs.push_back(ThreadCpuSeconds() - s0);
    }
    if (checkpoint) {
      const int a = k == 0 ? 0 : static_cast<int>(std::lround(static_cast<double>(k) * p.T / npts));
      regret.push_back(cum);
      secs.push_back(window / (t + 1 - a));
      sel_secs.push_back(window_select / (t + 1 - a));
      window = window_select = 0;
      if (bkb) {
        dict.push_back(bkb->dictionary_size());
        rebuilds.push_back(static_cast<double>(bkb->rebuilds()));
        points.push_back(bkb->points());
        if (shadow)
          deff.push_back(dynamic_cast<CandidateKernelUcb*>(shadow.get())->SumPulledVariance());
      } else {
        deff.push_back(kp->SumPulledVariance());
      }
    }
  }
  nlohmann::json r = {{"seed", s},
                      {"final_regret", cum},
                      {"regret_curve", regret},
                      {"seconds_per_round_curve", secs},
                      {"select_seconds_curve", sel_secs},
                      {"state_bytes", (*policy)->StateBytes()}};
  if (!deff.empty()) r["deff_curve"] = deff;
  if (bkb) {
    r["dict_size_curve"] = dict;
    r["points_curve"] = points;
    r["rebuilds_curve"] = rebuilds;
    if (!shadow_secs.empty()) r["exact_gp_round_seconds_curve"] = shadow_secs;
  }
  return r;
}

absl::StatusOr<nlohmann::json> Run(absl::string_view env_name, const SimArgs& args) {
  Params p;
  auto d = args.Int("d", 3);
  auto T = args.Int("T", 5000);
  auto seeds = args.Int("seeds", 5);
  auto first = args.Int("first_seed", 0);
  auto cands = args.Int("candidates", 50);
  auto centers = args.Int("centers", 20);
  auto lazy = args.Int("lazy_every", 50);
  auto bw = args.Double("bandwidth", 0.5);
  auto noise = args.Double("noise", 0.1);
  auto fb = args.Double("f_bound", 1.0);
  auto q = args.Double("q_bar", 5.0);
  auto eps = args.Double("epsilon", 0.5);
  auto delta = args.Double("delta", 0.1);
  auto mult = args.Double("radius_multiplier", 0.1);
  for (const absl::Status& s :
       {d.status(), T.status(), seeds.status(), first.status(), cands.status(), centers.status(),
        lazy.status(), bw.status(), noise.status(), fb.status(), q.status(), eps.status(),
        delta.status(), mult.status()})
    if (!s.ok()) return s;
  p.d = static_cast<int>(*d);
  p.T = static_cast<int>(*T);
  p.seeds = static_cast<int>(*seeds);
  p.first_seed = static_cast<int>(*first);
  p.candidates = static_cast<int>(*cands);
  p.centers = static_cast<int>(*centers);
  p.lazy_every = static_cast<int>(*lazy);
  p.bandwidth = *bw;
  p.noise = *noise;
  p.f_bound = *fb;
  p.q_bar = *q;
  p.epsilon = *eps;
  p.delta = *delta;
  p.mult = *mult;
  if (args.Has("lambda")) {
    auto l = args.Double("lambda", 0);
    if (!l.ok()) return l.status();
    p.lambda = *l;
  }
  p.deff = args.String("deff", "true") == "true";
  if (p.T < 100 || p.seeds < 1 || p.candidates < 1 || p.first_seed < 0)
    return absl::InvalidArgumentError(
        "--T must be >= 100, --seeds >= 1, --candidates >= 1, --first_seed >= 0");
  const std::vector<std::string> algos = args.List("algos", "bkb,gp_ucb");

  nlohmann::json doc;
  doc["env"] = std::string(env_name);
  doc["params"] = {{"d", p.d},
                   {"T", p.T},
                   {"seeds", p.seeds},
                   {"first_seed", p.first_seed},
                   {"candidates", p.candidates},
                   {"centers", p.centers},
                   {"bandwidth", p.bandwidth},
                   {"noise", p.noise},
                   {"f_bound", p.f_bound},
                   {"q_bar", p.q_bar},
                   {"epsilon", p.epsilon},
                   {"delta", p.delta},
                   {"radius_multiplier", p.mult},
                   {"lazy_every", p.lazy_every},
                   {"lambda", p.lambda ? *p.lambda : p.noise * p.noise}};
  doc["results"] = nlohmann::json::array();
  for (const std::string& algo : algos) {
    nlohmann::json runs = nlohmann::json::array();
    std::vector<double> finals;
    for (int s = p.first_seed; s < p.first_seed + p.seeds; ++s) {
      auto r = RunOne(algo, p, s);
      if (!r.ok()) return r.status();
      finals.push_back((*r)["final_regret"].get<double>());
      runs.push_back(*std::move(r));
    }
    auto [rm, rs] = MeanStd(finals);
    doc["results"].push_back(
        {{"algo", algo}, {"regret_mean", rm}, {"regret_std", rs}, {"runs", runs}});
  }
  return doc;
}

}  // namespace

// Registered in bench/sim/registry.cc.
absl::StatusOr<nlohmann::json> RunGpCandidates(absl::string_view env, const SimArgs& args) {
  return Run(env, args);
}

}  // namespace bandit::sim
