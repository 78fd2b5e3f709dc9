#include "server/instance/instance_state.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/arms.h"
#include "core/common/sparse.h"
#include "core/registry.h"
#include "server/instance/instance_state_internal.h"
#include "server/instance/named_inputs.h"


namespace bandit::server {

InstanceState::Memory InstanceState::MemoryBytes(bool refresh) {
  Memory& m = memory_;
  if (refresh || policy_->context_kind() != ContextKind::kNone) m.policy = policy_->StateBytes();
  if (refresh || (!shadows_.empty() && policy_->context_kind() != ContextKind::kNone))
    m.shadows = shadows_.StateBytes();
  if (refresh)
    m.overhead = kInstanceOverheadBytes + static_cast<int64_t>(config_.SpaceUsedLong()) +
                 static_cast<int64_t>(name_.size()) +
                 ArmContainerBytes(config_.policy().arms_size()) *
                     (1 + static_cast<int64_t>(shadows_.size()));
  if (refresh)
    for (const auto& e : evaluations_) m.overhead += static_cast<int64_t>(e.SpaceUsedLong());
  m.pending = pending_.Bytes();
  m.log = log_.MemoryBytes();
  return m;
}

int64_t InstanceState::SaveTransientBytes() const {
  // The policy's and shadows' state as messages hold their doubles in about their size; the
  // config as held; a pending decision's record its fields in about the size the table counts
  // for it (which includes the entry's fixed part and the table's slots, above the record's tags
  // and lengths; a sparse index held in 4 bytes may take 5 as a varint: the caller charges what
  // was built once it is).
  return policy_->StateBytes() + shadows_.StateBytes() +
         static_cast<int64_t>(config_.SpaceUsedLong()) + pending_.Bytes();
}

absl::StatusOr<int64_t> InstanceState::DeclaredBytes(const std::string& name,
                                                     const InstanceConfig* requested,
                                                     const InstanceLimits& limits) {
  if (requested == nullptr)
    return absl::InvalidArgumentError(
        "config is missing, expected an InstanceConfig with a policy");
  InstanceConfig config = *requested;
  if (auto s = NormalizeConfig(name, limits, &config); !s.ok()) return s;
  // The dimension a feature space gives the policy is filled in by NormalizeConfig.
  auto policy = DeclaredStateBytes(config.policy());
  if (!policy.ok()) return policy.status();
  // The config's arms as they will be held (num_arms becomes one ArmSpec per arm).
  const int64_t arms = config.policy().arms_size() > 0 ? config.policy().arms_size()
                                                       : std::max(0, config.policy().num_arms());
  constexpr int64_t kArmSpecBytes = 64;  // an ArmSpec message with a short id, as held
  return *policy + kInstanceOverheadBytes + static_cast<int64_t>(config.SpaceUsedLong()) +
         static_cast<int64_t>(name.size()) + ArmContainerBytes(arms) +
         (config.policy().arms_size() > 0 ? 0 : arms * kArmSpecBytes);
}

int64_t InstanceState::ArmContainerBytes(int64_t arms) {
  constexpr int64_t kSlot = sizeof(std::pair<const std::string, int>) + 1;
  return arms * static_cast<int64_t>(sizeof(std::string)) + arms * kSlot * 16 / 7;
}

absl::StatusOr<int64_t> InstanceState::DeclaredBytes(const bandit::v1::InstanceSnapshot& snap,
                                                     const InstanceLimits& limits) {
  auto bytes = DeclaredBytes(snap.name(), &snap.config(), limits);
  if (!bytes.ok()) return bytes.status();
  int64_t total = *bytes;
  for (const auto& shadow : snap.shadows()) {
    auto b = DeclaredStateBytes(shadow.config().policy());
    if (!b.ok()) return b.status();
    // Its direct model as the snapshot holds it (doubles, encoded in about their size); a
    // diagonal one at the most it can grow to (a hash map over the coordinates seen).
    total += *b + (shadow.direct_model().has_diagonal()
                       ? ope::SparseDirectModel::MaxStateBytes(std::clamp<int64_t>(
                             shadow.direct_model().diagonal().dimension(), 0, int64_t{1} << 30))
                       : static_cast<int64_t>(shadow.direct_model().ByteSizeLong()));
  }
  // Pending decisions as the table will hold them: each record's doubles and ids in about its
  // encoded size, plus the table's per-decision cost.
  for (const auto& p : snap.pending())
    total += PendingTable::BytesPerDecision(static_cast<int64_t>(p.ByteSizeLong()));
  // The log holds its entries encoded, plus an index entry each and a partly used chunk.
  if (snap.decision_log_size() > 0) {
    int64_t log = static_cast<int64_t>(DecisionLog::kMaxChunkBytes);
    for (const auto& d : snap.decision_log())
      log += static_cast<int64_t>(d.ByteSizeLong()) + 64;
    total += log;
  }
  return total;
}

int64_t InstanceState::NewDecisionBytes(const SelectInputs& in) const {
  constexpr int64_t kDouble = sizeof(double);
  // A memo is a few doubles (OKS: one per kernel); ids are at most 128 characters.
  constexpr int64_t kMemoAndIds = 64 * kDouble + 3 * 129;
  int64_t longest = in.x.size(), all = in.x.size();
  for (const Vector& c : *in.candidates) {
    longest = std::max<int64_t>(longest, c.size());
    all += c.size();
  }
  // A sparse vector's term is an index and a value: 12 bytes, counted in doubles.
  auto sparse_doubles = [](const SparseVector& v) {
    return (static_cast<int64_t>(v.size()) * 12 + 7) / 8;
  };
  for (const SparseVector& c : *in.sparse) {
    longest = std::max<int64_t>(longest, sparse_doubles(c));
    all += sparse_doubles(c);
  }
  for (const auto& slot : in.slots) {
    for (const Vector& c : slot.candidates) longest = std::max<int64_t>(longest, c.size());
    for (const SparseVector& c : slot.sparse_candidates)
      longest = std::max<int64_t>(longest, sparse_doubles(c));
  }
  // A memo that carries the candidates (VW's ips, dm, dr): each slot's at most all of them.
  int64_t memo = 0;
  if (policy_->MemoHoldsCandidates()) {
    for (const Vector& c : *in.candidates) memo += 1 + 2 * c.size();
    for (const SparseVector& c : *in.sparse) memo += 1 + 2 * static_cast<int64_t>(c.size());
    for (const auto& slot : in.slots) {
      int64_t own = 0;
      for (const Vector& c : slot.candidates) own += 1 + 2 * c.size();
      for (const SparseVector& c : slot.sparse_candidates)
        own += 1 + 2 * static_cast<int64_t>(c.size());
      memo = std::max(memo, own);
    }
  }
  const int64_t slots = std::max<int64_t>(1, static_cast<int64_t>(in.slots.size()));
  const int64_t per_choice = longest * kDouble + kMemoAndIds + memo * kDouble +
                             static_cast<int64_t>(shadows_.size() * sizeof(ShadowScore));
  int64_t heap = per_choice * slots;
  if (!in.slots.empty()) heap += slots * static_cast<int64_t>(sizeof(PendingDecision));
  int64_t bytes = PendingTable::BytesPerDecision(heap);
  if (log_.enabled()) {
    // The entry holds every candidate (and, with slots, each slot's), the distribution and ids.
    const int64_t entry = (all + (slots + 1) * longest) * kDouble + kMemoAndIds + 1024;
    // At its retention bound the log drops as much as it takes in, into the chunks it has.
    if (log_.bytes() + entry <= config_.decision_log().max_bytes()) bytes += entry;
  }
  return bytes;
}

int64_t InstanceState::ChangeBytes(const bandit::v1::JournalRecord& rec) const {
  using R = bandit::v1::JournalRecord;
  auto declared = [](const bandit::v1::PolicyConfig& c) -> int64_t {
    auto b = DeclaredStateBytes(c);
    return b.ok() ? *b : 0;  // a config the change refuses anyway
  };
  switch (rec.op_case()) {
    case R::kAddArms: {
      bandit::v1::PolicyConfig next = config_.policy();
      for (const auto& a : rec.add_arms().arms()) *next.add_arms() = a;
      const int64_t served = declared(next) - declared(config_.policy());
      // The config holds the arms too; each arm-set shadow takes them as the served policy does.
      return (std::max<int64_t>(0, served) + ArmContainerBytes(rec.add_arms().arms_size())) *
                 static_cast<int64_t>(1 + shadows_.size()) +
             2 * static_cast<int64_t>(rec.add_arms().SpaceUsedLong());
    }
    case R::kAddShadow: {
      bandit::v1::PolicyConfig shadow = rec.add_shadow().config().policy();
      // An arm-set shadow that names no arms takes the instance's.
      if (shadow.arms_size() == 0 && shadow.num_arms() == 0)
        *shadow.mutable_arms() = config_.policy().arms();
      // Beyond the dense bound its direct model is a diagonal ridge, which grows with the
      // coordinates seen: counted at its largest.
      const int64_t sparse = ShadowSet::SparseDimension(config_);
      return declared(shadow) + ArmContainerBytes(shadow.arms_size()) +
             static_cast<int64_t>(shadow.SpaceUsedLong()) +
             (sparse > 0 ? ope::SparseDirectModel::MaxStateBytes(sparse) : 0);
    }
    case R::kReplacePolicy:  // the new policy is built beside the old one
      return declared(rec.replace_policy().policy()) +
             static_cast<int64_t>(rec.replace_policy().state().ByteSizeLong());
    case R::kCreateEvaluation:
      return 2 * static_cast<int64_t>(rec.create_evaluation().ByteSizeLong());
    case R::kFinishEvaluation:
      return 2 * static_cast<int64_t>(rec.finish_evaluation().ByteSizeLong());
    case R::kConfigure:  // a new epsilon: a fresh policy is built to take it from
      return rec.configure().has_epsilon() ? declared(config_.policy()) : 0;
    case R::kReset:
    case R::kSetMixtureReference:
      return declared(config_.policy()) +
             (rec.has_set_mixture_reference()
                  ? static_cast<int64_t>(rec.set_mixture_reference().ByteSizeLong())
                  : 0);
    default:
      return 0;
  }
}

}  // namespace bandit::server
