#include "server/persistence.h"

#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
#include "server/log.h"

namespace bandit::server {

Persistence::Persistence(const PersistenceOptions& options, DecisionService* service)
    : options_(options), service_(service),
      snapshots_(options.fs, options.data_dir + "/snapshots") {}

absl::StatusOr<std::unique_ptr<Persistence>> Persistence::Open(const PersistenceOptions& options,
                                                               DecisionService* service,
                                                               RecoveryReport* report) {
  std::unique_ptr<Persistence> p(new Persistence(options, service));
  RecoveryReport local;
  if (auto s = p->Recover(report ? report : &local); !s.ok()) return s;
  return p;
}

absl::Status Persistence::Recover(RecoveryReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  FileSystem* fs = options_.fs;
  if (auto s = fs->CreateDirs(options_.data_dir); !s.ok()) return s;
  if (auto s = snapshots_.Init(); !s.ok()) return s;
  const std::string journal_dir = options_.data_dir + "/journal";
  if (auto s = fs->CreateDirs(journal_dir); !s.ok()) return s;

  auto loaded = snapshots_.LoadAll();
  if (!loaded.ok()) return loaded.status();
  std::map<std::string, std::shared_ptr<Instance>> live;
  std::map<std::string, std::string> refused;
  uint64_t max_snapshot_seq = 0;
  const InstanceLimits limits;  // recovery trusts what the server once accepted
  for (const auto& [name, why] : loaded->invalid) refused[name] = "snapshot: " + why;
  for (const auto& snap : loaded->snapshots) {
    auto inst = Instance::FromSnapshot(snap, service_->clock(), limits);
    if (!inst.ok()) {
      refused[snap.name()] = std::string(inst.status().message());
      continue;
    }
    (*inst)->MarkSnapshotted();
    live[snap.name()] = *inst;
    max_snapshot_seq = std::max<uint64_t>(max_snapshot_seq, snap.last_journal_seq());
    ++report->snapshots_loaded;
  }

  auto refuse = [&](const std::string& name, const std::string& why) {
    if (!refused.count(name)) refused[name] = why;
    live.erase(name);
  };
  auto read = Journal::ReadAll(
      fs, journal_dir,
      [&](const bandit::v1::JournalRecord& rec) {
        const std::string& name = rec.instance();
        if (refused.count(name)) return;
        auto it = live.find(name);
        switch (rec.op_case()) {
          case bandit::v1::JournalRecord::kCreate:
          case bandit::v1::JournalRecord::kImport: {
            if (it != live.end() && it->second->uid() == rec.uid()) return;  // in its snapshot
            absl::StatusOr<std::shared_ptr<Instance>> inst =
                rec.op_case() == bandit::v1::JournalRecord::kCreate
                    ? Instance::Create(rec.create(), service_->clock(), limits, rec.uid())
                    : Instance::FromSnapshot(rec.import(), service_->clock(), limits);
            if (!inst.ok()) {
              refuse(name, absl::StrCat("journal record ", rec.seq(), ": ", inst.status().message()));
              return;
            }
            live[name] = *inst;
            ++report->records_replayed;
            return;
          }
          case bandit::v1::JournalRecord::kDelete:
            if (it != live.end() && it->second->uid() == rec.uid()) live.erase(it);
            ++report->records_replayed;
            return;
          default: {
            if (it == live.end() || it->second->uid() != rec.uid()) return;  // deleted incarnation
            const auto snap_seq = it->second->last_journal_seq();
            if (rec.seq() <= snap_seq) return;  // already in the snapshot
            if (auto s = it->second->Apply(rec); !s.ok()) {
              refuse(name, absl::StrCat("replay of journal record ", rec.seq(), " failed: ",
                                        s.message()));
              return;
            }
            ++report->records_replayed;
          }
        }
      },
      [&](const std::string& name, const std::string& why) {
        if (!name.empty()) {
          refuse(name, absl::StrCat("journal corrupted: ", why));
          return;
        }
        // A damaged frame header: the rest of that segment cannot be attributed, so every
        // instance it might have touched is refused rather than served with a silent gap.
        std::vector<std::string> names;
        for (const auto& [n, inst] : live) names.push_back(n);
        for (const auto& n : names) refuse(n, absl::StrCat("journal corrupted: ", why));
      });
  if (!read.ok()) return read.status();
  report->journal_records = read->records;
  report->truncated_bytes = read->truncated_bytes;

  const uint64_t next_seq = std::max<uint64_t>(read->next_seq, max_snapshot_seq + 1);
  auto journal = Journal::Open(fs, journal_dir, options_.durability, next_seq, options_.observer);
  if (!journal.ok()) return journal.status();
  journal_ = *std::move(journal);

  for (auto& [name, inst] : live) {
    if (auto s = service_->registry().Add(inst); !s.ok()) return s;
  }
  for (const auto& [name, why] : refused) {
    BANDIT_LOG_ERROR("instance '", name, "' refused at recovery: ", why);
    service_->registry().Refuse(
        name, absl::DataLossError(absl::StrCat("instance '", name, "' was refused at recovery (",
                                               why, "); delete it to clear the name")));
    report->refused.emplace_back(name, why);
  }
  service_->AttachJournal(journal_.get(), [this](const std::string& name) {
    absl::MutexLock lock(&mu_);
    deleted_.insert(name);
  });
  report->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BANDIT_LOG_INFO("recovered ", live.size(), " instances in ", report->seconds, " s (",
                  report->snapshots_loaded, " snapshots, ", report->journal_records,
                  " journal records, ", report->records_replayed, " replayed, ",
                  report->truncated_bytes, " torn bytes cut, ", refused.size(),
                  " refused); durability=", DurabilityName(options_.durability));
  return absl::OkStatus();
}

absl::Status Persistence::WriteSnapshot(const std::shared_ptr<Instance>& inst) {
  const auto t0 = std::chrono::steady_clock::now();
  const bandit::v1::InstanceSnapshot snap = inst->Snapshot();
  absl::Status s = snapshots_.Write(snap);
  if (!s.ok()) {
    if (options_.observer.on_error) options_.observer.on_error(s);
    return s;
  }
  if (options_.on_snapshot)
    options_.on_snapshot(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  absl::MutexLock lock(&mu_);
  last_snapshot_ms_[inst->name()] = service_->clock()->NowMs();
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Persistence::SnapshotAll() {
  absl::MutexLock round(&round_mu_);
  auto boundary = journal_->Rotate();
  if (!boundary.ok()) return boundary.status();
  int64_t written = 0;
  std::set<std::string> live_names;
  for (const auto& inst : service_->registry().All()) {
    live_names.insert(inst->name());
    if (inst->changes_since_snapshot() == 0) continue;
    if (auto s = WriteSnapshot(inst); !s.ok()) return s;
    ++written;
  }
  std::set<std::string> deleted;
  {
    absl::MutexLock lock(&mu_);
    deleted.swap(deleted_);
  }
  for (const auto& name : deleted) {
    if (live_names.count(name)) continue;  // re-created since: its new snapshot stays
    if (auto s = snapshots_.Remove(name); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    last_snapshot_ms_.erase(name);
  }
  // Every record before the boundary is now inside a snapshot (or belongs to a deleted instance).
  if (auto s = journal_->DropSegmentsBefore(*boundary); !s.ok()) return s;
  return written;
}

absl::Status Persistence::SnapshotOne(const std::string& name) {
  auto inst = service_->registry().Get(name);
  if (!inst.ok()) return inst.status();
  absl::MutexLock round(&round_mu_);
  return WriteSnapshot(*inst);
}

void Persistence::StartBackground() {
  background_ = std::thread([this] { BackgroundLoop(); });
}

void Persistence::BackgroundLoop() {
  auto last_round = std::chrono::steady_clock::now();
  while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(500))) {
    if (!journal_->health().ok()) continue;
    if (std::chrono::steady_clock::now() - last_round >=
        std::chrono::milliseconds(options_.snapshot_interval_ms)) {
      if (auto s = SnapshotAll(); !s.ok())
        BANDIT_LOG_ERROR("snapshot round failed: ", s.status().ToString());
      last_round = std::chrono::steady_clock::now();
      continue;
    }
    for (const auto& inst : service_->registry().All()) {
      if (inst->changes_since_snapshot() < options_.snapshot_every_changes) continue;
      absl::MutexLock round(&round_mu_);
      if (auto s = WriteSnapshot(inst); !s.ok())
        BANDIT_LOG_ERROR("snapshot of '", inst->name(), "' failed: ", s.ToString());
    }
  }
}

absl::Status Persistence::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  stop_.Notify();
  if (background_.joinable()) background_.join();
  absl::Status status = journal_->health();
  if (status.ok()) {
    auto round = SnapshotAll();
    if (!round.ok()) status = round.status();
  }
  if (status.ok()) status = journal_->Flush();
  return status;
}

Persistence::~Persistence() {
  if (!closed_) {
    stop_.Notify();
    if (background_.joinable()) background_.join();
  }
}

std::vector<std::pair<std::string, int64_t>> Persistence::LastSnapshotTimes() const {
  absl::MutexLock lock(&mu_);
  return {last_snapshot_ms_.begin(), last_snapshot_ms_.end()};
}

}  // namespace bandit::server
