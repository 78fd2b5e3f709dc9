// A small C++ client for banditd. Every call carries a deadline; errors come back as
// absl::Status with the server's code and message.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bandit/v1/service.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace bandit::client {

struct ClientOptions {
  std::chrono::milliseconds deadline{5000};
  int max_message_bytes = 16 << 20;
  // TLS: on when `tls` is set or tls_root_certs is non-empty. tls_root_certs is the PEM of the CA
  // that signed the server certificate (empty = the system's roots).
  bool tls = false;
  std::string tls_root_certs;
  // Mutual TLS: this client's PEM certificate chain and private key.
  std::string tls_client_cert;
  std::string tls_client_key;
  // Name to check the server certificate against instead of the target's host (optional).
  std::string tls_server_name;
  // Sent as metadata "authorization: Bearer <token>" on every call (empty = none).
  std::string token;
};

// A Rounds stream (BanditService.Rounds, docs/api.md): Select, Update and Activate requests on
// one long-lived call, each answered in the order sent, each refusal in its own answer (the
// stream goes on). Send() does not wait, so a client may send a round's Update and the next
// round's Select together and read both answers after: one round trip per round. Not
// thread-safe: one thread sends, and one (the same or another) receives. The stream has no
// deadline; one that broke (the server restarted or shut down: UNAVAILABLE) is not reopened:
// open a new one.
class RoundStream {
 public:
  // Sends `req` without waiting for its answer. With `more_follow`, gRPC may hold it to leave
  // with the next request sent (one send for both). Returns the stream's status if it broke.
  absl::Status Send(const bandit::v1::RoundRequest& req, bool more_follow = false);
  // The answer to the oldest request sent and not yet received (its `status` set when that
  // request was refused); the stream's status if it ended first.
  absl::StatusOr<bandit::v1::RoundResponse> Receive();
  // One request and its answer, the answer's refusal as the status (as the unary calls).
  // FAILED_PRECONDITION while answers to earlier Send()s are still to be received.
  absl::StatusOr<bandit::v1::Decision> Select(const bandit::v1::SelectRequest& req);
  absl::StatusOr<bandit::v1::UpdateResponse> Update(const bandit::v1::UpdateRequest& req);
  absl::StatusOr<bandit::v1::ActivateResponse> Activate(const bandit::v1::ActivateRequest& req);
  // Requests sent whose answer was not received yet.
  int64_t unanswered() const { return unanswered_; }
  // Closes the sending side, receives (and drops) the answers still due, and returns the
  // stream's status (OK when the server answered everything).
  absl::Status Close();
  ~RoundStream();

 private:
  friend class BanditClient;
  RoundStream() = default;
  absl::StatusOr<bandit::v1::RoundResponse> Call(const bandit::v1::RoundRequest& req);
  // The stream's own status once it ended (reads Finish once).
  absl::Status Ended();

  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<bandit::v1::RoundRequest, bandit::v1::RoundResponse>>
      stream_;
  int64_t unanswered_ = 0;
  bool closed_ = false;
  std::optional<absl::Status> ended_;
};

// A RoundResponse's refusal as a status (OK when it has none).
absl::Status StatusOf(const bandit::v1::RoundResponse& answer);

