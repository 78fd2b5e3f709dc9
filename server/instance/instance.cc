// Instance: the lock around an InstanceState, the commit path (every change's record into
// Storage) and replay (records back through the same state methods).
#include "server/instance/instance.h"

#include <algorithm>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "server/instance/named_inputs.h"

namespace bandit::server {

absl::StatusOr<std::shared_ptr<Instance>> Instance::Create(
    const bandit::v1::CreateInstanceRequest& req, const Clock* clock, const InstanceLimits& limits,
    uint64_t uid) {
  if (uid == 0) uid = RandomUids()->NewUid();
  auto state = InstanceState::Create(req.name(), req.has_config() ? &req.config() : nullptr,
                                     limits, uid);
  if (!state.ok()) return state.status();
  return std::shared_ptr<Instance>(new Instance(*std::move(state), clock, limits));
}

absl::StatusOr<std::shared_ptr<Instance>> Instance::FromSnapshot(
    const bandit::v1::InstanceSnapshot& snap, const Clock* clock, const InstanceLimits& limits) {
  auto state = InstanceState::FromSnapshot(snap, limits);
  if (!state.ok()) return state.status();
  auto inst = std::shared_ptr<Instance>(new Instance(*std::move(state), clock, limits));
  absl::MutexLock lock(&inst->mu_);
  inst->last_journal_seq_ = snap.last_journal_seq();
  return inst;
}

absl::StatusOr<std::shared_ptr<Instance>> Instance::FromSnapshot(
    bandit::v1::InstanceSnapshot&& snap, const Clock* clock, const InstanceLimits& limits) {
  const uint64_t last_journal_seq = snap.last_journal_seq();
  auto state = InstanceState::FromSnapshot(std::move(snap), limits);
  if (!state.ok()) return state.status();
  auto inst = std::shared_ptr<Instance>(new Instance(*std::move(state), clock, limits));
  absl::MutexLock lock(&inst->mu_);
  inst->last_journal_seq_ = last_journal_seq;
  return inst;
}

Instance::RecordRole Instance::RoleOf(const bandit::v1::JournalRecord& rec) {
  switch (rec.op_case()) {
    case bandit::v1::JournalRecord::kCreate:
    case bandit::v1::JournalRecord::kImport:
      return RecordRole::kCreation;
    case bandit::v1::JournalRecord::kDelete:
      return RecordRole::kDeletion;
    default:
      return RecordRole::kChange;
  }
}

absl::StatusOr<std::shared_ptr<Instance>> Instance::FromCreation(
    const bandit::v1::JournalRecord& rec, const Clock* clock, const InstanceLimits& limits) {
  if (rec.has_create()) return Create(rec.create(), clock, limits, rec.uid());
  if (rec.has_import()) return FromSnapshot(rec.import(), clock, limits);
  return absl::InternalError(
      absl::StrCat("journal record ", rec.seq(), " (op ", rec.op_case(), ") creates no instance"));
}

absl::StatusOr<int64_t> Instance::DeclaredBytes(const bandit::v1::JournalRecord& rec,
                                                const InstanceLimits& limits) {
  if (rec.has_create())
    return InstanceState::DeclaredBytes(
        rec.create().name(), rec.create().has_config() ? &rec.create().config() : nullptr,
        limits);
  if (rec.has_import()) return InstanceState::DeclaredBytes(rec.import(), limits);
  return absl::InternalError(
      absl::StrCat("journal record ", rec.seq(), " (op ", rec.op_case(), ") creates no instance"));
}

bool Instance::HoldsCreation(const bandit::v1::JournalRecord& rec, uint64_t uid,
                             uint64_t last_journal_seq) {
  if (rec.replace()) return rec.seq() <= last_journal_seq;
  return uid == rec.uid();
}

Instance::Instance(std::unique_ptr<InstanceState> state, const Clock* clock,
                   const InstanceLimits& limits)
    : name_(state->name()),
      uid_(state->uid()),
      policy_case_(state->config().policy().policy_case()),
      clock_(clock),
      limits_(limits),
      feature_space_(state->feature_space()),
      sparse_inputs_(state->TakesSparseInputs()),
      slot_index_(state->SlotIndexState()),
      state_(std::move(state)) {}

Instance::~Instance() {
  if (budget_ == nullptr) return;
  budget_->Charge(-charged_.policy, MemoryKind::kPolicy);
  budget_->Charge(-charged_.pending, MemoryKind::kPending);
  budget_->Charge(-charged_.log, MemoryKind::kLog);
  budget_->Charge(-charged_.shadows, MemoryKind::kShadows);
  budget_->Charge(-charged_.overhead, MemoryKind::kOverhead);
}

absl::Status Instance::ChargeTo(std::shared_ptr<MemoryBudget> budget, MemoryOp op) {
  absl::MutexLock lock(&mu_);
  if (budget_ != nullptr || budget == nullptr) return absl::OkStatus();
  const InstanceState::Memory m = state_->MemoryBytes(/*refresh=*/true);
  // Reserved as one figure (so two instances cannot both take the last room), then told apart
  // by kind.
  if (auto s = budget->Reserve(m.total(), MemoryKind::kOverhead, op,
                               absl::StrCat("instance '", name_, "'"));
      !s.ok())
    return s;
  budget->Charge(-m.total(), MemoryKind::kOverhead);
  budget_ = std::move(budget);
  RechargeLocked(false);
  return absl::OkStatus();
}

InstanceState::Memory Instance::MemoryBytes() {
  absl::MutexLock lock(&mu_);
  return state_->MemoryBytes(/*refresh=*/true);
}

void Instance::RechargeLocked(bool refresh) {
  if (budget_ == nullptr) return;
  const InstanceState::Memory m = state_->MemoryBytes(refresh);
  budget_->Charge(m.policy - charged_.policy, MemoryKind::kPolicy);
  budget_->Charge(m.pending - charged_.pending, MemoryKind::kPending);
  budget_->Charge(m.log - charged_.log, MemoryKind::kLog);
  budget_->Charge(m.shadows - charged_.shadows, MemoryKind::kShadows);
  budget_->Charge(m.overhead - charged_.overhead, MemoryKind::kOverhead);
  charged_ = m;
}

void Instance::AttachStorage(Storage* storage) {
  absl::MutexLock lock(&mu_);
  storage_ = storage;
}

absl::Status Instance::AttachNew(Storage* storage, bandit::v1::JournalRecord creation,
                                 uint64_t* written_seq) {
  absl::MutexLock lock(&mu_);
  if (storage == nullptr) return absl::OkStatus();
  // Through the commit path like every other change, so the creation record comes before
  // anything the instance journals later.
  storage_ = storage;
  const int64_t changes = changes_since_snapshot_;
  if (auto s = Commit(&creation, clock_->NowMs(), written_seq); !s.ok()) {
    storage_ = nullptr;
    return s;
  }
  changes_since_snapshot_ = changes;  // the creation is not a change of the state
  return absl::OkStatus();
}

bandit::v1::InstanceConfig Instance::config() const {
  absl::MutexLock lock(&mu_);
  return state_->config();
}

int64_t Instance::changes_since_snapshot() const {
  absl::MutexLock lock(&mu_);
  return changes_since_snapshot_;
}

uint64_t Instance::last_journal_seq() const {
  absl::MutexLock lock(&mu_);
  return last_journal_seq_;
}

void Instance::MarkSnapshotted(int64_t changes_covered) {
  absl::MutexLock lock(&mu_);
  if (changes_covered == std::numeric_limits<int64_t>::max()) {
    // Recovery: the stored snapshot (plus replay) is the state as it is now.
    log_appended_taken_ = state_->decision_log().appended_bytes();
    log_bytes_taken_ = state_->decision_log().bytes();
  }
  log_appended_at_snapshot_ = log_appended_taken_;
  log_bytes_at_snapshot_ = log_bytes_taken_;
  changes_since_snapshot_ -= std::min(changes_covered, changes_since_snapshot_);
}

bool Instance::SnapshotDue(int64_t every_changes) const {
  absl::MutexLock lock(&mu_);
  if (changes_since_snapshot_ < every_changes) return false;
  const DecisionLog& log = state_->decision_log();
  return log.appended_bytes() - log_appended_at_snapshot_ >=
         kLogGrowthPerSnapshot * log_bytes_at_snapshot_;
}

void Instance::SaveLocked(bandit::v1::InstanceSnapshot* snap,
                          std::unique_ptr<DecisionLog::Frozen>* log, EncodedFields* pending,
                          int64_t* changes_covered) {
  state_->Save(snap, log, pending);
  snap->set_last_journal_seq(last_journal_seq_);
  log_appended_taken_ = state_->decision_log().appended_bytes();
  log_bytes_taken_ = state_->decision_log().bytes();
  // Not reset here: only a stored snapshot resets the count (MarkSnapshotted), so an export or a
  // failed write never lets the next round skip this instance and compact its records away.
  if (changes_covered != nullptr) *changes_covered = changes_since_snapshot_;
}

bandit::v1::InstanceSnapshot Instance::Snapshot(int64_t* changes_covered) {
  bandit::v1::InstanceSnapshot snap;
  std::unique_ptr<DecisionLog::Frozen> log;
  {
    absl::MutexLock lock(&mu_);
    SaveLocked(&snap, &log, /*pending=*/nullptr, changes_covered);
  }
  // Decoded outside the lock: Selects do not wait for a copy of the log.
  if (log != nullptr) log->AddTo(snap.mutable_decision_log());
  return snap;
}

int64_t Instance::SnapshotTransientBytes() const {
  absl::MutexLock lock(&mu_);
  return state_->SaveTransientBytes();
}

Instance::StorableSnapshot Instance::SnapshotForStorage(int64_t* changes_covered) {
  StorableSnapshot out;
  absl::MutexLock lock(&mu_);
  SaveLocked(&out.state, &out.log, out.pending.get(), changes_covered);
  out.pending->Then(out.log.get());
  return out;
}

void Instance::MarkReleased() {
  absl::MutexLock lock(&mu_);
  released_ = true;
}

absl::Status Instance::CheckWritable() const {
  if (deleted_) return absl::NotFoundError(absl::StrCat("instance '", name_, "' does not exist"));
  if (released_)
    return absl::UnavailableError(absl::StrCat(
        "instance '", name_, "' moved while this call waited; retry (it is served by its owner)"));
  if (replaced_)
    return absl::UnavailableError(absl::StrCat(
        "instance '", name_, "' was replaced by an import while this call waited; retry"));
  if (storage_ != nullptr && !replaying_) return storage_->WritableFor(name_);
  return absl::OkStatus();
}

namespace {
// Select and Update records borrow the caller's request instead of copying it
// (InstanceState::Select and ::Update, the only places that build such records; copying a
// 50 x 20 candidate request cost about 5% of the server's CPU per round): hand it back before
// the record is destroyed.
void ReturnBorrowed(bandit::v1::JournalRecord* rec) {
  if (rec->has_select()) (void)rec->unsafe_arena_release_select();
  // InstanceState::Select's per-thread copy of the log entry (a record on an arena owns its own).
  if (rec->has_logged_select() && rec->GetArena() == nullptr) (void)rec->release_logged_select();
  if (rec->has_update()) (void)rec->unsafe_arena_release_update();
}
}  // namespace

absl::Status Instance::Commit(bandit::v1::JournalRecord* rec, int64_t now, uint64_t* written_seq) {
  struct Unborrow {
    bandit::v1::JournalRecord* r;
    ~Unborrow() {
      if (r != nullptr) ReturnBorrowed(r);
    }
  } unborrow{rec};
  ++changes_since_snapshot_;
  if (storage_ == nullptr || replaying_) return absl::OkStatus();
  rec->set_instance(name_);
  rec->set_uid(uid_);
  rec->set_now_ms(now);
  if (held_ != nullptr) {
    if (rec->GetArena() == held_arena_) {
      // Kept with what it borrows until AppendHeld has encoded it and hands it back.
      held_->push_back(rec);
      unborrow.r = nullptr;
    } else {
      // A record not made by RecordFor (an expiry's): a copy on the arena (a borrowed request
      // is copied with it; the original is handed back on return).
      auto* copy = google::protobuf::Arena::CreateMessage<bandit::v1::JournalRecord>(held_arena_);
      *copy = *rec;
      held_->push_back(copy);
    }
    return absl::OkStatus();
  }
  auto seq = storage_->Append(rec);
  if (!seq.ok()) return seq.status();
  last_journal_seq_ = *seq;
  if (written_seq != nullptr) *written_seq = std::max(*written_seq, *seq);
  return absl::OkStatus();
}

bandit::v1::JournalRecord* Instance::RecordFor(bandit::v1::JournalRecord* local) {
  if (held_ == nullptr) return local;
  return google::protobuf::Arena::CreateMessage<bandit::v1::JournalRecord>(held_arena_);
}

absl::Status Instance::AppendHeld(uint64_t* written_seq) {
  std::vector<bandit::v1::JournalRecord*>* held = held_;
  held_ = nullptr;
  held_arena_ = nullptr;
  if (held == nullptr || held->empty()) return absl::OkStatus();
  auto seq = storage_->AppendAll(*held);
  for (bandit::v1::JournalRecord* rec : *held) ReturnBorrowed(rec);
  held->clear();
  if (!seq.ok()) return seq.status();
  last_journal_seq_ = *seq;
  if (written_seq != nullptr) *written_seq = std::max(*written_seq, *seq);
  return absl::OkStatus();
}

template <typename Item>
void Instance::RunHeld(size_t n, absl::Span<absl::Status> statuses, uint64_t* written_seq,
                       Item&& item) {
  // The records' arena starts in a block on this stack (10 Select records of a 50 x 20 request
  // take ~4 KB); it and anything it grew into are freed after the lock is released.
  alignas(16) char first_block[8 << 10];
  google::protobuf::ArenaOptions options;
  options.initial_block = first_block;
  options.initial_block_size = sizeof(first_block);
  google::protobuf::Arena arena(options);
  std::vector<bandit::v1::JournalRecord*> held;
  held.reserve(n + 1);
  absl::MutexLock lock(&mu_);
  const int64_t now = clock_->NowMs();
  held_ = &held;
  held_arena_ = &arena;
  for (size_t i = 0; i < n; ++i) statuses[i] = item(i, now);
  if (auto s = AppendHeld(written_seq); !s.ok())
    for (auto& status : statuses)
      if (status.ok()) status = s;
}

void Instance::SelectBatch(absl::Span<const bandit::v1::SelectRequest* const> reqs,
                           absl::Span<bandit::v1::Decision* const> outs,
                           absl::Span<absl::Status> statuses, uint64_t* written_seq) {
  // Unlike the single Select, the items are translated under the lock: the translation reuses
  // one per-thread scratch (SelectInputs), so translating every item first would need a
  // scratch per item; the batch holds the lock for all its items either way.
  SelectCall call;
  RunHeld(reqs.size(), statuses, written_seq, [&](size_t i, int64_t now) {
    mu_.AssertHeld();
    absl::Status s = ParseSelectLocked(*reqs[i], &call);
    if (s.ok()) s = SelectLocked(call, now, outs[i], written_seq, nullptr);
    return s;
  });
}

void Instance::UpdateBatch(absl::Span<const bandit::v1::UpdateRequest* const> reqs,
                           absl::Span<bandit::v1::UpdateResponse* const> outs,
                           absl::Span<absl::Status> statuses, uint64_t* written_seq,
                           bool all_or_none) {
  absl::Status refused;  // all_or_none: the first item refused as INVALID_ARGUMENT
  RunHeld(reqs.size(), statuses, written_seq, [&](size_t i, int64_t now) {
    mu_.AssertHeld();
    if (all_or_none && i == 0) refused = CheckAllLocked(reqs);
    if (!refused.ok()) return refused;
    return UpdateLocked(*reqs[i], now, outs[i], written_seq);
  });
}

absl::Status Instance::CheckAllLocked(absl::Span<const bandit::v1::UpdateRequest* const> reqs) {
  // Only what can never succeed: an item refused for its event's state (not pending, already
  // rewarded) is answered on its own when applied, as without all_or_none. Applying an item
  // cannot make a later one invalid, except a second reward for the same target, refused here.
  absl::flat_hash_map<std::pair<std::string_view, std::string_view>, size_t> seen;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const bandit::v1::UpdateRequest& req = *reqs[i];
    UpdateCall call;
    absl::Status s = ParseUpdate(req, limits_, &call);
    if (s.ok()) s = state_->CheckTarget(call);
    if (s.code() == absl::StatusCode::kInvalidArgument)
      return absl::InvalidArgumentError(absl::StrCat("requests[", i, "]: ", s.message()));
    if (req.target_case() != bandit::v1::UpdateRequest::kEventId) continue;
    if (auto [it, fresh] = seen.emplace(std::pair<std::string_view, std::string_view>(
                                            req.event_id(), req.slot_id()),
                                        i);
        !fresh)
      return absl::InvalidArgumentError(absl::StrCat(
          "requests[", i, "] rewards event '", req.event_id(), "'",
          req.slot_id().empty() ? "" : absl::StrCat(" slot '", req.slot_id(), "'"),
          " as requests[", it->second, "] does, expected one reward for each"));
  }
  return absl::OkStatus();
}

