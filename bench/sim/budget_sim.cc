// env "stream_budget": online kernel selection WITH a time constraint (Li & Liao 2022,
// Section 6.2, Tables 5-10): the random-feature bandit methods against the full-information
// baselines Raker (Shen et al. 2019) and LKMBooks (Li & Liao 2022, MLJ), under the paper's
// equal-time protocol.
//   bandit-sim --env=stream_budget --data=FILE.csv --loss=logistic|square|absolute
//     --algos=rf_oks,lkmbooks,raker,rf_ioks,rf_oks_pp --baseline=rf_oks_pp --D=400
//     [--equal_time=1] [--sizes=raker:70,lkmbooks:250] [--lambda_scales=1,5,10,25]
//     [--rf_map=cos_phase|cos_sin] [--permutations=10] [--rows=0] [--calib_iters=4]
//     [--sigmas=0.25,0.5,1,2,4,8] [--u=15|1] [--eta_constant=8] [--seed=1] --out=FILE.json
// Protocol (Section 6.2): the baseline runs with D random features per kernel; its average
// per-round time t_p is measured; every other method's size (D for rf_*, D frequencies for Raker,
// budget B for LKMBooks) is tuned so that its per-round time matches t_p. Here the tuning is
// automatic: full single-permutation runs, a proportional first guess, then secant steps on the
// measured time (rounded to multiples of 10, as the paper's sizes are), keeping the size whose
// time is closest to t_p. A size given in --sizes is used as is. Times are CPU time of this
// thread (CLOCK_THREAD_CPUTIME_ID) per round (predict + update), so other processes on a loaded
// machine do not inflate them; they are reported for every row next to t_p.
// rf_oks and raker get one row per --lambda_scales entry (OKS: Remark 1's lambda times s; Raker:
// eta = s / sqrt(T), the paper's grid {1, 5, 10, 25} / sqrt(T)).
#include <time.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/sim/sim.h"
#include "bench/sim/stream_data.h"
#include "core/oks/lkmbooks.h"
#include "core/oks/loss.h"
#include "core/oks/oks_policy.h"
#include "core/oks/raker.h"
#include "core/rng.h"

