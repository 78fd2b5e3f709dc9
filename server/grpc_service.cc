#include "server/grpc_service.h"

#include <chrono>

#include "server/status_util.h"

namespace bandit::server {

template <typename Fn>
GrpcBanditService::Reactor* GrpcBanditService::Run(Ctx* ctx, Rpc rpc, Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = ToGrpcStatus(fn());
  if (metrics_ != nullptr)
    metrics_->ObserveRpc(rpc, status.error_code(),
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                             .count());
  Reactor* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

GrpcBanditService::Reactor* GrpcBanditService::CreateInstance(
    Ctx* ctx, const bandit::v1::CreateInstanceRequest* req, bandit::v1::Instance* resp) {
  return Run(ctx, Rpc::kCreateInstance, [&] { return service_->CreateInstance(*req, resp); });
}
GrpcBanditService::Reactor* GrpcBanditService::GetInstance(
    Ctx* ctx, const bandit::v1::GetInstanceRequest* req, bandit::v1::Instance* resp) {
  return Run(ctx, Rpc::kGetInstance, [&] { return service_->GetInstance(*req, resp); });
}
GrpcBanditService::Reactor* GrpcBanditService::ListInstances(
    Ctx* ctx, const bandit::v1::ListInstancesRequest* req, bandit::v1::ListInstancesResponse* resp) {
  return Run(ctx, Rpc::kListInstances, [&] { return service_->ListInstances(*req, resp); });
}
GrpcBanditService::Reactor* GrpcBanditService::DeleteInstance(
    Ctx* ctx, const bandit::v1::DeleteInstanceRequest* req, bandit::v1::DeleteInstanceResponse*) {
  return Run(ctx, Rpc::kDeleteInstance, [&] { return service_->DeleteInstance(*req); });
}
GrpcBanditService::Reactor* GrpcBanditService::ResetInstance(
    Ctx* ctx, const bandit::v1::ResetInstanceRequest* req, bandit::v1::Instance* resp) {
  return Run(ctx, Rpc::kResetInstance, [&] { return service_->ResetInstance(*req, resp); });
}
GrpcBanditService::Reactor* GrpcBanditService::AddArms(
    Ctx* ctx, const bandit::v1::AddArmsRequest* req, bandit::v1::Instance* resp) {
  return Run(ctx, Rpc::kAddArms, [&] { return service_->AddArms(*req, resp); });
}
GrpcBanditService::Reactor* GrpcBanditService::RemoveArms(
    Ctx* ctx, const bandit::v1::RemoveArmsRequest* req, bandit::v1::Instance* resp) {
  return Run(ctx, Rpc::kRemoveArms, [&] { return service_->RemoveArms(*req, resp); });
}
GrpcBanditService::Reactor* GrpcBanditService::Select(Ctx* ctx,
                                                      const bandit::v1::SelectRequest* req,
                                                      bandit::v1::Decision* resp) {
  return Run(ctx, Rpc::kSelect, [&] { return service_->Select(*req, resp); });
}
GrpcBanditService::Reactor* GrpcBanditService::Update(Ctx* ctx,
                                                      const bandit::v1::UpdateRequest* req,
                                                      bandit::v1::UpdateResponse* resp) {
  return Run(ctx, Rpc::kUpdate, [&] { return service_->Update(*req, resp); });
}
GrpcBanditService::Reactor* GrpcBanditService::SelectBatch(
    Ctx* ctx, const bandit::v1::SelectBatchRequest* req, bandit::v1::SelectBatchResponse* resp) {
  return Run(ctx, Rpc::kSelectBatch, [&] { return service_->SelectBatch(*req, resp); });
}
GrpcBanditService::Reactor* GrpcBanditService::UpdateBatch(
    Ctx* ctx, const bandit::v1::UpdateBatchRequest* req, bandit::v1::UpdateBatchResponse* resp) {
  return Run(ctx, Rpc::kUpdateBatch, [&] { return service_->UpdateBatch(*req, resp); });
}

}  // namespace bandit::server