template <typename Mutation>
absl::Status Instance::ChangeLocked(int64_t now, uint64_t* written_seq, Mutation&& change) {
  if (auto s = CheckWritable(); !s.ok()) return s;
  bandit::v1::JournalRecord rec;
  if (auto s = change(&rec); !s.ok()) return s;
  return Commit(&rec, now, written_seq);
}

absl::Status Instance::MarkDeleted(uint64_t* written_seq) {
  absl::MutexLock lock(&mu_);
  return ChangeLocked(clock_->NowMs(), written_seq, [&](bandit::v1::JournalRecord* rec) {
    deleted_ = true;
    rec->set_delete_(true);
    return absl::OkStatus();
  });
}

absl::Status Instance::ReplaceWith(Instance& next, Storage* storage,
                                   bandit::v1::JournalRecord creation, uint64_t* written_seq) {
  absl::MutexLock lock(&mu_);
  if (auto s = CheckWritable(); !s.ok()) return s;
  if (auto s = next.AttachNew(storage, std::move(creation), written_seq); !s.ok()) return s;
  replaced_ = true;
  return absl::OkStatus();
}

absl::Status Instance::ParseSelectLocked(const bandit::v1::SelectRequest& req,
                                         SelectCall* call) {
  return ParseSelect(req, limits_, state_->feature_space().get(), state_->TakesSparseInputs(),
                     state_->SlotIndexState(), call);
}

