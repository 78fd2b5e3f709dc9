// Offline experimentation (Personalizer's "optimization discovery"): Vowpal Wabbit learning
// settings searched on an instance's decision log. The search is greedy by stage, each stage
// varying one family of flags of the best settings so far and keeping the others:
//   1. interactions: none, every namespace pair (-q ::), each context-by-action namespace pair
//      alone, all those pairs together;
//   2. the learning rate (-l 0.001 .. 0.5) with --power_t 0 or 0.5;
//   3. --cb_type (mtr, ips, dm, dr; SquareCB learns with mtr only);
//   4. exploration: epsilon-greedy (the online epsilon, else Personalizer's 0.2) or SquareCB
//      (with mtr, as VW requires).
// Every setting of a stage learns along the log as it is evaluated (progressive validation,
// core/ope/evaluator.h) in one pass over the log. The winner is chosen on two thirds of the
// decisions (by a hash of their event id) and reported on the held-out third, so that its
// estimate is not the maximum of many noisy ones. The search stops, a stage cut short, once
// the CPU budget is spent.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ope/evaluator.h"
#include "core/vw/options.h"

namespace bandit::server {

// Where the search starts when the online policy is not Vowpal Wabbit's learner: Personalizer's
// published default learning settings.
inline constexpr char kExperimentationBaseArguments[] =
    "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q ::";
// The most settings a stage runs at once (2 + 12 namespace pairs + all pairs).
inline constexpr int64_t kMaxSettingsPerStage = 15;

struct LearningSetting {
  std::string name;       // what the stage changed ("-q UA", "--cb_type dr", ...; "base")
  std::string arguments;  // the whole VW command line
};

// The namespace letters a log's named decisions use: the contexts' and the actions', each
// sorted and without repeats (the default namespace, ' ', left out: -q cannot name it).
struct LogNamespaces {
  std::string context;
  std::string actions;
};

// Whether a decision is in the held-out third (FNV-1a of its event id, modulo 3).
bool HeldOut(const std::string& event_id);

// `base`'s command line with every flag of `drop` (VW's long names) removed and `add` appended.
std::string RewriteArguments(const vw::VwOptions& base, const std::vector<std::string>& drop,
                             const std::string& add);

// Each stage's settings derived from `base` (the best so far), those VW refuses and those equal
// to `base` left out.
std::vector<LearningSetting> InteractionStage(const vw::VwOptions& base, const LogNamespaces& ns);
std::vector<LearningSetting> LearningRateStage(const vw::VwOptions& base);
std::vector<LearningSetting> CbTypeStage(const vw::VwOptions& base);
std::vector<LearningSetting> ExplorationStage(const vw::VwOptions& base);

// Runs settings in one pass over the log: each one's result, in order, or why it could not
// run on the log (an empty error string: it ran).
struct SettingOutcome {
  ope::CandidateResult result;
  std::string error;
};
using SettingsPass =
    std::function<absl::StatusOr<std::vector<SettingOutcome>>(const std::vector<LearningSetting>&)>;

struct SearchOutcome {
  LearningSetting best;
  ope::CandidateResult best_result;
  // Every setting run, with its estimate on the searched two thirds, in the order run.
  std::vector<std::pair<LearningSetting, ope::Estimators>> trials;
  double cpu_seconds = 0;
  bool budget_exhausted = false;
};

// The search from `base` (already run: its outcome and the CPU seconds its pass took per
// setting). `cpu_seconds` reads the searching thread's CPU clock. A pass's error (the log
// unreadable, the job cancelled) ends the search with that error.
absl::StatusOr<SearchOutcome> SearchSettings(const LearningSetting& base,
                                             const ope::CandidateResult& base_result,
                                             double seconds_per_setting, const LogNamespaces& ns,
                                             const SettingsPass& pass, double cpu_budget_seconds,
                                             const std::function<double()>& cpu_seconds);

}  // namespace bandit::server
