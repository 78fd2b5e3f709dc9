// The one interface every bandit algorithm implements. No gRPC here: the server translates
// requests into these plain types and absl::Status codes into gRPC codes (same numbers).
//
// Contract for every method that returns a Status: on error, the policy's state (including its
// random engine) is exactly as before the call. Validate first, then mutate.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
// Not service.pb.h: nearly every unit includes this header, and the service messages are the
// largest generated header (ScoreKind lives in policy.proto for that reason).
#include "bandit/v1/policy.pb.h"
#include "bandit/v1/state.pb.h"

namespace bandit {

using Vector = Eigen::VectorXd;
using Matrix = Eigen::MatrixXd;

// What kind of context Select needs.
enum class ContextKind {
  kNone,        // finite arm set held by the policy (K-armed, BKB, mixtures)
  kCandidates,  // a list of candidate arm feature vectors, may change every request
  kPoint,       // a single input x (online kernel selection)
};

// A sparse feature vector over [0, dimension): (index, value) terms in any order; an index
// may repeat and its values then add up (hashed features that collide, as in Vowpal Wabbit's
// dot product). Its dense form is sum_k value[k] e_{index[k]}.
struct SparseVector {
  std::vector<uint32_t> index;
  std::vector<double> value;
  size_t size() const { return index.size(); }
};

// Which form of per-arm scores a caller of Select accepts. A caller's option, not a policy's:
// every policy reads it, and only a policy whose probability vector costs far more than its
// decision (Thompson sampling's quadrature per arm) treats kScoresOrPosteriors apart from
// kScores. Converts from and to bool (false = kNone, true = kScores) because most policies
// and callers only ask "are scores wanted".
struct ScoreRequest {
  enum Form : uint8_t {
    kNone,     // the decision alone
    kScores,   // fill Decision::scores
    // Scores, or in their place the posteriors a probability vector is a function of
    // (Decision::argmax_posteriors(), for a later ArgmaxProbabilities) with the chosen
    // action's propensity. The decision log asks this way.
    kScoresOrPosteriors,
  };
  Form form = kNone;

  constexpr ScoreRequest() = default;
  constexpr ScoreRequest(Form f) : form(f) {}                        // NOLINT: implicit
  constexpr ScoreRequest(bool scores) : form(scores ? kScores : kNone) {}  // NOLINT: implicit
  constexpr operator bool() const { return form != kNone; }            // NOLINT: implicit
  constexpr bool posteriors_suffice() const { return form == kScoresOrPosteriors; }
};

// A policy's read-only share of one Select, computed ahead by Policy::PrepareSelect (what a
// policy whose Select costs far more than its draw can split off, so that concurrent Selects of
// one instance compute it in parallel under the instance's shared lock).
class PreparedSelect {
 public:
  virtual ~PreparedSelect() = default;
};

// Inputs of one Select call.
struct SelectContext {
  std::span<const Vector> candidates;  // kCandidates
  // kCandidates, for a policy whose TakesSparse() is true: the candidates as sparse vectors,
  // in place of `candidates` (which is then empty).
  std::span<const SparseVector> sparse_candidates;
  const Vector* point = nullptr;       // kPoint
  // kNone: the arms this decision may choose, one flag per arm slot (nonzero = allowed); empty
  // means every arm. A policy chooses among the allowed arms as if the others did not exist, so
  // its propensity is conditional on the mask (a multi-slot decision's later slots, a request's
  // excluded arms). Every kNone policy honours it; the conformance suite checks that.
  std::span<const char> allowed_arms;
  // Which form of per-arm scores the caller accepts (see ScoreRequest); false: none.
  ScoreRequest want_scores;
  // What this policy's PrepareSelect computed for the same inputs, or null. The policy uses it
  // only if it is still current (made by this policy on the model as it is now) and otherwise
  // computes afresh, so a decision is the same with or without it.
  const PreparedSelect* prepared = nullptr;
};

// Independent posteriors, one per action, whose probabilities of holding the largest draw are
// a decision's probability vector: Beta(first_j, second_j), or Normal with mean first_j and
// standard deviation second_j.
struct ArgmaxPosteriors {
  bool beta = true;
  Vector first, second;
};

// Online kernel selection's (core/oks) prediction f_t(x_t) of the chosen hypothesis at the
// request's input.
struct KernelPrediction {
  double value = 0.0;
};

// What one policy family reports beside the common fields of a Decision: at most one of them.
using DecisionExtension = std::variant<std::monostate, ArgmaxPosteriors, KernelPrediction>;

// Output of one Select call.
struct Decision {
  int arm = -1;             // index into candidates / arm slots / kernels / generators
  std::string arm_id;       // finite-arm policies: the stable id of `arm`
  double propensity = 1.0;  // probability the policy gave `arm`
  Vector scores;            // per-arm score or probability (when want_scores)
  bandit::v1::ScoreKind score_kind = bandit::v1::SCORE_KIND_UNSPECIFIED;
  // A family's own output (set it by assignment, read it with the accessors below).
  DecisionExtension extension;
  std::vector<std::pair<std::string, double>> diagnostics;  // e.g. {"ucb", 1.2}
  // Model's own estimated gap: best estimated mean minus the chosen arm's estimated mean, at
  // decision time (NaN if the policy has no estimates). Feeds the estimated-regret metric.
  double estimated_gap = std::numeric_limits<double>::quiet_NaN();
  // Whatever the policy needs back at Update time (e.g. OKS's sampling probabilities). The
  // server stores it with the pending decision and hands it back in Observation::memo.
  Vector memo;

