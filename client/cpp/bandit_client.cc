#include "client/cpp/bandit_client.h"

#include <type_traits>

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "proto/bandit/v1/metadata.h"

namespace bandit::client {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target, const ClientOptions& o) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(o.max_message_bytes);
  args.SetMaxSendMessageSize(o.max_message_bytes);
  if (!o.tls && o.tls_root_certs.empty())
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = o.tls_root_certs;
  ssl.pem_cert_chain = o.tls_client_cert;
  ssl.pem_private_key = o.tls_client_key;
  if (!o.tls_server_name.empty()) args.SetSslTargetNameOverride(o.tls_server_name);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
}

}  // namespace

BanditClient::BanditClient(const std::string& target, ClientOptions options)
    : BanditClient(MakeChannel(target, options), options) {}

BanditClient::BanditClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : options_(options),
      channel_(std::move(channel)),
      stub_(bandit::v1::BanditService::NewStub(channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)) {}

void BanditClient::Prepare(grpc::ClientContext* ctx) const {
  ctx->set_deadline(std::chrono::system_clock::now() + options_.deadline);
  if (!options_.token.empty()) ctx->AddMetadata(bandit::v1::kAuthorizationKey, "Bearer " + options_.token);
}

namespace {

// The instance a call is about, sent as the routing header x-bandit-instance so that a proxy
// in front of a cluster (HAProxy: balance hdr(x-bandit-instance)) sends it to one node
// consistently; "" = none (ListInstances, SnapshotInstances of all).
template <typename Req>
std::string RoutingKey(const Req& req) {
  if constexpr (requires { req.instance(); }) {  // Select, Update, Activate, the evaluations
    return req.instance();
  } else if constexpr (std::is_same_v<Req, bandit::v1::SelectBatchRequest> ||
                       std::is_same_v<Req, bandit::v1::UpdateBatchRequest>) {
    return req.requests_size() > 0 ? req.requests(0).instance() : "";
  } else if constexpr (std::is_same_v<Req, bandit::v1::ListInstancesRequest>) {
    return "";
  } else {
    return req.name();
  }
}

}  // namespace

template <typename Req, typename Resp, typename Method>
absl::StatusOr<Resp> BanditClient::Call(Method method, const Req& req) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  if (std::string key = RoutingKey(req); !key.empty()) ctx.AddMetadata(bandit::v1::kInstanceKey, key);
  Resp resp;
  grpc::Status s = ((*stub_).*method)(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s);
  return resp;
}

using bandit::v1::BanditService;
namespace v1 = bandit::v1;

absl::Status BanditClient::ExportDecisionLog(
    const v1::ExportDecisionLogRequest& req,
    const std::function<absl::Status(const v1::LoggedDecision&)>& each) {
  grpc::ClientContext ctx;
  if (!options_.token.empty()) ctx.AddMetadata(bandit::v1::kAuthorizationKey, "Bearer " + options_.token);
  std::unique_ptr<grpc::ClientReader<v1::DecisionLogChunk>> reader =
      stub_->ExportDecisionLog(&ctx, req);
  v1::DecisionLogChunk chunk;
  while (reader->Read(&chunk)) {
    for (const auto& d : chunk.decisions()) {
      if (absl::Status s = each(d); !s.ok()) {
        ctx.TryCancel();
        (void)reader->Finish();
        return s;
      }
    }
  }
  return FromGrpc(reader->Finish());
}

absl::StatusOr<v1::Instance> BanditClient::CreateInstance(const v1::CreateInstanceRequest& req) {
  return Call<v1::CreateInstanceRequest, v1::Instance>(&BanditService::Stub::CreateInstance, req);
}

absl::StatusOr<v1::Instance> BanditClient::GetInstance(const std::string& name) {
  v1::GetInstanceRequest req;
  req.set_name(name);
  return Call<v1::GetInstanceRequest, v1::Instance>(&BanditService::Stub::GetInstance, req);
}

absl::StatusOr<v1::ListInstancesResponse> BanditClient::ListInstances(
    int page_size, const std::string& page_token) {
  v1::ListInstancesRequest req;
  req.set_page_size(page_size);
  req.set_page_token(page_token);
  return Call<v1::ListInstancesRequest, v1::ListInstancesResponse>(
      &BanditService::Stub::ListInstances, req);
}

absl::Status BanditClient::DeleteInstance(const std::string& name) {
  v1::DeleteInstanceRequest req;
  req.set_name(name);
  return Call<v1::DeleteInstanceRequest, v1::DeleteInstanceResponse>(
             &BanditService::Stub::DeleteInstance, req)
      .status();
}

absl::StatusOr<v1::Instance> BanditClient::ResetInstance(const std::string& name) {
  v1::ResetInstanceRequest req;
  req.set_name(name);
  return Call<v1::ResetInstanceRequest, v1::Instance>(&BanditService::Stub::ResetInstance, req);
}

absl::StatusOr<v1::Instance> BanditClient::AddArms(const v1::AddArmsRequest& req) {
  return Call<v1::AddArmsRequest, v1::Instance>(&BanditService::Stub::AddArms, req);
}

