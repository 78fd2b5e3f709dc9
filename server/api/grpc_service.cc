#include "server/api/grpc_service.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <type_traits>
#include <utility>

#include <google/protobuf/descriptor.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include "absl/strings/str_cat.h"
#include "proto/bandit/v1/metadata.h"
#include "server/cluster/router.h"
#include "server/cluster/stream_forward.h"
#include "server/service/status_util.h"

namespace bandit::server {
grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), CappedMessage(s));
}

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

std::optional<uint64_t> GrpcBanditService::PendingCalls::Add(const Call& call) {
  absl::MutexLock lock(&mu_);
  if (cut_.has_value()) return std::nullopt;
  const uint64_t id = next_id_++;
  calls_.emplace(id, call);
  return id;
}

std::optional<GrpcBanditService::PendingCalls::Call> GrpcBanditService::PendingCalls::Claim(
    uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(id);
  if (it == calls_.end()) return std::nullopt;  // cut: already answered
  Call call = it->second;
  calls_.erase(it);
  return call;
}

std::vector<GrpcBanditService::PendingCalls::Call> GrpcBanditService::PendingCalls::Cut(
    const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (!cut_.has_value()) cut_ = status;
  std::vector<Call> out;
  for (auto& [id, call] : calls_) out.push_back(call);
  calls_.clear();
  return out;
}

absl::Status GrpcBanditService::PendingCalls::cut_status() const {
  absl::MutexLock lock(&mu_);
  return cut_.value_or(absl::OkStatus());
}

double GrpcBanditService::PendingCalls::OldestDurableWaitSeconds() const {
  absl::MutexLock lock(&mu_);
  // Ids follow arrival; a call starts waiting right after its handler returns, so the first
  // durability call found is (close to) the oldest.
  for (const auto& [id, call] : calls_)
    if (call.durability)
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - call.start).count();
  return 0;
}

std::optional<uint64_t> GrpcBanditService::AddPending(const PendingCalls::Call& call) {
  std::optional<uint64_t> id = pending_->Add(call);
  if (!id.has_value()) Finish(call.reactor, call.rpc, call.start, pending_->cut_status());
  return id;
}

int GrpcBanditService::CutPendingCalls(const absl::Status& status) {
  const std::vector<PendingCalls::Call> cut = pending_->Cut(status);
  for (const auto& call : cut) Finish(call.reactor, call.rpc, call.start, status);
  return static_cast<int>(cut.size()) + CutStreams(status);
}

double GrpcBanditService::OldestDurableWaitSeconds() const {
  return pending_->OldestDurableWaitSeconds();
}

cluster::Caller GrpcBanditService::CallerOf(const Ctx& ctx) {
  cluster::Caller caller;
  const auto& md = ctx.client_metadata();
  for (const char* key : {bandit::v1::kAuthorizationKey, bandit::v1::kInstanceKey})
    if (auto it = md.find(key); it != md.end())
      caller.metadata.emplace_back(key, std::string(it->second.data(), it->second.size()));
  caller.forwarded = md.find(bandit::v1::kForwardedByKey) != md.end();
  caller.deadline = ctx.deadline();
  return caller;
}

class GrpcBanditService::CountedReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit CountedReactor(std::atomic<int64_t>* active) : active_(active) {}
  void OnDone() override { delete this; }
  // Its reactions are trivial (OnCancel does nothing, OnDone a decrement and a delete), so gRPC
  // may run them inline, as it does for its DefaultReactor: otherwise each call's OnDone is
  // scheduled on gRPC's executor, a thread hop that measured 6% of the round rate.
  bool InternalInlineable() override { return true; }

 private:
  const ActiveCall active_;
};

GrpcBanditService::Reactor* GrpcBanditService::NewReactor() {
  return new CountedReactor(&active_calls_);
}

