// A small C++ client for banditd. Every call carries a deadline; errors come back as
// absl::Status with the server's code and message.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/channel.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bandit/v1/service.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace bandit::client {

struct ClientOptions {
  std::chrono::milliseconds deadline{5000};
  int max_message_bytes = 16 << 20;
};

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
  absl::StatusOr<bandit::v1::Decision> Select(const bandit::v1::SelectRequest& req);
  absl::StatusOr<bandit::v1::UpdateResponse> Update(const bandit::v1::UpdateRequest& req);
  absl::StatusOr<bandit::v1::SelectBatchResponse> SelectBatch(
      const bandit::v1::SelectBatchRequest& req);
  absl::StatusOr<bandit::v1::UpdateBatchResponse> UpdateBatch(
      const bandit::v1::UpdateBatchRequest& req);
  // grpc.health.v1 Check of the whole server ("" service).
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> Health();

  bandit::v1::BanditService::Stub& stub() { return *stub_; }

 private:
  template <typename Req, typename Resp, typename Method>
  absl::StatusOr<Resp> Call(Method method, const Req& req);

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<bandit::v1::BanditService::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace bandit::client