absl::StatusOr<v1::Instance> BanditClient::RemoveArms(const v1::RemoveArmsRequest& req) {
  return Call<v1::RemoveArmsRequest, v1::Instance>(&BanditService::Stub::RemoveArms, req);
}

absl::StatusOr<std::string> BanditClient::ExportInstance(const std::string& name,
                                                         v1::ModelFormat format) {
  v1::ExportInstanceRequest req;
  req.set_name(name);
  req.set_format(format);
  auto resp = Call<v1::ExportInstanceRequest, v1::ExportInstanceResponse>(
      &BanditService::Stub::ExportInstance, req);
  if (!resp.ok()) return resp.status();
  if (format == v1::VW) return std::move(*resp->mutable_vw_model());
  return std::move(*resp->mutable_snapshot());
}

absl::StatusOr<v1::Instance> BanditClient::ImportVwModel(const std::string& name,
                                                         const std::string& model,
                                                         const std::string& extra_arguments,
                                                         const v1::InstanceConfig& config,
                                                         bool replace) {
  v1::ImportInstanceRequest req;
  req.set_name(name);
  req.set_vw_model(model);
  req.set_vw_extra_arguments(extra_arguments);
  *req.mutable_config() = config;
  req.set_replace(replace);
  return Call<v1::ImportInstanceRequest, v1::Instance>(&BanditService::Stub::ImportInstance, req);
}

absl::StatusOr<v1::Instance> BanditClient::ImportInstance(const std::string& name,
                                                          const std::string& snapshot,
                                                          bool replace) {
  v1::ImportInstanceRequest req;
  req.set_name(name);
  req.set_snapshot(snapshot);
  req.set_replace(replace);
  return Call<v1::ImportInstanceRequest, v1::Instance>(&BanditService::Stub::ImportInstance, req);
}

absl::StatusOr<v1::Instance> BanditClient::AddShadow(const v1::AddShadowRequest& req) {
  return Call<v1::AddShadowRequest, v1::Instance>(&BanditService::Stub::AddShadow, req);
}

absl::StatusOr<v1::Instance> BanditClient::RemoveShadow(const v1::RemoveShadowRequest& req) {
  return Call<v1::RemoveShadowRequest, v1::Instance>(&BanditService::Stub::RemoveShadow, req);
}

absl::StatusOr<v1::Instance> BanditClient::PromoteShadow(const v1::PromoteShadowRequest& req) {
  return Call<v1::PromoteShadowRequest, v1::Instance>(&BanditService::Stub::PromoteShadow, req);
}

absl::StatusOr<v1::Evaluation> BanditClient::CreateEvaluation(
    const v1::CreateEvaluationRequest& req) {
  return Call<v1::CreateEvaluationRequest, v1::Evaluation>(
      &BanditService::Stub::CreateEvaluation, req);
}

absl::StatusOr<v1::Evaluation> BanditClient::GetEvaluation(const std::string& instance,
                                                           const std::string& id) {
  v1::GetEvaluationRequest req;
  req.set_instance(instance);
  req.set_id(id);
  return Call<v1::GetEvaluationRequest, v1::Evaluation>(&BanditService::Stub::GetEvaluation, req);
}

absl::StatusOr<v1::ListEvaluationsResponse> BanditClient::ListEvaluations(
    const std::string& instance) {
  v1::ListEvaluationsRequest req;
  req.set_instance(instance);
  return Call<v1::ListEvaluationsRequest, v1::ListEvaluationsResponse>(
      &BanditService::Stub::ListEvaluations, req);
}

absl::Status BanditClient::DeleteEvaluation(const std::string& instance, const std::string& id) {
  v1::DeleteEvaluationRequest req;
  req.set_instance(instance);
  req.set_id(id);
  return Call<v1::DeleteEvaluationRequest, v1::DeleteEvaluationResponse>(
             &BanditService::Stub::DeleteEvaluation, req)
      .status();
}

absl::StatusOr<v1::Instance> BanditClient::ConfigureInstance(
    const v1::ConfigureInstanceRequest& req) {
  return Call<v1::ConfigureInstanceRequest, v1::Instance>(&BanditService::Stub::ConfigureInstance,
                                                          req);
}

absl::StatusOr<v1::Instance> BanditClient::SetMixtureReference(
    const v1::SetMixtureReferenceRequest& req) {
  return Call<v1::SetMixtureReferenceRequest, v1::Instance>(
      &BanditService::Stub::SetMixtureReference, req);
}

absl::StatusOr<v1::Decision> BanditClient::Select(const v1::SelectRequest& req) {
  return Call<v1::SelectRequest, v1::Decision>(&BanditService::Stub::Select, req);
}

absl::StatusOr<v1::UpdateResponse> BanditClient::Update(const v1::UpdateRequest& req) {
  return Call<v1::UpdateRequest, v1::UpdateResponse>(&BanditService::Stub::Update, req);
}