absl::Status Instance::ParseSelectUnlocked(const bandit::v1::SelectRequest& req,
                                           const features::FeatureSpace* space,
                                           SelectCall* call) const {
  return ParseSelect(req, limits_, space,
                     sparse_inputs_.load(std::memory_order_relaxed),
                     slot_index_.load(std::memory_order_relaxed), call);
}

absl::Status Instance::Select(const bandit::v1::SelectRequest& req, bandit::v1::Decision* out,
                              uint64_t* written_seq) {
  // Translate the request before taking the lock: the critical section is what every
  // concurrent caller of this instance waits for.
  SelectCall call;
  const std::shared_ptr<const features::FeatureSpace> space = feature_space_.load();
  if (auto s = ParseSelectUnlocked(req, space.get(), &call); !s.ok()) return s;
  // A policy whose prediction is the cost of its Select (Vowpal Wabbit's learner) computes it
  // under the shared lock, so concurrent Selects of one instance run on every core; the
  // exclusive section below only draws and records, in journal order, and the policy discards a
  // prediction an Update made stale in between (the decision is the one it would make alone).
  if (prepares_select_.load(std::memory_order_relaxed)) {
    absl::ReaderMutexLock shared(&mu_);
    state_->PrepareSelect(call);
  }
  absl::MutexLock lock(&mu_);
  prepares_select_.store(state_->PreparesSelect(), std::memory_order_relaxed);
  // The policy's multi-slot featurization state moved since the request was featurized (a
  // Select before this one had several slots), or the policy was replaced by one of another
  // feature space: featurized again, as the journal's replay will.
  if (call.inputs.slot_index != state_->SlotIndexState() || space != state_->feature_space()) {
    call.inputs.prepared.reset();  // computed for the policy and vectors of before
    if (auto s = ParseSelectLocked(req, &call); !s.ok()) return s;
  }
  absl::Status s = SelectLocked(call, clock_->NowMs(), out, written_seq, nullptr);
  slot_index_.store(state_->SlotIndexState(), std::memory_order_relaxed);
  return s;
}

