// Vowpal Wabbit's conditional contextual bandits (--ccb_explore_adf) against VW itself: VW's
// own recorded predictions (core.vwtest.json #197, its labeled examples) and, where the prebuilt
// VW 9.11.2 is present, generated multi-slot streams run through both, every slot's pmf
// compared and, after the stream, every float of the model bit for bit. The learner is driven
// as VW's ccb reduction drives cb_adf: slot after slot, each over the actions earlier slots left,
// in the slot's shared context (FeatureSpace::SlotContexts), learned before the next slot.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/features/feature_space.h"
#include "core/vw/cb_learner.h"
#include "core/vw/model_file.h"
#include "core/vw/options.h"
#include "tests/core/vw/vw_test_util.h"

namespace bandit::vw {
namespace BANDIT_UNITY_ID {
using namespace bandit::vw::testing;  // NOLINT: the shared test helpers

// One CCB example of VW's text format: `ccb shared`, `ccb action` and `ccb slot` lines; a slot's
// label `action:cost:probability` names the logged action by its index among all actions.
struct CcbSlot {
  std::string line;
  int logged = -1;
  float cost = 0, probability = 1;
};
struct CcbExample {
  std::string shared;
  std::vector<std::string> actions;
  std::vector<CcbSlot> slots;
};

std::vector<CcbExample> ReadCcb(const std::string& text) {
  std::vector<CcbExample> out;
  CcbExample current;
  std::stringstream ss(text);
  std::string line;
  auto flush = [&] {
    if (!current.actions.empty() || !current.slots.empty()) out.push_back(current);
    current = CcbExample();
  };
  while (std::getline(ss, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      flush();
      continue;
    }
    if (line.rfind("ccb shared", 0) == 0) {
      current.shared = line;
    } else if (line.rfind("ccb action", 0) == 0) {
      current.actions.push_back(line);
    } else if (line.rfind("ccb slot", 0) == 0) {
      CcbSlot slot;
      slot.line = line;
      const std::string head = line.substr(8, line.find('|') == std::string::npos
                                                  ? std::string::npos
                                                  : line.find('|') - 8);
      std::vector<std::string> parts = absl::StrSplit(head, ' ', absl::SkipEmpty());
      if (!parts.empty()) {
        std::vector<std::string> label = absl::StrSplit(parts[0], ':');
        if (label.size() == 3) {
          EXPECT_TRUE(absl::SimpleAtoi(label[0], &slot.logged));
          // VW reads the numbers with its own parse_float.
          slot.cost = features::ParseVwFloat(label[1]).value_or(NAN);
          slot.probability = features::ParseVwFloat(label[2]).value_or(NAN);
        }
      }
      current.slots.push_back(slot);
    }
  }
  flush();
  return out;
}

// Each slot's printed pmf (by action index) of VW's -p output: one line per slot, an empty line
// after each example.
std::vector<std::vector<std::map<int, double>>> ReadCcbPredictions(const std::string& text) {
  std::vector<std::vector<std::map<int, double>>> out(1);
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    if (line.find(':') == std::string::npos) {
      if (!out.back().empty()) out.emplace_back();
      continue;
    }
    std::map<int, double> p;
    for (absl::string_view pair : absl::StrSplit(line, ',')) {
      std::vector<std::string> av = absl::StrSplit(pair, ':');
      int a = 0;
      double v = 0;
      EXPECT_TRUE(av.size() == 2 && absl::SimpleAtoi(av[0], &a) && absl::SimpleAtod(av[1], &v));
      p[a] = v;
    }
    out.back().push_back(p);
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

struct CcbReplay {
  int slots_compared = 0;
  int mismatches = 0;
  std::string first_mismatch;
};

// Runs the examples through `learner` as VW's ccb reduction does (every slot labeled with an
// action still offered) and compares each slot's pmf with VW's to its printed digits
// (`tolerance` 0: 1e-6 absolute or 1e-4 relative; otherwise VW's runner's 1e-4).
CcbReplay ReplayCcb(CbLearner& learner, const std::vector<CcbExample>& examples,
                    const std::vector<std::vector<std::map<int, double>>>* vw, bool runner) {
  CcbReplay result;
  const VwOptions& o = learner.options();
  auto space = *features::FeatureSpace::Create(o.space);
  auto slot_space = *space.ForSlots();
  features::InputLimits limits;
  for (size_t e = 0; e < examples.size(); ++e) {
    const CcbExample& ex = examples[e];
    features::ParsedFeatures shared;
    EXPECT_TRUE(space.ParseText(ex.shared, "shared", limits, false, &shared).ok());
    std::vector<features::ParsedFeatures> actions(ex.actions.size()), slots(ex.slots.size());
    for (size_t i = 0; i < ex.actions.size(); ++i)
      EXPECT_TRUE(space.ParseText(ex.actions[i], "action", limits, false, &actions[i]).ok());
    for (size_t k = 0; k < ex.slots.size(); ++k)
      EXPECT_TRUE(space.ParseText(ex.slots[k].line, "slot", limits, false, &slots[k]).ok());
    // conditional_contextual_bandit.cc: the index is added once any example had several slots
    // or a featured first slot, and from then on to every example.
    const bool multi_slot = ex.slots.size() > 1 || slots[0].size() > 0;
    if (multi_slot) learner.SawMultiSlotDecision();
    const bool indexed = learner.slot_index() == Policy::SlotIndex::kAlways;
    const features::FeatureSpace& used = indexed ? slot_space : space;
    std::vector<features::ParsedFeatures> contexts;
    used.SlotContexts(shared, slots, indexed, false, &contexts);
    std::vector<char> taken(ex.actions.size(), 0);
    for (size_t k = 0; k < ex.slots.size(); ++k) {
      std::vector<int> offered;
      std::vector<SparseVector> xs;
      for (size_t i = 0; i < ex.actions.size(); ++i) {
        if (taken[i]) continue;
        offered.push_back(static_cast<int>(i));
        SparseVector x;
        used.Featurize(actions[i], &contexts[k], &x.index, &x.value);
        xs.push_back(std::move(x));
      }
      CbLearner::Prediction p;
      learner.Predict(xs, &p);
      if (vw != nullptr && e < vw->size() && k < (*vw)[e].size()) {
        ++result.slots_compared;
        for (const auto& [a, v] : (*vw)[e][k]) {
          const auto at = std::find(offered.begin(), offered.end(), a);
          const double ours = at == offered.end() ? -1 : p.pmf[at - offered.begin()];
          const bool close = runner ? std::fabs(ours - v) < 1e-4
                                    : std::fabs(ours - v) <= 1e-6 || std::fabs(ours - v) <= 1e-4 * v;
          if (!close && ++result.mismatches == 1)
            result.first_mismatch =
                absl::StrCat("example ", e, " slot ", k, " action ", a, ": ours ", ours, ", VW ", v);
        }
      }
      const CcbSlot& s = ex.slots[k];
      const auto at = std::find(offered.begin(), offered.end(), s.logged);
      if (at == offered.end()) continue;  // unlabeled, or its action is taken: not learned
      const int position = static_cast<int>(at - offered.begin());
      EXPECT_TRUE(learner.Learn(xs[position], position, static_cast<int>(offered.size()), s.cost,
                                s.probability));
      taken[s.logged] = 1;
    }
  }
  return result;
}

// A stream of CCB examples: 3 to 6 actions, 1 to 3 slots (the first few examples a single slot
// without features, so the index starts absent), slot features in the default namespace or in
// the action's or a new namespace, each slot labeled with an action earlier slots left.
std::string GenerateCcbStream(uint32_t seed, int rounds) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  std::string out;
  for (int r = 0; r < rounds; ++r) {
    absl::StrAppend(&out, "ccb shared |User u", pick(5), " age:", unit(rng) * 2, " |Context c",
                    pick(3), "\n");
    const int actions = 3 + pick(4);
    for (int a = 0; a < actions; ++a) {
      absl::StrAppend(&out, "ccb action |Action a", pick(8));
      if (unit(rng) < 0.5f) absl::StrAppend(&out, " v:", unit(rng) * 3 - 1);
      absl::StrAppend(&out, "\n");
    }
    const int slots = r < 4 ? 1 : 1 + pick(3);
    std::vector<int> free(actions);
    for (int a = 0; a < actions; ++a) free[a] = a;
    for (int k = 0; k < slots; ++k) {
      const int j = pick(static_cast<int>(free.size()));
      const int logged = free[j];
      free.erase(free.begin() + j);
      const float cost = std::round((unit(rng) * 2 - 1) * 100) / 100;
      const float p = std::round((0.1f + 0.9f * unit(rng)) * 1000) / 1000;
      // (A label needs a '|' after it, features or none.)
      absl::StrAppend(&out, "ccb slot ", logged, ":", cost, ":", p);
      if (r < 4) absl::StrAppend(&out, " |");
      if (r >= 4) {
        const float u = unit(rng);
        if (u < 0.3f)
          absl::StrAppend(&out, " | s", pick(4));
        else if (u < 0.55f)
          absl::StrAppend(&out, " |Slot w", pick(3), " |Action x");
        else if (u < 0.75f)
          absl::StrAppend(&out, " |Page p", pick(2));
        else
          absl::StrAppend(&out, " |");
      }
      absl::StrAppend(&out, "\n");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

TEST(VwCcb, RecordedPredictionsReproduced) {
  // core.vwtest.json #197: `--ccb_explore_adf` on train-sets/ccb_test.dat. Its first 15
  // examples are labeled (their slots' choices are the logged actions); the rest are sampled
  // with VW's own generator, which the service does not reproduce (it draws with its own).
  const std::string root = SourceDir() + "/tests/data/vowpal_wabbit/test/";
  const auto examples = ReadCcb(Read(root + "train-sets/ccb_test.dat"));
  const auto recorded = ReadCcbPredictions(Read(root + "train-sets/ref/ccb_test.predict"));
  ASSERT_GE(examples.size(), 15u);
  ASSERT_GE(recorded.size(), 15u);
  const std::vector<CcbExample> labeled(examples.begin(), examples.begin() + 15);
  auto options = ParseVwArguments("--ccb_explore_adf");
  ASSERT_TRUE(options.ok()) << options.status();
  CbLearner learner(*options, 1);
  const CcbReplay r = ReplayCcb(learner, labeled, &recorded, /*runner=*/true);
  EXPECT_EQ(r.slots_compared, 45);
  EXPECT_EQ(r.mismatches, 0) << r.first_mismatch;
}

TEST(VwCcb, PredictionsAndModelEqualVws) {
  const std::string vw = VwBinary();
  if (!VwRuns(vw)) GTEST_SKIP() << "VW 9.11.2 not found at " << vw << " (set $VW): skipped";
  const std::string dir = ::testing::TempDir() + "/vw_ccb";
  std::filesystem::create_directories(dir);
  const std::string stream =
      GenerateCcbStream(5, std::getenv("VW_ROUNDS") ? std::atoi(std::getenv("VW_ROUNDS")) : 300);
  std::ofstream(dir + "/stream.dat") << stream;
  const auto examples = ReadCcb(stream);
  std::vector<std::string> cases = {
      "--ccb_explore_adf -q UA",
      "--ccb_explore_adf --epsilon 0.1 -q ::",
      "--ccb_explore_adf --squarecb -q UA -q SA",
      "--ccb_explore_adf --softmax --lambda 2 -q UA --power_t 0 -l 0.05",
      "--ccb_explore_adf --first 20 -q CA",
      "--ccb_explore_adf --ccb_no_slot_index -q UA",
  };
  // VW_CASES="args;args" compares other command lines instead.
  if (const char* only = std::getenv("VW_CASES")) cases = absl::StrSplit(only, ';');
  for (const std::string& arguments : cases) {
    SCOPED_TRACE(arguments);
    auto options = ParseVwArguments(arguments);
    ASSERT_TRUE(options.ok()) << options.status();
    options->regressor.simd_inv_sqrt = true;  // as the prebuilt VW was built
    const std::string command =
        absl::StrCat(vw, " ", arguments, " -d ", dir, "/stream.dat -p ", dir, "/p.txt -f ", dir,
                     "/vw.bin --quiet 2> ", dir, "/err.txt");
    ASSERT_EQ(std::system(command.c_str()), 0) << command << "\n" << Read(dir + "/err.txt");
    const auto printed = ReadCcbPredictions(Read(dir + "/p.txt"));
    CbLearner learner(*options, 1);
    const CcbReplay r = ReplayCcb(learner, examples, &printed, /*runner=*/false);
    EXPECT_GT(r.slots_compared, 500);
    EXPECT_EQ(r.mismatches, 0) << r.first_mismatch;

    // The model: VW's header byte for byte (ccb's options and flag), every float bit for bit.
    const std::string theirs_bytes = Read(dir + "/vw.bin");
    const std::string ours_bytes = WriteModelFile(learner);
    const size_t header = theirs_bytes.find(std::string("\x04\x00\x00\x00", 4), 0x29);
    ASSERT_NE(header, std::string::npos);
    EXPECT_EQ(ours_bytes.substr(0, header + 9), theirs_bytes.substr(0, header + 9));
    auto theirs = ReadModelFile(theirs_bytes, "", 1);
    ASSERT_TRUE(theirs.ok()) << theirs.status();
    EXPECT_EQ(theirs->learner->slot_index(), learner.slot_index());
    EXPECT_EQ(theirs->learner->counters().slot_index_seen, learner.counters().slot_index_seen);
    const auto& a = theirs->learner->regressor().weights();
    const auto& b = learner.regressor().weights();
    ASSERT_EQ(a.size(), b.size());
    const size_t stride = size_t{1} << learner.regressor().stride_shift();
    int differ = 0;
    for (size_t i = 0; i < b.size(); i += stride)
      for (int j = 0; j < 3; ++j)
        if (a[i + j] != b[i + j] && ++differ <= 3)
          ADD_FAILURE() << "index " << i / stride << " float " << j << ": VW " << a[i + j]
                        << ", ours " << b[i + j];
    EXPECT_EQ(differ, 0);
    EXPECT_EQ(theirs->learner->counters().event_sum, learner.counters().event_sum);
    EXPECT_EQ(theirs->learner->counters().action_sum, learner.counters().action_sum);
  }
}

TEST(VwCcb, ArgumentsAndState) {
  EXPECT_FALSE(ParseVwArguments("--ccb_explore_adf --bag 3").ok());
  EXPECT_FALSE(ParseVwArguments("--ccb_explore_adf --sgd").ok());
  EXPECT_FALSE(ParseVwArguments("--cb_explore_adf --ccb_no_slot_index").ok());
  auto o = ParseVwArguments("--ccb_explore_adf -q UA");
  ASSERT_TRUE(o.ok());
  CbLearner learner(*o, 1);
  EXPECT_EQ(learner.slot_index(), Policy::SlotIndex::kBeforeFirst);
  // Logged data without its slots is refused.
  Observation direct;
  direct.sparse_features = SparseVector{{1}, {1.0}};
  direct.reward = 1;
  EXPECT_EQ(learner.Update(direct).code(), absl::StatusCode::kInvalidArgument);
  // The sticky flag survives a snapshot and a model file.
  learner.SawMultiSlotDecision();
  EXPECT_EQ(learner.slot_index(), Policy::SlotIndex::kAlways);
  bandit::v1::PolicyState state;
  learner.Save(&state);
  CbLearner restored(*o, 1);
  ASSERT_TRUE(restored.Restore(state).ok());
  EXPECT_EQ(restored.slot_index(), Policy::SlotIndex::kAlways);
  auto read = ReadModelFile(WriteModelFile(learner), "", 1);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->learner->slot_index(), Policy::SlotIndex::kAlways);
  auto never = ParseVwArguments("--ccb_explore_adf --ccb_no_slot_index");
  ASSERT_TRUE(never.ok());
  EXPECT_EQ(CbLearner(*never, 1).slot_index(), Policy::SlotIndex::kNever);
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit::vw
