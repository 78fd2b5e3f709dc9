// Vowpal Wabbit's contextual-bandit learner against VW itself: (a) VW's own test suite, whose
// recorded predictions (tests/data/vowpal_wabbit, copied unchanged) are reproduced for the
// reductions served; (b) VW 9.11.2 run side by side on generated streams, where the prebuilt
// binary is present (../shared/tools/vw/vw or $VW; the tests say they were skipped otherwise).
// Both drive the learner as VW's driver does: each multiline example is predicted, then
// learned when it carries a label.
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/features/feature_space.h"
#include "core/vw/cb_learner.h"
#include "core/vw/options.h"
#include "tests/core/vw/vw_test_util.h"

namespace bandit::vw {
namespace BANDIT_UNITY_ID {
using namespace bandit::vw::testing;  // NOLINT: the shared test helpers

// VW prints 6 decimals: the comparison the exactness claim is held to.
bool Close(double ours, double vw) {
  return std::fabs(ours - vw) <= 1e-6 || std::fabs(ours - vw) <= 1e-4 * std::fabs(vw);
}

// VW's own test runner's comparison of printed floats (test/run_tests.py fuzzy_float_compare,
// its default epsilon 1e-4): what its recorded files are held to across builds and machines.
bool CloseAsVwsRunner(double ours, double vw) {
  if (std::fabs(ours - vw) < 1e-4) return true;
  return std::fabs(vw) > 1.0 && std::fabs(ours / vw - 1.0) < 1e-4;
}

struct ReplayResult {
  int compared = 0;
  int exact_mismatches = 0;   // values not Close
  int runner_mismatches = 0;  // values not CloseAsVwsRunner
  std::string first_exact_mismatch;
};

// Runs `arguments` over the examples as VW's driver does and compares each prediction with
// VW's: the pmf (cb_explore_adf) or the costs (cb_adf, printed with --rank_all).
ReplayResult Replay(const std::string& arguments, const std::vector<Example>& examples,
                    const std::vector<std::map<int, double>>& vw, bool simd_inv_sqrt) {
  ReplayResult result;
  auto options = ParseVwArguments(arguments);
  EXPECT_TRUE(options.ok()) << options.status();
  if (!options.ok()) return result;
  options->regressor.simd_inv_sqrt = simd_inv_sqrt;
  auto space = features::FeatureSpace::Create(options->space);
  EXPECT_TRUE(space.ok());
  CbLearner learner(*options, 1);
  EXPECT_EQ(examples.size(), vw.size()) << arguments;
  for (size_t r = 0; r < examples.size() && r < vw.size(); ++r) {
    const auto xs = Featurize(*space, examples[r]);
    CbLearner::Prediction p;
    learner.Predict(xs, &p);
    const bool costs = options->reduction == Reduction::kCbAdf;
    const std::vector<float>& ours = costs ? p.costs : p.pmf;
    EXPECT_EQ(vw[r].size(), ours.size()) << arguments << " example " << r;
    bool exact = true, runner = true;
    for (const auto& [a, v] : vw[r]) {
      if (a < 0 || a >= static_cast<int>(ours.size())) continue;
      if (!Close(ours[a], v) && result.first_exact_mismatch.empty())
        result.first_exact_mismatch =
            absl::StrCat("example ", r, " action ", a, ": ours ", ours[a], ", VW ", v);
      exact = exact && Close(ours[a], v);
      if (!CloseAsVwsRunner(ours[a], v)) {
        runner = false;
        ADD_FAILURE() << arguments << ": example " << r << " action " << a << ": ours " << ours[a]
                      << ", VW " << v;
      }
    }
    result.exact_mismatches += !exact;
    result.runner_mismatches += !runner;
    ++result.compared;
    const Example& e = examples[r];
    if (e.labeled >= 0)
      learner.LearnOffered(xs, e.labeled, e.cost, e.probability);
  }
  return result;
}

// (a) VW's own test suite (test/core.vwtest.json: the command, its input and its recorded
// predictions).
struct SuiteCase {
  int id;
  std::string arguments;  // the learner's part of VW's command line
  std::string input, predictions;
  bool simd_inv_sqrt = false;
};

TEST(VwTestSuite, RecordedPredictionsReproduced) {
  const std::string root = SourceDir() + "/tests/data/vowpal_wabbit/test/";
  const std::vector<SuiteCase> cases = {
      {85, "--cb_adf --noconstant", "train-sets/cb_test.ldf", "pred-sets/ref/cb_adf_rank.predict"},
      {126, "--cb_explore_adf --epsilon 0.1 --noconstant", "train-sets/cb_test.ldf",
       "pred-sets/ref/cbe_adf_epsilon.predict"},
      {127, "--cb_explore_adf --softmax --lambda 1 --noconstant", "train-sets/cb_test.ldf",
       "pred-sets/ref/cbe_adf_softmax.predict"},
      {128, "--cb_explore_adf --bag 3 --noconstant", "train-sets/cb_test.ldf",
       "pred-sets/ref/cbe_adf_bag.predict"},
      {129, "--cb_explore_adf --first 2 --noconstant", "train-sets/cb_test.ldf",
       "pred-sets/ref/cbe_adf_first.predict"},
      {91, "--cb_adf --cb_type dr", "train-sets/cb_test.ldf", "pred-sets/ref/cb_adf_dr.predict",
       true},
      {136, "--cb_explore_adf --cover 3 --noconstant", "train-sets/cb_test.ldf",
       "pred-sets/ref/cbe_adf_cover.predict"},
      {137, "--cb_explore_adf --cover 3 --cb_type dr --noconstant", "train-sets/cb_test.ldf",
       "pred-sets/ref/cbe_adf_cover_dr.predict"},
      {198, "--cb_explore_adf --softmax --lambda 100000 --noconstant", "train-sets/cb_test.ldf",
       "pred-sets/ref/cbe_adf_softmax_biglambda.predict"},
      {312, "--cb_explore_adf -q UA --squarecb", "train-sets/cb_load.dat",
       "pred-sets/ref/squarecb_pred.predict"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(absl::StrCat("core.vwtest.json #", c.id, ": ", c.arguments));
    const std::string input = Read(root + c.input), predictions = Read(root + c.predictions);
    ASSERT_FALSE(input.empty()) << root + c.input;
    ASSERT_FALSE(predictions.empty()) << root + c.predictions;
    // Recorded by VW's CI build (STD_INV_SQRT, the learner's default), on another machine: held
    // to VW's own runner's comparison, as VW holds itself.
    const ReplayResult r = Replay(c.arguments, ReadExamples(input), ReadPredictions(predictions),
                                  c.simd_inv_sqrt);
    EXPECT_GT(r.compared, 0);
    EXPECT_EQ(r.runner_mismatches, 0);
  }
}

TEST(VwSideBySide, PredictionsEqualVw) {
  const std::string vw = VwBinary();
  if (!VwRuns(vw)) GTEST_SKIP() << "VW 9.11.2 not found at " << vw << " (set $VW): skipped";
  const std::string dir = ::testing::TempDir() + "/vw_side_by_side";
  std::filesystem::create_directories(dir);
  const std::string data = dir + "/stream.dat";
  // VW_DATA=file compares on that file instead of the generated stream.
  const std::string stream =
      std::getenv("VW_DATA") ? Read(std::getenv("VW_DATA")) : GenerateStream(7, 400);
  std::ofstream(data) << stream;
  const auto examples = ReadExamples(stream);
  std::vector<std::string> cases = {
      // Personalizer's default learning policy.
      "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q :: -b 18",
      "--cb_explore_adf --squarecb -q UA -b 18",
      "--cb_explore_adf --squarecb --gamma_scale 50 --gamma_exponent 0.3 --epsilon 0.05 -q UA",
      "--cb_explore_adf --softmax --lambda 3 -q UA -q CA",
      "--cb_explore_adf --first 25 --epsilon 0.1 -b 16",
      "--cb_explore_adf --epsilon 0.1 --first_only --interactions UCA",
      "--cb_explore_adf --epsilon 0.3 -q :: --noconstant --hash_seed 7 --ignore C",
      "--cb_adf -q UA",
      "--cb_adf --sgd -l 0.05",
      "--cb_adf --sgd -l 0.05 --power_t 0.3 --initial_t 2",
      "--cb_adf --adaptive -l 0.3",
      "--cb_adf --normalized -l 0.2",
      "--cb_adf --invariant -l 0.2 --power_t 0.4",
      "--cb_adf --adaptive --normalized --power_t 0.3 -l 0.4 -q UA",
      "--cb_adf --power_t 0.25 --initial_t 5 -q UA",
      "--cb_adf --l2 0.0001 -q UA",
      "--cb_adf --l1 0.00001 -q UA",
      "--cb_adf --clip_p 0.4 -q UA",
      "--cb_explore_adf --cubic UCA -b 20",
      // Bagging: the bootstrap's draws, each regressor's counts, the interleaved weights.
      "--cb_explore_adf --bag 5 -q UA -b 18",
      "--cb_explore_adf --bag 3 --greedify --epsilon 0.05 --random_seed 7 -q ::",
      "--cb_explore_adf --bag 4 --first_only --sgd -l 0.1 -b 16",
      "--cb_explore_adf --bag 2 --power_t 0 -l 0.01 --random_seed 123456789 -q UA",
      // The other cb_types: every offered action learns an estimate of its cost.
      "--cb_adf --cb_type ips -q UA",
      "--cb_adf --cb_type dm -q UA",
      "--cb_adf --cb_type dr -q UA",
      "--cb_adf --cb_type ips --clip_p 0.3 --sgd -l 0.05",
      "--cb_adf --cb_type dr --clip_p 0.3 --power_t 0.3 -l 0.2",
      "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type ips -q :: -b 18",
      "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type dr -q :: -b 18",
      "--cb_explore_adf --softmax --lambda 2 --cb_type dm -q UA",
      "--cb_explore_adf --first 25 --cb_type dr",
      "--cb_explore_adf --bag 3 --cb_type dr --random_seed 5 -q UA",
      "--cb_explore_adf --bag 4 --greedify --cb_type ips -b 16",
      // Online cover: its policies interleaved with cb_adf's and the scorer.
      "--cb_explore_adf --cover 3 -q UA",
      "--cb_explore_adf --cover 4 --cb_type dr -q UA",
      "--cb_explore_adf --cover 2 --cb_type ips --epsilon 0.1",
      "--cb_explore_adf --cover 5 --psi 0.3 --nounif -q ::",
      "--cb_explore_adf --cover 3 --first_only --cb_type dr --epsilon 0.05 -b 16",
      "--cb_explore_adf --cover 1 -q UA",
  };
  // VW_CASES="args;args" compares other command lines instead (for a new option's first run).
  if (const char* only = std::getenv("VW_CASES")) cases = absl::StrSplit(only, ';');
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string& arguments = cases[i];
    SCOPED_TRACE(arguments);
    const std::string predictions = absl::StrCat(dir, "/p", i, ".txt");
    const bool costs = arguments.rfind("--cb_adf", 0) == 0;
    const std::string command =
        absl::StrCat(vw, " ", arguments, costs ? " --rank_all" : "", " -d ", data, " -p ",
                     predictions, " --quiet 2> ", dir, "/err", i, ".txt");
    ASSERT_EQ(std::system(command.c_str()), 0) << command << "\n"
                                               << Read(absl::StrCat(dir, "/err", i, ".txt"));
    // The prebuilt VW is a default (SIMD inverse square root) build: every prediction equals
    // VW's to the digits it prints.
    const ReplayResult r = Replay(arguments, examples, ReadPredictions(Read(predictions)), true);
    EXPECT_EQ(r.compared, static_cast<int>(examples.size()));
    EXPECT_EQ(r.exact_mismatches, 0)
        << "rounds not equal to VW's printed digits, the first " << r.first_exact_mismatch;
  }
}

// The arguments: what is served is parsed to VW's defaults, what is not is refused naming the
// flag.
TEST(VwArguments, DefaultsAreVws) {
  auto o = ParseVwArguments("--cb_explore_adf");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->explorer, Explorer::kEpsilon);
  EXPECT_FLOAT_EQ(o->epsilon, 0.05f);
  EXPECT_TRUE(o->regressor.adaptive && o->regressor.normalized && o->regressor.invariant);
  EXPECT_FLOAT_EQ(o->regressor.learning_rate, 0.5f);
  EXPECT_FLOAT_EQ(o->regressor.power_t, 0.5f);
  EXPECT_EQ(o->space.bits, 18);
  EXPECT_TRUE(o->space.constant);
  auto sgd = ParseVwArguments("--cb_adf --sgd");
  ASSERT_TRUE(sgd.ok());
  EXPECT_FALSE(sgd->regressor.adaptive || sgd->regressor.normalized || sgd->regressor.invariant);
  EXPECT_FLOAT_EQ(sgd->regressor.learning_rate, 10.f);  // gd_setup's default for a named update
  auto personalizer = ParseVwArguments(
      "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q :: -b18");
  ASSERT_TRUE(personalizer.ok()) << personalizer.status();
  EXPECT_EQ(personalizer->space.bits, 18);
  EXPECT_EQ(personalizer->space.interactions, std::vector<std::string>{"::"});
  EXPECT_FLOAT_EQ(personalizer->regressor.learning_rate, 0.001f);
  auto squarecb = ParseVwArguments("--cb_explore_adf --squarecb");
  ASSERT_TRUE(squarecb.ok());
  EXPECT_FLOAT_EQ(squarecb->epsilon, 0.f);
  EXPECT_FLOAT_EQ(squarecb->gamma_scale, 10.f);
  EXPECT_FLOAT_EQ(squarecb->gamma_exponent, 0.5f);
}

TEST(VwArguments, RefusedWithTheFlagNamed) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"", "--cb_adf or --cb_explore_adf"},
      {"--cb_explore_adf --bag 0", "--bag is '0'"},
      {"--cb_explore_adf --bag 4 -b 2", "--bag is 4 with -b 2"},
      {"--cb_explore_adf --bag 3 --squarecb", "two explorers"},
      {"--cb_adf --bag 3", "--bag does nothing with --cb_adf"},
      {"--cb_explore_adf --greedify", "--greedify does nothing without --bag"},
      {"--cb_explore_adf --random_seed 3", "--random_seed only seeds --bag"},
      {"--cb_explore_adf --cover 3 --cb_type dm", "--cb_type is 'dm' with --cover"},
      {"--cb_explore_adf --cover 3 --bag 2", "two explorers"},
      {"--cb_explore_adf --psi 0.5", "--psi does nothing without --cover"},
      {"--cb_explore_adf --nounif", "--nounif does nothing without --cover"},
      {"--cb_adf --cover 2", "--cover does nothing with --cb_adf"},
      {"--cb_adf --cb_type sm", "--cb_type is 'sm', which is not served"},
      {"--cb_adf --cb_type xyz", "--cb_type is 'xyz', expected mtr, ips, dm or dr"},
      {"--cb_adf --cb_type dr -b 1", "--cb_type is dr with -b 1"},
      {"--cb_explore_adf --bag 2 --cb_type dr -b 2", "--bag is 2 with -b 2"},
      {"--cb_explore_adf --squarecb --cb_type ips", "--squarecb needs --cb_type mtr"},
      {"--cb_explore_adf --softmax --squarecb", "two explorers"},
      {"--cb_explore_adf --first 3 --softmax", "two explorers"},
      {"--cb_adf --epsilon 0.1", "--epsilon does nothing with --cb_adf"},
      {"--cb_explore_adf --lambda 2", "--lambda does nothing without --softmax"},
      {"--cb_explore_adf --gamma_scale 2", "--gamma_scale does nothing without --squarecb"},
      {"--cb_explore_adf --softmax --first_only", "--first_only"},
      {"--cb_explore_adf --epsilon 1.5", "--epsilon is '1.5'"},
      {"--cb_explore_adf -b 31", "--bit_precision is '31'"},
      {"--cb_explore_adf -q ABC", "--quadratic is 'ABC'"},
      {"--cb_explore_adf -l", "--learning_rate needs a value"},
      {"--cb_explore_adf -l 0", "--learning_rate is 0"},
      {"--cb_explore_adf --epsilon 0.1 --epsilon 0.2", "--epsilon is given twice"},
      {"--cb_explore_adf --no_such_flag", "--no_such_flag is not a VW option"},
      {"--cb_explore_adf --sgd --adaptive", "--sgd"},
      {"--cb_explore_adf --dsjson", "--dsjson"},
      {"--cb_explore_adf 0.2", "'0.2' is not an option"},
      {"--ccb_explore_adf --cover 2", "--cover with --ccb_explore_adf is not served"},
  };
  for (const auto& [arguments, expected] : refused) {
    auto o = ParseVwArguments(arguments);
    ASSERT_FALSE(o.ok()) << arguments;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << arguments;
    EXPECT_NE(o.status().message().find(expected), std::string::npos)
        << arguments << ": " << o.status().message();
  }
}