absl::Status Instance::SelectLocked(SelectCall& call, int64_t now, bandit::v1::Decision* out,
                                    uint64_t* written_seq, const std::string* replay_event_id) {
  if (auto s = CheckWritable(); !s.ok()) return s;
  out->Clear();  // a caller may reuse its Decision: nothing of the last one stays
  auto ctx = state_->SelectContextFor(call);
  if (!ctx.ok()) return ctx.status();
  const SelectInputs& in = call.inputs;
  ctx->prepared = in.prepared.get();
  if (!replay_event_id) ExpireDueLocked(now, written_seq);
  // Admitted before the decision is made: what its pending entry and log entry may take.
  if (budget_ != nullptr && budget_->limited() && !replaying_) {
    const int64_t bytes = state_->NewDecisionBytes(in);
    if (auto s = budget_->Admit(
            bytes, MemoryOp::kSelect,
            absl::StrCat("a new decision of instance '", name_, "' (its pending decision",
                         state_->decision_log().enabled() ? " and decision log entry" : "",
                         "; the instance holds ", charged_.total(), " bytes, ", charged_.pending,
                         " of them pending decisions)"));
        !s.ok())
      return s;
    const int64_t share = static_cast<int64_t>(static_cast<double>(budget_->limit()) *
                                               kInstanceDecisionShare);
    // A decision log at its retention bound does not grow; its pending decisions do.
    const int64_t held = charged_.pending;
    if (held + bytes > share) {
      budget_->CountRefusal(MemoryOp::kSelect);
      return absl::ResourceExhaustedError(absl::StrCat(
          "a new decision of instance '", name_, "' needs ", bytes,
          " bytes, but its pending decisions hold ", held,
          " bytes of the most one instance's may hold, ", share, " (half of the node's memory "
          "budget, --max_memory_bytes, of ", budget_->limit(),
          " bytes); send the rewards of its pending decisions (or let them expire: lower "
          "config.pending.reward_wait_ms) or lower its pending capacity"));
    }
  }
  bandit::v1::JournalRecord local;
  bandit::v1::JournalRecord* rec = RecordFor(&local);
  auto decided = state_->Select(*ctx, call, now, out, rec, replay_event_id);
  RechargeLocked(false);
  if (!decided.ok()) return decided;
  // Neither the decision alone nor its log entry: the request is the record, re-executed on
  // replay. Borrowed, not copied: only read while the record is encoded (Commit hands it back).
  if (rec->op_case() == bandit::v1::JournalRecord::OP_NOT_SET && call.request != nullptr)
    rec->unsafe_arena_set_allocated_select(const_cast<bandit::v1::SelectRequest*>(call.request));
  if (!in.action_of.empty()) {
    WriteNamedDecision(call, out);
    if (call.explain && state_->feature_space() && !replay_event_id)
      ExplainChoice(*state_->feature_space(), call, state_->PolicyCoordinateWeights(), out);
  }
  return Commit(rec, now, written_seq);
}