class BanditClient {
 public:
  explicit BanditClient(const std::string& target, ClientOptions options = {});
  explicit BanditClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options = {});

  absl::StatusOr<bandit::v1::Instance> CreateInstance(const bandit::v1::CreateInstanceRequest& req);
  absl::StatusOr<bandit::v1::Instance> GetInstance(const std::string& name);
  absl::StatusOr<bandit::v1::ListInstancesResponse> ListInstances(int page_size,
                                                                  const std::string& page_token);
  absl::Status DeleteInstance(const std::string& name);
  absl::StatusOr<bandit::v1::Instance> ResetInstance(const std::string& name);
  absl::StatusOr<bandit::v1::Instance> AddArms(const bandit::v1::AddArmsRequest& req);
  absl::StatusOr<bandit::v1::Instance> RemoveArms(const bandit::v1::RemoveArmsRequest& req);
  absl::StatusOr<bandit::v1::Instance> SetMixtureReference(
      const bandit::v1::SetMixtureReferenceRequest& req);
  absl::StatusOr<bandit::v1::Instance> AddShadow(const bandit::v1::AddShadowRequest& req);
  absl::StatusOr<bandit::v1::Instance> RemoveShadow(const bandit::v1::RemoveShadowRequest& req);
  absl::StatusOr<bandit::v1::Instance> PromoteShadow(const bandit::v1::PromoteShadowRequest& req);
  // Offline evaluations of an instance's decision log (docs/api.md): created pending, polled
  // with GetEvaluation until their job ends.
  absl::StatusOr<bandit::v1::Evaluation> CreateEvaluation(
      const bandit::v1::CreateEvaluationRequest& req);
  absl::StatusOr<bandit::v1::Evaluation> GetEvaluation(const std::string& instance,
                                                       const std::string& id);
  absl::StatusOr<bandit::v1::ListEvaluationsResponse> ListEvaluations(const std::string& instance);
  absl::Status DeleteEvaluation(const std::string& instance, const std::string& id);
  // The settings that may change live (reward wait, expiry, aggregation, epsilon, learning mode).
  absl::StatusOr<bandit::v1::Instance> ConfigureInstance(
      const bandit::v1::ConfigureInstanceRequest& req);
  // The instance's complete exported state (opaque bytes), and its import under `name`
  // (empty = the exported name).
  // The instance's snapshot, or with format VW its Vowpal Wabbit model file (a vw instance).
  absl::StatusOr<std::string> ExportInstance(
      const std::string& name, bandit::v1::ModelFormat format = bandit::v1::SNAPSHOT);
  // A new vw instance from a Vowpal Wabbit model file (`vw -f`), with the arguments the file
  // does not keep and the rest of its config (no policy).
  // `replace` (both imports): an instance of that name, if any, is replaced in one step
  // (ImportInstanceRequest.replace); otherwise a taken name is ALREADY_EXISTS.
  absl::StatusOr<bandit::v1::Instance> ImportVwModel(const std::string& name,
                                                     const std::string& model,
                                                     const std::string& extra_arguments,
                                                     const bandit::v1::InstanceConfig& config,
                                                     bool replace = false);
  absl::StatusOr<bandit::v1::Instance> ImportInstance(const std::string& name,
                                                      const std::string& snapshot,
                                                      bool replace = false);
  absl::StatusOr<bandit::v1::Decision> Select(const bandit::v1::SelectRequest& req);
  absl::StatusOr<bandit::v1::UpdateResponse> Update(const bandit::v1::UpdateRequest& req);
  // Activates a decision made with defer_activation.
  absl::StatusOr<bandit::v1::ActivateResponse> Activate(const bandit::v1::ActivateRequest& req);
  absl::StatusOr<bandit::v1::SelectBatchResponse> SelectBatch(
      const bandit::v1::SelectBatchRequest& req);
  absl::StatusOr<bandit::v1::UpdateBatchResponse> UpdateBatch(
      const bandit::v1::UpdateBatchRequest& req);
  // Streams the instance's decision log, calling `each` on every decision in log order (one
  // chunk held at a time). No overall deadline: a long log takes as long as it takes; the call
  // ends when the log does, when `each` fails (its status is returned), or when the server fails.
  absl::Status ExportDecisionLog(
      const bandit::v1::ExportDecisionLogRequest& req,
      const std::function<absl::Status(const bandit::v1::LoggedDecision&)>& each);
  // A Rounds stream. `instance`, if given, is sent as the routing header x-bandit-instance (a
  // proxy in front of a cluster then sends the stream to that instance's node; each request is
  // routed on its own either way).
  absl::StatusOr<std::unique_ptr<RoundStream>> OpenRoundStream(const std::string& instance = "");
  // grpc.health.v1 Check of the whole server ("" service).
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> Health();

  bandit::v1::BanditService::Stub& stub() { return *stub_; }
  // Sets the deadline and the token metadata on a context for a raw stub() call.
  void Prepare(grpc::ClientContext* ctx) const;

 private:
  template <typename Req, typename Resp, typename Method>
  absl::StatusOr<Resp> Call(Method method, const Req& req);

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<bandit::v1::BanditService::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace bandit::client
