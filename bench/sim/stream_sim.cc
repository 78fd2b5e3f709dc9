// env "stream": online kernel selection on a labelled data stream (Li & Liao 2022, Section 6).
//   bandit-sim --env=stream --data=FILE.csv --loss=logistic|square|absolute|hinge|squared_hinge
//     --algos=oks,oks_pp,ioks,rf_oks,rf_oks_pp,rf_ioks --permutations=10 --out=FILE.json
//     [--rows=0 (all)] [--exact_rows=0 (= rows)] [--D=400] [--sigmas=0.25,0.5,1,2,4,8]
//     [--u=15 classification / 1 regression] [--lambda_scales=1] [--eta_constant=8] [--seed=1]
// The CSV has a header row; the first column is the label y (classification: -1/+1 for the margin
// losses; regression otherwise), the rest are the features (already scaled to [-1, 1]).
// Each permutation (Fisher-Yates with the seeded Rng) is shared by all algorithms; the first
// `rows` rows of it are streamed (`exact_rows` for the exact-kernel algorithms, whose per-round
// cost grows with t). Horizon T = the number of streamed rows (the paper's setting: T known).
// Output per algorithm: amr (classification, mistakes of sign f(x), sign(0) = +1) or al (mean loss
// of the served prediction), its std over permutations, seconds_per_round (Select + Update), the
// running score curve, and the final sampling distribution p_T.
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/sim/sim.h"
#include "bench/sim/stream_data.h"
#include "core/oks/loss.h"
#include "core/oks/oks_policy.h"
#include "core/rng.h"