absl::Status Instance::Update(const bandit::v1::UpdateRequest& req, bandit::v1::UpdateResponse* out,
                              uint64_t* written_seq) {
  absl::MutexLock lock(&mu_);
  return UpdateLocked(req, clock_->NowMs(), out, written_seq);
}

absl::Status Instance::UpdateLocked(const bandit::v1::UpdateRequest& req, int64_t now,
                                    bandit::v1::UpdateResponse* out, uint64_t* written_seq) {
  if (auto s = CheckWritable(); !s.ok()) return s;
  // The one translation of an Update request, live and on replay.
  UpdateCall call;
  if (auto s = ParseUpdate(req, limits_, &call); !s.ok()) return s;
  if (!replaying_) ExpireDueLocked(now, written_seq);
  bandit::v1::JournalRecord local;
  bandit::v1::JournalRecord* rec = RecordFor(&local);
  auto learned = state_->Update(call, now, out);
  RechargeLocked(false);
  if (!learned.ok()) return learned;
  // Journaled as the request, borrowed as a Select's is (Commit hands it back).
  rec->unsafe_arena_set_allocated_update(const_cast<bandit::v1::UpdateRequest*>(&req));
  return Commit(rec, now, written_seq);
}

int64_t Instance::ExpireDue() {
  absl::MutexLock lock(&mu_);
  if (!CheckWritable().ok()) return 0;
  return ExpireDueLocked(clock_->NowMs(), nullptr);
}

