#include "server/grpc_service.h"

#include <chrono>
#include <functional>
#include <type_traits>

#include <google/protobuf/descriptor.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include "absl/strings/str_cat.h"

#include "server/status_util.h"

namespace bandit::server {

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), CappedMessage(s));
}

GrpcBanditService::GrpcBanditService(DecisionService* service, Metrics* metrics,
                                     const Authorizer* auth)
    : service_(service), metrics_(metrics), auth_(auth) {
  const google::protobuf::ServiceDescriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          bandit::v1::BanditService::service_full_name());
  // Replaces the typed handler the generated base registered for each method.
#define BANDIT_REGISTER_HANDLER(method, request, response, role)                         \
  MarkMethodRawCallback(                                                                 \
      descriptor->FindMethodByName(#method)->index(),                                    \
      new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(      \
          [this](Ctx* ctx, const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {          \
            return HandleBytes<bandit::v1::request, bandit::v1::response>(               \
                ctx, Rpc::k##method, &DecisionService::method, in, out);                 \
          }));
  BANDIT_FOR_EACH_RPC(BANDIT_REGISTER_HANDLER)
#undef BANDIT_REGISTER_HANDLER
}

template <typename Req, typename Resp>
grpc::MessageHolder<Req, Resp>* GrpcBanditService::AllocateMessages() {
  if constexpr (std::is_same_v<Req, bandit::v1::SelectRequest>) {
    return allocators_.select.AllocateMessages();
  } else if constexpr (std::is_same_v<Req, bandit::v1::UpdateRequest>) {
    return allocators_.update.AllocateMessages();
  } else if constexpr (std::is_same_v<Req, bandit::v1::SelectBatchRequest>) {
    return allocators_.select_batch.AllocateMessages();
  } else if constexpr (std::is_same_v<Req, bandit::v1::UpdateBatchRequest>) {
    return allocators_.update_batch.AllocateMessages();
  } else {
    return new ArenaMessages<Req, Resp>();
  }
}

template <typename Req, typename Resp>
void GrpcBanditService::Finish(Reactor* reactor, Rpc rpc,
                               std::chrono::steady_clock::time_point start,
                               const absl::Status& status, grpc::MessageHolder<Req, Resp>* call,
                               grpc::ByteBuffer* out) {
  grpc::Status g = ToGrpcStatus(status);
  if (g.ok() && call != nullptr) {
    bool own_buffer = false;
    if (grpc::Status s = grpc::SerializationTraits<Resp>::Serialize(*call->response(), out,
                                                                    &own_buffer);
        !s.ok())
      g = grpc::Status(grpc::StatusCode::INTERNAL,
                       "the response could not be serialized: " + s.error_message());
  }
  if (call != nullptr) call->Release();
  if (metrics_ != nullptr)
    metrics_->ObserveRpc(
        rpc, g.error_code(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  reactor->Finish(g);
}

template <typename Req, typename Resp, typename Method>
GrpcBanditService::Reactor* GrpcBanditService::HandleBytes(Ctx* ctx, Rpc rpc, Method method,
                                                           const grpc::ByteBuffer* in,
                                                           grpc::ByteBuffer* out) {
  grpc::MessageHolder<Req, Resp>* call = AllocateMessages<Req, Resp>();
  // The request buffer belongs to this call alone and is not read again (parsing drains it).
  auto* bytes = const_cast<grpc::ByteBuffer*>(in);
  const size_t size = bytes == nullptr ? 0 : bytes->Length();
  if (bytes == nullptr ||
      !grpc::SerializationTraits<Req>::Deserialize(bytes, call->request()).ok()) {
    call->Release();
    if (metrics_ != nullptr) metrics_->CountUnparseable(rpc);
    Reactor* reactor = ctx->DefaultReactor();
    Finish<Req, Resp>(reactor, rpc, std::chrono::steady_clock::now(),
                      absl::InvalidArgumentError(absl::StrCat(
                          "the request payload (", size, " bytes) is not a valid protobuf-encoded ",
                          Req::descriptor()->full_name(), " (expected by ", RpcName(rpc), ")")),
                      nullptr, out);
    return reactor;
  }
  return Handle(ctx, rpc, method, call, out);
}

template <typename Method, typename Req, typename Resp>
GrpcBanditService::Reactor* GrpcBanditService::Handle(Ctx* ctx, Rpc rpc, Method method,
                                                      grpc::MessageHolder<Req, Resp>* call,
                                                      grpc::ByteBuffer* out) {
  const auto start = std::chrono::steady_clock::now();
  Reactor* reactor = ctx->DefaultReactor();
  if (auth_ != nullptr) {
    if (absl::Status denied = auth_->Check(rpc, *ctx); !denied.ok()) {
      Finish(reactor, rpc, start, denied, call, out);
      return reactor;
    }
  }
  const Req& req = *call->request();
  Resp* resp = call->response();
  using Done = std::function<void(absl::Status)>;
  if constexpr (std::is_invocable_v<Method, DecisionService*, const Req&, Resp*, Done>) {
    (service_->*method)(req, resp, [this, reactor, rpc, start, call, out](absl::Status status) {
      Finish(reactor, rpc, start, status, call, out);
    });
  } else if constexpr (std::is_invocable_v<Method, DecisionService*, const Req&, Resp*,
                                           uint64_t*>) {
    uint64_t written_seq = 0;  // the newest record this call appended (0 = none)
    const absl::Status status = (service_->*method)(req, resp, &written_seq);
    if (!status.ok() || !service_->MustWaitForDurability(written_seq)) {
      Finish(reactor, rpc, start, status, call, out);
    } else {
      service_->WhenDurable(written_seq,
                            [this, reactor, rpc, start, call, out](absl::Status durable) {
                              Finish(reactor, rpc, start, durable, call, out);
                            });
    }
  } else {
    Finish(reactor, rpc, start, (service_->*method)(req, resp), call, out);
  }
  return reactor;
}

}  // namespace bandit::server