// Plain SGD's first update in closed form: from w = 0 on one feature x with label y and
// importance weight h (one action offered, probability 1): p = 0, and
// w = 2 (y - 0) eta h t^(-power_t) x with t = initial t (1) + h (gd.cc get_scale).
TEST(VwRegressor, FirstSgdUpdateInClosedForm) {
  auto o = ParseVwArguments("--cb_adf --sgd -l 0.1 --power_t 0.5 --noconstant -b 4");
  ASSERT_TRUE(o.ok());
  Regressor regressor(o->regressor, 4);
  SparseVector x{{3}, {2.0}};
  regressor.Learn(x, -1.f, 1.f);
  const float expected = 2.f * (-1.f - 0.f) * 0.1f * std::pow(2.f, -0.5f) * 2.f;
  EXPECT_FLOAT_EQ(regressor.weight(3), expected);
  EXPECT_FLOAT_EQ(regressor.Predict(x), expected * 2.f);
}

// The default (adaptive, normalized, invariant) update's first step on one feature x, label y:
// G = 4 y^2 x^2, N = |x|, rate r = 1 / (sqrt(G) N) (the SSE estimate of 1/sqrt), the
// normalizer's multiplier sqrt(1 / (x^2 / N^2)) = 1, s = x^2 r, and the importance-aware step
// u = y (1 - exp(-2 eta s)) / s; w = u x r. Checked to the estimate's precision.
TEST(VwRegressor, FirstDefaultUpdateInClosedForm) {
  auto o = ParseVwArguments("--cb_adf --noconstant -b 4");
  ASSERT_TRUE(o.ok());
  Regressor regressor(o->regressor, 4);
  const double x = 0.5, y = -1, eta = 0.5;
  regressor.Learn(SparseVector{{5}, {x}}, static_cast<float>(y), 1.f);
  const double r = 1 / (std::sqrt(4 * y * y * x * x) * std::fabs(x));
  const double s = x * x * r;
  const double u = y * (1 - std::exp(-2 * eta * s)) / s;
  EXPECT_NEAR(regressor.weight(5), u * x * r, 1e-3 * std::fabs(u * x * r));
}