int64_t Instance::ExpireDueLocked(int64_t now, uint64_t* written_seq) {
  bandit::v1::JournalRecord rec;
  const int64_t n = state_->ExpireDue(now, &rec);
  if (n > 0) {
    RechargeLocked(false);
    (void)Commit(&rec, now, written_seq);  // a failure here surfaces on the next write
  }
  return n;
}

absl::Status Instance::ReadDecisionLog(uint64_t after_seq, int64_t since_ms, int64_t until_ms,
                                       int64_t max_events, int64_t max_bytes,
                                       bandit::v1::DecisionLogChunk* out, bool* more) {
  absl::MutexLock lock(&mu_);
  if (deleted_) return absl::NotFoundError(absl::StrCat("instance '", name_, "' does not exist"));
  const DecisionLog& log = state_->decision_log();
  if (!log.enabled())
    return absl::FailedPreconditionError(absl::StrCat(
        "instance '", name_,
        "' keeps no decision log; expected an instance created with config.decision_log.enabled"));
  if (CheckWritable().ok()) ExpireDueLocked(clock_->NowMs(), nullptr);
  int64_t bytes = 0;
  *more = false;
  log.Visit(after_seq, since_ms, until_ms, [&](const DecisionLog::Entry& d) {
    const int64_t size = static_cast<int64_t>(DecisionLog::EncodedSize(d));
    if (out->decisions_size() >= max_events ||
        (out->decisions_size() > 0 && bytes + size > max_bytes)) {
      *more = true;
      return false;
    }
    bytes += size;
    DecisionLog::Decode(d, out->add_decisions());
    return true;
  });
  return absl::OkStatus();
}

