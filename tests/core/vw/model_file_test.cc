// VW's model files both ways: a model this learner writes reads back to the same learner (and
// writes the same bytes again); where the prebuilt VW 9.11.2 is present, VW reads our file and
// predicts what we predict, we read VW's file and predict (and go on learning) as VW does, and
// the header we write for the same training is VW's, byte for byte (its checksum included).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "core/features/feature_space.h"
#include "core/vw/cb_learner.h"
#include "core/vw/model_file.h"
#include "core/vw/options.h"
#include "tests/core/vw/vw_test_util.h"

namespace bandit::vw {
namespace BANDIT_UNITY_ID {
using namespace bandit::vw::testing;  // NOLINT: the shared test helpers

// Learns the labeled examples in order (as VW's driver does after each prediction).
void Train(CbLearner& learner, const features::FeatureSpace& space,
           const std::vector<Example>& examples) {
  for (const Example& e : examples) {
    if (e.labeled < 0) continue;
    const auto xs = Featurize(space, e);
    ASSERT_TRUE(learner.LearnOffered(xs, e.labeled, e.cost, e.probability));
  }
}

// Each example's pmf (or costs, for --cb_adf), without learning.
std::vector<std::vector<float>> Predictions(const CbLearner& learner,
                                            const features::FeatureSpace& space,
                                            const std::vector<Example>& examples) {
  std::vector<std::vector<float>> out;
  for (const Example& e : examples) {
    CbLearner::Prediction p;
    learner.Predict(Featurize(space, e), &p);
    out.push_back(learner.options().reduction == Reduction::kCbAdf ? p.costs : p.pmf);
  }
  return out;
}

const std::vector<std::string> kArguments = {
    "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q :: -b 18",
    "--cb_explore_adf --squarecb -q UA -b 16",
    "--cb_explore_adf --first 500 --epsilon 0.1",
    "--cb_explore_adf --softmax --lambda 3 --noconstant -q CA",
    "--cb_adf --sgd -l 0.05 --hash_seed 3 --ignore C",
    "--cb_adf --adaptive -l 0.3 --interactions UCA",
    "--cb_adf --normalized -l 0.2 --cubic UCA",
    "--cb_explore_adf --bag 4 --greedify -q UA -b 16",
    "--cb_explore_adf --cb_type dr --epsilon 0.1 -q UA",
    "--cb_adf --cb_type ips --clip_p 0.2",
    "--cb_explore_adf --cover 3 -q UA",
    "--cb_explore_adf --cover 2 --cb_type ips --psi 0.5 --nounif",
};

TEST(VwModelFile, ReadsBackWhatItWrites) {
  const auto examples = ReadExamples(GenerateStream(11, 200));
  for (const std::string& arguments : kArguments) {
    SCOPED_TRACE(arguments);
    auto options = ParseVwArguments(arguments);
    ASSERT_TRUE(options.ok()) << options.status();
    auto space = *features::FeatureSpace::Create(options->space);
    CbLearner learner(*options, 1);
    Train(learner, space, examples);
    const std::string bytes = WriteModelFile(learner);
    auto read = ReadModelFile(bytes, "", 1);
    ASSERT_TRUE(read.ok()) << read.status();
    // (The rate each weight keeps beside it is not in a model file: a learn recomputes it
    // before it is read.)
    EXPECT_EQ(Predictions(*read->learner, space, examples), Predictions(learner, space, examples));
    EXPECT_EQ(WriteModelFile(*read->learner), bytes);
  }
}

TEST(VwModelFile, RefusesWhatIsNotAServedModel) {
  auto options = ParseVwArguments("--cb_explore_adf -b 4");
  ASSERT_TRUE(options.ok());
  CbLearner learner(*options, 1);
  std::string bytes = WriteModelFile(learner);
  EXPECT_EQ(ReadModelFile("", "", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadModelFile(bytes.substr(0, 30), "", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string flipped = bytes;
  flipped[0x40] ^= 1;  // inside the options string: the checksum no longer matches
  auto corrupt = ReadModelFile(flipped, "", 1);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find("checksum"), std::string::npos) << corrupt.status();
  std::string torn = bytes + std::string("\x05\x00\x00\x00\x01", 5);  // a record cut short
  EXPECT_NE(ReadModelFile(torn, "", 1).status().message().find("ends inside a record"),
            std::string::npos);
  std::string beyond = bytes + std::string("\x40\x00\x00\x00", 4) + std::string(12, '\0');
  EXPECT_NE(ReadModelFile(beyond, "", 1).status().message().find("beyond 2^b"), std::string::npos);
}

// Runs VW; its stderr is kept beside the outputs.
void RunVw(const std::string& vw, const std::string& args, const std::string& dir) {
  const std::string command = absl::StrCat(vw, " ", args, " --quiet 2> ", dir, "/vw_err.txt");
  ASSERT_EQ(std::system(command.c_str()), 0) << command << "\n" << Read(dir + "/vw_err.txt");
}

bool SameAsVw(const std::vector<std::vector<float>>& ours,
              const std::vector<std::map<int, double>>& vw, const std::string& what) {
  EXPECT_EQ(ours.size(), vw.size()) << what;
  int mismatches = 0;
  for (size_t r = 0; r < ours.size() && r < vw.size(); ++r)
    for (const auto& [a, v] : vw[r])
      if (a >= static_cast<int>(ours[r].size()) ||
          !(std::fabs(ours[r][a] - v) <= 1e-6 || std::fabs(ours[r][a] - v) <= 1e-4 * std::fabs(v)))
        if (++mismatches <= 3)
          ADD_FAILURE() << what << ": example " << r << " action " << a << ": ours "
                        << (a < static_cast<int>(ours[r].size()) ? ours[r][a] : -1) << ", VW " << v;
  return mismatches == 0;
}

TEST(VwModelFile, VwReadsOursAndWeReadVws) {
  const std::string vw = VwBinary();
  if (!VwRuns(vw)) GTEST_SKIP() << "VW 9.11.2 not found at " << vw << " (set $VW): skipped";
  const std::string dir = ::testing::TempDir() + "/vw_model_file";
  std::filesystem::create_directories(dir);
  const std::string train = GenerateStream(21, 300), test = GenerateStream(22, 100);
  std::ofstream(dir + "/train.dat") << train;
  std::ofstream(dir + "/test.dat") << test;
  const auto train_examples = ReadExamples(train), test_examples = ReadExamples(test);
  for (const std::string& arguments : kArguments) {
    SCOPED_TRACE(arguments);
    auto options = ParseVwArguments(arguments);
    ASSERT_TRUE(options.ok());
    options->regressor.simd_inv_sqrt = true;  // as the prebuilt VW was built
    auto space = *features::FeatureSpace::Create(options->space);
    const bool costs = options->reduction == Reduction::kCbAdf;
    const std::string rank = costs ? " --rank_all" : "";

    // VW trains and writes its model; the same training here writes ours.
    RunVw(vw, absl::StrCat(arguments, " -d ", dir, "/train.dat -f ", dir, "/vw.bin"), dir);
    CbLearner learner(*options, 1);
    Train(learner, space, train_examples);
    const std::string ours = WriteModelFile(learner);
    std::ofstream(dir + "/ours.bin", std::ios::binary) << ours;
    const std::string theirs = Read(dir + "/vw.bin");
    // The header (options string and checksum) is VW's, byte for byte.
    const size_t header = theirs.find(std::string("\x04\x00\x00\x00", 4), 0x29);
    ASSERT_NE(header, std::string::npos);
    EXPECT_EQ(ours.substr(0, header + 8), theirs.substr(0, header + 8));

    // VW reads our file and predicts (-t: without learning) what we predict.
    RunVw(vw,
          absl::StrCat("-i ", dir, "/ours.bin -t", rank, " -d ", dir, "/test.dat -p ", dir,
                       "/from_ours.txt"),
          dir);
    EXPECT_TRUE(SameAsVw(Predictions(learner, space, test_examples),
                         ReadPredictions(Read(dir + "/from_ours.txt")), "VW reading ours"));

    // We read VW's file and predict what VW predicts with it, and the same again as both go on
    // learning.
    RunVw(vw,
          absl::StrCat("-i ", dir, "/vw.bin -t", rank, " -d ", dir, "/test.dat -p ", dir,
                       "/from_theirs.txt"),
          dir);
    auto read = ReadModelFile(theirs, "", 1);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(SameAsVw(Predictions(*read->learner, space, test_examples),
                         ReadPredictions(Read(dir + "/from_theirs.txt")), "ours reading VW's"));
    RunVw(vw,
          absl::StrCat("-i ", dir, "/vw.bin", rank, " -d ", dir, "/test.dat -p ", dir,
                       "/continued.txt"),
          dir);
    auto continued_options = read->learner->options();
    continued_options.regressor.simd_inv_sqrt = true;
    CbLearner continued(continued_options, 1);
    ASSERT_TRUE(continued
                    .Load(read->learner->regressor().weights(),
                          read->learner->regressor().scalars(), read->learner->counters())
                    .ok());
    std::vector<std::vector<float>> as_we_go;
    for (const Example& e : test_examples) {
      const auto xs = Featurize(space, e);
      CbLearner::Prediction p;
      continued.Predict(xs, &p);
      as_we_go.push_back(costs ? p.costs : p.pmf);
      if (e.labeled >= 0)
        continued.LearnOffered(xs, e.labeled, e.cost, e.probability);
    }
    EXPECT_TRUE(SameAsVw(as_we_go, ReadPredictions(Read(dir + "/continued.txt")),
                         "learning on from VW's model"));
  }
}

// The strongest form of "the same learner": after the same stream, every float VW keeps in its
// model (each weight, its adaptive sum and normalizer, the normalizer's sums, the label range)
// equals ours bit for bit.
TEST(VwModelFile, LearnedStateEqualsVwsBitForBit) {
  const std::string vw = VwBinary();
  if (!VwRuns(vw)) GTEST_SKIP() << "VW 9.11.2 not found at " << vw << " (set $VW): skipped";
  const std::string dir = ::testing::TempDir() + "/vw_bit_for_bit";
  std::filesystem::create_directories(dir);
  const std::string stream = GenerateStream(7, 400);
  std::ofstream(dir + "/stream.dat") << stream;
  const auto examples = ReadExamples(stream);
  const std::vector<std::string> cases = {
      "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q :: -b 18",
      "--cb_explore_adf --squarecb -q UA",
      "--cb_explore_adf --cubic UCA -b 20",
      "--cb_explore_adf --epsilon 0.3 -q :: --noconstant --hash_seed 7 --ignore C",
      "--cb_adf -q UA",
      "--cb_adf --sgd -l 0.05",
      "--cb_adf --adaptive -l 0.3 --interactions UCA",
      "--cb_adf --normalized -l 0.2",
      "--cb_adf --power_t 0.25 --initial_t 5 -q UA",
      "--cb_adf --l1 0.00001 -q UA",
      "--cb_adf --l2 0.0001 -q UA",
      "--cb_explore_adf --bag 5 --epsilon 0.02 -q UA",
      // VW sorts the interactions (by length, then letters) before it sums their terms.
      "--cb_adf -q UA -q CA --interactions UAC -q AA",
      "--cb_explore_adf --bag 3 --random_seed 99 --first_only --power_t 0 -l 0.01",
      // The other cb_types; dr's scorer interleaved beside the learner. (With --l1 or --l2 the
      // predictions VW prints for a labeled example come after its scorer learned, which moved
      // the shared contraction: the learned state is what is compared for them.)
      "--cb_adf --cb_type ips -q UA",
      "--cb_explore_adf --cb_type dm --epsilon 0.1 -q ::",
      "--cb_adf --cb_type dr -q UA",
      "--cb_adf --cb_type dr --l2 0.001 -q UA",
      "--cb_adf --cb_type dr --l1 0.0001 --clip_p 0.2",
      "--cb_explore_adf --bag 3 --cb_type dr --random_seed 4 -q UA",
      "--cb_explore_adf --cover 3 -q UA",
      "--cb_explore_adf --cover 4 --cb_type dr --epsilon 0.1 --l2 0.0001",
      "--cb_explore_adf --cover 2 --cb_type ips --first_only -q ::",
  };
  for (const std::string& arguments : cases) {
    SCOPED_TRACE(arguments);
    auto options = ParseVwArguments(arguments);
    ASSERT_TRUE(options.ok());
    options->regressor.simd_inv_sqrt = true;  // as the prebuilt VW was built
    auto space = *features::FeatureSpace::Create(options->space);
    CbLearner learner(*options, 1);
    Train(learner, space, examples);
    RunVw(vw, absl::StrCat(arguments, " -d ", dir, "/stream.dat -f ", dir, "/vw.bin"), dir);
    auto theirs = ReadModelFile(Read(dir + "/vw.bin"), "", 1);
    ASSERT_TRUE(theirs.ok()) << theirs.status();
    const Regressor& a = theirs->learner->regressor();
    const Regressor& b = learner.regressor();
    // The floats a model file keeps per weight (the rate beside them is recomputed per learn).
    const int kept = 1 + options->regressor.adaptive + options->regressor.normalized;
    const size_t stride = size_t{1} << b.stride_shift();
    int differ = 0;
    for (size_t i = 0; i < b.weights().size(); i += stride)
      for (int j = 0; j < kept; ++j)
        if (a.weights()[i + j] != b.weights()[i + j] && ++differ <= 3)
          ADD_FAILURE() << "index " << i / stride << " float " << j << ": VW " << a.weights()[i + j]
                        << ", ours " << b.weights()[i + j];
    EXPECT_EQ(differ, 0);
    EXPECT_EQ(a.scalars().normalized_sum_norm_x, b.scalars().normalized_sum_norm_x);
    EXPECT_EQ(a.scalars().total_weight, b.scalars().total_weight);
    EXPECT_EQ(a.scalars().min_label, b.scalars().min_label);
    EXPECT_EQ(a.scalars().max_label, b.scalars().max_label);
    EXPECT_EQ(a.scalars().contraction, b.scalars().contraction);
    EXPECT_EQ(a.scalars().gravity, b.scalars().gravity);
    EXPECT_EQ(theirs->learner->counters().event_sum, learner.counters().event_sum);
    EXPECT_EQ(theirs->learner->counters().action_sum, learner.counters().action_sum);
    // --bag's bootstrap state, as VW saves it (its --random_seed).
    EXPECT_EQ(theirs->learner->counters().random_state, learner.counters().random_state);
    EXPECT_EQ(theirs->learner->counters().cover_rounds, learner.counters().cover_rounds);
  }
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit::vw