// The checked prediction (the checks riding along the sums) is the unchecked one bit for bit on
// valid vectors, with and without l1, over action counts that leave every tail length; and any
// one bad term in any action refuses the whole call: an index at the dimension (below the
// array), an index far past the array (masked, never read out of bounds), a value that is not a
// finite float, or index and value arrays of different lengths.
TEST(VwRegressor, CheckedPredictionEqualsTheUncheckedAndRefusesAnyBadTerm) {
  for (const char* args : {"--cb_adf -b 6", "--cb_adf --l1 1e-4 -b 6"}) {
    auto o = ParseVwArguments(args);
    ASSERT_TRUE(o.ok()) << o.status();
    Regressor regressor(o->regressor, 6);
    std::mt19937_64 rng(5);
    std::uniform_int_distribution<uint32_t> index(0, 39);  // below every dimension tried
    std::normal_distribution<double> value(0, 1);
    auto vectors = [&](size_t actions) {
      std::vector<SparseVector> xs(actions);
      for (size_t a = 0; a < actions; ++a)
        for (size_t k = 0; k < 3 + (a * 7) % 11; ++k) {
          xs[a].index.push_back(index(rng));
          xs[a].value.push_back(value(rng));
        }
      return xs;
    };
    for (int round = 0; round < 30; ++round) {
      const auto xs = vectors(9);
      for (const auto& x : xs) ASSERT_TRUE(regressor.Learn(x, static_cast<float>(value(rng)), 1.f));
    }
    for (size_t actions : {1u, 3u, 4u, 5u, 8u, 9u}) {
      const auto xs = vectors(actions);
      std::vector<float> plain(actions), checked(actions);
      regressor.PredictAll(xs, plain.data());
      ASSERT_TRUE(regressor.PredictAllChecked(xs, 64, checked.data()));
      for (size_t a = 0; a < actions; ++a) {
        EXPECT_EQ(std::bit_cast<uint32_t>(plain[a]), std::bit_cast<uint32_t>(checked[a]))
            << args << " " << actions << " " << a;
        EXPECT_EQ(std::bit_cast<uint32_t>(plain[a]),
                  std::bit_cast<uint32_t>(regressor.Predict(xs[a])));
      }
      // A dimension below the array's: its last index is refused.
      for (size_t a = 0; a < actions; ++a) {
        auto bad = xs;
        bad[a].index.back() = 40;
        EXPECT_FALSE(regressor.PredictAllChecked(bad, 40, checked.data())) << args << " " << a;
        EXPECT_TRUE(regressor.PredictAllChecked(bad, 41, checked.data())) << args << " " << a;
        bad[a].index.front() = 0x80000000u;
        EXPECT_FALSE(regressor.PredictAllChecked(bad, 64, checked.data()));
        for (double v : {std::numeric_limits<double>::quiet_NaN(),
                         std::numeric_limits<double>::infinity(), -1e39}) {
          bad = xs;
          bad[a].value[bad[a].size() / 2] = v;
          EXPECT_FALSE(regressor.PredictAllChecked(bad, 64, checked.data())) << v;
        }
        bad = xs;
        bad[a].value.pop_back();
        EXPECT_FALSE(regressor.PredictAllChecked(bad, 64, checked.data()));
      }
    }
  }
}

