// Vowpal Wabbit's command line, as the contextual-bandit learner (core/vw/cb_learner.h) serves
// it: the reduction, its explorer, the regressor and the feature space, parsed and checked once.
// Flags and defaults are VW 9.11.2's (vowpalwabbit/core/src/parse_args.cc, reductions/gd.cc,
// reductions/cb/cb_adf.cc and cb_explore_adf_*.cc). What this learner does not serve is refused
// with INVALID_ARGUMENT naming the flag; so are the combinations VW refuses and those it only
// warns about and then ignores (a setting that does nothing is a mistake worth an error).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "core/features/feature_space.h"

namespace bandit::vw {

enum class Reduction {
  kCbAdf,         // --cb_adf: a cost per action, the decision the lowest
  kCbExploreAdf,  // --cb_explore_adf: a probability per action
};

enum class Explorer {
  kNone,      // --cb_adf
  kEpsilon,   // --cb_explore_adf's default: epsilon-greedy
  kFirst,     // --first N: uniform for the first N learned rounds, then greedy
  kSoftmax,   // --softmax --lambda L
  kSquareCb,  // --squarecb (--gamma_scale, --gamma_exponent)
  kBag,       // --bag N: N bootstrapped regressors vote for their best actions
  kCover,     // --cover N: online cover, N policies trained to disagree (cb_explore_adf_cover.cc)
};

// How cb_adf turns a round's label into regressions (reductions/cb/cb_adf.cc learn_*,
// gen_cs_example.cc):
enum class CbType {
  kMtr,  // the chosen action alone, importance weighted (VW's default)
  kIps,  // every offered action: cost / p for the chosen, 0 for the others
  kDm,   // every offered action: the cost for the chosen, 0 for the others
  kDr,   // every offered action: a second regressor's estimate, corrected by
         // (cost - estimate) / p for the chosen; that regressor learns the chosen action's cost
};

// VW's name of a cb_type ("mtr", "ips", "dm", "dr").
absl::string_view CbTypeName(CbType t);

struct RegressorOptions {
  // VW's default update is adaptive, normalized and invariant (importance-aware); --sgd,
  // --adaptive, --normalized and --invariant name the parts wanted instead.
  bool adaptive = true;
  bool normalized = true;
  bool invariant = true;
  float learning_rate = 0.5f;  // -l; 10 when a non-default update is named without -l
  float power_t = 0.5f;
  // --initial_t; for plain SGD (neither adaptive nor normalized) VW starts t at 1.
  float initial_t = 0.0f;
  bool initial_t_given = false;
  float l1 = 0.0f;
  float l2 = 0.0f;
  // How 1/sqrt(G) is taken in the adaptive rate. false: 1/std::sqrt, correctly rounded, the same
  // on every machine (VW built with STD_INV_SQRT, as its own test suite's recorded predictions
  // were). true: the SSE estimate VW's default x86-64 build uses (gd.cc inv_sqrt), whose bits
  // differ between CPU makers, so a journal replayed on another host could drift; it is not
  // an option of the served learner, only of tests that compare with such a build.
  bool simd_inv_sqrt = false;
};

struct VwOptions {
  Reduction reduction = Reduction::kCbAdf;
  Explorer explorer = Explorer::kNone;
  float epsilon = 0.0f;       // greedy: 0.05 by default; a floor on probabilities for the others
  bool first_only = false;    // greedy: the 1 - epsilon goes to the first of tied actions only
  uint64_t first_rounds = 0;  // --first N
  float lambda = 1.0f;        // --softmax
  float gamma_scale = 10.0f;
  float gamma_exponent = 0.5f;
  CbType cb_type = CbType::kMtr;
  float clip_p = 0.0f;  // --clip_p: the smallest probability an importance weight divides by
  // --bag N: N regressors in one weight array, each trained on a Poisson(1) bootstrap of the
  // rounds (drawn from VW's merand48 seeded by --random_seed; --greedify trains the first on
  // every round once). The array keeps -b's size, so each regressor hashes into
  // b - ceil(log2 N) bits (VW interleaves them: index i of regressor m is i * 2^ceil(log2 N) + m).
  // --ccb_explore_adf: multi-slot decisions as VW's conditional contextual bandits make them
  // (cb_explore_adf once per slot over the actions earlier slots left; each slot's features and,
  // once any decision had several slots or a featured first slot, its index "index<k>" and the
  // interactions with it). --ccb_no_slot_index: the index never.
  bool ccb = false;
  bool ccb_no_slot_index = false;
  uint64_t bag_size = 1;
  // The regressors interleaved in the weight array: --bag's, each with --cb_type dr's scorer
  // beside it (VW's feature widths: bag size times 2 for dr).
  uint64_t models = 1;
  bool greedify = false;
  // --cover N: the policies; --psi, their disagreement penalty; --nounif: actions no policy
  // chose keep probability 0. Without --epsilon the floor is 1/K decaying as
  // min(1/K, 1/sqrt(rounds learned * K)) (epsilon_decay).
  uint64_t cover_size = 0;
  float psi = 1.0f;
  bool nounif = false;
  bool epsilon_decay = false;
  uint64_t random_seed = 0;
  // log2 of the weight array's slots: -b. The feature space's bits are this less
  // ceil(log2 models).
  int weight_bits = 18;
  RegressorOptions regressor;
  features::FeatureSpaceOptions space;
  // The arguments as given, whitespace normalized (what the instance reports).
  std::string arguments;
  // Each flag given, by VW's long name, with its value ("" for a switch), in the order given
  // (a model file keeps some of them).
  std::vector<std::pair<std::string, std::string>> supplied;
};

// Parses VW's arguments. INVALID_ARGUMENT, naming the flag and what was expected, for an
// unknown or unserved flag, a missing or malformed value, a flag given twice, and the
// combinations above.
absl::StatusOr<VwOptions> ParseVwArguments(absl::string_view arguments);

}  // namespace bandit::vw