namespace bandit::sim {
namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

enum class Method { kRfOks, kRfOksPP, kRfIoks, kRaker, kLkmBooks };

absl::StatusOr<Method> ParseMethod(const std::string& s) {
  if (s == "rf_oks") return Method::kRfOks;
  if (s == "rf_oks_pp") return Method::kRfOksPP;
  if (s == "rf_ioks") return Method::kRfIoks;
  if (s == "raker") return Method::kRaker;
  if (s == "lkmbooks") return Method::kLkmBooks;
  return absl::InvalidArgumentError(
      absl::StrCat("--algos / --baseline entry '", s,
                   "' is unknown, expected rf_oks, rf_oks_pp, rf_ioks, raker or lkmbooks"));
}

struct Setup {
  const Dataset* data;
  bandit::v1::OksLoss loss;
  oks::LossKind loss_kind;
  bool classification;
  std::vector<double> sigmas;
  double u, eta_constant;
  bandit::v1::OksConfig::RandomFeatureMap rf_map;
  int64_t T;
  uint64_t seed;
  const std::vector<std::vector<int64_t>>* orders;
};

struct RunResult {
  double score = 0;  // AMR or AL
  double cpu_per_round = 0;
  std::vector<double> curve;
  Eigen::VectorXd weights;  // p_T (bandit) or the kernel weights (Raker, LKMBooks)
};

// One pass over permutation `r` with method `m` at size `size` and scale `scale`.
absl::StatusOr<RunResult> RunOnce(const Setup& s, Method m, int64_t size, double scale, int64_t r) {
  const Dataset& data = *s.data;
  std::vector<oks::KernelSpec> kernels;
  for (double sg : s.sigmas) kernels.push_back({ShiftInvariantKernel::kGaussian, sg});
  const uint64_t run_seed = s.seed * 1000003 + static_cast<uint64_t>(r);
  std::unique_ptr<oks::OnlineKernelSelection> policy;
  std::unique_ptr<oks::Raker> raker;
  std::unique_ptr<oks::LkmBooks> lkm;
  if (m == Method::kRaker) {
    Rng rng(run_seed);
    auto rk = oks::Raker::Create(kernels, data.dim, static_cast<int>(size), s.loss_kind,
                                 scale / std::sqrt(static_cast<double>(s.T)), rng);
    if (!rk.ok()) return rk.status();
    raker = std::make_unique<oks::Raker>(*std::move(rk));
  } else if (m == Method::kLkmBooks) {
    oks::LkmBooksParams lp;
    lp.budget = size;
    lp.horizon = s.T;
    lp.classification = s.classification;
    auto lb = oks::LkmBooks::Create(kernels, data.dim, s.loss_kind, lp, run_seed);
    if (!lb.ok()) return lb.status();
    lkm = std::make_unique<oks::LkmBooks>(*std::move(lb));
  } else {
    bandit::v1::OksConfig c;
    c.set_variant(m == Method::kRfOks     ? bandit::v1::OksConfig::OKS
                  : m == Method::kRfOksPP ? bandit::v1::OksConfig::OKS_PP
                                          : bandit::v1::OksConfig::IOKS);
    c.set_dimension(data.dim);
    c.set_loss(s.loss);
    c.set_task(s.classification ? bandit::v1::OKS_CLASSIFICATION : bandit::v1::OKS_REGRESSION);
    for (double sg : s.sigmas) {
      auto* k = c.add_kernels();
      k->set_kind(bandit::v1::OksKernel::GAUSSIAN);
      k->set_bandwidth(sg);
    }
    c.set_u(s.u);
    c.set_horizon(std::max<int64_t>(s.T, 2));
    c.set_random_features(static_cast<int>(size));
    c.set_random_feature_map(s.rf_map);
    c.set_lambda_scale(scale);
    c.set_eta_constant(s.eta_constant);
    auto p = oks::OnlineKernelSelection::Create(c, run_seed, /*allow_unbounded=*/false);
    if (!p.ok()) return p.status();
    policy = *std::move(p);
  }
  RunResult out;
  out.curve.reserve(s.T);
  double total = 0;
  const double start = ThreadCpuSeconds();
  for (int64_t t = 0; t < s.T; ++t) {
    const int64_t row = (*s.orders)[r][t];
    const Eigen::VectorXd& x = data.x[row];
    const double y = data.y[row];
    double f;
    if (raker) {
      f = raker->PredictAndUpdate(x, y);
    } else if (lkm) {
      f = lkm->PredictAndUpdate(x, y);
    } else {
      SelectContext ctx;
      ctx.point = &x;
      auto d = policy->Select(ctx);
      if (!d.ok()) return d.status();
      f = *d->prediction();
      Observation o;
      o.features = x;
      o.memo = d->memo;
      o.reward = y;
      if (auto st = policy->Update(o); !st.ok()) return st;
    }
    total +=
        s.classification ? ((f < 0 ? -1.0 : 1.0) != y ? 1.0 : 0.0) : oks::Loss(s.loss_kind, f, y);
    out.curve.push_back(total / static_cast<double>(t + 1));
  }
  out.cpu_per_round = (ThreadCpuSeconds() - start) / static_cast<double>(s.T);
  out.score = total / static_cast<double>(s.T);
  out.weights = raker ? raker->KernelWeights() : lkm ? lkm->p() : policy->Probabilities();
  return out;
}

int64_t RoundTo10(double v) {
  return std::max<int64_t>(10, static_cast<int64_t>(std::llround(v / 10.0)) * 10);
}

}  // namespace

