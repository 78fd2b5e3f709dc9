// The finite arm set of a kNone policy: stable string ids in slot order, optional features.
// Policies keep their per-arm statistics in the same slot order and erase the same slot when
// an arm is removed.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bandit/v1/policy.pb.h"
#include "core/id_index.h"
#include "core/state_io.h"

namespace bandit {

enum class ArmFeatures { kNone, kRequired };

class ArmSet {
 public:
  // Builds the arm set from PolicyConfig.arms (or num_arms). With kRequired every arm needs a
  // finite feature vector of one common dimension (`dim`, or inferred when dim < 0).
  static absl::StatusOr<ArmSet> FromConfig(const bandit::v1::PolicyConfig& config,
                                           ArmFeatures features, int64_t dim = -1,
                                           int min_arms = 1);

  int size() const { return static_cast<int>(ids_.size()); }
  int64_t dim() const { return dim_; }
  const std::vector<std::string>& ids() const { return ids_; }
  const std::string& id(int slot) const { return ids_[slot]; }
  std::optional<int> Find(absl::string_view id) const;
  // Column `slot` is that arm's features (empty matrix when features are not used).
  const Eigen::MatrixXd& features() const { return features_; }

  // Validation without change, then the change. Add returns the new slot (always the last).
  absl::Status CheckAdd(const bandit::v1::ArmSpec& arm) const;
  int Add(const bandit::v1::ArmSpec& arm);
  // Returns the slot the arm had; later slots shift down by one.
  absl::StatusOr<int> Remove(absl::string_view id);

  void Save(StateWriter& w) const;
  // INVALID_ARGUMENT, the set unchanged, for a state that repeats an arm id or whose feature
  // matrix does not match its ids.
  absl::Status Restore(const StateReader& r);
  int64_t Bytes() const;

 private:
  std::vector<std::string> ids_;
  IdIndex slot_of_;  // arm id -> slot
  ArmFeatures use_features_ = ArmFeatures::kNone;
  int64_t dim_ = 0;
  Eigen::MatrixXd features_;  // dim x size
};

// SelectContext::allowed_arms against a k-arm set: empty (every arm), or k flags with at least
// one set. INVALID_ARGUMENT otherwise.
absl::Status CheckAllowedArms(std::span<const char> allowed, int k);
inline bool IsAllowed(std::span<const char> allowed, int slot) {
  return allowed.empty() || allowed[static_cast<size_t>(slot)] != 0;
}
// How many of the k arms are allowed, and the n-th allowed slot (0 <= n < CountAllowed): with
// every arm allowed, k and n itself, so a policy drawing "the n-th allowed arm" consumes its
// random stream exactly as it did before masks existed.
int CountAllowed(std::span<const char> allowed, int k);
int NthAllowed(std::span<const char> allowed, int n);

// Names: 1..128 chars of [A-Za-z0-9_.:-], first char a letter or digit.
absl::Status CheckId(absl::string_view field, absl::string_view id);

// Erase entry `slot` of a per-arm vector (helper for policies' RemoveArm).
void EraseSlot(Eigen::VectorXd& v, int slot);
void EraseColumn(Eigen::MatrixXd& m, int col);

// Per-arm pull counts and running mean rewards, slot-aligned with an ArmSet (what
// epsilon-greedy and UCB1 learn).
struct ArmMeans {
  Eigen::VectorXd counts;  // pulls of each arm
  Eigen::VectorXd means;   // empirical mean reward of each arm

  explicit ArmMeans(int arms = 0)
      : counts(Eigen::VectorXd::Zero(arms)), means(Eigen::VectorXd::Zero(arms)) {}
  void Observe(int slot, double reward) {
    counts[slot] += 1.0;
    means[slot] += (reward - means[slot]) / counts[slot];  // incremental mean
  }
  void AddSlot();  // a new arm: 0 pulls, mean 0
  void EraseSlot(int slot);
  void Save(StateWriter& w) const;
  // Reads "counts" and "means" of length `arms`; on error *this is unchanged.
  absl::Status Restore(const StateReader& r, int arms);
  int64_t Bytes() const {
    return static_cast<int64_t>((counts.size() + means.size()) * sizeof(double));
  }
};

}  // namespace bandit
