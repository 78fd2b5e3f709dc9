#include "server/cluster/router.h"

#include <algorithm>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "bandit/v1/service.grpc.pb.h"

namespace bandit::server::cluster {

absl::Status FromForwarded(const grpc::Status& s, const std::string& owner) {
  if (s.error_code() == grpc::StatusCode::CANCELLED)
    return absl::UnavailableError(absl::StrCat(
        "node '", owner, "', the instance's owner, cut the forwarded call (", s.error_message(),
        "): it is leaving or restarting; the change may or may not have been applied; retry"));
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

std::string MethodPath(Rpc rpc) {
  return absl::StrCat("/", bandit::v1::BanditService::service_full_name(), "/", RpcName(rpc));
}

std::string Router::node_id() const {
  ClusterNode* node = node_.load();
  return node == nullptr ? std::string() : node->node_id();
}

Caller Caller::WithToken(const std::string& token, const std::string& instance) {
  Caller caller;
  if (!token.empty())
    caller.metadata.emplace_back(bandit::v1::kAuthorizationKey, "Bearer " + token);
  if (!instance.empty()) caller.metadata.emplace_back(bandit::v1::kInstanceKey, instance);
  return caller;
}

absl::StatusOr<Route> Router::Decide(const RoutingKey& key, bool forwarded) const {
  ClusterNode* node = node_.load();
  if (node == nullptr) return absl::UnavailableError("this node is joining the cluster; retry");
  if (key.name.empty()) {
    Route here;
    here.local = true;
    return here;
  }
  return node->RouteFor(key.name, key.create, forwarded);
}

Router::Deadline Router::Capped(Deadline deadline, std::chrono::milliseconds cap) const {
  const Deadline latest = std::chrono::system_clock::now() + cap;
  return deadline < latest ? deadline : latest;
}

grpc::GenericStub* Router::StubFor(const std::string& address) {
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

void Router::ForwardUnary(const Route& route, Rpc rpc, grpc::ByteBuffer request,
                          grpc::ByteBuffer* response, Metadata metadata, Deadline deadline,
                          std::function<void(absl::Status, std::string served_by)> done) {
  // Owned by the completion callback: the context and the request live until the answer came.
  struct Forward {
    grpc::ClientContext client;
    grpc::ByteBuffer request;
  };
  auto f = std::make_shared<Forward>();
  f->request = std::move(request);
  f->client.set_deadline(Capped(deadline, options_.forward_deadline));
  for (auto& [key, value] : metadata) f->client.AddMetadata(key, value);
  f->client.AddMetadata(bandit::v1::kForwardedByKey, node_id());
  ++forwarded_;
  StubFor(route.address)
      ->UnaryCall(&f->client, MethodPath(rpc), grpc::StubOptions(), &f->request, response,
                  [f, owner = route.node_id, done = std::move(done)](grpc::Status s) {
                    const auto& trailers = f->client.GetServerTrailingMetadata();
                    auto it = trailers.find(bandit::v1::kNodeKey);
                    std::string served_by = it == trailers.end()
                                                ? owner
                                                : std::string(it->second.data(), it->second.size());
                    absl::Status status = FromForwarded(s, served_by);
                    done(std::move(status), std::move(served_by));
                  });
}

ForwardedStream* Router::ForwardStream(const Route& route, Rpc rpc, grpc::ByteBuffer request,
                                       Metadata metadata, Deadline deadline,
                                       ForwardedStream::Sink* sink) {
  metadata.emplace_back(bandit::v1::kForwardedByKey, node_id());
  ++forwarded_;
  return ForwardedStream::Prepare(StubFor(route.address), MethodPath(rpc), std::move(request),
                                  metadata, deadline, route.node_id, sink);
}

void Router::ListAll(const bandit::v1::ListInstancesRequest& req,
                     absl::StatusOr<bandit::v1::ListInstancesResponse> local,
                     const Caller& caller, grpc::ByteBuffer* response, Done done) {
  // Answered by this node, as the node that served it, once the page is in `response`.
  auto answer = [response, done, id = node_id()](
                    absl::StatusOr<bandit::v1::ListInstancesResponse> page) {
    if (!page.ok()) {
      done(page.status(), id);
      return;
    }
    bool own = false;
    grpc::Status g =
        grpc::SerializationTraits<bandit::v1::ListInstancesResponse>::Serialize(*page, response,
                                                                                &own);
    done(g.ok() ? absl::OkStatus() : absl::InternalError(g.error_message()), id);
  };
  if (absl::StatusOr<Route> here = Decide({"", false}, caller.forwarded); !here.ok()) {
    done(here.status(), node_id());
    return;
  }
  // Another node's fan-out asks for this node's own page only.
  if (caller.forwarded || !local.ok()) {
    answer(std::move(local));
    return;
  }
  // The other nodes are asked with the caller's token only (the routing header names no
  // instance of theirs).
  Metadata metadata;
  for (const auto& [key, value] : caller.metadata)
    if (key == bandit::v1::kAuthorizationKey) metadata.emplace_back(key, value);
  ListAcross(req, *std::move(local), std::move(metadata), caller.deadline, std::move(answer));
}

void Router::ListAcross(
    const bandit::v1::ListInstancesRequest& req, bandit::v1::ListInstancesResponse local,
    Metadata metadata, Deadline deadline,
    std::function<void(absl::StatusOr<bandit::v1::ListInstancesResponse>)> done) {
  struct Fan {
    absl::Mutex mu;
    int remaining ABSL_GUARDED_BY(mu) = 0;
    std::vector<bandit::v1::Instance> instances ABSL_GUARDED_BY(mu);
    bool more ABSL_GUARDED_BY(mu) = false;
    absl::Status error ABSL_GUARDED_BY(mu);
  };
  auto fan = std::make_shared<Fan>();
  const int size = req.page_size() == 0 ? 100 : req.page_size();
  {
    absl::MutexLock lock(&fan->mu);
    for (auto& inst : *local.mutable_instances()) fan->instances.push_back(std::move(inst));
    fan->more = !local.next_page_token().empty();
  }
  // Runs once every page is in (the last answer's thread).
  auto finish = [fan, size, done = std::move(done)]() {
    absl::MutexLock lock(&fan->mu);
    if (!fan->error.ok()) {
      done(fan->error);
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
    done(std::move(merged));
  };
  ClusterNode* node = node_.load();
  std::vector<std::pair<std::string, std::string>> others;
  if (node != nullptr)
    for (const auto& member : node->LiveMembers())
      if (member.first != node->node_id()) others.push_back(member);
  if (others.empty()) {
    finish();
    return;
  }
  {
    absl::MutexLock lock(&fan->mu);
    fan->remaining = static_cast<int>(others.size());
  }
  const Deadline capped = Capped(deadline, options_.list_deadline);
  for (const auto& [id, address] : others) {
    // Owned by the completion callback, as a unary forward.
    struct Ask {
      grpc::ClientContext client;
      grpc::ByteBuffer request, response;
    };
    auto ask = std::make_shared<Ask>();
    bool own = false;
    (void)grpc::SerializationTraits<bandit::v1::ListInstancesRequest>::Serialize(req, &ask->request,
                                                                                 &own);
    ask->client.set_deadline(capped);
    for (const auto& [key, value] : metadata) ask->client.AddMetadata(key, value);
    ask->client.AddMetadata(bandit::v1::kForwardedByKey, node->node_id());
    ++forwarded_;
    StubFor(address)->UnaryCall(
        &ask->client, MethodPath(Rpc::kListInstances), grpc::StubOptions(), &ask->request,
        &ask->response, [ask, fan, finish, id = id](grpc::Status s) {
          bandit::v1::ListInstancesResponse page;
          const bool parsed =
              s.ok() && grpc::SerializationTraits<bandit::v1::ListInstancesResponse>::Deserialize(
                            &ask->response, &page)
                            .ok();
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

}  // namespace bandit::server::cluster
