#include "server/service/decision_service.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "absl/strings/string_view.h"
#include "core/vw/model_file.h"
#include "core/ope/evaluator.h"
#include "core/vw/options.h"
#include "server/env/log.h"
#include "server/instance/instance_state.h"
#include "server/service/status_util.h"
#include "server/storage/snapshot_store.h"

namespace bandit::server {

DecisionService::DecisionService(const Clock* clock, ServiceLimits limits, UidSource* uids)
    : clock_(clock),
      uids_(uids),
      limits_(limits),
      memory_(std::make_shared<MemoryBudget>(limits.max_memory_bytes)),
      registry_(limits.max_instances) {}

absl::Status DecisionService::CheckNameFree(const std::string& name) {
  auto existing = registry_.Get(name);
  if (existing.ok())
    return absl::AlreadyExistsError(absl::StrCat("instance '", name, "' already exists"));
  if (existing.status().code() != absl::StatusCode::kNotFound) return existing.status();
  return absl::OkStatus();
}

absl::Status DecisionService::Register(std::shared_ptr<Instance> inst,
                                       bandit::v1::JournalRecord rec, MemoryOp op,
                                       bandit::v1::Instance* out, uint64_t* written_seq) {
  // What it holds now, charged before it is journaled: a refused instance leaves no record.
  if (auto s = inst->ChargeTo(memory_, op); !s.ok()) return s;
  if (storage_ != nullptr) {
    // Journaled before anyone can see the instance, so its own records always come after.
    if (auto s = storage_->health(); !s.ok()) return s;
    if (auto s = inst->AttachNew(storage_, std::move(rec), written_seq); !s.ok()) return s;
  }
  if (auto s = registry_.Add(inst); !s.ok()) return s;
  inst->Describe(out);
  return absl::OkStatus();
}

absl::Status DecisionService::CreateInstance(const bandit::v1::CreateInstanceRequest& req,
                                             bandit::v1::Instance* out, uint64_t* written_seq) {
  absl::MutexLock lock(&lifecycle_mu_);
  if (auto s = CheckNameFree(req.name()); !s.ok()) return s;
  // Admitted by the footprint its config declares, before anything is built (a config that
  // does not normalize gets Create's own error below).
  if (auto declared = InstanceState::DeclaredBytes(
          req.name(), req.has_config() ? &req.config() : nullptr, limits_.instance);
      declared.ok()) {
    if (auto s = memory_->Admit(*declared, MemoryOp::kCreate,
                                absl::StrCat("instance '", req.name(), "' (its config declares ",
                                             *declared, " bytes)"));
        !s.ok())
      return s;
  }
  // The record first, and the instance from it: the apply replay makes of the same record.
  bandit::v1::JournalRecord rec;
  *rec.mutable_create() = req;
  rec.set_uid(uids_->NewUid());
  auto inst = Instance::FromCreation(rec, clock_, limits_.instance);
  if (!inst.ok()) return inst.status();
  // Journaled with its config as normalized (replay normalizes it again to the same).
  *rec.mutable_create()->mutable_config() = (*inst)->config();
  return Register(*std::move(inst), std::move(rec), MemoryOp::kCreate, out, written_seq);
}

void DecisionService::AttachStorage(Storage* storage,
                                    std::function<void(const std::string&)> on_deleted) {
  absl::MutexLock lock(&lifecycle_mu_);
  storage_ = storage;
  on_deleted_ = std::move(on_deleted);
  for (const auto& inst : registry_.All()) inst->AttachStorage(storage);
}

void DecisionService::WhenDurable(uint64_t written_seq,
                                  std::function<void(absl::Status)> done) const {
  // In everysec and none a write is acknowledged once appended (the append checked the
  // storage's health); only `always` waits for the group commit.
  if (!MustWaitForDurability(written_seq)) {
    done(absl::OkStatus());
    return;
  }
  storage_->WhenDurable(written_seq, std::move(done));
}

absl::Status DecisionService::ReadDecisionLog(const bandit::v1::ExportDecisionLogRequest& req,
                                              DecisionLogCursor* cursor,
                                              bandit::v1::DecisionLogChunk* out, bool* done) {
  if (req.name().empty())
    return absl::InvalidArgumentError("name is empty, expected the instance whose log to export");
  if (req.since_ms() < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("since_ms is ", req.since_ms(), ", expected 0 (unbounded) or more"));
  if (req.until_ms() < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("until_ms is ", req.until_ms(), ", expected 0 (unbounded) or more"));
  if (req.until_ms() > 0 && req.until_ms() <= req.since_ms())
    return absl::InvalidArgumentError(absl::StrCat(
        "until_ms is ", req.until_ms(), ", expected more than since_ms ", req.since_ms()));
  if (req.max_events() < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("max_events is ", req.max_events(), ", expected 0 (all) or more"));
  auto inst = registry_.Get(req.name());
  if (!inst.ok()) return inst.status();
  if (cursor->sent == 0 && cursor->after_seq == 0) cursor->after_seq = req.after_event_seq();
  int64_t budget = kDecisionLogChunkEvents;
  if (req.max_events() > 0) budget = std::min(budget, req.max_events() - cursor->sent);
  out->Clear();
  bool more = false;
  if (budget > 0) {
    if (auto s = (*inst)->ReadDecisionLog(cursor->after_seq, req.since_ms(), req.until_ms(), budget,
                                          kDecisionLogChunkBytes, out, &more);
        !s.ok())
      return s;
  }
  // Thompson sampling entries: their probabilities from their posteriors, outside the lock.
  for (bandit::v1::LoggedDecision& d : *out->mutable_decisions()) {
    if (!d.has_posteriors() || d.probabilities_size() > 0) continue;
    absl::StatusOr<ArgmaxPosteriors> posteriors = DecisionLog::PosteriorsOf(d);
    absl::StatusOr<Vector> p =
        posteriors.ok() ? cursor->probabilities.Of(*posteriors) : posteriors.status();
    // Restore and import refuse invalid posteriors: this is a defect, not a user's error.
    if (!p.ok())
      return absl::InternalError(absl::StrCat("decision log of instance '", req.name(),
                                              "', event '", d.event_id(),
                                              "', posteriors: ", p.status().message()));
    d.mutable_probabilities()->Assign(p->data(), p->data() + p->size());
    // The chosen action's entry is the propensity the decision was served with (Thompson's
    // Select with return_scores does the same).
    if (d.has_propensity() && d.chosen_index() >= 0 && d.chosen_index() < d.probabilities_size())
      d.set_probabilities(d.chosen_index(), d.propensity());
  }
  if (out->decisions_size() > 0) {
    cursor->after_seq = out->decisions(out->decisions_size() - 1).event_seq();
    cursor->sent += out->decisions_size();
  }
  *done = !more || (req.max_events() > 0 && cursor->sent >= req.max_events());
  return absl::OkStatus();
}

absl::Status DecisionService::ExportInstance(const bandit::v1::ExportInstanceRequest& req,
                                             bandit::v1::ExportInstanceResponse* out) {
  auto inst = registry_.Get(req.name());
  if (!inst.ok()) return inst.status();
  const Instance::StorableSnapshot image = (*inst)->SnapshotForStorage();
  if (req.format() == bandit::v1::VW) {
    auto model = vw::ModelFileFromState(image.state.config().policy(), image.state.policy());
    if (!model.ok()) return model.status();
    out->set_vw_model(*std::move(model));
    return absl::OkStatus();
  }
  std::string snapshot = SnapshotStore::Encode(image.state, image.encoded());
  // The response adds a tag and a length to the snapshot: refused here with what to do rather
  // than by gRPC's send limit, whose error names neither the instance nor a way out.
  constexpr int64_t kResponseOverhead = 16;
  if (static_cast<int64_t>(snapshot.size()) + kResponseOverhead > limits_.max_message_bytes) {
    const bandit::v1::InstanceStats stats = (*inst)->Stats(nullptr);
    return absl::ResourceExhaustedError(absl::StrCat(
        "instance '", req.name(), "' exports as ", snapshot.size(),
        " bytes, more than the server's gRPC message limit of ", limits_.max_message_bytes,
        " bytes (--max_message_bytes); its decision log holds ", stats.decision_log_events(),
        " decisions (", stats.decision_log_bytes(),
        " bytes). Either raise --max_message_bytes on the server and the client's limit "
        "(banditctl --max_message_bytes), or save the log with ExportDecisionLog (banditctl log) "
        "and lower config.decision_log.max_events / max_bytes (or disable the log) before "
        "exporting the instance"));
  }
  out->set_snapshot(std::move(snapshot));
  return absl::OkStatus();
}

absl::StatusOr<bandit::v1::InstanceSnapshot> DecisionService::SnapshotOfVwModel(
    const bandit::v1::ImportInstanceRequest& req) {
  if (!req.snapshot().empty())
    return absl::InvalidArgumentError("snapshot and vw_model are both set, expected one");
  if (req.name().empty())
    return absl::InvalidArgumentError("name is empty, expected the new instance's name (a VW "
                                      "model file has none)");
  if (req.config().has_policy())
    return absl::InvalidArgumentError(
        "config.policy is set, expected none: the policy is the VW model file's");
  auto model = vw::StateFromModelFile(req.vw_model(), req.vw_extra_arguments());
  if (!model.ok()) return model.status();
  // A new instance of the file's arguments (its config normalized as a create's), holding the
  // file's learned state.
  bandit::v1::CreateInstanceRequest create;
  create.set_name(req.name());
  *create.mutable_config() = req.config();
  create.mutable_config()->mutable_policy()->mutable_vw()->set_arguments(model->arguments);
  auto fresh = Instance::Create(create, clock_, limits_.instance, uids_->NewUid());
  if (!fresh.ok()) return fresh.status();
  bandit::v1::InstanceSnapshot snap = (*fresh)->SnapshotForStorage().state;
  *snap.mutable_policy() = std::move(model->state);
  return snap;
}

absl::Status DecisionService::ImportInstance(const bandit::v1::ImportInstanceRequest& req,
                                             bandit::v1::Instance* out, uint64_t* written_seq) {
  absl::StatusOr<bandit::v1::InstanceSnapshot> snap =
      req.vw_model().empty() ? SnapshotStore::Decode(req.snapshot()) : SnapshotOfVwModel(req);
  if (!snap.ok() && req.vw_model().empty())
    return absl::InvalidArgumentError(absl::StrCat("snapshot: ", snap.status().message()));
  if (!snap.ok()) return snap.status();
  if (!req.name().empty()) snap->set_name(req.name());
  snap->set_last_journal_seq(0);
  // An import is a new instance on this server: its shadows count against this server's limit
  // as AddShadow's would (recovery, which restores what was once accepted, does not come here).
  if (snap->shadows_size() > limits_.instance.max_shadows)
    return absl::ResourceExhaustedError(absl::StrCat(
        "snapshot of instance '", snap->name(), "' has ", snap->shadows_size(),
        " shadows, more than the configured maximum of ", limits_.instance.max_shadows,
        " (--max_shadows); remove shadows before exporting, or raise the limit"));
  absl::MutexLock lock(&lifecycle_mu_);
  // With `replace` the instance of that name, if any, is only looked up here: it is touched once
  // the new one is built and charged, in Replace.
  std::shared_ptr<Instance> existing;
  if (req.replace()) {
    auto found = registry_.Get(snap->name());
    if (found.ok()) {
      existing = *std::move(found);
    } else if (found.status().code() != absl::StatusCode::kNotFound) {
      return found.status();
    }
  } else if (auto s = CheckNameFree(snap->name()); !s.ok()) {
    return s;
  }
  if (auto declared = InstanceState::DeclaredBytes(*snap, limits_.instance); declared.ok()) {
    if (auto s = memory_->Admit(
            *declared, MemoryOp::kImport,
            absl::StrCat("instance '", snap->name(), "' (its snapshot's policy, shadows, ",
                         snap->pending_size(), " pending decisions and ",
                         snap->decision_log_size(), " logged decisions)"));
        !s.ok())
      return s;
  }
  // The record first, and the instance from it: the apply replay makes of the same record.
  bandit::v1::JournalRecord rec;
  *rec.mutable_import() = *std::move(snap);
  if (existing != nullptr) rec.set_replace(true);
  auto inst = Instance::FromCreation(rec, clock_, limits_.instance);
  if (!inst.ok()) return inst.status();
  if (existing != nullptr)
    return Replace(existing, *std::move(inst), std::move(rec), out, written_seq);
  return Register(*std::move(inst), std::move(rec), MemoryOp::kImport, out, written_seq);
}

absl::Status DecisionService::Replace(const std::shared_ptr<Instance>& existing,
                                      std::shared_ptr<Instance> inst,
                                      bandit::v1::JournalRecord rec, bandit::v1::Instance* out,
                                      uint64_t* written_seq) {
  // Both are held while the name changes hands: the new one is charged in full before the old
  // one is touched, and the old one's charge is released when its last holder lets go.
  if (auto s = inst->ChargeTo(memory_, MemoryOp::kImport); !s.ok()) return s;
  if (storage_ != nullptr) {
    if (auto s = storage_->health(); !s.ok()) return s;
  }
  // One record: the journal holds the old instance up to it and the new one from it, so a crash
  // at any point recovers one of the two, never neither.
  if (auto s = existing->ReplaceWith(*inst, storage_, std::move(rec), written_seq); !s.ok())
    return s;
  if (auto s = registry_.Replace(existing, inst); !s.ok()) {
    // The name left this node after the record was written (a cluster hand-off): whoever
    // loads it next replays the record; this copy is not served.
    inst->MarkReleased();
    return s;
  }
  inst->Describe(out);
  return absl::OkStatus();
}

absl::Status DecisionService::GetInstance(const bandit::v1::GetInstanceRequest& req,
                                          bandit::v1::Instance* out) {
  auto inst = registry_.Get(req.name());
  if (!inst.ok()) return inst.status();
  (*inst)->Describe(out);
  return absl::OkStatus();
}

absl::Status DecisionService::ListInstances(const bandit::v1::ListInstancesRequest& req,
                                            bandit::v1::ListInstancesResponse* out) {
  int size = req.page_size() == 0 ? 100 : req.page_size();
  if (size < 0 || size > limits_.max_page_size)
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size is ", req.page_size(), ", expected 0 (default 100) to ", limits_.max_page_size));
  // The page token is the last name of the previous page; names sort after "".
  auto page = registry_.ListAfter(req.page_token(), size + 1);
  const bool more = static_cast<int>(page.size()) > size;
  if (more) page.pop_back();
  for (const auto& inst : page) inst->Describe(out->add_instances());
  if (more && !page.empty()) out->set_next_page_token(page.back()->name());
  return absl::OkStatus();
}

absl::Status DecisionService::DeleteInstance(const bandit::v1::DeleteInstanceRequest& req,
                                             bandit::v1::DeleteInstanceResponse*,
                                             uint64_t* written_seq) {
  absl::MutexLock lock(&lifecycle_mu_);
  auto inst = registry_.Get(req.name());
  if (inst.ok()) {
    if (auto s = (*inst)->MarkDeleted(written_seq); !s.ok()) return s;
  } else if (inst.status().code() == absl::StatusCode::kNotFound ||
             inst.status().code() == absl::StatusCode::kInvalidArgument) {
    return inst.status();
  }
  if (auto s = registry_.Remove(req.name()); !s.ok()) return s;
  if (on_deleted_) on_deleted_(req.name());
  return absl::OkStatus();
}

absl::Status DecisionService::ChangeAndDescribe(const std::string& name,
                                                bandit::v1::JournalRecord change,
                                                bandit::v1::Instance* out, uint64_t* written_seq) {
  auto inst = registry_.Get(name);
  if (!inst.ok()) return inst.status();
  Admission admission;
  admission.max_shadows = limits_.instance.max_shadows;
  if (auto s = (*inst)->Change(std::move(change), admission, written_seq); !s.ok()) return s;
  (*inst)->Describe(out);
  return absl::OkStatus();
}

// Each request becomes its change's record (server/instance/instance_operations.h), once, here.

absl::Status DecisionService::ResetInstance(const bandit::v1::ResetInstanceRequest& req,
                                            bandit::v1::Instance* out, uint64_t* written_seq) {
  bandit::v1::JournalRecord change;
  change.set_reset(true);
  return ChangeAndDescribe(req.name(), std::move(change), out, written_seq);
}

absl::Status DecisionService::AddArms(const bandit::v1::AddArmsRequest& req,
                                      bandit::v1::Instance* out, uint64_t* written_seq) {
  bandit::v1::JournalRecord change;
  *change.mutable_add_arms() = req;
  return ChangeAndDescribe(req.name(), std::move(change), out, written_seq);
}

absl::Status DecisionService::RemoveArms(const bandit::v1::RemoveArmsRequest& req,
                                         bandit::v1::Instance* out, uint64_t* written_seq) {
  bandit::v1::JournalRecord change;
  *change.mutable_remove_arms() = req;
  return ChangeAndDescribe(req.name(), std::move(change), out, written_seq);
}

absl::Status DecisionService::SetMixtureReference(const bandit::v1::SetMixtureReferenceRequest& req,
                                                  bandit::v1::Instance* out,
                                                  uint64_t* written_seq) {
  bandit::v1::JournalRecord change;
  *change.mutable_set_mixture_reference() = req;
  return ChangeAndDescribe(req.name(), std::move(change), out, written_seq);
}

absl::Status DecisionService::ConfigureInstance(const bandit::v1::ConfigureInstanceRequest& req,
                                                bandit::v1::Instance* out,
                                                uint64_t* written_seq) {
  bandit::v1::JournalRecord change;
  *change.mutable_configure() = req;
  return ChangeAndDescribe(req.name(), std::move(change), out, written_seq);
}

absl::Status DecisionService::AddShadow(const bandit::v1::AddShadowRequest& req,
                                        bandit::v1::Instance* out, uint64_t* written_seq) {
  bandit::v1::JournalRecord change;
  *change.mutable_add_shadow() = req;
  return ChangeAndDescribe(req.name(), std::move(change), out, written_seq);
}

absl::Status DecisionService::RemoveShadow(const bandit::v1::RemoveShadowRequest& req,
                                           bandit::v1::Instance* out, uint64_t* written_seq) {
  bandit::v1::JournalRecord change;
  *change.mutable_remove_shadow() = req;
  return ChangeAndDescribe(req.name(), std::move(change), out, written_seq);
}

absl::Status DecisionService::PromoteShadow(const bandit::v1::PromoteShadowRequest& req,
                                            bandit::v1::Instance* out, uint64_t* written_seq) {
  bandit::v1::JournalRecord change;
  *change.mutable_promote_shadow() = req;
  return ChangeAndDescribe(req.name(), std::move(change), out, written_seq);
}

absl::Status DecisionService::Activate(const bandit::v1::ActivateRequest& req,
                                       bandit::v1::ActivateResponse* out, uint64_t* written_seq) {
  (void)out;  // nothing to report beyond the status
  auto inst = registry_.Get(req.instance());
  if (!inst.ok()) return inst.status();
  bandit::v1::JournalRecord change;
  *change.mutable_activate() = req;
  return (*inst)->Change(std::move(change), Admission(), written_seq);
}

absl::Status DecisionService::Select(const bandit::v1::SelectRequest& req,
                                     bandit::v1::Decision* out, uint64_t* written_seq) {
  auto inst = registry_.Get(req.instance());
  if (!inst.ok()) return inst.status();
  return (*inst)->Select(req, out, written_seq);
}

absl::Status DecisionService::Update(const bandit::v1::UpdateRequest& req,
                                     bandit::v1::UpdateResponse* out, uint64_t* written_seq) {
  auto inst = registry_.Get(req.instance());
  if (!inst.ok()) return inst.status();
  return (*inst)->Update(req, out, written_seq);
}

namespace {

// A batch's items grouped by instance: each group's items in request order, the groups in the
// order their instance first appears.
struct InstanceGroup {
  const std::string* instance;
  std::vector<int> items;
};

template <typename Request>
std::vector<InstanceGroup> GroupByInstance(
    const google::protobuf::RepeatedPtrField<Request>& requests) {
  std::vector<InstanceGroup> groups;
  absl::flat_hash_map<absl::string_view, size_t> index;
  for (int i = 0; i < requests.size(); ++i) {
    const std::string& name = requests.Get(i).instance();
    auto [it, inserted] = index.try_emplace(name, groups.size());
    if (inserted) groups.push_back({&name, {}});
    groups[it->second].items.push_back(i);
  }
  return groups;
}

// Runs a batch one instance group at a time: one registry lookup and one Instance batch call
// (one lock, one storage append) per group. Fills `results` and `statuses` in request order.
template <typename Request, typename Result, typename RunGroup>
void RunByInstance(const InstanceRegistry& registry,
                   const google::protobuf::RepeatedPtrField<Request>& requests,
                   google::protobuf::RepeatedPtrField<Result>* results,
                   google::protobuf::RepeatedPtrField<bandit::v1::ItemStatus>* statuses,
                   const RunGroup& run_group) {
  const int n = requests.size();
  const int base = results->size();
  for (int i = 0; i < n; ++i) results->Add();
  std::vector<absl::Status> item_status(n);
  std::vector<const Request*> group_requests;
  std::vector<Result*> group_results;
  std::vector<absl::Status> group_status;
  for (const InstanceGroup& group : GroupByInstance(requests)) {
    auto inst = registry.Get(*group.instance);
    if (!inst.ok()) {
      for (int i : group.items) item_status[i] = inst.status();
      continue;
    }
    group_requests.clear();
    group_results.clear();
    for (int i : group.items) {
      group_requests.push_back(&requests.Get(i));
      group_results.push_back(results->Mutable(base + i));
    }
    group_status.assign(group.items.size(), absl::OkStatus());
    run_group(**inst, group_requests, group_results, absl::MakeSpan(group_status));
    for (size_t k = 0; k < group.items.size(); ++k)
      item_status[group.items[k]] = std::move(group_status[k]);
  }
  for (int i = 0; i < n; ++i) {
    auto* status = statuses->Add();
    if (item_status[i].ok()) continue;
    ToItemStatus(item_status[i], status);
    results->Mutable(base + i)->Clear();  // an empty result where the status is not OK
  }
}

absl::Status CheckBatchSize(int items, int64_t max_items) {
  if (items > max_items)
    return absl::InvalidArgumentError(
        absl::StrCat("requests has ", items, " items, expected at most ", max_items));
  return absl::OkStatus();
}

}  // namespace

absl::Status DecisionService::SelectBatch(const bandit::v1::SelectBatchRequest& req,
                                          bandit::v1::SelectBatchResponse* out,
                                          uint64_t* written_seq) {
  if (auto s = CheckBatchSize(req.requests_size(), limits_.max_batch_items); !s.ok()) return s;
  RunByInstance(
      registry_, req.requests(), out->mutable_decisions(), out->mutable_statuses(),
      [&](Instance& inst, const std::vector<const bandit::v1::SelectRequest*>& reqs,
          const std::vector<bandit::v1::Decision*>& outs, absl::Span<absl::Status> statuses) {
        inst.SelectBatch(reqs, outs, statuses, written_seq);
      });
  return absl::OkStatus();
}

absl::Status DecisionService::UpdateBatch(const bandit::v1::UpdateBatchRequest& req,
                                          bandit::v1::UpdateBatchResponse* out,
                                          uint64_t* written_seq) {
  if (auto s = CheckBatchSize(req.requests_size(), limits_.max_batch_items); !s.ok()) return s;
  if (req.all_or_none()) {
    for (int i = 1; i < req.requests_size(); ++i)
      if (req.requests(i).instance() != req.requests(0).instance())
        return absl::InvalidArgumentError(absl::StrCat(
            "requests[", i, "].instance is '", req.requests(i).instance(), "', expected '",
            req.requests(0).instance(), "' as requests[0]: an all_or_none batch is for one instance"));
  }
  RunByInstance(
      registry_, req.requests(), out->mutable_responses(), out->mutable_statuses(),
      [&](Instance& inst, const std::vector<const bandit::v1::UpdateRequest*>& reqs,
          const std::vector<bandit::v1::UpdateResponse*>& outs, absl::Span<absl::Status> statuses) {
        inst.UpdateBatch(reqs, outs, statuses, written_seq, req.all_or_none());
      });
  if (req.all_or_none()) {
    // Refused as a whole (every item has the refusal): the batch's status, not each item's.
    const auto& statuses = out->statuses();
    const bool refused =
        !statuses.empty() &&
        std::all_of(statuses.begin(), statuses.end(), [&](const bandit::v1::ItemStatus& item) {
          return item.code() == static_cast<int>(absl::StatusCode::kInvalidArgument) &&
                 item.message() == statuses[0].message();
        });
    if (refused) {
      absl::Status status(absl::StatusCode::kInvalidArgument, statuses[0].message());
      out->Clear();
      return status;
    }
  }
  return absl::OkStatus();
}

void DecisionService::SetSnapshotRunner(SnapshotRunner runner) {
  absl::MutexLock lock(&lifecycle_mu_);
  snapshot_runner_ = std::move(runner);
}

void DecisionService::SnapshotInstances(const bandit::v1::SnapshotInstancesRequest& req,
                                        bandit::v1::SnapshotInstancesResponse* out,
                                        std::function<void(absl::Status)> done) {
  SnapshotRunner runner;
  {
    absl::MutexLock lock(&lifecycle_mu_);
    runner = snapshot_runner_;
  }
  if (!runner) {
    done(absl::FailedPreconditionError("this server keeps no durable state"));
    return;
  }
  runner(req.name(), [out, done = std::move(done)](absl::StatusOr<int64_t> written) {
    if (written.ok()) out->set_snapshots_written(*written);
    done(written.status());
  });
}

int64_t DecisionService::ExpireAll() {
  int64_t n = 0;
  for (const auto& inst : registry_.All()) n += inst->ExpireDue();
  return n;
}

}  // namespace bandit::server