absl::Status Instance::Change(bandit::v1::JournalRecord rec, const Admission& admission,
                              uint64_t* written_seq) {
  if (!IsChange(rec.op_case()))
    return absl::InternalError(absl::StrCat("Instance::Change was given a record with op ",
                                            rec.op_case(), ", which is not an instance change"));
  absl::MutexLock lock(&mu_);
  const int64_t now = clock_->NowMs();
  // An activation after the wait must find the decision expired, as a reward would.
  if (rec.has_activate() && CheckWritable().ok()) ExpireDueLocked(now, written_seq);
  return ChangeLocked(now, written_seq, [&](bandit::v1::JournalRecord* r) {
    // Admitted before anything is built, from the configs the change implies.
    if (budget_ != nullptr && budget_->limited()) {
      if (const int64_t bytes = state_->ChangeBytes(rec); bytes > 0) {
        const MemoryOp op = rec.has_add_arms()     ? MemoryOp::kAddArms
                            : rec.has_add_shadow() ? MemoryOp::kAddShadow
                                                   : MemoryOp::kConfigChange;
        if (auto s = budget_->Admit(bytes, op,
                                    absl::StrCat(MemoryOpName(op), " on instance '", name_,
                                                 "' (which holds ", charged_.total(), " bytes)"));
            !s.ok())
          return s;
      }
    }
    auto s = ApplyChange(*state_, &admission, now, &rec);
    RechargeLocked(true);
    if (!s.ok()) return s;
    policy_case_.store(state_->config().policy().policy_case());  // PromoteShadow changes it
    sparse_inputs_.store(state_->TakesSparseInputs());
    feature_space_.store(state_->feature_space());  // ReplacePolicy may change it
    *r = std::move(rec);
    return s;
  });
}