  // In place of a probability vector, when the context accepted kScoresOrPosteriors; null
  // otherwise.
  const ArgmaxPosteriors* argmax_posteriors() const {
    return std::get_if<ArgmaxPosteriors>(&extension);
  }
  ArgmaxPosteriors* argmax_posteriors() { return std::get_if<ArgmaxPosteriors>(&extension); }
  // Kernel selection's prediction; none for other policies.
  std::optional<double> prediction() const {
    if (const auto* p = std::get_if<KernelPrediction>(&extension)) return p->value;
    return std::nullopt;
  }
};

// The mixtures' (core/mixture) observation of a generated sample: its embedding and, when
// the caller scored it, its fidelity in [0, 1]. Other policies ignore it.
struct GeneratedSample {
  Vector embedding;
  std::optional<double> fidelity;
};

// Inputs of one Update call: what was chosen, and what was observed.
struct Observation {
  int arm = -1;                    // kNone policies: slot index resolved from arm_id by the caller
  std::string arm_id;              // kNone policies: stable arm id (authoritative; slots may shift)
  Vector features;                 // kCandidates: the chosen arm's features; kPoint: the input x
  // kCandidates, for a policy whose TakesSparse() is true: the chosen arm's features as a
  // sparse vector, in place of `features` (which is then empty).
  std::optional<SparseVector> sparse_features;
  Vector memo;                     // Decision::memo of the joined Select; empty for direct updates
  bool direct = false;             // true for logged data (no prior Select)
  // Logged data: how many actions the logged decision was made among (0: unknown, taken as one).
  int offered = 0;
  // Logged data: the probability the logging policy chose the action with, and its position
  // among the `offered` actions, where known (0 and -1: unknown). Vowpal Wabbit's learner learns
  // a logged example at them, as VW does (offline evaluation).
  double logged_propensity = 0;
  int logged_position = -1;
  double reward = 0.0;             // reward, or the label y for kernel selection
  std::optional<GeneratedSample> sample;  // mixtures: what the chosen generator produced
};

class Policy {
 public:
  virtual ~Policy() = default;

  // Registered name, e.g. "ucb1". Stored in snapshots.
  virtual absl::string_view name() const = 0;
  virtual ContextKind context_kind() const = 0;

