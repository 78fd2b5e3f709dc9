#include "server/service/persistence.h"

#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "server/env/log.h"
#include "server/instance/instance_state.h"
#include "server/instance/memory_budget.h"

namespace bandit::server {

Persistence::Persistence(std::unique_ptr<Storage> storage, const PersistenceOptions& options,
                         DecisionService* service)
    : options_(options), service_(service), storage_(std::move(storage)) {}

absl::StatusOr<std::unique_ptr<Persistence>> Persistence::Open(const PersistenceOptions& options,
                                                               DecisionService* service,
                                                               RecoveryReport* report) {
  FileStorageOptions fo;
  fo.fs = options.fs;
  fo.dir = options.data_dir;
  fo.durability = options.durability;
  fo.observer = options.observer;
  fo.clock = options.clock;
  return Open(std::make_unique<FileStorage>(std::move(fo)), options, service, report);
}

absl::StatusOr<std::unique_ptr<Persistence>> Persistence::Open(std::unique_ptr<Storage> storage,
                                                               const PersistenceOptions& options,
                                                               DecisionService* service,
                                                               RecoveryReport* report) {
  std::unique_ptr<Persistence> p(new Persistence(std::move(storage), options, service));
  RecoveryReport local;
  if (auto s = p->Recover(report ? report : &local); !s.ok()) return s;
  return p;
}

namespace {

// What recovery and takeover build is admitted against the node's memory budget before it is
// built: the footprint an instance's stored config declares (InstanceState::DeclaredBytes, from
// core/footprint.h) is reserved first, so an instance that would not fit is refused without
// its policy, pending decisions or log ever being allocated. The reservation is exchanged for
// the built instance's charge (Instance::ChargeTo) once its records are replayed, as
// CreateInstance admits on the declared footprint and then charges what was built.
class RecoveryAdmission {
 public:
  RecoveryAdmission(MemoryBudget* budget, MemoryOp op) : budget_(budget), op_(op) {}
  RecoveryAdmission(const RecoveryAdmission&) = delete;
  RecoveryAdmission& operator=(const RecoveryAdmission&) = delete;
  ~RecoveryAdmission() {
    for (const auto& [name, bytes] : held_) budget_->Charge(-bytes, MemoryKind::kPolicy);
  }

  // Whether the incarnation `uid` of `name`, declaring `declared` and holding the journal up to
  // `last_seq`, may be built. A footprint that cannot be computed is admitted: building it gives
  // the precise error.
  bool Admit(const std::string& name, uint64_t uid, uint64_t last_seq,
             const absl::StatusOr<int64_t>& declared) {
    Release(name);  // a new incarnation replaces the previous one's reservation
    over_.erase(name);
    if (!declared.ok()) return true;
    absl::Status s = budget_->Reserve(
        *declared, MemoryKind::kPolicy, op_,
        absl::StrCat("instance '", name, "' (the footprint its stored config declares)"));
    if (!s.ok()) {
      over_[name] = Over{uid, last_seq, *declared, std::move(s)};
      return false;
    }
    held_[name] = *declared;
    return true;
  }
  // The built copy is dropped (deleted, refused) or about to be charged as built.
  void Release(const std::string& name) {
    auto it = held_.find(name);
    if (it == held_.end()) return;
    budget_->Charge(-it->second, MemoryKind::kPolicy);
    held_.erase(it);
  }
  // The incarnation of `name` that creation record `rec` makes was left unbuilt for the budget
  // (its records are skipped until a deletion of that incarnation or a new one).
  bool over(const std::string& name, const bandit::v1::JournalRecord& rec) const {
    auto it = over_.find(name);
    return it != over_.end() &&
           Instance::HoldsCreation(rec, it->second.uid, it->second.last_seq);
  }
  // A deletion record: the unbuilt incarnation `uid` of `name` is gone.
  void Deleted(const std::string& name, uint64_t uid) {
    auto it = over_.find(name);
    if (it != over_.end() && it->second.uid == uid) over_.erase(it);
  }

  struct Over {
    uint64_t uid = 0;
    uint64_t last_seq = 0;
    int64_t declared = 0;
    absl::Status refusal;
  };
  const std::map<std::string, Over>& refused() const { return over_; }