// A Select never changes the model, and the same seed replays the same choices.
// Every term of every candidate is checked (index below 2^b, a finite float value) wherever it
// sits in the vector (the check takes two values at a time): INVALID_ARGUMENT naming the
// candidate and the term, and the model untouched.
TEST(VwLearner, EveryTermIsCheckedWhereverItSits) {
  bandit::v1::PolicyConfig config;
  config.mutable_vw()->set_arguments("--cb_explore_adf --epsilon 0.3 -b 4");
  auto policy = CbLearner::Make(config, 1);
  ASSERT_TRUE(policy.ok());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (size_t length : {1u, 2u, 5u, 8u})
    for (size_t at = 0; at < length; ++at)
      for (double bad : {nan, 1e39, -1e39, std::numeric_limits<double>::infinity()}) {
        SparseVector x;
        for (size_t k = 0; k < length; ++k) {
          x.index.push_back(static_cast<uint32_t>(k));
          x.value.push_back(k == at ? bad : 0.5);
        }
        std::vector<SparseVector> xs = {{{1}, {1.0}}, x};
        SelectContext ctx;
        ctx.sparse_candidates = xs;
        auto d = (*policy)->Select(ctx);
        ASSERT_FALSE(d.ok()) << length << " " << at << " " << bad;
        EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_NE(d.status().message().find(absl::StrCat("candidates[1].value[", at, "]")),
                  std::string::npos)
            << d.status();
      }
  SparseVector beyond{{3, 16}, {1.0, 1.0}};  // 2^4 = 16 is out of range
  std::vector<SparseVector> xs = {beyond};
  SelectContext ctx;
  ctx.sparse_candidates = xs;
  EXPECT_EQ((*policy)->Select(ctx).status().code(), absl::StatusCode::kInvalidArgument);
  SparseVector largest{{15, 1}, {3.4e38, -3.4e38}};  // below FLT_MAX: taken
  xs = {largest};
  ctx.sparse_candidates = xs;
  EXPECT_TRUE((*policy)->Select(ctx).ok());
}

