// The service's request logic, free of gRPC: validate, find the instance, call it. The gRPC
// layer (grpc_service.h) is a thin adapter over this class, and in-process tests use it directly.
#pragma once

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "bandit/v1/service.pb.h"
#include "server/clock.h"
#include "server/instance_registry.h"

namespace bandit::server {

struct ServiceLimits {
  InstanceLimits instance;
  int64_t max_instances = 100'000;
  int64_t max_batch_items = 1'000;
  int max_page_size = 1'000;
};

class DecisionService {
 public:
  explicit DecisionService(const Clock* clock = SystemClock::Get(), ServiceLimits limits = {});

  absl::Status CreateInstance(const bandit::v1::CreateInstanceRequest& req, bandit::v1::Instance* out);
  absl::Status GetInstance(const bandit::v1::GetInstanceRequest& req, bandit::v1::Instance* out);
  absl::Status ListInstances(const bandit::v1::ListInstancesRequest& req,
                             bandit::v1::ListInstancesResponse* out);
  absl::Status DeleteInstance(const bandit::v1::DeleteInstanceRequest& req);
  absl::Status ResetInstance(const bandit::v1::ResetInstanceRequest& req, bandit::v1::Instance* out);
  absl::Status AddArms(const bandit::v1::AddArmsRequest& req, bandit::v1::Instance* out);
  absl::Status RemoveArms(const bandit::v1::RemoveArmsRequest& req, bandit::v1::Instance* out);
  absl::Status SetMixtureReference(const bandit::v1::SetMixtureReferenceRequest& req,
                                   bandit::v1::Instance* out);
  absl::Status Select(const bandit::v1::SelectRequest& req, bandit::v1::Decision* out);
  absl::Status Update(const bandit::v1::UpdateRequest& req, bandit::v1::UpdateResponse* out);
  absl::Status SelectBatch(const bandit::v1::SelectBatchRequest& req,
                           bandit::v1::SelectBatchResponse* out);
  absl::Status UpdateBatch(const bandit::v1::UpdateBatchRequest& req,
                           bandit::v1::UpdateBatchResponse* out);
  absl::Status ExportInstance(const bandit::v1::ExportInstanceRequest& req,
                              bandit::v1::ExportInstanceResponse* out);
  absl::Status ImportInstance(const bandit::v1::ImportInstanceRequest& req, bandit::v1::Instance* out);

  // Durability: once attached, every change is journaled; deleted names are handed to
  // `on_deleted` (the snapshot store forgets them at its next round).
  void AttachJournal(Journal* journal, std::function<void(const std::string&)> on_deleted);
  Journal* journal() const { return journal_; }

  // Applies expiry on every instance (a background sweeper calls this; requests also expire
  // lazily on the instance they touch). Returns how many decisions expired.
  int64_t ExpireAll();

  InstanceRegistry& registry() { return registry_; }
  const Clock* clock() const { return clock_; }

 private:
  // ALREADY_EXISTS if `name` is taken (or the refusal status of a name refused at recovery).
  absl::Status CheckNameFree(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mu_);
  // Journals `rec` (the create or import of `inst`), then makes the instance visible.
  absl::Status Register(std::shared_ptr<Instance> inst, bandit::v1::JournalRecord rec,
                        bandit::v1::Instance* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mu_);
  // Looks the instance up, applies `change`, describes the result.
  absl::Status ChangeAndDescribe(const std::string& name, bandit::v1::Instance* out,
                                 const std::function<absl::Status(Instance&)>& change);

  const Clock* clock_;
  const ServiceLimits limits_;
  InstanceRegistry registry_;
  // Serializes create/delete/import so the journal's order of lifecycle records matches the
  // registry's (these calls are rare; Select/Update never take it).
  absl::Mutex lifecycle_mu_;
  Journal* journal_ = nullptr;
  std::function<void(const std::string&)> on_deleted_;
};

}  // namespace bandit::server