class GrpcBanditService::DecisionLogWriter final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
      public cluster::ForwardedStream::Sink {
 public:
  DecisionLogWriter(GrpcBanditService* owner, Ctx* ctx, const grpc::ByteBuffer* in)
      : owner_(owner),
        active_(&owner->active_calls_),
        ctx_(ctx),
        start_(std::chrono::steady_clock::now()) {
    auto* bytes = const_cast<grpc::ByteBuffer*>(in);
    const size_t size = bytes == nullptr ? 0 : bytes->Length();
    if (bytes == nullptr ||
        !grpc::SerializationTraits<bandit::v1::ExportDecisionLogRequest>::Deserialize(bytes, &req_)
             .ok()) {
      if (owner_->metrics_ != nullptr) owner_->metrics_->CountUnparseable(Rpc::kExportDecisionLog);
      End(absl::InvalidArgumentError(
          absl::StrCat("the request payload (", size, " bytes) is not a valid protobuf-encoded ",
                       bandit::v1::ExportDecisionLogRequest::descriptor()->full_name(),
                       " (expected by ExportDecisionLog)")));
      return;
    }
    if (owner_->auth_ != nullptr) {
      if (absl::Status denied = owner_->auth_->Check(Rpc::kExportDecisionLog, *ctx, req_.name());
          !denied.ok()) {
        End(denied);
        return;
      }
    }
    if (owner_->router_ != nullptr && RoutedElsewhere()) return;
    Next();
  }

  void OnWriteDone(bool ok) override {
    if (cluster::ForwardedStream* f = forward()) {
      if (!ok) f->Cancel();  // the caller stopped reading: the owner's call ends, then this one
      f->Next();
      return;
    }
    if (!ok) {
      End(absl::CancelledError("the client stopped reading the decision log stream"));
      return;
    }
    if (last_) {
      End(absl::OkStatus());
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }
  void OnCancel() override {
    absl::MutexLock lock(&forward_mu_);
    if (forward_ != nullptr) forward_->Cancel();
  }

  void ForwardMessage(grpc::ByteBuffer* message) override { StartWrite(message); }
  void ForwardDone(const grpc::Status& status, const std::string& node) override {
    {
      absl::MutexLock lock(&forward_mu_);
      forward_ = nullptr;
    }
    ctx_->AddTrailingMetadata(bandit::v1::kNodeKey, node);
    End(cluster::FromForwarded(status, node));
  }

 private:
  // Cluster mode: the instance's owner serves the stream. True if the call was forwarded there
  // (ForwardDone ends it) or ended here; false if this node serves it.
  bool RoutedElsewhere() {
    cluster::Router* router = owner_->router_;
    // An empty name is served here, and refused with the usual message.
    absl::StatusOr<cluster::ForwardedStream*> f =
        router->DispatchStream(Rpc::kExportDecisionLog, req_, CallerOf(*ctx_), this);
    if (!f.ok() || *f == nullptr) {
      if (std::string id = router->node_id(); !id.empty())
        ctx_->AddTrailingMetadata(bandit::v1::kNodeKey, id);
      if (!f.ok()) End(f.status());
      return !f.ok();
    }
    {
      absl::MutexLock lock(&forward_mu_);
      forward_ = *f;
    }
    (*f)->Go();
    return true;
  }
  cluster::ForwardedStream* forward() {
    absl::MutexLock lock(&forward_mu_);
    return forward_;
  }

  void Next() {
    bool done = false;
    absl::Status s = owner_->service_->ReadDecisionLog(req_, &cursor_, &chunk_, &done);
    if (!s.ok()) {
      End(s);
      return;
    }
    if (chunk_.decisions_size() == 0) {
      End(absl::OkStatus());
      return;
    }
    last_ = done;
    bool own_buffer = false;
    out_.Clear();
    if (grpc::Status g = grpc::SerializationTraits<bandit::v1::DecisionLogChunk>::Serialize(
            chunk_, &out_, &own_buffer);
        !g.ok()) {
      End(absl::InternalError("a decision log chunk could not be serialized: " +
                              g.error_message()));
      return;
    }
    StartWrite(&out_);
  }
  void End(const absl::Status& status) {
    const grpc::Status g = ToGrpcStatus(status);
    if (owner_->metrics_ != nullptr)
      owner_->metrics_->ObserveRpc(
          Rpc::kExportDecisionLog, g.error_code(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    Finish(g);
  }

  GrpcBanditService* const owner_;
  const ActiveCall active_;  // the stream counts as one call until OnDone
  Ctx* const ctx_;
  const std::chrono::steady_clock::time_point start_;
  absl::Mutex forward_mu_;
  cluster::ForwardedStream* forward_ ABSL_GUARDED_BY(forward_mu_) = nullptr;  // while forwarding
  bandit::v1::ExportDecisionLogRequest req_;
  DecisionService::DecisionLogCursor cursor_;
  bandit::v1::DecisionLogChunk chunk_;
  grpc::ByteBuffer out_;
  bool last_ = false;
};

GrpcBanditService::GrpcBanditService(DecisionService* service, Metrics* metrics,
                                     const Authorizer* auth, cluster::Router* router)
    : router_(router), service_(service), metrics_(metrics), auth_(auth) {
  const google::protobuf::ServiceDescriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          bandit::v1::BanditService::service_full_name());
  // Replaces the typed handler the generated base registered for each method.
#define BANDIT_REGISTER_HANDLER(method, request, response, role)                    \
  MarkMethodRawCallback(                                                            \
      descriptor->FindMethodByName(#method)->index(),                               \
      new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>( \
          [this](Ctx* ctx, const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {     \
            return HandleBytes<bandit::v1::request, bandit::v1::response>(          \
                ctx, Rpc::k##method, &DecisionService::method, in, out);            \
          }));
  BANDIT_FOR_EACH_RPC(BANDIT_REGISTER_HANDLER)
#undef BANDIT_REGISTER_HANDLER
  MarkMethodRawCallback(
      descriptor->FindMethodByName("ExportDecisionLog")->index(),
      new grpc::internal::CallbackServerStreamingHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
          [this](Ctx* ctx, const grpc::ByteBuffer* in) {
            return new DecisionLogWriter(this, ctx, in);
          }));
  MarkMethodRawCallback(
      descriptor->FindMethodByName("Rounds")->index(),
      new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
          [this](Ctx* ctx) { return OpenRoundStream(ctx); }));
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

namespace {

// Writes the bytes the call answers with if `status` is OK, then returns the call's arena: the
// request and response are not touched again. INTERNAL if the response does not serialize.
template <typename Req, typename Resp>
absl::Status Respond(grpc::MessageHolder<Req, Resp>* call, grpc::ByteBuffer* out,
                     absl::Status status) {
  if (status.ok()) {
    bool own_buffer = false;
    if (grpc::Status s =
            grpc::SerializationTraits<Resp>::Serialize(*call->response(), out, &own_buffer);
        !s.ok())
      status = absl::InternalError("the response could not be serialized: " + s.error_message());
  }
  call->Release();
  return status;
}

}  // namespace

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
    Reactor* reactor = NewReactor();
    Finish(reactor, rpc, std::chrono::steady_clock::now(),
           absl::InvalidArgumentError(absl::StrCat(
               "the request payload (", size, " bytes) is not a valid protobuf-encoded ",
               Req::descriptor()->full_name(), " (expected by ", RpcName(rpc), ")")));
    return reactor;
  }
  return Handle(ctx, rpc, method, call, out);
}

template <typename Req, typename Resp>
bool GrpcBanditService::RouteElsewhere(Ctx* ctx, Reactor* reactor, Rpc rpc,
                                       std::chrono::steady_clock::time_point start,
                                       grpc::MessageHolder<Req, Resp>* call,
                                       grpc::ByteBuffer* out) {
  const cluster::Caller caller = CallerOf(*ctx);
  // An answer from the router: a refusal here, the owner's answer (in `out`), the merged list.
  auto answered = [this, ctx, reactor, rpc, start](absl::Status s, std::string served_by) {
    if (!served_by.empty()) ctx->AddTrailingMetadata(bandit::v1::kNodeKey, served_by);
    Finish(reactor, rpc, start, s);
  };
  if constexpr (std::is_same_v<Req, bandit::v1::ListInstancesRequest>) {
    // This node's own page (it also validates the request); the router adds the others'.
    bandit::v1::ListInstancesResponse local;
    absl::Status s = service_->ListInstances(*call->request(), &local);
    router_->ListAll(*call->request(),
                     s.ok() ? absl::StatusOr<bandit::v1::ListInstancesResponse>(std::move(local))
                            : absl::StatusOr<bandit::v1::ListInstancesResponse>(s),
                     caller, out, std::move(answered));
    call->Release();
    return true;
  } else {
    if (router_->Dispatch(rpc, *call->request(), caller, out, std::move(answered)) ==
        cluster::Router::Placement::kAnswered) {
      call->Release();
      return true;
    }
    ctx->AddTrailingMetadata(bandit::v1::kNodeKey, router_->node_id());
    return false;
  }
}

template <typename Method, typename Req, typename Resp>
GrpcBanditService::Reactor* GrpcBanditService::Handle(Ctx* ctx, Rpc rpc, Method method,
                                                      grpc::MessageHolder<Req, Resp>* call,
                                                      grpc::ByteBuffer* out) {
  const auto start = std::chrono::steady_clock::now();
  Reactor* reactor = NewReactor();
  if (auth_ != nullptr) {
    if (absl::Status denied = auth_->Check(rpc, *ctx, cluster::RoutingKeyOf(*call->request()).name);
        !denied.ok()) {
      call->Release();
      Finish(reactor, rpc, start, denied);
      return reactor;
    }
  }
  if (router_ != nullptr && RouteElsewhere(ctx, reactor, rpc, start, call, out)) return reactor;
  const Req& req = *call->request();
  Resp* resp = call->response();
  using Done = std::function<void(absl::Status)>;
  if constexpr (std::is_invocable_v<Method, DecisionService*, const Req&, Resp*, Done>) {
    const std::optional<uint64_t> id = AddPending({reactor, rpc, start, /*durability=*/false});
    if (!id.has_value()) {
      call->Release();
      return reactor;
    }
    // The service fills `resp` when it is done, so the arena stays until then, even when the
    // call was cut meanwhile (its late completion then only returns the arena).
    (service_->*method)(req, resp,
                        [this, pending = pending_, id = *id, call, out](absl::Status status) {
                          auto claimed = pending->Claim(id);
                          status = Respond(call, out, status);
                          if (claimed)
                            Finish(claimed->reactor, claimed->rpc, claimed->start, status);
                        });
  } else if constexpr (std::is_invocable_v<Method, DecisionService*, const Req&, Resp*,
                                           uint64_t*>) {
    uint64_t written_seq = 0;  // the newest record this call appended (0 = none)
    const absl::Status status = Respond(call, out, (service_->*method)(req, resp, &written_seq));
    if (!status.ok() || !service_->MustWaitForDurability(written_seq)) {
      Finish(reactor, rpc, start, status);
    } else {
      const std::optional<uint64_t> id = AddPending({reactor, rpc, start, /*durability=*/true});
      if (id.has_value())
        service_->WhenDurable(written_seq, [this, pending = pending_, id = *id](absl::Status s) {
          if (auto claimed = pending->Claim(id))
            Finish(claimed->reactor, claimed->rpc, claimed->start, s);
        });
    }
  } else {
    Finish(reactor, rpc, start, Respond(call, out, (service_->*method)(req, resp)));
  }
  return reactor;
}

}  // namespace bandit::server