TEST(VwLearner, SelectReadsTheModelAndTheSeedReplays) {
  bandit::v1::PolicyConfig config;
  config.mutable_vw()->set_arguments("--cb_explore_adf --epsilon 0.3 -b 3");
  auto a = CbLearner::Make(config, 42), b = CbLearner::Make(config, 42);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<SparseVector> xs = {{{1}, {1.0}}, {{2}, {1.0}}, {{3}, {0.5}}};
  SelectContext ctx;
  ctx.sparse_candidates = xs;
  ctx.want_scores = true;
  for (int round = 0; round < 50; ++round) {
    auto da = (*a)->Select(ctx), db = (*b)->Select(ctx);
    ASSERT_TRUE(da.ok() && db.ok());
    EXPECT_EQ(da->arm, db->arm);
    EXPECT_NEAR(da->scores.sum(), 1.0, 1e-6);
    EXPECT_EQ(da->propensity, da->scores[da->arm]);
    Observation obs;
    obs.sparse_features = xs[da->arm];
    obs.memo = da->memo;
    obs.reward = da->arm == 2 ? 1 : 0;
    ASSERT_TRUE((*a)->Update(obs).ok());
    obs.memo = db->memo;
    ASSERT_TRUE((*b)->Update(obs).ok());
  }
  // Learned: the rewarded action is the greedy one, with 1 - epsilon + epsilon / 3.
  auto d = (*a)->Select(ctx);
  ASSERT_TRUE(d.ok());
  EXPECT_NEAR(d->scores[2], 0.7 + 0.1, 1e-6);
}