// ---- offline evaluations ----

namespace bandit::server {
namespace {

constexpr int kMaxEvaluationPolicies = 16;
constexpr size_t kMaxEvaluationText = 256;

// Evaluation and policy names, and caller-given ids: printable, bounded.
absl::Status CheckEvaluationText(absl::string_view field, absl::string_view value, bool id) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is empty"));
  if (value.size() > kMaxEvaluationText)
    return absl::InvalidArgumentError(absl::StrCat(field, " has ", value.size(),
                                                   " characters, expected at most ",
                                                   kMaxEvaluationText));
  for (const char c : value) {
    const bool ok = id ? (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                          c == '_' || c == '.')
                       : static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
    if (!ok)
      return absl::InvalidArgumentError(absl::StrCat(
          field, " '", absl::CHexEscape(value), "' has a character outside ",
          id ? "letters, digits, '-', '_' and '.'" : "printable text"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DecisionService::CreateEvaluation(const bandit::v1::CreateEvaluationRequest& req,
                                               bandit::v1::Evaluation* out,
                                               uint64_t* written_seq) {
  return CreateEvaluationOfType(req, bandit::v1::EVALUATION_TYPE_MANUAL, out, written_seq);
}

absl::Status DecisionService::CreateEvaluationOfType(
    const bandit::v1::CreateEvaluationRequest& req, bandit::v1::EvaluationType type,
    bandit::v1::Evaluation* out, uint64_t* written_seq) {
  if (auto s = CheckEvaluationText("name", req.name(), false); !s.ok()) return s;
  if (!req.id().empty())
    if (auto s = CheckEvaluationText("id", req.id(), true); !s.ok()) return s;
  if (req.start_ms() < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("start_ms is ", req.start_ms(), ", expected a time since the epoch"));
  if (req.end_ms() <= req.start_ms())
    return absl::InvalidArgumentError(absl::StrCat("end_ms is ", req.end_ms(),
                                                   ", expected a time after start_ms ",
                                                   req.start_ms()));
  if (req.policies_size() > kMaxEvaluationPolicies)
    return absl::InvalidArgumentError(absl::StrCat("policies has ", req.policies_size(),
                                                   " entries, expected at most ",
                                                   kMaxEvaluationPolicies));
  for (int i = 0; i < req.policies_size(); ++i) {
    const auto& p = req.policies(i);
    if (auto s = CheckEvaluationText(absl::StrCat("policies[", i, "].name"), p.name(), false);
        !s.ok())
      return s;
    for (int j = 0; j < i; ++j)
      if (req.policies(j).name() == p.name())
        return absl::InvalidArgumentError(absl::StrCat(
            "policies[", i, "].name '", p.name(), "' is also policies[", j, "]'s, ",
            kDistinctPolicyNames));
    if (auto args = vw::ParseVwArguments(p.arguments()); !args.ok())
      return absl::InvalidArgumentError(absl::StrCat("policies[", i, "] '", p.name(), "' ",
                                                     kPolicyArgumentsRefused,
                                                     args.status().message()));
  }
  auto inst = registry_.Get(req.instance());
  if (!inst.ok()) return inst.status();
  bandit::v1::DecisionLogChunk first;
  bool more = false;
  if (auto s = (*inst)->ReadDecisionLog(0, req.start_ms(), req.end_ms(), 1, 1 << 20, &first,
                                        &more);
      !s.ok())
    return s;
  if (first.decisions_size() == 0)
    return absl::FailedPreconditionError(absl::StrCat(
        "instance '", req.instance(), "' ", kNoDecisionLogged, " from ", req.start_ms(), " to ",
        req.end_ms(), " ms since the epoch: nothing to evaluate"));
  bandit::v1::Evaluation e;
  e.set_id(req.id().empty() ? absl::StrFormat("%016x", uids_->NewUid()) : req.id());
  e.set_name(req.name());
  e.set_start_ms(req.start_ms());
  e.set_end_ms(req.end_ms());
  *e.mutable_policies() = req.policies();
  e.set_offline_experimentation(req.offline_experimentation());
  e.set_type(type);
  e.set_status(bandit::v1::EVALUATION_PENDING);
  e.set_created_at_ms(clock_->NowMs());
  bandit::v1::JournalRecord change;
  *change.mutable_create_evaluation() = e;
  Admission admission;
  if (auto s = (*inst)->Change(std::move(change), admission, written_seq); !s.ok()) return s;
  *out = std::move(e);
  const EvaluationJobs jobs = CurrentEvaluationJobs();
  if (jobs.start) jobs.start(req.instance(), out->id(), false);
  return absl::OkStatus();
}

absl::Status DecisionService::GetEvaluation(const bandit::v1::GetEvaluationRequest& req,
                                            bandit::v1::Evaluation* out) {
  auto inst = registry_.Get(req.instance());
  if (!inst.ok()) return inst.status();
  auto held = (*inst)->Evaluations(req.id());
  if (req.id().empty() || held.empty())
    return absl::NotFoundError(absl::StrCat("instance '", req.instance(), "' ",
                                            kNoSuchEvaluation, " '", req.id(), "'"));
  *out = std::move(held.front());
  return absl::OkStatus();
}

absl::Status DecisionService::ListEvaluations(const bandit::v1::ListEvaluationsRequest& req,
                                              bandit::v1::ListEvaluationsResponse* out) {
  auto inst = registry_.Get(req.instance());
  if (!inst.ok()) return inst.status();
  out->Clear();
  for (auto& e : (*inst)->Evaluations()) *out->add_evaluations() = std::move(e);
  return absl::OkStatus();
}

absl::Status DecisionService::DeleteEvaluation(const bandit::v1::DeleteEvaluationRequest& req,
                                               bandit::v1::DeleteEvaluationResponse* out,
                                               uint64_t* written_seq) {
  auto inst = registry_.Get(req.instance());
  if (!inst.ok()) return inst.status();
  bandit::v1::JournalRecord change;
  change.set_delete_evaluation(req.id());
  if (auto s = (*inst)->Change(std::move(change), Admission{}, written_seq); !s.ok()) return s;
  if (out != nullptr) out->Clear();
  const EvaluationJobs jobs = CurrentEvaluationJobs();
  if (jobs.cancel) jobs.cancel(req.instance(), req.id());
  return absl::OkStatus();
}

absl::Status DecisionService::FinishEvaluation(const std::string& instance,
                                               bandit::v1::Evaluation done,
                                               uint64_t* written_seq) {
  auto inst = registry_.Get(instance);
  if (!inst.ok()) return inst.status();
  bandit::v1::JournalRecord change;
  *change.mutable_finish_evaluation()->mutable_evaluation() = std::move(done);
  return (*inst)->Change(std::move(change), Admission{}, written_seq);
}

DecisionService::EvaluationJobs DecisionService::CurrentEvaluationJobs() {
  absl::MutexLock lock(&lifecycle_mu_);
  return evaluation_jobs_;
}

void DecisionService::SetEvaluationJobs(EvaluationJobs jobs) {
  absl::MutexLock lock(&lifecycle_mu_);
  evaluation_jobs_ = std::move(jobs);
}

int64_t DecisionService::StartDueAutoOptimizations() {
  if (!CurrentEvaluationJobs().start) return 0;
  const int64_t now = clock_->NowMs();
  int64_t created = 0;
  for (const auto& inst : registry_.All()) {
    const bandit::v1::AutoOptimization a = inst->config().auto_optimization();
    if (!a.enabled() || a.frequency_ms() <= 0) continue;
    {
      absl::MutexLock lock(&auto_mu_);
      auto it = auto_empty_at_.find(inst->name());
      if (it != auto_empty_at_.end() && now < it->second + a.frequency_ms()) continue;
    }
    const std::vector<bandit::v1::Evaluation> held = inst->Evaluations();
    int64_t last = -1;
    bool running = false;
    const bandit::v1::Evaluation* oldest = nullptr;  // the oldest finished automatic one
    for (const auto& e : held) {
      if (e.type() != bandit::v1::EVALUATION_TYPE_AUTO) continue;
      last = std::max(last, e.created_at_ms());
      running |= e.status() == bandit::v1::EVALUATION_PENDING;
      if (e.status() != bandit::v1::EVALUATION_PENDING &&
          (oldest == nullptr || e.created_at_ms() < oldest->created_at_ms()))
        oldest = &e;
    }
    const int64_t due = last < 0 ? a.start_ms() : std::max(a.start_ms(), last + a.frequency_ms());
    if (running || now < due) continue;
    if (static_cast<int>(held.size()) >= InstanceState::kMaxEvaluations) {
      if (oldest == nullptr) continue;  // every slot a manual evaluation's: the caller's to free
      bandit::v1::DeleteEvaluationRequest drop;
      drop.set_instance(inst->name());
      drop.set_id(oldest->id());
      bandit::v1::DeleteEvaluationResponse dropped;
      if (!DeleteEvaluation(drop, &dropped).ok()) continue;
    }
    bandit::v1::CreateEvaluationRequest req;
    req.set_instance(inst->name());
    req.set_name(absl::StrCat("Automatic optimization ",
                              absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(now),
                                               absl::UTCTimeZone())));
    req.set_start_ms(std::max<int64_t>(0, now - a.frequency_ms()));
    req.set_end_ms(now + 1);
    req.set_offline_experimentation(true);
    bandit::v1::Evaluation e;
    const absl::Status s =
        CreateEvaluationOfType(req, bandit::v1::EVALUATION_TYPE_AUTO, &e, nullptr);
    absl::MutexLock lock(&auto_mu_);
    if (s.ok()) {
      auto_empty_at_.erase(inst->name());
      ++created;
    } else {
      auto_empty_at_[inst->name()] = now;
      if (!absl::IsFailedPrecondition(s))
        BANDIT_LOG_WARN("automatic optimization of instance '", inst->name(),
                        "' could not start: ", s.message());
    }
  }
  return created;
}

int64_t DecisionService::ResumeEvaluations(const std::string& name) {
  const EvaluationJobs jobs = CurrentEvaluationJobs();
  if (!jobs.start) return 0;
  int64_t resumed = 0;
  std::vector<std::shared_ptr<Instance>> instances;
  if (name.empty()) {
    instances = registry_.All();
  } else if (auto one = registry_.Get(name); one.ok()) {
    instances.push_back(*std::move(one));
  }
  for (const auto& inst : instances)
    for (const auto& e : inst->Evaluations())
      if (e.status() == bandit::v1::EVALUATION_PENDING) {
        jobs.start(inst->name(), e.id(), true);
        ++resumed;
      }
  return resumed;
}

}  // namespace bandit::server

// ---- the learning policy ----

namespace bandit::server {

absl::Status DecisionService::SetLearningPolicy(const bandit::v1::SetLearningPolicyRequest& req,
                                                bandit::v1::Instance* out,
                                                uint64_t* written_seq) {
  if (auto args = vw::ParseVwArguments(req.arguments()); !args.ok())
    return absl::InvalidArgumentError(
        absl::StrCat(kPolicyArgumentsRefused, args.status().message()));
  auto inst = registry_.Get(req.name());
  if (!inst.ok()) return inst.status();
  bandit::v1::Instance described;
  (*inst)->Describe(&described);
  bandit::v1::JournalRecord change;
  auto* replace = change.mutable_replace_policy();
  replace->mutable_policy()->mutable_vw()->set_arguments(req.arguments());
  if (req.train_on_log()) {
    // The learner as the instance will serve it (its config normalized over the instance's),
    // taught the log's rewarded decisions in order by the evaluator bandit-ope and the
    // evaluations run.
    // Checked before the training, which the apply would otherwise refuse only after it.
    auto config =
        ConfigWithPolicy(req.name(), limits_.instance, described.config(), replace->policy());
    if (!config.ok()) return config.status();
    ope::EvaluateOptions options;
    options.max_dense_dimension = 1;  // the vw learner takes sparse vectors at any size
    auto trainer = ope::Evaluator::Create({{"training", *std::move(config)}}, options);
    if (!trainer.ok()) return trainer.status();
    bandit::v1::ExportDecisionLogRequest read;
    read.set_name(req.name());
    DecisionLogCursor cursor;
    bandit::v1::DecisionLogChunk chunk;
    ope::DecisionGroups groups(
        [&](std::span<const bandit::v1::LoggedDecision> slots, int count) {
          return (*trainer)->AddDecision(slots, slots.front().event_id(), count);
        });
    for (bool done = false; !done;) {
      if (auto s = ReadDecisionLog(read, &cursor, &chunk, &done); !s.ok()) return s;
      for (auto& d : *chunk.mutable_decisions())
        if (auto s = groups.Add(std::move(d)); !s.ok()) return s;
    }
    if (auto s = groups.Finish(); !s.ok()) return s;
    (*trainer)->SavePolicy(0, replace->mutable_state());
    replace->set_trained_events((*trainer)->results().front().estimators.events());
  }
  return ChangeAndDescribe(req.name(), std::move(change), out, written_seq);
}

}  // namespace bandit::server
