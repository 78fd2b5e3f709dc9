#include "server/grpc_service.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <type_traits>
#include <utility>

#include <google/protobuf/descriptor.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"
#include "server/cluster/cluster_node.h"
#include "server/cluster/stream_forward.h"
#include "server/status_util.h"

namespace bandit::server {
namespace {

// The answer of a call forwarded to `owner`, for the caller. CANCELLED from the owner is never
// the caller's own doing (a caller that cancelled reads no answer): the owner cut the call (it
// is leaving: its server shutting down cancels the calls it has not finished or not yet
// started). CANCELLED is not retryable, so the caller would give up on a call the cluster can
// serve: it hears UNAVAILABLE, which clients retry (reaching the instance's next owner).
absl::Status FromForwarded(const grpc::Status& s, const std::string& owner) {
  if (s.error_code() == grpc::StatusCode::CANCELLED)
    return absl::UnavailableError(absl::StrCat(
        "node '", owner, "', the instance's owner, cut the forwarded call (", s.error_message(),
        "): it is leaving or restarting; the change may or may not have been applied; retry"));
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace

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
  return static_cast<int>(cut.size());
}

double GrpcBanditService::OldestDurableWaitSeconds() const {
  return pending_->OldestDurableWaitSeconds();
}

class GrpcBanditService::DecisionLogWriter final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
      public cluster::ForwardedStream::Sink {
 public:
  DecisionLogWriter(GrpcBanditService* owner, Ctx* ctx, const grpc::ByteBuffer* in)
      : owner_(owner), ctx_(ctx), start_(std::chrono::steady_clock::now()) {
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
    if (owner_->cluster_mode_ && RoutedElsewhere()) return;
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
    ctx_->AddTrailingMetadata("x-bandit-node", node);
    End(FromForwarded(status, node));
  }

 private:
  // Cluster mode: the instance's owner serves the stream. True if the call was forwarded there
  // (ForwardDone ends it) or ended here; false if this node serves it.
  bool RoutedElsewhere() {
    cluster::ClusterNode* node = owner_->cluster_.load();
    if (node == nullptr) {
      End(absl::UnavailableError("this node is joining the cluster; retry"));
      return true;
    }
    if (req_.name().empty()) return false;  // refused here, with the usual message
    const auto& md = ctx_->client_metadata();
    const bool forwarded = md.find("x-bandit-forwarded-by") != md.end();
    absl::StatusOr<cluster::Route> route = node->RouteFor(req_.name(), false, forwarded);
    if (!route.ok() || route->local) {
      ctx_->AddTrailingMetadata("x-bandit-node", node->node_id());
      if (!route.ok()) End(route.status());
      return !route.ok();
    }
    std::vector<std::pair<std::string, std::string>> metadata;
    for (const char* key : {"authorization", "x-bandit-instance"})
      if (auto it = md.find(key); it != md.end())
        metadata.emplace_back(key, std::string(it->second.data(), it->second.size()));
    metadata.emplace_back("x-bandit-forwarded-by", node->node_id());
    grpc::ByteBuffer request;
    bool own = false;
    (void)grpc::SerializationTraits<bandit::v1::ExportDecisionLogRequest>::Serialize(req_, &request,
                                                                                     &own);
    ++owner_->forwarded_;
    // No deadline cap as for unary forwards: a long export may run past it, and a shutdown
    // cancels this call (OnCancel), which cancels the owner's.
    cluster::ForwardedStream* f = cluster::ForwardedStream::Prepare(
        owner_->StubFor(route->address),
        absl::StrCat("/", bandit::v1::BanditService::service_full_name(), "/ExportDecisionLog"),
        std::move(request), metadata, ctx_->deadline(), route->node_id, this);
    {
      absl::MutexLock lock(&forward_mu_);
      forward_ = f;
    }
    f->Go();
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
                                     const Authorizer* auth)
    : service_(service), metrics_(metrics), auth_(auth) {
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

// The instance a request is about ("" = none: served by the node it reached), and whether the
// call creates it.
template <typename Req>
std::pair<std::string, bool> RoutingKey(const Req& req) {
  if constexpr (std::is_same_v<Req, bandit::v1::CreateInstanceRequest>) {
    return {req.name(), true};
  } else if constexpr (std::is_same_v<Req, bandit::v1::ImportInstanceRequest>) {
    return {req.name(), true};
  } else if constexpr (std::is_same_v<Req, bandit::v1::SelectRequest> ||
                       std::is_same_v<Req, bandit::v1::UpdateRequest> ||
                       std::is_same_v<Req, bandit::v1::ActivateRequest>) {
    return {req.instance(), false};
  } else if constexpr (std::is_same_v<Req, bandit::v1::SelectBatchRequest> ||
                       std::is_same_v<Req, bandit::v1::UpdateBatchRequest>) {
    // A batch on one instance goes to its owner; a mixed batch is served here (items of
    // instances other nodes own answer UNAVAILABLE naming the owner).
    if (req.requests_size() == 0) return {"", false};
    const std::string& first = req.requests(0).instance();
    for (const auto& item : req.requests())
      if (item.instance() != first) return {"", false};
    return {first, false};
  } else if constexpr (std::is_same_v<Req, bandit::v1::ListInstancesRequest> ||
                       std::is_same_v<Req, bandit::v1::SnapshotInstancesRequest>) {
    return {"", false};
  } else {
    return {req.name(), false};
  }
}

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
    Reactor* reactor = ctx->DefaultReactor();
    Finish(reactor, rpc, std::chrono::steady_clock::now(),
           absl::InvalidArgumentError(absl::StrCat(
               "the request payload (", size, " bytes) is not a valid protobuf-encoded ",
               Req::descriptor()->full_name(), " (expected by ", RpcName(rpc), ")")));
    return reactor;
  }
  return Handle(ctx, rpc, method, call, out);
}

grpc::GenericStub* GrpcBanditService::StubFor(const std::string& address) {
  absl::MutexLock lock(&stubs_mu_);
  auto& stub = stubs_[address];
  if (!stub) {
    // Node-to-node traffic stays inside the cluster's network (plaintext, as the nodes'
    // PostgreSQL and metrics traffic); the caller's token travels with the call.
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    stub = std::make_unique<grpc::GenericStub>(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }
  return stub.get();
}

void GrpcBanditService::ListAcrossCluster(
    Ctx* ctx, Reactor* reactor, std::chrono::steady_clock::time_point start,
    grpc::MessageHolder<bandit::v1::ListInstancesRequest, bandit::v1::ListInstancesResponse>* call,
    grpc::ByteBuffer* out) {
  cluster::ClusterNode* node = cluster_.load();
  const bandit::v1::ListInstancesRequest req = *call->request();
  struct Fan {
    absl::Mutex mu;
    int remaining = 0;
    std::vector<bandit::v1::Instance> instances;
    bool more = false;
    absl::Status error;
  };
  auto fan = std::make_shared<Fan>();
  {
    // This node's own page first; it also validates the request.
    bandit::v1::ListInstancesResponse local;
    absl::Status s = service_->ListInstances(req, &local);
    call->Release();
    if (!s.ok()) {
      Finish(reactor, Rpc::kListInstances, start, s);
      return;
    }
    for (auto& inst : *local.mutable_instances()) fan->instances.push_back(std::move(inst));
    fan->more = !local.next_page_token().empty();
  }
  const int size = req.page_size() == 0 ? 100 : req.page_size();
  std::vector<std::pair<std::string, std::string>> others;
  for (const auto& member : node->LiveMembers())
    if (member.first != node->node_id()) others.push_back(member);
  auto finish = [this, fan, reactor, start, out, size, ctx, id = node->node_id()]() {
    ctx->AddTrailingMetadata("x-bandit-node", id);
    if (!fan->error.ok()) {
      Finish(reactor, Rpc::kListInstances, start, fan->error);
      return;
    }
    std::sort(fan->instances.begin(), fan->instances.end(),
              [](const auto& a, const auto& b) { return a.name() < b.name(); });
    bandit::v1::ListInstancesResponse merged;
    for (int i = 0; i < static_cast<int>(fan->instances.size()) && i < size; ++i)
      *merged.add_instances() = fan->instances[i];
    if ((static_cast<int>(fan->instances.size()) > size || fan->more) &&
        merged.instances_size() > 0)
      merged.set_next_page_token(merged.instances(merged.instances_size() - 1).name());
    bool own = false;
    grpc::Status g =
        grpc::SerializationTraits<bandit::v1::ListInstancesResponse>::Serialize(merged, out, &own);
    Finish(reactor, Rpc::kListInstances, start,
           g.ok() ? absl::OkStatus() : absl::InternalError(g.error_message()));
  };
  if (others.empty()) {
    finish();
    return;
  }
  fan->remaining = static_cast<int>(others.size());
  const auto& md = ctx->client_metadata();
  std::string token;
  if (auto it = md.find("authorization"); it != md.end())
    token.assign(it->second.data(), it->second.size());
  const auto cap = std::chrono::system_clock::now() + std::chrono::seconds(10);
  const auto deadline = ctx->deadline() < cap ? ctx->deadline() : cap;
  for (const auto& [id, address] : others) {
    struct Ask {
      grpc::ClientContext client;
      grpc::ByteBuffer request, response;
    };
    auto* ask = new Ask();
    bool own = false;
    (void)grpc::SerializationTraits<bandit::v1::ListInstancesRequest>::Serialize(req, &ask->request,
                                                                                 &own);
    ask->client.set_deadline(deadline);
    if (!token.empty()) ask->client.AddMetadata("authorization", token);
    ask->client.AddMetadata("x-bandit-forwarded-by", node->node_id());
    ++forwarded_;
    StubFor(address)->UnaryCall(
        &ask->client,
        absl::StrCat("/", bandit::v1::BanditService::service_full_name(), "/ListInstances"),
        grpc::StubOptions(), &ask->request, &ask->response,
        [ask, fan, finish, id = id](grpc::Status s) {
          bandit::v1::ListInstancesResponse page;
          bool parsed =
              s.ok() && grpc::SerializationTraits<bandit::v1::ListInstancesResponse>::Deserialize(
                            &ask->response, &page)
                            .ok();
          delete ask;
          bool last;
          {
            absl::MutexLock lock(&fan->mu);
            if (!parsed && fan->error.ok()) {
              // A partial list would silently miss instances: the call fails, retriably.
              fan->error = absl::UnavailableError(absl::StrCat("ListInstances: node '", id,
                                                               "' did not answer (",
                                                               s.error_message(), "); retry"));
            }
            if (parsed) {
              for (auto& inst : *page.mutable_instances())
                fan->instances.push_back(std::move(inst));
              fan->more = fan->more || !page.next_page_token().empty();
            }
            last = --fan->remaining == 0;
          }
          if (last) finish();
        });
  }
}

template <typename Req, typename Resp>
bool GrpcBanditService::RouteElsewhere(Ctx* ctx, Reactor* reactor, Rpc rpc,
                                       std::chrono::steady_clock::time_point start,
                                       grpc::MessageHolder<Req, Resp>* call,
                                       grpc::ByteBuffer* out) {
  cluster::ClusterNode* node = cluster_.load();
  if (node == nullptr) {
    call->Release();
    Finish(reactor, rpc, start, absl::UnavailableError("this node is joining the cluster; retry"));
    return true;
  }
  const auto [name, create] = RoutingKey(*call->request());
  const auto& md = ctx->client_metadata();
  const bool forwarded = md.find("x-bandit-forwarded-by") != md.end();
  if constexpr (std::is_same_v<Req, bandit::v1::ListInstancesRequest>) {
    if (!forwarded) {
      ListAcrossCluster(ctx, reactor, start, call, out);
      return true;
    }
  }
  if (!name.empty()) {
    absl::StatusOr<cluster::Route> route = node->RouteFor(name, create, forwarded);
    if (!route.ok()) {
      call->Release();
      ctx->AddTrailingMetadata("x-bandit-node", node->node_id());
      Finish(reactor, rpc, start, route.status());
      return true;
    }
    if (!route->local) {
      struct Forward {
        grpc::ClientContext client;
        grpc::ByteBuffer request;
      };
      auto* f = new Forward();
      bool own = false;
      (void)grpc::SerializationTraits<Req>::Serialize(*call->request(), &f->request, &own);
      call->Release();
      // The caller's deadline, capped so that a forward never outlives a shutdown's grace.
      const auto cap = std::chrono::system_clock::now() + std::chrono::seconds(30);
      const auto deadline = ctx->deadline();
      f->client.set_deadline(deadline < cap ? deadline : cap);
      for (const char* key : {"authorization", "x-bandit-instance"}) {
        auto it = md.find(key);
        if (it != md.end())
          f->client.AddMetadata(key, std::string(it->second.data(), it->second.size()));
      }
      f->client.AddMetadata("x-bandit-forwarded-by", node->node_id());
      ++forwarded_;
      const std::string owner = route->node_id;
      StubFor(route->address)
          ->UnaryCall(
              &f->client,
              absl::StrCat("/", bandit::v1::BanditService::service_full_name(), "/", RpcName(rpc)),
              grpc::StubOptions(), &f->request, out,
              [this, f, ctx, reactor, rpc, start, owner](grpc::Status s) {
                const auto& trailers = f->client.GetServerTrailingMetadata();
                auto it = trailers.find("x-bandit-node");
                const std::string served_by =
                    it == trailers.end() ? owner
                                         : std::string(it->second.data(), it->second.size());
                ctx->AddTrailingMetadata("x-bandit-node", served_by);
                delete f;
                Finish(reactor, rpc, start, FromForwarded(s, served_by));
              });
      return true;
    }
  }
  ctx->AddTrailingMetadata("x-bandit-node", node->node_id());
  return false;
}

template <typename Method, typename Req, typename Resp>
GrpcBanditService::Reactor* GrpcBanditService::Handle(Ctx* ctx, Rpc rpc, Method method,
                                                      grpc::MessageHolder<Req, Resp>* call,
                                                      grpc::ByteBuffer* out) {
  const auto start = std::chrono::steady_clock::now();
  Reactor* reactor = ctx->DefaultReactor();
  if (auth_ != nullptr) {
    if (absl::Status denied = auth_->Check(rpc, *ctx, RoutingKey(*call->request()).first);
        !denied.ok()) {
      call->Release();
      Finish(reactor, rpc, start, denied);
      return reactor;
    }
  }
  if (cluster_mode_ && RouteElsewhere(ctx, reactor, rpc, start, call, out)) return reactor;
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