// ips, dm, dr and --cover learn every action offered: a Select's memo carries them to the Update, which
// then learns what VW learns from the labeled round (LearnOffered on the same vectors, compared
// state for state); a memo cut short or holding an index past the space is refused with the
// model unchanged; logged data (no memo) is a round of the chosen action alone.
TEST(VwLearner, EveryOfferedActionTravelsInTheMemoAndIsLearned) {
  for (const char* arguments :
       {"--cb_explore_adf --epsilon 0.3 -b 6 --cb_type ips",
        "--cb_explore_adf --epsilon 0.3 -b 6 --cb_type dm",
        "--cb_explore_adf --epsilon 0.3 -b 6 --cb_type dr",
        // --cover reads every action to learn, mtr included: its policies learn them all.
        "--cb_explore_adf --cover 3 -b 8"}) {
    SCOPED_TRACE(arguments);
    bandit::v1::PolicyConfig config;
    config.mutable_vw()->set_arguments(arguments);
    auto served = CbLearner::Make(config, 7);
    ASSERT_TRUE(served.ok());
    auto* policy = static_cast<CbLearner*>(served->get());
    CbLearner reference(*ParseVwArguments(config.vw().arguments()), 7);
    std::vector<SparseVector> xs = {{{1, 5}, {1.0, 0.5}}, {{2}, {1.0}}, {{3, 9, 30}, {0.5, 2, -1}}};
    SelectContext ctx;
    ctx.sparse_candidates = xs;
    for (int round = 0; round < 30; ++round) {
      auto d = policy->Select(ctx);
      ASSERT_TRUE(d.ok());
      // Three numbers, then per action its count, indices and values.
      EXPECT_EQ(d->memo.size(), 3 + 3 * 1 + 2 * (2 + 1 + 3));
      Observation obs;
      obs.sparse_features = xs[d->arm];
      obs.memo = d->memo;
      obs.reward = d->arm == 2 ? 1 : -0.5;
      if (round == 10) {
        Observation cut = obs;
        cut.memo.conservativeResize(cut.memo.size() - 1);
        Observation far = obs;
        far.memo[4] = 1 << policy->options().space.bits;  // the first index, past the space
        const std::vector<float> before = policy->regressor().weights();
        EXPECT_EQ(policy->Update(cut).code(), absl::StatusCode::kInvalidArgument);
        EXPECT_EQ(policy->Update(far).code(), absl::StatusCode::kInvalidArgument);
        EXPECT_EQ(policy->regressor().weights(), before);
      }
      ASSERT_TRUE(policy->Update(obs).ok());
      ASSERT_TRUE(reference.LearnOffered(xs, d->arm, static_cast<float>(-obs.reward),
                                         static_cast<float>(d->propensity)));
      ASSERT_EQ(policy->regressor().weights(), reference.regressor().weights()) << round;
    }
    // Logged data: the chosen action alone, chosen for sure.
    Observation logged;
    logged.sparse_features = xs[1];
    logged.direct = true;
    logged.reward = 1;
    ASSERT_TRUE(policy->Update(logged).ok());
    ASSERT_TRUE(reference.LearnOffered(std::span<const SparseVector>(&xs[1], 1), 0, -1.f, 1.f));
    EXPECT_EQ(policy->regressor().weights(), reference.regressor().weights());
    EXPECT_EQ(policy->regressor().scalars().t, reference.regressor().scalars().t);
  }
}

