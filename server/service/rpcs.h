// Every RPC of bandit.v1.BanditService, listed once. The metrics enum and names, the role each
// RPC needs (auth.cc), the gRPC handlers (grpc_service.*) are all expanded from this list; each
// handler calls the DecisionService method of the same name, so a method missing there does not
// compile.
#pragma once

namespace bandit::server {

// Roles are ordered; each includes the ones below it.
enum class Role : int { kReader = 1, kWriter = 2, kAdmin = 3 };

// X(method, request message, response message, least role)
#define BANDIT_FOR_EACH_RPC(X)                                                      \
  X(CreateInstance, CreateInstanceRequest, Instance, kAdmin)                        \
  X(GetInstance, GetInstanceRequest, Instance, kReader)                             \
  X(ListInstances, ListInstancesRequest, ListInstancesResponse, kReader)            \
  X(DeleteInstance, DeleteInstanceRequest, DeleteInstanceResponse, kAdmin)          \
  X(ResetInstance, ResetInstanceRequest, Instance, kAdmin)                          \
  X(AddArms, AddArmsRequest, Instance, kAdmin)                                      \
  X(RemoveArms, RemoveArmsRequest, Instance, kAdmin)                                \
  X(Select, SelectRequest, Decision, kWriter)                                       \
  X(Update, UpdateRequest, UpdateResponse, kWriter)                                 \
  X(Activate, ActivateRequest, ActivateResponse, kWriter)                           \
  X(SelectBatch, SelectBatchRequest, SelectBatchResponse, kWriter)                  \
  X(UpdateBatch, UpdateBatchRequest, UpdateBatchResponse, kWriter)                  \
  X(SnapshotInstances, SnapshotInstancesRequest, SnapshotInstancesResponse, kAdmin) \
  X(ExportInstance, ExportInstanceRequest, ExportInstanceResponse, kAdmin)          \
  X(ImportInstance, ImportInstanceRequest, Instance, kAdmin)                        \
  X(SetMixtureReference, SetMixtureReferenceRequest, Instance, kAdmin)              \
  X(AddShadow, AddShadowRequest, Instance, kAdmin)                                  \
  X(RemoveShadow, RemoveShadowRequest, Instance, kAdmin)                            \
  X(PromoteShadow, PromoteShadowRequest, Instance, kAdmin)                          \
  X(ConfigureInstance, ConfigureInstanceRequest, Instance, kAdmin)                  \
  X(SetLearningPolicy, SetLearningPolicyRequest, Instance, kAdmin)                  \
  X(CreateEvaluation, CreateEvaluationRequest, Evaluation, kAdmin)                  \
  X(GetEvaluation, GetEvaluationRequest, Evaluation, kReader)                       \
  X(ListEvaluations, ListEvaluationsRequest, ListEvaluationsResponse, kReader)      \
  X(DeleteEvaluation, DeleteEvaluationRequest, DeleteEvaluationResponse, kAdmin)

// Streaming RPCs: the same four columns; each has its own reactor in grpc_service.*. A Rounds
// stream's requests are each checked, timed and counted as the unary call of their kind
// (Select, Update, Activate); the stream itself needs the role of those.
#define BANDIT_FOR_EACH_STREAMING_RPC(X)                                    \
  X(ExportDecisionLog, ExportDecisionLogRequest, DecisionLogChunk, kAdmin) \
  X(Rounds, RoundRequest, RoundResponse, kWriter)

enum class Rpc : int {
#define BANDIT_RPC_ENUM(method, request, response, role) k##method,
  BANDIT_FOR_EACH_RPC(BANDIT_RPC_ENUM) BANDIT_FOR_EACH_STREAMING_RPC(BANDIT_RPC_ENUM)
#undef BANDIT_RPC_ENUM
      kCount
};

// "Select", "CreateInstance", ...
const char* RpcName(Rpc rpc);
// The least role that may call `rpc`.
Role RequiredRole(Rpc rpc);

}  // namespace bandit::server
