// Instance: durable-state half (snapshots in and out, journal records out, replay in). The
// request-serving half is instance.cc; both share the class and its lock.
#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/arms.h"
#include "server/instance.h"

namespace bandit::server {

absl::StatusOr<std::shared_ptr<Instance>> Instance::FromSnapshot(
    const bandit::v1::InstanceSnapshot& snap, const Clock* clock, const InstanceLimits& limits) {
  bandit::v1::CreateInstanceRequest req;
  req.set_name(snap.name());
  *req.mutable_config() = snap.config();
  auto inst = Create(req, clock, limits, snap.uid() == 0 ? 1 : snap.uid());
  if (!inst.ok()) return inst.status();
  Instance& in = **inst;
  absl::MutexLock lock(&in.mu_);
  if (auto s = in.policy_->Restore(snap.policy()); !s.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot of instance '", snap.name(), "': ", s.message()));
  {
    // Policies' Restore does not re-validate arm ids (core ArmSet::Restore); a state with
    // duplicate or malformed ids would make a config the next Create refuses (found by fuzzing).
    absl::flat_hash_set<std::string> seen;
    for (const auto& id : in.policy_->ArmIds()) {
      if (auto s = CheckId("snapshot arm id", id); !s.ok()) return s;
      if (!seen.insert(id).second)
        return absl::InvalidArgumentError(absl::StrCat("snapshot of instance '", snap.name(),
                                                       "' repeats arm id '", id, "'"));
    }
  }
  // Pending decisions go back in expiry order. A live instance can hold them out of order (the
  // wall clock stepped back, or an imported instance came from a server whose clock was ahead),
  // and its own snapshot must still restore, so sort instead of refusing (found by fuzzing).
  std::vector<const bandit::v1::PendingDecisionRecord*> pending;
  pending.reserve(snap.pending_size());
  for (const auto& p : snap.pending()) pending.push_back(&p);
  std::stable_sort(pending.begin(), pending.end(), [](const auto* a, const auto* b) {
    return a->expires_at_ms() < b->expires_at_ms();
  });
  for (const auto* p : pending) in.pending_.Insert(FromRecord(*p));
  in.stats_ = snap.stats();
  in.next_seq_ = std::max<uint64_t>(1, snap.next_event_seq());
  in.last_journal_seq_ = snap.last_journal_seq();
  in.SyncConfigArms();
  return inst;
}

void Instance::AttachJournal(Journal* journal) {
  absl::MutexLock lock(&mu_);
  journal_ = journal;
}

int64_t Instance::changes_since_snapshot() const {
  absl::MutexLock lock(&mu_);
  return changes_since_snapshot_;
}

uint64_t Instance::last_journal_seq() const {
  absl::MutexLock lock(&mu_);
  return last_journal_seq_;
}

void Instance::MarkSnapshotted() {
  absl::MutexLock lock(&mu_);
  changes_since_snapshot_ = 0;
}

bandit::v1::InstanceSnapshot Instance::Snapshot() {
  bandit::v1::InstanceSnapshot snap;
  absl::MutexLock lock(&mu_);
  snap.set_format_version(1);
  snap.set_name(name_);
  *snap.mutable_config() = config_;
  policy_->Save(snap.mutable_policy());
  for (const PendingDecision* p : pending_.InOrder()) ToRecord(*p, snap.add_pending());
  *snap.mutable_stats() = stats_;
  snap.set_uid(uid_);
  snap.set_next_event_seq(next_seq_);
  snap.set_last_journal_seq(last_journal_seq_);
  changes_since_snapshot_ = 0;
  return snap;
}

absl::Status Instance::Journaled(bandit::v1::JournalRecord rec, int64_t now) {
  // Select and Update records borrow the caller's request instead of copying it (SelectLocked and
  // UpdateLocked, the only places that build such records; copying a 50 x 20 candidate request
  // cost about 5% of the server's CPU per round): hand it back before `rec` is destroyed.
  struct Unborrow {
    bandit::v1::JournalRecord& r;
    ~Unborrow() {
      if (r.has_select()) (void)r.unsafe_arena_release_select();
      if (r.has_update()) (void)r.unsafe_arena_release_update();
    }
  } unborrow{rec};
  ++changes_since_snapshot_;
  if (journal_ == nullptr || replaying_) return absl::OkStatus();
  rec.set_instance(name_);
  rec.set_uid(uid_);
  rec.set_now_ms(now);
  auto seq = journal_->Append(&rec);
  if (!seq.ok()) return seq.status();
  last_journal_seq_ = *seq;
  return absl::OkStatus();
}

absl::Status Instance::Apply(const bandit::v1::JournalRecord& rec) {
  absl::MutexLock lock(&mu_);
  replaying_ = true;
  absl::Status s;
  switch (rec.op_case()) {
    case bandit::v1::JournalRecord::kSelect: {
      bandit::v1::Decision out;
      SelectInputs in;
      s = ParseSelectInputs(rec.select(), &in);
      if (s.ok()) s = SelectLocked(rec.select(), in, rec.now_ms(), &out, nullptr, &rec.event_id());
      break;
    }
    case bandit::v1::JournalRecord::kDecided:
      s = ApplyDecidedLocked(rec.decided());
      break;
    case bandit::v1::JournalRecord::kUpdate: {
      bandit::v1::UpdateResponse out;
      s = UpdateLocked(rec.update(), rec.now_ms(), &out, nullptr);
      break;
    }
    case bandit::v1::JournalRecord::kExpire:
      ExpireDueLocked(rec.now_ms());
      break;
    case bandit::v1::JournalRecord::kReset:
      s = ResetLocked();
      break;
    case bandit::v1::JournalRecord::kAddArms:
      s = AddArmsLocked(rec.add_arms());
      break;
    case bandit::v1::JournalRecord::kSetMixtureReference:
      s = SetMixtureReferenceLocked(rec.set_mixture_reference());
      break;
    case bandit::v1::JournalRecord::kRemoveArms:
      s = RemoveArmsLocked(rec.remove_arms());
      break;
    default:
      s = absl::InternalError(absl::StrCat("journal record ", rec.seq(), " has op ",
                                           rec.op_case(), " that an instance cannot replay"));
  }
  replaying_ = false;
  if (s.ok()) last_journal_seq_ = rec.seq();
  return s;
}

absl::Status Instance::ApplyDecidedLocked(const bandit::v1::DecidedSelect& rec) {
  if (auto s = CheckWritable(); !s.ok()) return s;
  if (!policy_->SelectReadsOnly())
    return absl::DataLossError(absl::StrCat("journal has a decided-select record for instance '",
                                            name_, "', whose policy '", policy_->name(),
                                            "' must be replayed from its requests"));
  if (pending_.full())
    return absl::DataLossError(absl::StrCat("replay of instance '", name_,
                                            "' found the pending table full at a select"));
  PendingDecision p = FromRecord(rec.decision());
  const std::string expected = NextEventId();
  if (p.event_id != expected)
    return absl::DataLossError(absl::StrCat("replay of instance '", name_, "' expected event '",
                                            expected, "' where the journal has '", p.event_id,
                                            "'"));
  RecordDecisionLocked(std::move(p), rec.estimated_gap());
  ++changes_since_snapshot_;
  return absl::OkStatus();
}

}  // namespace bandit::server