absl::StatusOr<nlohmann::json> RunStreamBudget(absl::string_view env, const SimArgs& args) {
  const std::string path = args.String("data", "");
  if (path.empty())
    return absl::InvalidArgumentError("--data=FILE.csv is required for --env=stream_budget");
  auto loss = ParseLoss(args.String("loss", "logistic"));
  if (!loss.ok()) return loss.status();
  const oks::LossKind loss_kind = oks::FromProto(*loss);
  const bool classification = oks::Info(loss_kind).margin;
  auto perms = args.Int("permutations", 10);
  auto rows = args.Int("rows", 0);
  auto D = args.Int("D", 400);
  auto seed = args.Int("seed", 1);
  auto equal_time = args.Int("equal_time", 1);
  auto calib_iters = args.Int("calib_iters", 4);
  auto u = args.Double("u", classification ? 15.0 : 1.0);
  auto eta_constant = args.Double("eta_constant", 8.0);
  for (const absl::Status& st :
       {perms.status(), rows.status(), D.status(), seed.status(), equal_time.status(),
        calib_iters.status(), u.status(), eta_constant.status()})
    if (!st.ok()) return st;
  if (*perms < 1 || *D < 1 || *rows < 0 || *calib_iters < 1)
    return absl::InvalidArgumentError(
        "--permutations, --D, --calib_iters must be >= 1, --rows >= 0");
  const std::string map_name = args.String("rf_map", "cos_phase");
  bandit::v1::OksConfig::RandomFeatureMap rf_map;
  if (map_name == "cos_phase")
    rf_map = bandit::v1::OksConfig::COSINE_PHASE;
  else if (map_name == "cos_sin")
    rf_map = bandit::v1::OksConfig::COS_SIN_PAIRS;
  else
    return absl::InvalidArgumentError(
        absl::StrCat("--rf_map=", map_name, " is unknown, expected cos_phase or cos_sin"));
  std::vector<double> sigmas, scales;
  for (const auto& [key, fallback, out] : {std::tuple{"sigmas", "0.25,0.5,1,2,4,8", &sigmas},
                                           std::tuple{"lambda_scales", "1,5,10,25", &scales}}) {
    for (const auto& item : args.List(key, fallback)) {
      double v;
      if (!absl::SimpleAtod(item, &v) || !(v > 0) || !std::isfinite(v))
        return absl::InvalidArgumentError(
            absl::StrCat("--", key, " entry '", item, "' is not a number > 0"));
      out->push_back(v);
    }
  }
  std::map<std::string, int64_t> fixed_sizes;
  for (const auto& item : args.List("sizes", "")) {
    if (item.empty()) continue;
    std::vector<std::string> kv = absl::StrSplit(item, ':');
    int64_t v;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &v) || v < 1 || !ParseMethod(kv[0]).ok())
      return absl::InvalidArgumentError(
          absl::StrCat("--sizes entry '", item, "' is not algo:size"));
    fixed_sizes[kv[0]] = v;
  }
  const std::string baseline_name = args.String(
      "baseline", classification || loss_kind == oks::LossKind::kSquare ? "rf_oks_pp" : "rf_ioks");
  auto baseline = ParseMethod(baseline_name);
  if (!baseline.ok()) return baseline.status();
  std::vector<std::string> algos = args.List("algos", "rf_oks,lkmbooks,raker,rf_ioks,rf_oks_pp");
  for (const auto& a : algos)
    if (auto m = ParseMethod(a); !m.ok()) return m.status();

  auto data = ReadCsv(path);
  if (!data.ok()) return data.status();
  const int64_t n = static_cast<int64_t>(data->y.size());
  if (classification)
    for (double y : data->y)
      if (y != 1.0 && y != -1.0)
        return absl::InvalidArgumentError(
            absl::StrCat("--loss needs labels in {-1, +1}; ", path, " has y = ", y));
  const int64_t T = *rows > 0 ? std::min(*rows, n) : n;
  std::vector<std::vector<int64_t>> orders(*perms);
  for (int64_t r = 0; r < *perms; ++r) {  // same permutations as --env=stream
    Rng rng(static_cast<uint64_t>(*seed) * 7919 + static_cast<uint64_t>(r));
    auto& o = orders[r];
    o.resize(n);
    for (int64_t i = 0; i < n; ++i) o[i] = i;
    for (int64_t i = n - 1; i > 0; --i) std::swap(o[i], o[rng.UniformInt(i + 1)]);
  }
  Setup setup{&*data,
              *loss,
              loss_kind,
              classification,
              sigmas,
              *u,
              *eta_constant,
              rf_map,
              T,
              static_cast<uint64_t>(*seed),
              &orders};

  // Baseline time t_p: median of three single-permutation runs at --D.
  std::vector<double> base_times;
  for (int rep = 0; rep < 3; ++rep) {
    auto r = RunOnce(setup, *baseline, *D, 1.0, 0);
    if (!r.ok()) return r.status();
    base_times.push_back(r->cpu_per_round);
  }
  std::sort(base_times.begin(), base_times.end());
  const double t_p = base_times[1];

  auto initial_size = [&](Method m) -> int64_t {
    switch (m) {
      case Method::kRaker:
        return std::max<int64_t>(10, *D / 6);  // K = 6 kernels updated per round
      case Method::kLkmBooks:
        return std::max<int64_t>(10, *D / 2);
      default:
        return *D;
    }
  };
  const std::string metric = classification ? "amr" : "al";
  nlohmann::json results = nlohmann::json::array();
  for (const std::string& name : algos) {
    const Method m = *ParseMethod(name);
    int64_t size = initial_size(m);
    nlohmann::json trace = nlohmann::json::array();
    if (m == *baseline) {
      size = *D;
    } else if (fixed_sizes.count(name)) {
      size = fixed_sizes[name];
    } else if (*equal_time) {
      // Secant search on the measured per-round time (first step proportional).
      std::vector<std::pair<int64_t, double>> pts;
      int64_t cur = size;
      for (int64_t it = 0; it < *calib_iters; ++it) {
        bool seen = false;
        for (auto& p : pts) seen |= p.first == cur;
        if (seen) break;
        auto r = RunOnce(setup, m, cur, scales[0], 0);
        if (!r.ok()) return r.status();
        pts.push_back({cur, r->cpu_per_round});
        trace.push_back({{"size", cur}, {"cpu_seconds_per_round", r->cpu_per_round}});
        if (std::abs(r->cpu_per_round - t_p) <= 0.03 * t_p) break;
        double next;
        if (pts.size() == 1) {
          next = cur * t_p / r->cpu_per_round;
        } else {
          const auto& [s0, t0] = pts[pts.size() - 2];
          const auto& [s1, t1] = pts.back();
          next = t1 == t0 ? s1 : s1 + (t_p - t1) * (s1 - s0) / (t1 - t0);
        }
        cur = RoundTo10(std::clamp(next, 10.0, 20.0 * static_cast<double>(std::max(size, cur))));
      }
      size = std::min_element(pts.begin(), pts.end(), [&](auto& a, auto& b) {
               return std::abs(a.second - t_p) < std::abs(b.second - t_p);
             })->first;
    }
    const bool scaled = m == Method::kRfOks || m == Method::kRaker;
    for (double scale : scaled ? scales : std::vector<double>{1.0}) {
      std::vector<double> scores, cpu;
      std::vector<std::vector<double>> curves;
      Eigen::VectorXd w_mean = Eigen::VectorXd::Zero(sigmas.size());
      for (int64_t r = 0; r < *perms; ++r) {
        auto res = RunOnce(setup, m, size, scale, r);
        if (!res.ok()) return res.status();
        scores.push_back(res->score);
        cpu.push_back(res->cpu_per_round);
        curves.push_back(Downsample(res->curve, 100));
        w_mean += res->weights / static_cast<double>(*perms);
      }
      const auto [sm, ss] = MeanStd(scores);
      const auto [cm, cs] = MeanStd(cpu);
      const auto [curve_m, curve_s] = CurveMeanStd(curves);
      std::string label = name;
      if (scaled && scales.size() > 1)
        label = absl::StrCat(name, m == Method::kRaker ? "(eta " : "(lambda x", scale,
                             m == Method::kRaker ? "/sqrt T)" : ")");
      results.push_back(
          {{"algo", label},
           {"method", name},
           {"size", size},
           {"size_kind", m == Method::kLkmBooks ? "B" : "D"},
           {"scale", scale},
           {metric, sm},
           {metric + "_std", ss},
           {"cpu_seconds_per_round", cm},
           {"cpu_seconds_per_round_std", cs},
           {"calibration", trace},
           {"per_permutation", scores},
           {"final_weights", std::vector<double>(w_mean.data(), w_mean.data() + w_mean.size())},
           {"score_curve", curve_m},
           {"score_curve_std", curve_s}});
    }
  }
  nlohmann::json params = {{"data", path},
                           {"loss", args.String("loss", "logistic")},
                           {"task", classification ? "classification" : "regression"},
                           {"n", n},
                           {"dim", data->dim},
                           {"T", T},
                           {"permutations", *perms},
                           {"baseline", baseline_name},
                           {"D", *D},
                           {"t_p", t_p},
                           {"t_p_runs", base_times},
                           {"equal_time", *equal_time != 0},
                           {"rf_map", map_name},
                           {"sigmas", sigmas},
                           {"lambda_scales", scales},
                           {"u", *u},
                           {"eta_constant", *eta_constant},
                           {"seed", *seed},
                           {"timer", "CLOCK_THREAD_CPUTIME_ID per round (predict + update)"}};
  return nlohmann::json{{"env", std::string(env)}, {"params", params}, {"results", results}};
}

}  // namespace bandit::sim