namespace bandit::sim {
namespace {

struct AlgoSpec {
  std::string name;
  bandit::v1::OksConfig::Variant variant;
  bool rf;
};

absl::StatusOr<AlgoSpec> ParseAlgo(const std::string& s) {
  using C = bandit::v1::OksConfig;
  if (s == "oks") return AlgoSpec{s, C::OKS, false};
  if (s == "oks_pp") return AlgoSpec{s, C::OKS_PP, false};
  if (s == "ioks") return AlgoSpec{s, C::IOKS, false};
  if (s == "rf_oks") return AlgoSpec{s, C::OKS, true};
  if (s == "rf_oks_pp") return AlgoSpec{s, C::OKS_PP, true};
  if (s == "rf_ioks") return AlgoSpec{s, C::IOKS, true};
  return absl::InvalidArgumentError(
      absl::StrCat("--algos entry '", s,
                   "' is unknown, expected oks, oks_pp, ioks, rf_oks, rf_oks_pp or rf_ioks"));
}

std::vector<double> ParseDoubles(const std::vector<std::string>& items, bool* ok) {
  std::vector<double> out;
  *ok = true;
  for (const auto& s : items) {
    double v;
    if (!absl::SimpleAtod(s, &v) || !std::isfinite(v)) *ok = false;
    out.push_back(v);
  }
  return out;
}

}  // namespace

absl::StatusOr<nlohmann::json> RunStream(absl::string_view env, const SimArgs& args) {
  const std::string path = args.String("data", "");
  if (path.empty())
    return absl::InvalidArgumentError("--data=FILE.csv is required for --env=stream");
  auto loss = ParseLoss(args.String("loss", "logistic"));
  if (!loss.ok()) return loss.status();
  const oks::LossKind loss_kind = oks::FromProto(*loss);
  const bool classification = oks::Info(loss_kind).margin;
  auto perms = args.Int("permutations", 10);
  auto rows = args.Int("rows", 0);
  auto exact_rows = args.Int("exact_rows", 0);
  auto D = args.Int("D", 400);
  auto seed = args.Int("seed", 1);
  auto u = args.Double("u", classification ? 15.0 : 1.0);
  auto eta_constant = args.Double("eta_constant", 8.0);
  for (const absl::Status& s : {perms.status(), rows.status(), exact_rows.status(), D.status(),
                                seed.status(), u.status(), eta_constant.status()})
    if (!s.ok()) return s;
  if (*perms < 1 || *D < 1 || *rows < 0 || *exact_rows < 0)
    return absl::InvalidArgumentError(
        "--permutations and --D must be >= 1, --rows/--exact_rows >= 0");
  bool ok_sigmas, ok_scales;
  const std::vector<double> sigmas =
      ParseDoubles(args.List("sigmas", "0.25,0.5,1,2,4,8"), &ok_sigmas);
  const std::vector<double> scales = ParseDoubles(args.List("lambda_scales", "1"), &ok_scales);
  if (!ok_sigmas || !ok_scales || sigmas.empty() || scales.empty())
    return absl::InvalidArgumentError(
        "--sigmas and --lambda_scales must be comma-separated numbers");
  std::vector<AlgoSpec> algos;
  for (const auto& a : args.List("algos", "oks,oks_pp,ioks,rf_oks,rf_oks_pp,rf_ioks")) {
    auto s = ParseAlgo(a);
    if (!s.ok()) return s.status();
    algos.push_back(*s);
  }
  auto data = ReadCsv(path);
  if (!data.ok()) return data.status();
  const int64_t n = static_cast<int64_t>(data->y.size());
  if (classification)
    for (double y : data->y)
      if (y != 1.0 && y != -1.0)
        return absl::InvalidArgumentError(absl::StrCat("--loss=", args.String("loss", ""),
                                                       " needs labels in {-1, +1}; ", path,
                                                       " has y = ", y));
  const int64_t t_all = *rows > 0 ? std::min(*rows, n) : n;
  const int64_t t_exact = *exact_rows > 0 ? std::min(*exact_rows, t_all) : t_all;

  // Permutations, shared by all algorithms.
  std::vector<std::vector<int64_t>> orders(*perms);
  for (int64_t r = 0; r < *perms; ++r) {
    Rng rng(static_cast<uint64_t>(*seed) * 7919 + static_cast<uint64_t>(r));
    auto& o = orders[r];
    o.resize(n);
    for (int64_t i = 0; i < n; ++i) o[i] = i;
    for (int64_t i = n - 1; i > 0; --i) std::swap(o[i], o[rng.UniformInt(i + 1)]);
  }

  nlohmann::json results = nlohmann::json::array();
  const std::string metric = classification ? "amr" : "al";
  for (const AlgoSpec& a : algos) {
    const std::vector<double> algo_scales =
        a.variant == bandit::v1::OksConfig::OKS ? scales : std::vector<double>{1.0};
    for (double scale : algo_scales) {
      const int64_t T = a.rf ? t_all : t_exact;
      bandit::v1::OksConfig c;
      c.set_variant(a.variant);
      c.set_dimension(data->dim);
      c.set_loss(*loss);
      c.set_task(classification ? bandit::v1::OKS_CLASSIFICATION : bandit::v1::OKS_REGRESSION);
      for (double s : sigmas) {
        auto* k = c.add_kernels();
        k->set_kind(bandit::v1::OksKernel::GAUSSIAN);
        k->set_bandwidth(s);
      }
      c.set_u(*u);
      c.set_horizon(std::max<int64_t>(T, 2));
      c.set_random_features(a.rf ? static_cast<int>(*D) : 0);
      c.set_lambda_scale(scale);
      c.set_eta_constant(*eta_constant);
      std::vector<double> scores, secs;
      std::vector<std::vector<double>> curves;
      Eigen::VectorXd p_mean = Eigen::VectorXd::Zero(sigmas.size());
      Eigen::VectorXd picks = Eigen::VectorXd::Zero(sigmas.size());
      for (int64_t r = 0; r < *perms; ++r) {
        auto pol = oks::OnlineKernelSelection::Create(
            c, static_cast<uint64_t>(*seed) * 1000003 + static_cast<uint64_t>(r),
            /*allow_unbounded=*/true);
        if (!pol.ok()) return pol.status();
        double total = 0;
        std::vector<double> curve;
        curve.reserve(T);
        const auto start = std::chrono::steady_clock::now();
        for (int64_t t = 0; t < T; ++t) {
          const int64_t row = orders[r][t];
          const Eigen::VectorXd& x = data->x[row];
          const double y = data->y[row];
          SelectContext ctx;
          ctx.point = &x;
          auto d = (*pol)->Select(ctx);
          if (!d.ok()) return d.status();
          const double f = *d->prediction();
          total +=
              classification ? ((f < 0 ? -1.0 : 1.0) != y ? 1.0 : 0.0) : oks::Loss(loss_kind, f, y);
          picks[d->arm] += 1.0;
          Observation o;
          o.features = x;
          o.memo = d->memo;
          o.reward = y;
          if (auto s = (*pol)->Update(o); !s.ok()) return s;
          curve.push_back(total / static_cast<double>(t + 1));
        }
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        scores.push_back(total / static_cast<double>(T));
        secs.push_back(elapsed / static_cast<double>(T));
        curves.push_back(Downsample(curve, 100));
        p_mean += (*pol)->Probabilities();
      }
      const auto [m, sd] = MeanStd(scores);
      const auto [ms, sds] = MeanStd(secs);
      const auto [cm, cs] = CurveMeanStd(curves);
      p_mean /= static_cast<double>(*perms);
      picks /= picks.sum();
      std::string name = a.name;
      if (algo_scales.size() > 1) name = absl::StrCat(a.name, "(lambda x", scale, ")");
      nlohmann::json j = {
          {"algo", name},
          {metric, m},
          {metric + "_std", sd},
          {"seconds_per_round", ms},
          {"seconds_per_round_std", sds},
          {"rows", T},
          {"per_permutation", scores},
          {"final_p", std::vector<double>(p_mean.data(), p_mean.data() + p_mean.size())},
          {"pick_fraction", std::vector<double>(picks.data(), picks.data() + picks.size())},
          {"score_curve", cm},
          {"score_curve_std", cs}};
      if (a.variant == bandit::v1::OksConfig::OKS) j["lambda_scale"] = scale;
      results.push_back(j);
    }
  }
  nlohmann::json params = {{"data", path},
                           {"loss", args.String("loss", "logistic")},
                           {"task", classification ? "classification" : "regression"},
                           {"n", n},
                           {"dim", data->dim},
                           {"rows", t_all},
                           {"exact_rows", t_exact},
                           {"permutations", *perms},
                           {"D", *D},
                           {"sigmas", sigmas},
                           {"u", *u},
                           {"lambda_scales", scales},
                           {"eta_constant", *eta_constant},
                           {"seed", *seed},
                           {"T", t_all},
                           {"horizon", "T = streamed rows (known)"}};
  return nlohmann::json{{"env", std::string(env)}, {"params", params}, {"results", results}};
}

}  // namespace bandit::sim
