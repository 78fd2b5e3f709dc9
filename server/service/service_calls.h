// The service's operations as a front door calls them for one request, wherever the instance
// is served: LocalCalls runs them on this process's DecisionService; in a cluster,
// cluster::RoutedCalls (server/cluster/routed_calls.h) runs those of an instance another node
// owns on that node, through the cluster's router. The HTTP front door (server/api/http/) calls
// this interface; the gRPC adapter, which passes request and answer bytes on as they came, calls
// the same routing step of the router (cluster::Router::Dispatch) directly.
//
// Every unary RPC of server/service/rpcs.h about one instance (all but ListInstances and
// SnapshotInstances) has
// one method of the same name, in one shape: Status (const Req&, Resp*, uint64_t* written_seq).
// written_seq is raised as DecisionService raises it (a change made here, to wait for with
// DecisionService::WhenDurable); a call served by another node is acknowledged by that node
// only once durable, and leaves it alone.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "bandit/v1/service.pb.h"
#include "server/service/decision_service.h"
#include "server/service/rpcs.h"

namespace bandit::server {

#define BANDIT_FOR_EACH_INSTANCE_CALL(X)                           \
  X(CreateInstance, CreateInstanceRequest, Instance)               \
  X(GetInstance, GetInstanceRequest, Instance)                     \
  X(DeleteInstance, DeleteInstanceRequest, DeleteInstanceResponse) \
  X(ResetInstance, ResetInstanceRequest, Instance)                 \
  X(AddArms, AddArmsRequest, Instance)                             \
  X(RemoveArms, RemoveArmsRequest, Instance)                       \
  X(Select, SelectRequest, Decision)                               \
  X(Update, UpdateRequest, UpdateResponse)                         \
  X(Activate, ActivateRequest, ActivateResponse)                   \
  X(SelectBatch, SelectBatchRequest, SelectBatchResponse)          \
  X(UpdateBatch, UpdateBatchRequest, UpdateBatchResponse)          \
  X(ExportInstance, ExportInstanceRequest, ExportInstanceResponse) \
  X(ImportInstance, ImportInstanceRequest, Instance)               \
  X(SetMixtureReference, SetMixtureReferenceRequest, Instance)     \
  X(AddShadow, AddShadowRequest, Instance)                         \
  X(RemoveShadow, RemoveShadowRequest, Instance)                   \
  X(PromoteShadow, PromoteShadowRequest, Instance)                 \
  X(ConfigureInstance, ConfigureInstanceRequest, Instance)         \
  X(SetLearningPolicy, SetLearningPolicyRequest, Instance)         \
  X(CreateEvaluation, CreateEvaluationRequest, Evaluation)         \
  X(GetEvaluation, GetEvaluationRequest, Evaluation)               \
  X(ListEvaluations, ListEvaluationsRequest, ListEvaluationsResponse) \
  X(DeleteEvaluation, DeleteEvaluationRequest, DeleteEvaluationResponse)

class ServiceCalls {
 public:
  virtual ~ServiceCalls() = default;
#define BANDIT_DECLARE_CALL(method, request, response)                                   \
  virtual absl::Status method(const bandit::v1::request& req, bandit::v1::response* out, \
                              uint64_t* written_seq = nullptr) = 0;
  BANDIT_FOR_EACH_INSTANCE_CALL(BANDIT_DECLARE_CALL)
#undef BANDIT_DECLARE_CALL
  // OK if instance `name` exists (served here or by its owner), else why not (NOT_FOUND, ...).
  virtual absl::Status Find(const std::string& name) = 0;
};

// Calls DecisionService's `method` in whichever of its shapes it has (read, write; see
// server/api/grpc_service.h) as a ServiceCalls method.
template <typename Method, typename Req, typename Resp>
absl::Status CallService(DecisionService* service, Method method, const Req& req, Resp* out,
                         uint64_t* written_seq) {
  if constexpr (std::is_invocable_v<Method, DecisionService*, const Req&, Resp*, uint64_t*>) {
    return (service->*method)(req, out, written_seq);
  } else {
    return (service->*method)(req, out);
  }
}

class LocalCalls final : public ServiceCalls {
 public:
  explicit LocalCalls(DecisionService* service) : service_(service) {}
#define BANDIT_LOCAL_CALL(method, request, response)                               \
  absl::Status method(const bandit::v1::request& req, bandit::v1::response* out,   \
                      uint64_t* written_seq = nullptr) override {                  \
    return CallService(service_, &DecisionService::method, req, out, written_seq); \
  }
  BANDIT_FOR_EACH_INSTANCE_CALL(BANDIT_LOCAL_CALL)
#undef BANDIT_LOCAL_CALL
  absl::Status Find(const std::string& name) override {
    return service_->registry().Get(name).status();
  }

 private:
  DecisionService* const service_;
};

}  // namespace bandit::server