 private:
  MemoryBudget* const budget_;
  const MemoryOp op_;
  std::map<std::string, int64_t> held_;
  std::map<std::string, Over> over_;
};

// Replays what a Storage hands back (snapshots, then records in sequence order) into
// instances: full recovery at start and one instance's load on a cluster takeover share it.
// Each instance is admitted by `admission` before it is built.
RecoverySink ReplaySink(const Clock* clock,
                        std::map<std::string, std::shared_ptr<Instance>>* live_out,
                        std::map<std::string, std::string>* refused_out, RecoveryReport* report,
                        RecoveryAdmission* admission) {
  static const InstanceLimits limits;  // recovery trusts what the server once accepted
  auto refuse = [live_out, refused_out, admission](const std::string& name,
                                                   const std::string& why) {
    if (!refused_out->count(name)) (*refused_out)[name] = why;
    live_out->erase(name);
    admission->Release(name);
  };
  RecoverySink sink;
  sink.snapshot = [live_out, refused_out, refuse, clock, report,
                   admission](bandit::v1::InstanceSnapshot&& snap) {
    auto& live = *live_out;
    auto& refused = *refused_out;
    const std::string name = snap.name();
    if (refused.count(name)) return;
    if (!admission->Admit(name, snap.uid(), snap.last_journal_seq(),
                          InstanceState::DeclaredBytes(snap, limits)))
      return;
    // Consumed as the instance is built: the snapshot's records are freed as they are taken in.
    auto inst = Instance::FromSnapshot(std::move(snap), clock, limits);
    if (!inst.ok()) {
      refuse(name, std::string(inst.status().message()));
      return;
    }
    (*inst)->MarkSnapshotted();
    live[name] = *inst;
    ++report->snapshots_loaded;
  };
  sink.record = [live_out, refused_out, refuse, clock, report,
                 admission](const bandit::v1::JournalRecord& rec) {
    auto& live = *live_out;
    auto& refused = *refused_out;
    const std::string& name = rec.instance();
    if (refused.count(name)) return;
    auto it = live.find(name);
    switch (Instance::RoleOf(rec)) {
      case Instance::RecordRole::kCreation: {
        if (it != live.end() &&
            Instance::HoldsCreation(rec, it->second->uid(), it->second->last_journal_seq()))
          return;  // in its snapshot
        if (admission->over(name, rec)) return;  // its snapshot was left unbuilt
        if (!admission->Admit(name, rec.uid(), rec.seq(), Instance::DeclaredBytes(rec, limits))) {
          live.erase(name);
          return;
        }
        // The same apply as the live path's (DecisionService::CreateInstance, ImportInstance);
        // a replacing import's instance takes the place of the one built so far.
        absl::StatusOr<std::shared_ptr<Instance>> inst = Instance::FromCreation(rec, clock, limits);
        if (!inst.ok()) {
          refuse(name, absl::StrCat("journal record ", rec.seq(), ": ", inst.status().message()));
          return;
        }
        live[name] = *inst;
        ++report->records_replayed;
        return;
      }
      case Instance::RecordRole::kDeletion:
        if (it != live.end() && it->second->uid() == rec.uid()) {
          live.erase(it);
          admission->Release(name);
        }
        admission->Deleted(name, rec.uid());
        ++report->records_replayed;
        return;
      case Instance::RecordRole::kChange: {
        if (it == live.end() || it->second->uid() != rec.uid()) return;  // deleted incarnation
        const auto snap_seq = it->second->last_journal_seq();
        if (rec.seq() <= snap_seq) return;  // already in the snapshot
        if (auto s = it->second->Apply(rec); !s.ok()) {
          refuse(name,
                 absl::StrCat("replay of journal record ", rec.seq(), " failed: ", s.message()));
          return;
        }
        ++report->records_replayed;
      }
    }
  };
  sink.corrupt = [live_out, refuse](const std::string& name, const std::string& why) {
    auto& live = *live_out;
    if (!name.empty()) {
      refuse(name, why);
      return;
    }
    // Damage that cannot be attributed (a damaged frame header): every instance the records
    // that follow might have touched is refused rather than served with a silent gap.
    std::vector<std::string> names;
    for (const auto& [n, inst] : live) names.push_back(n);
    for (const auto& n : names) refuse(n, why);
  };
  return sink;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Instance>> Persistence::LoadInstance(const std::string& name,
                                                                    uint64_t* max_seq,
                                                                    int64_t* needed_bytes) {
  std::map<std::string, std::shared_ptr<Instance>> live;
  std::map<std::string, std::string> refused;
  RecoveryReport report;
  RecoveryAdmission admission(service_->memory().get(), MemoryOp::kTakeover);
  auto read = storage_->RecoverInstance(
      name, ReplaySink(service_->clock(), &live, &refused, &report, &admission));
  if (!read.ok()) return read.status();
  if (max_seq != nullptr) *max_seq = *read;
  if (auto it = refused.find(name); it != refused.end()) {
    BANDIT_LOG_ERROR("instance '", name, "' refused at takeover: ", it->second);
    return absl::DataLossError(absl::StrCat("instance '", name, "' cannot be loaded (", it->second,
                                            "); delete it to clear the name"));
  }
  if (auto over = admission.refused().find(name); over != admission.refused().end()) {
    if (needed_bytes != nullptr) *needed_bytes = over->second.declared;
    return over->second.refusal;
  }
  auto it = live.find(name);
  if (it == live.end()) return std::shared_ptr<Instance>();
  // Charged as built before it is served (the reservation of its declared footprint is
  // exchanged for it).
  admission.Release(name);
  if (auto s = it->second->ChargeTo(service_->memory(), MemoryOp::kTakeover); !s.ok()) {
    if (needed_bytes != nullptr) *needed_bytes = it->second->MemoryBytes().total();
    return s;
  }
  it->second->AttachStorage(storage_.get());
  return it->second;
}

absl::Status Persistence::Recover(RecoveryReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, std::shared_ptr<Instance>> live;
  std::map<std::string, std::string> refused;
  RecoveryAdmission admission(service_->memory().get(), MemoryOp::kRecovery);
  RecoverySink sink = ReplaySink(service_->clock(), &live, &refused, report, &admission);
  auto read = storage_->Recover(sink);
  if (!read.ok()) return read.status();
  report->journal_records = read->records;
  report->truncated_bytes = read->truncated_bytes;

  // One that does not fit is left in storage, untouched, and refused by name until a restart
  // with room loads it.
  auto leave_unloaded = [&](const std::string& name, const absl::Status& s) {
    BANDIT_LOG_ERROR("instance '", name, "' not loaded at recovery: ", s.message());
    report->refused.emplace_back(name, std::string(s.message()));
    service_->registry().Refuse(
        name, absl::ResourceExhaustedError(absl::StrCat(
                  "instance '", name, "' is stored but was not loaded at start: ", s.message(),
                  ". Restart the server with a larger --max_memory_bytes to serve it (deleting "
                  "it discards it)")));
  };
  int64_t loaded = 0;
  for (auto& [name, inst] : live) {
    // The declared footprint's reservation is exchanged for what was built (pending decisions
    // and a decision log may take it past its declaration), in name order.
    admission.Release(name);
    if (auto s = inst->ChargeTo(service_->memory(), MemoryOp::kRecovery); !s.ok()) {
      leave_unloaded(name, s);
      continue;
    }
    if (auto s = service_->registry().Add(inst); !s.ok()) return s;
    ++loaded;
  }
  // Refused on their declared footprint: never built.
  for (const auto& [name, over] : admission.refused()) leave_unloaded(name, over.refusal);
  for (const auto& [name, why] : refused) {
    BANDIT_LOG_ERROR("instance '", name, "' refused at recovery: ", why);
    service_->registry().Refuse(
        name, absl::DataLossError(absl::StrCat("instance '", name, "' was refused at recovery (",
                                               why, "); delete it to clear the name")));
    report->refused.emplace_back(name, why);
  }
  service_->AttachStorage(storage_.get(), [this](const std::string& name) {
    absl::MutexLock lock(&mu_);
    deleted_.insert(name);
  });
  service_->SetSnapshotRunner(
      [this](const std::string& name, std::function<void(absl::StatusOr<int64_t>)> done) {
        RequestSnapshot(name, std::move(done));
      });
  report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BANDIT_LOG_INFO("recovered ", loaded, " instances in ", report->seconds, " s (",
                  report->snapshots_loaded, " snapshots, ", report->journal_records,
                  " journal records, ", report->records_replayed, " replayed, ",
                  report->truncated_bytes, " torn bytes cut, ", refused.size(), " refused, ",
                  live.size() - loaded + admission.refused().size(),
                  " left unloaded for the memory budget); durability=",
                  DurabilityName(storage_->mode()));
  return absl::OkStatus();
}

absl::Status Persistence::WriteSnapshot(const std::shared_ptr<Instance>& inst, bool* postponed) {
  if (postponed != nullptr) *postponed = false;
  const auto t0 = std::chrono::steady_clock::now();
  // What the snapshot holds beside the instance while it is written (its policy state as a
  // message, its pending decisions encoded; storage streams the bytes from them) is charged to
  // the node's memory budget before it is taken. A snapshot that
  // does not fit is postponed, not written at the risk of the node's memory: the journal keeps
  // every change it would have covered (a round with a postponed snapshot compacts nothing),
  // and a later round tries again.
  MemoryBudget* budget = service_->memory().get();
  const int64_t transient = inst->SnapshotTransientBytes();
  if (absl::Status fits =
          budget->Reserve(transient, MemoryKind::kSnapshot, MemoryOp::kSnapshot,
                          absl::StrCat("the snapshot of instance '", inst->name(), "'"));
      !fits.ok()) {
    bool first;
    {
      absl::MutexLock lock(&mu_);
      first = postponed_.insert(inst->name()).second;
    }
    if (first)
      BANDIT_LOG_WARN("snapshot of '", inst->name(),
                      "' postponed until it fits the memory budget (its journal records are "
                      "kept): ",
                      fits.message());
    if (postponed != nullptr) *postponed = true;
    return absl::ResourceExhaustedError(
        absl::StrCat("snapshot postponed: ", fits.message()));
  }
  absl::Status s;
  int64_t changes_covered = 0;
  int64_t charged = transient;
  {
    const Instance::StorableSnapshot snap = inst->SnapshotForStorage(&changes_covered);
    // The charge follows what was built (the estimate bounds it but for varint indices).
    const int64_t held =
        static_cast<int64_t>(snap.state.SpaceUsedLong() + snap.pending->own_size());
    budget->Charge(held - charged, MemoryKind::kSnapshot);
    charged = held;
    s = storage_->WriteSnapshot(snap.state, snap.encoded());
  }
  budget->Charge(-charged, MemoryKind::kSnapshot);
  if (!s.ok()) {
    if (options_.on_snapshot_error) options_.on_snapshot_error(s);
    return s;
  }
  inst->MarkSnapshotted(changes_covered);
  if (options_.on_snapshot)
    options_.on_snapshot(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  absl::MutexLock lock(&mu_);
  if (postponed_.erase(inst->name()) > 0)
    BANDIT_LOG_INFO("snapshot of '", inst->name(), "' written after being postponed");
  last_snapshot_ms_[inst->name()] = service_->clock()->NowMs();
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Persistence::SnapshotAll() {
  absl::MutexLock round(&round_mu_);
  auto boundary = storage_->BeginSnapshotRound();
  if (!boundary.ok()) return boundary.status();
  int64_t written = 0;
  bool postponed = false;
  std::set<std::string> live_names;
  for (const auto& inst : service_->registry().All()) {
    live_names.insert(inst->name());
    if (inst->changes_since_snapshot() == 0) continue;
    bool this_postponed = false;
    if (auto s = WriteSnapshot(inst, &this_postponed); !s.ok()) {
      if (!this_postponed) return s;
      postponed = true;  // the others are still written; nothing is compacted
      continue;
    }
    ++written;
  }
  std::set<std::string> deleted;
  {
    absl::MutexLock lock(&mu_);
    deleted.swap(deleted_);
  }
  for (const auto& name : deleted) {
    if (live_names.count(name)) continue;  // re-created since: its new snapshot stays
    if (auto s = storage_->RemoveSnapshot(name); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    last_snapshot_ms_.erase(name);
    postponed_.erase(name);
  }
  // Every record before the boundary is now inside a snapshot (or belongs to a deleted
  // instance), unless a snapshot was postponed: its records are kept for the next round.
  if (postponed) return written;
  if (auto s = storage_->Compact(*boundary); !s.ok()) return s;
  return written;
}

absl::Status Persistence::SnapshotOne(const std::string& name) {
  auto inst = service_->registry().Get(name);
  if (!inst.ok()) return inst.status();
  absl::MutexLock round(&round_mu_);
  return WriteSnapshot(*inst);
}

void Persistence::StartBackground() {
  absl::MutexLock lock(&queue_mu_);
  if (background_running_ || stopping_) return;
  background_running_ = true;
  background_ = std::thread([this] { BackgroundLoop(); });
  interval_timer_ =
      options_.clock->Every(options_.snapshot_interval_ms, [this] { IntervalRound(); });
}

void Persistence::IntervalRound() {
  // Waits for the round so that ticks never pile up behind a slow one, and so that a manual
  // clock's Advance returns after the round it triggered. Storage that is failing is left
  // alone: the round would only fail again.
  if (!storage_->health().ok()) return;
  absl::Notification done;
  RequestSnapshot("", [&done](absl::StatusOr<int64_t> written) {
    if (!written.ok()) BANDIT_LOG_ERROR("snapshot round failed: ", written.status().ToString());
    done.Notify();
  });
  done.WaitForNotification();
}

void Persistence::RequestSnapshot(const std::string& name,
                                  std::function<void(absl::StatusOr<int64_t>)> done) {
  SnapshotRequest r{name, std::move(done)};
  {
    absl::MutexLock lock(&queue_mu_);
    if (background_running_ && !stopping_) {
      requests_.push_back(std::move(r));
      return;
    }
  }
  RunRequest(r);
}

void Persistence::RunRequest(const SnapshotRequest& r) {
  if (r.name.empty()) {
    r.done(SnapshotAll());
    return;
  }
  absl::Status s = SnapshotOne(r.name);
  if (s.ok())
    r.done(int64_t{1});
  else
    r.done(s);
}

void Persistence::BackgroundLoop() {
  const auto woken = [](Persistence* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->queue_mu_) {
    return p->stopping_ || !p->requests_.empty();
  };
  for (;;) {
    std::vector<SnapshotRequest> requests;
    bool stopping;
    {
      absl::MutexLock lock(&queue_mu_);
      queue_mu_.AwaitWithTimeout(absl::Condition(+woken, this), absl::Milliseconds(500));
      requests.swap(requests_);
      stopping = stopping_;
    }
    for (const auto& r : requests) RunRequest(r);
    if (stopping) return;
    if (!storage_->health().ok()) continue;
    for (const auto& inst : service_->registry().All()) {
      if (!inst->SnapshotDue(options_.snapshot_every_changes)) continue;
      absl::MutexLock round(&round_mu_);
      // A postponed snapshot was logged once, when it was first postponed.
      bool postponed = false;
      if (auto s = WriteSnapshot(inst, &postponed); !s.ok() && !postponed)
        BANDIT_LOG_ERROR("snapshot of '", inst->name(), "' failed: ", s.ToString());
    }
  }
}

void Persistence::StopBackground() {
  interval_timer_.reset();  // waits for a running tick (its round runs before the loop stops)
  bool running;
  {
    absl::MutexLock lock(&queue_mu_);
    stopping_ = true;
    running = background_running_;
  }
  if (running) background_.join();
}

absl::Status Persistence::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  StopBackground();
  absl::Status status = storage_->health();
  if (status.ok()) {
    auto round = SnapshotAll();
    if (!round.ok()) status = round.status();
  }
  if (status.ok()) status = storage_->Flush();
  return status;
}

Persistence::~Persistence() {
  service_->SetSnapshotRunner(nullptr);
  if (!closed_) StopBackground();
}

std::vector<std::pair<std::string, int64_t>> Persistence::LastSnapshotTimes() const {
  absl::MutexLock lock(&mu_);
  return {last_snapshot_ms_.begin(), last_snapshot_ms_.end()};
}

}  // namespace bandit::server