absl::StatusOr<v1::ActivateResponse> BanditClient::Activate(const v1::ActivateRequest& req) {
  return Call<v1::ActivateRequest, v1::ActivateResponse>(&BanditService::Stub::Activate, req);
}

absl::StatusOr<v1::SelectBatchResponse> BanditClient::SelectBatch(
    const v1::SelectBatchRequest& req) {
  return Call<v1::SelectBatchRequest, v1::SelectBatchResponse>(&BanditService::Stub::SelectBatch,
                                                               req);
}

absl::StatusOr<v1::UpdateBatchResponse> BanditClient::UpdateBatch(
    const v1::UpdateBatchRequest& req) {
  return Call<v1::UpdateBatchRequest, v1::UpdateBatchResponse>(&BanditService::Stub::UpdateBatch,
                                                               req);
}

absl::StatusOr<std::unique_ptr<RoundStream>> BanditClient::OpenRoundStream(
    const std::string& instance) {
  std::unique_ptr<RoundStream> stream(new RoundStream());
  // No deadline: the stream lives as long as its client wants.
  if (!options_.token.empty())
    stream->ctx_.AddMetadata(bandit::v1::kAuthorizationKey, "Bearer " + options_.token);
  if (!instance.empty()) stream->ctx_.AddMetadata(bandit::v1::kInstanceKey, instance);
  stream->stream_ = stub_->Rounds(&stream->ctx_);
  if (stream->stream_ == nullptr) return absl::InternalError("the Rounds stream could not start");
  return stream;
}

absl::Status StatusOf(const v1::RoundResponse& answer) {
  if (!answer.has_status() || answer.status().code() == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(answer.status().code()),
                      answer.status().message());
}

absl::Status RoundStream::Ended() {
  if (!ended_.has_value()) ended_ = FromGrpc(stream_->Finish());
  // A stream that ended OK while requests were unanswered did not answer them.
  if (ended_->ok() && unanswered_ > 0)
    return absl::UnavailableError("the Rounds stream ended before answering every request");
  return *ended_;
}

absl::Status RoundStream::Send(const v1::RoundRequest& req, bool more_follow) {
  if (ended_.has_value() || closed_)
    return ended_.has_value() ? Ended()
                              : absl::FailedPreconditionError("the Rounds stream was closed");
  grpc::WriteOptions options;
  if (more_follow) options.set_buffer_hint();
  if (!stream_->Write(req, options)) return Ended();
  ++unanswered_;
  return absl::OkStatus();
}

absl::StatusOr<v1::RoundResponse> RoundStream::Receive() {
  if (unanswered_ == 0)
    return absl::FailedPreconditionError("no request of this Rounds stream awaits its answer");
  v1::RoundResponse answer;
  if (ended_.has_value() || !stream_->Read(&answer)) return Ended();
  --unanswered_;
  return answer;
}

absl::StatusOr<v1::RoundResponse> RoundStream::Call(const v1::RoundRequest& req) {
  if (unanswered_ > 0)
    return absl::FailedPreconditionError(
        "answers to earlier requests of this Rounds stream are still to be received");
  if (absl::Status s = Send(req); !s.ok()) return s;
  absl::StatusOr<v1::RoundResponse> answer = Receive();
  if (!answer.ok()) return answer.status();
  if (absl::Status refused = StatusOf(*answer); !refused.ok()) return refused;
  return answer;
}

absl::StatusOr<v1::Decision> RoundStream::Select(const v1::SelectRequest& req) {
  v1::RoundRequest round;
  *round.mutable_select() = req;
  absl::StatusOr<v1::RoundResponse> answer = Call(round);
  if (!answer.ok()) return answer.status();
  return std::move(*answer->mutable_decision());
}

absl::StatusOr<v1::UpdateResponse> RoundStream::Update(const v1::UpdateRequest& req) {
  v1::RoundRequest round;
  *round.mutable_update() = req;
  absl::StatusOr<v1::RoundResponse> answer = Call(round);
  if (!answer.ok()) return answer.status();
  return std::move(*answer->mutable_update());
}

absl::StatusOr<v1::ActivateResponse> RoundStream::Activate(const v1::ActivateRequest& req) {
  v1::RoundRequest round;
  *round.mutable_activate() = req;
  absl::StatusOr<v1::RoundResponse> answer = Call(round);
  if (!answer.ok()) return answer.status();
  return std::move(*answer->mutable_activate());
}

absl::Status RoundStream::Close() {
  if (!closed_ && !ended_.has_value()) {
    closed_ = true;
    stream_->WritesDone();
  }
  v1::RoundResponse answer;
  while (unanswered_ > 0 && !ended_.has_value() && stream_->Read(&answer)) --unanswered_;
  return Ended();
}

RoundStream::~RoundStream() {
  if (!ended_.has_value()) {
    ctx_.TryCancel();
    (void)stream_->Finish();
  }
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> BanditClient::Health() {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + options_.deadline);
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = health_->Check(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s);
  return resp.status();
}

}  // namespace bandit::client
