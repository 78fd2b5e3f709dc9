#include "core/arms.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/validate.h"

namespace bandit {

absl::Status CheckId(absl::string_view field, absl::string_view id) {
  if (id.empty() || id.size() > 128)
    return absl::InvalidArgumentError(
        absl::StrCat(field, " '", id, "' has length ", id.size(), ", expected 1..128 characters"));
  for (size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!(alnum || (i > 0 && (c == '_' || c == '.' || c == ':' || c == '-'))))
      return absl::InvalidArgumentError(
          absl::StrCat(field, " '", id, "' has an invalid character at position ", i,
                       ", expected [A-Za-z0-9] first and [A-Za-z0-9_.:-] after"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ArmSet> ArmSet::FromConfig(const bandit::v1::PolicyConfig& config,
                                          ArmFeatures features, int64_t dim, int min_arms) {
  ArmSet set;
  set.use_features_ = features;
  std::vector<bandit::v1::ArmSpec> arms(config.arms().begin(), config.arms().end());
  if (arms.empty()) {
    if (config.num_arms() < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("num_arms is ", config.num_arms(), ", expected >= 0"));
    for (int i = 0; i < config.num_arms(); ++i) arms.emplace_back().set_id(std::to_string(i));
  }
  if (static_cast<int>(arms.size()) < min_arms)
    return absl::InvalidArgumentError(absl::StrCat("policy has ", arms.size(),
                                                   " arms, expected at least ", min_arms,
                                                   " (set arms or num_arms)"));
  if (features == ArmFeatures::kRequired) {
    set.dim_ = dim >= 0 ? dim : (arms.empty() ? 0 : arms[0].features_size());
    if (set.dim_ <= 0)
      return absl::InvalidArgumentError("arms[0].features is empty, expected a feature vector");
  }
  set.features_.resize(set.dim_, 0);
  for (size_t i = 0; i < arms.size(); ++i) {
    if (arms[i].id().empty()) arms[i].set_id(std::to_string(i));
    if (auto s = set.CheckAdd(arms[i]); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat("arms[", i, "]: ", s.message()));
    set.Add(arms[i]);
  }
  return set;
}

std::optional<int> ArmSet::Find(absl::string_view id) const {
  return slot_of_.Find(id);
}

absl::Status ArmSet::CheckAdd(const bandit::v1::ArmSpec& arm) const {
  if (auto s = CheckId("arm id", arm.id()); !s.ok()) return s;
  if (slot_of_.Find(arm.id()))
    return absl::InvalidArgumentError(
        absl::StrCat("arm id '", arm.id(), "' is a duplicate, expected unique arm ids"));
  if (use_features_ == ArmFeatures::kRequired) {
    Eigen::VectorXd f =
        Eigen::Map<const Eigen::VectorXd>(arm.features().data(), arm.features_size());
    if (auto s = CheckVector(absl::StrCat("features of arm '", arm.id(), "'"), f, dim_); !s.ok())
      return s;
  } else if (arm.features_size() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "arm '", arm.id(), "' has features, expected none: this policy does not use arm features"));
  }
  return absl::OkStatus();
}

int ArmSet::Add(const bandit::v1::ArmSpec& arm) {
  const int slot = size();
  ids_.push_back(arm.id());
  slot_of_.TryAppend(arm.id());  // CheckAdd refused a repeat
  if (use_features_ == ArmFeatures::kRequired) {
    features_.conservativeResize(dim_, slot + 1);
    features_.col(slot) =
        Eigen::Map<const Eigen::VectorXd>(arm.features().data(), arm.features_size());
  }
  return slot;
}

absl::StatusOr<int> ArmSet::Remove(absl::string_view id) {
  auto found = Find(id);
  if (!found) return absl::NotFoundError(absl::StrCat("arm id '", id, "' is not in the arm set"));
  const int slot = *found;
  ids_.erase(ids_.begin() + slot);
  slot_of_.Erase(slot);
  if (use_features_ == ArmFeatures::kRequired) EraseColumn(features_, slot);
  return slot;
}

void ArmSet::Save(StateWriter& w) const {
  w.PutArmIds(ids_);
  if (use_features_ == ArmFeatures::kRequired) w.Put("arm_features", features_);
}

absl::Status ArmSet::Restore(const StateReader& r) {
  std::vector<std::string> ids = r.ArmIds();
  // A state names each arm once (Add refuses a repeat); one that repeats an id would make Find
  // answer for one of its slots only, so it is refused like any other inconsistent state.
  IdIndex slot_of;
  for (const std::string& id : ids) {
    if (auto s = slot_of.Append(id, [](int i) { return absl::StrCat("arm_ids[", i, "]"); });
        !s.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("the state's ", s.message(), ", expected unique arm ids"));
  }
  Eigen::MatrixXd feats(dim_, 0);
  if (use_features_ == ArmFeatures::kRequired) {
    if (auto s = r.Get("arm_features", &feats, dim_, static_cast<int64_t>(ids.size())); !s.ok())
      return s;
  }
  ids_ = std::move(ids);
  features_ = std::move(feats);
  slot_of_ = std::move(slot_of);
  return absl::OkStatus();
}

int64_t ArmSet::Bytes() const {
  int64_t b = features_.size() * sizeof(double);
  for (const auto& id : ids_) b += id.size();
  return b;
}

void EraseSlot(Eigen::VectorXd& v, int slot) {
  const int n = static_cast<int>(v.size());
  for (int i = slot; i + 1 < n; ++i) v[i] = v[i + 1];
  v.conservativeResize(n - 1);
}

absl::Status CheckAllowedArms(std::span<const char> allowed, int k) {
  if (allowed.empty()) return absl::OkStatus();
  if (allowed.size() != static_cast<size_t>(k))
    return absl::InvalidArgumentError(absl::StrCat("the allowed-arms mask has ", allowed.size(),
                                                   " entries, expected one per arm (", k, ")"));
  if (CountAllowed(allowed, k) == 0)
    return absl::InvalidArgumentError("every arm is excluded, expected at least one allowed arm");
  return absl::OkStatus();
}

int CountAllowed(std::span<const char> allowed, int k) {
  if (allowed.empty()) return k;
  int n = 0;
  for (char a : allowed) n += a != 0;
  return n;
}

int NthAllowed(std::span<const char> allowed, int n) {
  if (allowed.empty()) return n;
  for (size_t i = 0; i < allowed.size(); ++i)
    if (allowed[i] != 0 && n-- == 0) return static_cast<int>(i);
  return -1;
}

void EraseColumn(Eigen::MatrixXd& m, int col) {
  const int n = static_cast<int>(m.cols());
  for (int j = col; j + 1 < n; ++j) m.col(j) = m.col(j + 1);
  m.conservativeResize(m.rows(), n - 1);
}

void ArmMeans::AddSlot() {
  const int n = static_cast<int>(counts.size());
  counts.conservativeResize(n + 1);
  means.conservativeResize(n + 1);
  counts[n] = 0;
  means[n] = 0;
}

void ArmMeans::EraseSlot(int slot) {
  bandit::EraseSlot(counts, slot);
  bandit::EraseSlot(means, slot);
}

void ArmMeans::Save(StateWriter& w) const {
  w.Put("counts", counts);
  w.Put("means", means);
}

absl::Status ArmMeans::Restore(const StateReader& r, int arms) {
  Eigen::VectorXd c, m;
  if (auto s = r.Get("counts", &c, arms); !s.ok()) return s;
  if (auto s = r.Get("means", &m, arms); !s.ok()) return s;
  counts = std::move(c);
  means = std::move(m);
  return absl::OkStatus();
}

}  // namespace bandit
