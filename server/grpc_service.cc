#include "server/grpc_service.h"

#include <chrono>
#include <thread>

#include "server/status_util.h"

namespace bandit::server {

void GrpcBanditService::Finish(Reactor* reactor, Rpc rpc,
                               std::chrono::steady_clock::time_point start,
                               const absl::Status& status) {
  const grpc::Status g = ToGrpcStatus(status);
  if (metrics_ != nullptr)
    metrics_->ObserveRpc(
        rpc, g.error_code(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  reactor->Finish(g);
}

template <typename Fn>
GrpcBanditService::Reactor* GrpcBanditService::Run(Ctx* ctx, Rpc rpc, Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  if (auth_ != nullptr) {
    if (absl::Status denied = auth_->Check(rpc, *ctx); !denied.ok()) {
      Reactor* reactor = ctx->DefaultReactor();
      Finish(reactor, rpc, start, denied);
      return reactor;
    }
  }
  uint64_t written_seq = 0;  // the newest record this call appended (0 = none)
  const absl::Status status = fn(&written_seq);
  Reactor* reactor = ctx->DefaultReactor();
  if (!status.ok()) {
    Finish(reactor, rpc, start, status);
    return reactor;
  }
  if (!service_->MustWaitForDurability(written_seq)) {
    Finish(reactor, rpc, start, status);
    return reactor;
  }
  service_->WhenDurable(written_seq, [this, reactor, rpc, start](absl::Status durable) {
    Finish(reactor, rpc, start, durable);
  });
  return reactor;
}

GrpcBanditService::Reactor* GrpcBanditService::CreateInstance(
    Ctx* ctx, const bandit::v1::CreateInstanceRequest* req, bandit::v1::Instance* resp) {
  return Run(ctx, Rpc::kCreateInstance,
             [&](uint64_t* seq) { return service_->CreateInstance(*req, resp, seq); });
}
GrpcBanditService::Reactor* GrpcBanditService::GetInstance(
    Ctx* ctx, const bandit::v1::GetInstanceRequest* req, bandit::v1::Instance* resp) {
  return Run(ctx, Rpc::kGetInstance, [&](uint64_t*) { return service_->GetInstance(*req, resp); });
}
GrpcBanditService::Reactor* GrpcBanditService::ListInstances(
    Ctx* ctx, const bandit::v1::ListInstancesRequest* req, bandit::v1::ListInstancesResponse* resp) {
  return Run(ctx, Rpc::kListInstances,
             [&](uint64_t*) { return service_->ListInstances(*req, resp); });
}
GrpcBanditService::Reactor* GrpcBanditService::DeleteInstance(
    Ctx* ctx, const bandit::v1::DeleteInstanceRequest* req, bandit::v1::DeleteInstanceResponse*) {
  return Run(ctx, Rpc::kDeleteInstance,
             [&](uint64_t* seq) { return service_->DeleteInstance(*req, seq); });
}
GrpcBanditService::Reactor* GrpcBanditService::ResetInstance(
    Ctx* ctx, const bandit::v1::ResetInstanceRequest* req, bandit::v1::Instance* resp) {
  return Run(ctx, Rpc::kResetInstance,
             [&](uint64_t* seq) { return service_->ResetInstance(*req, resp, seq); });
}
GrpcBanditService::Reactor* GrpcBanditService::AddArms(
    Ctx* ctx, const bandit::v1::AddArmsRequest* req, bandit::v1::Instance* resp) {
  return Run(ctx, Rpc::kAddArms, [&](uint64_t* seq) { return service_->AddArms(*req, resp, seq); });
}
GrpcBanditService::Reactor* GrpcBanditService::RemoveArms(
    Ctx* ctx, const bandit::v1::RemoveArmsRequest* req, bandit::v1::Instance* resp) {
  return Run(ctx, Rpc::kRemoveArms,
             [&](uint64_t* seq) { return service_->RemoveArms(*req, resp, seq); });
}
GrpcBanditService::Reactor* GrpcBanditService::SetMixtureReference(
    Ctx* ctx, const bandit::v1::SetMixtureReferenceRequest* req, bandit::v1::Instance* resp) {
  return Run(ctx, Rpc::kSetMixtureReference,
             [&](uint64_t* seq) { return service_->SetMixtureReference(*req, resp, seq); });
}
GrpcBanditService::Reactor* GrpcBanditService::Select(Ctx* ctx,
                                                      const bandit::v1::SelectRequest* req,
                                                      bandit::v1::Decision* resp) {
  return Run(ctx, Rpc::kSelect, [&](uint64_t* seq) { return service_->Select(*req, resp, seq); });
}
GrpcBanditService::Reactor* GrpcBanditService::Update(Ctx* ctx,
                                                      const bandit::v1::UpdateRequest* req,
                                                      bandit::v1::UpdateResponse* resp) {
  return Run(ctx, Rpc::kUpdate, [&](uint64_t* seq) { return service_->Update(*req, resp, seq); });
}
GrpcBanditService::Reactor* GrpcBanditService::SelectBatch(
    Ctx* ctx, const bandit::v1::SelectBatchRequest* req, bandit::v1::SelectBatchResponse* resp) {
  return Run(ctx, Rpc::kSelectBatch,
             [&](uint64_t* seq) { return service_->SelectBatch(*req, resp, seq); });
}
GrpcBanditService::Reactor* GrpcBanditService::UpdateBatch(
    Ctx* ctx, const bandit::v1::UpdateBatchRequest* req, bandit::v1::UpdateBatchResponse* resp) {
  return Run(ctx, Rpc::kUpdateBatch,
             [&](uint64_t* seq) { return service_->UpdateBatch(*req, resp, seq); });
}

GrpcBanditService::Reactor* GrpcBanditService::SnapshotInstances(
    Ctx* ctx, const bandit::v1::SnapshotInstancesRequest* req,
    bandit::v1::SnapshotInstancesResponse* resp) {
  const auto start = std::chrono::steady_clock::now();
  Reactor* reactor = ctx->DefaultReactor();
  if (auth_ != nullptr) {
    if (absl::Status denied = auth_->Check(Rpc::kSnapshotInstances, *ctx); !denied.ok()) {
      Finish(reactor, Rpc::kSnapshotInstances, start, denied);
      return reactor;
    }
  }
  if (persistence_ == nullptr) {
    Finish(reactor, Rpc::kSnapshotInstances, start,
           absl::FailedPreconditionError("this server keeps no durable state"));
    return reactor;
  }
  // Snapshot I/O runs off the RPC thread; the reactor finishes when it is done.
  std::thread([this, reactor, req, resp, start] {
    absl::Status status;
    if (!req->name().empty()) {
      status = persistence_->SnapshotOne(req->name());
      if (status.ok()) resp->set_snapshots_written(1);
    } else {
      auto n = persistence_->SnapshotAll();
      status = n.status();
      if (n.ok()) resp->set_snapshots_written(*n);
    }
    Finish(reactor, Rpc::kSnapshotInstances, start, status);
  }).detach();
  return reactor;
}
GrpcBanditService::Reactor* GrpcBanditService::ExportInstance(
    Ctx* ctx, const bandit::v1::ExportInstanceRequest* req,
    bandit::v1::ExportInstanceResponse* resp) {
  return Run(ctx, Rpc::kExportInstance,
             [&](uint64_t*) { return service_->ExportInstance(*req, resp); });
}
GrpcBanditService::Reactor* GrpcBanditService::ImportInstance(
    Ctx* ctx, const bandit::v1::ImportInstanceRequest* req, bandit::v1::Instance* resp) {
  return Run(ctx, Rpc::kImportInstance,
             [&](uint64_t* seq) { return service_->ImportInstance(*req, resp, seq); });
}

}  // namespace bandit::server
