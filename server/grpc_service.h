// gRPC callback-API adapter: each handler times the call, runs DecisionService, finishes the
// reactor. Handlers hold no state of their own.
#pragma once

#include "bandit/v1/service.grpc.pb.h"
#include "server/arena_allocator.h"
#include "server/auth.h"
#include "server/decision_service.h"
#include "server/metrics.h"
#include "server/persistence.h"

namespace bandit::server {

class GrpcBanditService final : public bandit::v1::BanditService::CallbackService {
 public:
  // `persistence` may be null (no durable state: SnapshotInstances answers FAILED_PRECONDITION).
  // `auth` may be null (no authentication); when set, every handler checks the caller's token
  // against RequiredRole(rpc) before doing anything.
  GrpcBanditService(DecisionService* service, Metrics* metrics, Persistence* persistence,
                    const Authorizer* auth = nullptr)
      : service_(service), metrics_(metrics), persistence_(persistence), auth_(auth) {
    allocators_.Install(*this);  // per-round RPCs parse into pooled arenas
  }

  using Ctx = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;

  Reactor* CreateInstance(Ctx* ctx, const bandit::v1::CreateInstanceRequest* req,
                          bandit::v1::Instance* resp) override;
  Reactor* GetInstance(Ctx* ctx, const bandit::v1::GetInstanceRequest* req,
                       bandit::v1::Instance* resp) override;
  Reactor* ListInstances(Ctx* ctx, const bandit::v1::ListInstancesRequest* req,
                         bandit::v1::ListInstancesResponse* resp) override;
  Reactor* DeleteInstance(Ctx* ctx, const bandit::v1::DeleteInstanceRequest* req,
                          bandit::v1::DeleteInstanceResponse* resp) override;
  Reactor* ResetInstance(Ctx* ctx, const bandit::v1::ResetInstanceRequest* req,
                         bandit::v1::Instance* resp) override;
  Reactor* AddArms(Ctx* ctx, const bandit::v1::AddArmsRequest* req,
                   bandit::v1::Instance* resp) override;
  Reactor* RemoveArms(Ctx* ctx, const bandit::v1::RemoveArmsRequest* req,
                      bandit::v1::Instance* resp) override;
  Reactor* SetMixtureReference(Ctx* ctx, const bandit::v1::SetMixtureReferenceRequest* req,
                               bandit::v1::Instance* resp) override;
  Reactor* Select(Ctx* ctx, const bandit::v1::SelectRequest* req,
                  bandit::v1::Decision* resp) override;
  Reactor* Update(Ctx* ctx, const bandit::v1::UpdateRequest* req,
                  bandit::v1::UpdateResponse* resp) override;
  Reactor* SelectBatch(Ctx* ctx, const bandit::v1::SelectBatchRequest* req,
                       bandit::v1::SelectBatchResponse* resp) override;
  Reactor* UpdateBatch(Ctx* ctx, const bandit::v1::UpdateBatchRequest* req,
                       bandit::v1::UpdateBatchResponse* resp) override;
  Reactor* SnapshotInstances(Ctx* ctx, const bandit::v1::SnapshotInstancesRequest* req,
                             bandit::v1::SnapshotInstancesResponse* resp) override;
  Reactor* ExportInstance(Ctx* ctx, const bandit::v1::ExportInstanceRequest* req,
                          bandit::v1::ExportInstanceResponse* resp) override;
  Reactor* ImportInstance(Ctx* ctx, const bandit::v1::ImportInstanceRequest* req,
                          bandit::v1::Instance* resp) override;

 private:
  // Checks the caller's role, runs `fn(&written_seq)`; a call that wrote is acknowledged only
  // once the service says its newest record is as durable as --durability promises (in
  // `always`, after the group-commit fsync, off this thread).
  template <typename Fn>
  Reactor* Run(Ctx* ctx, Rpc rpc, Fn&& fn);
  void Finish(Reactor* reactor, Rpc rpc, std::chrono::steady_clock::time_point start,
              const absl::Status& status);

  RoundMessageAllocators allocators_;
  DecisionService* service_;
  Metrics* metrics_;
  Persistence* persistence_;
  const Authorizer* auth_;
};

}  // namespace bandit::server