void Instance::DescribeShadows(bandit::v1::Instance* out) const {
  absl::MutexLock lock(&mu_);
  state_->DescribeShadows(out);
}

std::vector<bandit::v1::Evaluation> Instance::Evaluations(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  std::vector<bandit::v1::Evaluation> out;
  for (const auto& e : state_->evaluations())
    if (id.empty() || e.id() == id) out.push_back(e);
  return out;
}

bandit::v1::InstanceStats Instance::Stats(
    std::vector<std::pair<std::string, double>>* summary) const {
  absl::MutexLock lock(&mu_);
  return state_->Stats(summary);
}

void Instance::Describe(bandit::v1::Instance* out) {
  absl::MutexLock lock(&mu_);
  if (CheckWritable().ok()) ExpireDueLocked(clock_->NowMs(), nullptr);
  state_->Describe(out);
}

absl::Status Instance::Apply(const bandit::v1::JournalRecord& rec) {
  absl::MutexLock lock(&mu_);
  replaying_ = true;
  const int64_t now = rec.now_ms();
  absl::Status s;
  switch (rec.op_case()) {
    case bandit::v1::JournalRecord::kSelect: {
      bandit::v1::Decision out;
      SelectCall call;
      s = ParseSelectLocked(rec.select(), &call);
      if (s.ok()) s = SelectLocked(call, now, &out, nullptr, &rec.event_id());
      break;
    }
    case bandit::v1::JournalRecord::kLoggedSelect: {
      // The request rebuilt from its log entry; the entry the re-executed Select appends must be
      // the journaled one, byte for byte (the log is the point of this record).
      bandit::v1::Decision out;
      SelectCall call;
      std::string event_id;
      s = InstanceState::LoggedSelectInputs(rec.logged_select(), limits_, &call.inputs, &event_id);
      // A caller-chosen id (never of the server's form) was the request's; a server-made one is
      // made again by the replayed Select.
      uint64_t uid = 0, seq = 0;
      if (!ParseEventId(event_id, &uid, &seq)) call.event_id = event_id;
      if (s.ok()) s = SelectLocked(call, now, &out, nullptr, &event_id);
      if (s.ok() && state_->decision_log().last_entry() != rec.logged_select())
        s = absl::DataLossError(absl::StrCat("replay of instance '", name_, "' logged event '",
                                             event_id, "' differently than the journal has it"));
      break;
    }
    case bandit::v1::JournalRecord::kDecided:
      s = ChangeLocked(now, nullptr, [&](bandit::v1::JournalRecord*) {
        return state_->ReplayDecided(rec.decided());
      });
      break;
    case bandit::v1::JournalRecord::kUpdate: {
      bandit::v1::UpdateResponse out;
      s = UpdateLocked(rec.update(), now, &out, nullptr);
      break;
    }
    case bandit::v1::JournalRecord::kExpire:
      ExpireDueLocked(now, nullptr);
      break;
    default: {
      if (!IsChange(rec.op_case())) {
        s = absl::InternalError(absl::StrCat("journal record ", rec.seq(), " has op ",
                                             rec.op_case(), " that an instance cannot replay"));
        break;
      }
      // The same apply as the live path's (Instance::Change), without its admission limits.
      bandit::v1::JournalRecord change = rec;
      s = ChangeLocked(now, nullptr, [&](bandit::v1::JournalRecord*) {
        auto st = ApplyChange(*state_, /*admission=*/nullptr, now, &change);
        if (st.ok()) {
          policy_case_.store(state_->config().policy().policy_case());
          sparse_inputs_.store(state_->TakesSparseInputs());
          feature_space_.store(state_->feature_space());
        }
        return st;
      });
    }
  }
  replaying_ = false;
  RechargeLocked(/*refresh=*/IsChange(rec.op_case()));
  if (s.ok()) last_journal_seq_ = rec.seq();
  return s;
}

}  // namespace bandit::server