// A logged example (offline evaluation, training on a log) is learned as VW learns a labeled
// one: at its logged propensity, among the actions offered, at its position (SquareCB weighs
// the chosen action by 1/p only when it was the last offered).
TEST(VwLearner, ALoggedExampleIsLearnedAtItsPropensityAndPosition) {
  const SparseVector x{{1, 4}, {1.0, 0.5}};
  for (const int position : {1, 3}) {
    SCOPED_TRACE(position);
    bandit::v1::PolicyConfig config;
    config.mutable_vw()->set_arguments("--cb_explore_adf --squarecb -b 6");
    auto served = CbLearner::Make(config, 1);
    ASSERT_TRUE(served.ok());
    auto* policy = static_cast<CbLearner*>(served->get());
    CbLearner twin(*ParseVwArguments(config.vw().arguments()), 1);
    Observation logged;
    logged.direct = true;
    logged.sparse_features = x;
    logged.reward = 1;
    logged.offered = 4;
    logged.logged_propensity = 0.25;
    logged.logged_position = position;
    ASSERT_TRUE(policy->Update(logged).ok());
    ASSERT_TRUE(twin.Learn(x, position, 4, -1.f, 0.25f));
    EXPECT_EQ(policy->regressor().weights(), twin.regressor().weights());
  }
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit::vw