  virtual absl::StatusOr<Decision> Select(const SelectContext& ctx) = 0;
  // True when the policy also takes its candidates and the chosen features as sparse vectors
  // (SelectContext::sparse_candidates, Observation::sparse_features), so a caller with hashed
  // features over a large space need never build a dense vector of the policy's dimension.
  // Such a policy takes dense vectors too.
  virtual bool TakesSparse() const { return false; }
  // True when Select only reads the policy's state: no random draw, no counter, so Save()
  // before and after any Select is identical. The server then journals a Select's decision
  // rather than its (possibly large) request. Declaring it wrongly breaks recovery; each policy
  // that returns true has a test that checks the invariant.
  virtual bool SelectReadsOnly() const { return false; }
  // True when a Decision's memo carries every candidate offered (one number per candidate and
  // two per sparse term or dense coordinate), for an Update that learns them all; the server
  // counts them in a pending decision's memory before it is made.
  virtual bool MemoHoldsCandidates() const { return false; }
  virtual absl::Status Update(const Observation& obs) = 0;

  // Multi-slot featurization kept as policy state (Vowpal Wabbit's conditional contextual
  // bandits, --ccb_explore_adf): whether a decision's slots carry their index ("index<k>" and
  // its interactions). kPerDecision (every other policy): a decision with several slots or a
  // featured first slot does, as the request alone says. A policy that keeps the state decides
  // slots only (a single decision names one slot) and is kBeforeFirst until a decision carried
  // the index, kAlways after (VW's sticky has_seen_multi_slot_example), or kNever
  // (--ccb_no_slot_index; the slots' features are still added).
  enum class SlotIndex { kPerDecision, kBeforeFirst, kAlways, kNever };
  virtual SlotIndex slot_index() const { return SlotIndex::kPerDecision; }
  // Told when a decision had several slots or a featured first slot (VW's rule): kBeforeFirst
  // turns kAlways (kNever stays, keeping the fact as VW's model file does).
  virtual void SawMultiSlotDecision() {}

  // The read-only share of a Select (see PreparedSelect), or null when the policy does not split
  // its Select (the default) or the inputs are invalid (Select then reports the error). Reads
  // the state only: callers run it concurrently with other PrepareSelect calls, never with a
  // call that changes the policy.
  virtual bool PreparesSelect() const { return false; }
  virtual std::unique_ptr<PreparedSelect> PrepareSelect(const SelectContext& /*ctx*/) const {
    return nullptr;
  }

  // Finite arm set (kNone policies). Default: the policy has no arm set.
  virtual std::vector<std::string> ArmIds() const { return {}; }
  virtual absl::Status AddArm(const bandit::v1::ArmSpec& arm) {
    return absl::FailedPreconditionError(
        absl::StrCat("policy '", name(), "' has no finite arm set to add arms to"));
  }
  virtual absl::Status RemoveArm(absl::string_view arm_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("policy '", name(), "' has no finite arm set to remove arms from"));
  }

  // A configuration change that keeps what was learned (e.g. a mixture's reference
  // distribution). `fresh` is a policy just built from the new config by its factory
  // (ReconfigurePolicy in core/registry.h), so the config has been validated, once; this policy
  // takes fresh's configuration and keeps its learned state and random engine. `fresh` may be
  // left in any state. FAILED_PRECONDITION (nothing changed) for a change this policy cannot
  // take live. Default: no live changes.
  virtual absl::Status Reconfigure(Policy& fresh) {
    return absl::FailedPreconditionError(
        absl::StrCat("policy '", name(), "' cannot change its configuration live"));
  }
  // Complete state, RNG included. Restore(Save()) gives a policy that makes exactly the same
  // decisions. Restore is only called on a policy freshly created from the same config.
  virtual void Save(bandit::v1::PolicyState* out) const = 0;
  virtual absl::Status Restore(const bandit::v1::PolicyState& state) = 0;

  // Bytes of learned state (what grows, or does not, with the number of rounds).
  virtual int64_t StateBytes() const = 0;

  // Live policy-specific figures for GetInstance (e.g. mixture score); optional.
  virtual std::vector<std::pair<std::string, double>> Summary() const { return {}; }
  // A per-arm vector worth showing (e.g. mixture weights alpha); optional.
  virtual Vector Weights() const { return Vector(); }
  // A contextual policy whose learned vector is too large to copy per request (Vowpal Wabbit's
  // 2^18 weights): the weight of one coordinate, for explain. Others: none, Weights() serves.
  virtual std::optional<double> CoordinateWeight(uint32_t /*index*/) const {
    return std::nullopt;
  }
};

}  // namespace bandit
