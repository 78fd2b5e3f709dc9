// Cluster routing and forwarding, the one routing seam of every front door: where a call for an
// instance goes (this node, or the owner another node is), and the forward itself, to the
// owner's gRPC port, with the caller's token, the routing header and x-bandit-forwarded-by (so
// it is never forwarded twice), under the caller's deadline capped at
// RouterOptions::forward_deadline. Both doors describe their caller (Caller) and call the same
// step: Dispatch (a unary call; the gRPC adapter, asynchronous), Run (the same, blocking and
// typed; the HTTP door through RoutedCalls), DispatchStream (ExportDecisionLog) and ListAll
// (ListInstances across the nodes). Metadata keys: proto/bandit/v1/metadata.h.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "bandit/v1/service.pb.h"
#include "proto/bandit/v1/metadata.h"
#include "server/cluster/cluster_node.h"
#include "server/cluster/stream_forward.h"
#include "server/service/rpcs.h"

namespace bandit::server::cluster {

struct RouterOptions {
  // The longest a forwarded unary call may run (the caller's deadline when it is sooner), so
  // that a forward never outlives a shutdown's grace period by much (--forward_deadline_ms).
  std::chrono::milliseconds forward_deadline{30'000};
  // The same for ListInstances asking every other node for its page.
  std::chrono::milliseconds list_deadline{10'000};
};

// The instance a request is about ("" = none: served by the node it reached) and whether the
// call creates it.
struct RoutingKey {
  std::string name;
  bool create = false;
};

template <typename Req>
RoutingKey RoutingKeyOf(const Req& req) {
  if constexpr (std::is_same_v<Req, bandit::v1::CreateInstanceRequest> ||
                std::is_same_v<Req, bandit::v1::ImportInstanceRequest>) {
    return {req.name(), true};
  } else if constexpr (std::is_same_v<Req, bandit::v1::SelectRequest> ||
                       std::is_same_v<Req, bandit::v1::UpdateRequest> ||
                       std::is_same_v<Req, bandit::v1::ActivateRequest> ||
                       std::is_same_v<Req, bandit::v1::CreateEvaluationRequest> ||
                       std::is_same_v<Req, bandit::v1::GetEvaluationRequest> ||
                       std::is_same_v<Req, bandit::v1::ListEvaluationsRequest> ||
                       std::is_same_v<Req, bandit::v1::DeleteEvaluationRequest>) {
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

// The answer of a call forwarded to `owner`, for the caller. CANCELLED from the owner is never
// the caller's own doing (a caller that cancelled reads no answer): the owner cut the call (it
// is leaving: its server shutting down cancels the calls it has not finished or not yet
// started). CANCELLED is not retryable, so the caller would give up on a call the cluster can
// serve: it hears UNAVAILABLE, which clients retry (reaching the instance's next owner).
absl::Status FromForwarded(const grpc::Status& s, const std::string& owner);

// "/bandit.v1.BanditService/Select", ...
std::string MethodPath(Rpc rpc);

// A call a front door received, as routing sees it: what a forward passes on of it (the
// caller's token and the routing header, as metadata), whether another node sent it (it is then
// never sent on), and its deadline.
struct Caller {
  std::vector<std::pair<std::string, std::string>> metadata;
  bool forwarded = false;
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
  // A caller known by its token ("" = none), sent as "Bearer TOKEN", and the instance it names
  // ("" = none) as the routing header: the HTTP door's.
  static Caller WithToken(const std::string& token, const std::string& instance);
};

class Router {
 public:
  using Metadata = std::vector<std::pair<std::string, std::string>>;
  using Deadline = std::chrono::system_clock::time_point;
  // A call's answer from elsewhere: its status and the node that served it.
  using Done = std::function<void(absl::Status, std::string served_by)>;

  explicit Router(RouterOptions options = {}) : options_(options) {}

  // Until the node is set, every call for an instance is answered UNAVAILABLE ("joining").
  void SetNode(ClusterNode* node) { node_.store(node); }
  // This node's id ("" while joining).
  std::string node_id() const;

  // Where a call for `key` goes: this node (route.local, also for a call about no instance), or
  // the owner. UNAVAILABLE while joining; the cluster's refusal otherwise (e.g. `forwarded`: the
  // call came from another node and this one does not own the instance).
  absl::StatusOr<Route> Decide(const RoutingKey& key, bool forwarded) const;

  // The routing step of a unary call: where `req` (of `rpc`, from `caller`) goes. kHere: this
  // node serves it (the door runs it locally; node_id() is the serving node). kAnswered:
  // `done(status, served_by)` runs once: at once, on this thread, when the call is refused here
  // (joining, moving, the cluster's refusal; served_by = this node's id, "" while joining), or
  // on a gRPC thread once the owner answered the forwarded request (OK: *response holds its
  // answer's bytes).
  enum class Placement { kHere, kAnswered };
  template <typename Req>
  Placement Dispatch(Rpc rpc, const Req& req, const Caller& caller, grpc::ByteBuffer* response,
                     Done done);
  // The same, blocking and typed (a door that runs a request on its own thread: HTTP):
  // `local()` when this node serves it, else the owner's answer parsed into *resp.
  template <typename Req, typename Resp, typename Local>
  absl::Status Run(Rpc rpc, const Req& req, Resp* resp, const Caller& caller, Local local);
  // The routing step of a server-streaming call: nullptr when this node serves it, its refusal,
  // or the stream forwarded to the owner, prepared (the door keeps it for its sink's calls,
  // then Go()).
  template <typename Req>
  absl::StatusOr<ForwardedStream*> DispatchStream(Rpc rpc, const Req& req, const Caller& caller,
                                                  ForwardedStream::Sink* sink);
  // ListInstances on any node: `local` is this node's page (or its refusal of the request);
  // unless another node sent the call, every other live node's page is merged in (ListAcross).
  // done(status, this node's id) runs once, with the page's bytes in *response when OK.
  void ListAll(const bandit::v1::ListInstancesRequest& req,
               absl::StatusOr<bandit::v1::ListInstancesResponse> local, const Caller& caller,
               grpc::ByteBuffer* response, Done done);

  // Sends `request` (the bytes of `rpc`'s request message) to `route`'s owner with `metadata`
  // (the caller's: authorization, routing header) plus x-bandit-forwarded-by, under `deadline`
  // capped at forward_deadline. `done(status, served_by)` runs once, on a gRPC thread, after
  // the owner's answer is in `*response` (OK) or not; served_by is the owner's x-bandit-node
  // trailer (else the owner's id).
  void ForwardUnary(const Route& route, Rpc rpc, grpc::ByteBuffer request,
                    grpc::ByteBuffer* response, Metadata metadata, Deadline deadline,
                    std::function<void(absl::Status, std::string served_by)> done);

  // A server-streaming call forwarded whole (ExportDecisionLog); no cap on its deadline (a long
  // export may run past it; cancelling the caller's call cancels the owner's). The stream ends
  // itself (ForwardedStream).
  ForwardedStream* ForwardStream(const Route& route, Rpc rpc, grpc::ByteBuffer request,
                                 Metadata metadata, Deadline deadline, ForwardedStream::Sink* sink);

  // ListInstances across the cluster: `local` is this node's own page of `req`; every other live
  // node is asked for its page after the same token, and the first page_size names of the merge
  // are the cluster's page. UNAVAILABLE if a node does not answer (a partial list would miss
  // instances silently). `done` runs once, on this thread or a gRPC thread.
  void ListAcross(const bandit::v1::ListInstancesRequest& req,
                  bandit::v1::ListInstancesResponse local, Metadata metadata, Deadline deadline,
                  std::function<void(absl::StatusOr<bandit::v1::ListInstancesResponse>)> done);

  // Calls forwarded so far (bandit_cluster_forwarded_calls_total).
  int64_t forwarded_calls() const { return forwarded_.load(); }

 private:
  grpc::GenericStub* StubFor(const std::string& address);
  Deadline Capped(Deadline deadline, std::chrono::milliseconds cap) const;

  const RouterOptions options_;
  std::atomic<ClusterNode*> node_{nullptr};
  std::atomic<int64_t> forwarded_{0};
  absl::Mutex stubs_mu_;
  std::map<std::string, std::unique_ptr<grpc::GenericStub>> stubs_ ABSL_GUARDED_BY(stubs_mu_);
};

template <typename Req>
Router::Placement Router::Dispatch(Rpc rpc, const Req& req, const Caller& caller,
                                   grpc::ByteBuffer* response, Done done) {
  absl::StatusOr<Route> route = Decide(RoutingKeyOf(req), caller.forwarded);
  if (route.ok() && route->local) return Placement::kHere;
  if (!route.ok()) {
    done(route.status(), node_id());
    return Placement::kAnswered;
  }
  grpc::ByteBuffer request;
  bool own = false;
  if (grpc::Status s = grpc::SerializationTraits<Req>::Serialize(req, &request, &own); !s.ok()) {
    done(absl::InternalError("a request to forward could not be serialized: " + s.error_message()),
         node_id());
    return Placement::kAnswered;
  }
  ForwardUnary(*route, rpc, std::move(request), response, caller.metadata, caller.deadline,
               std::move(done));
  return Placement::kAnswered;
}

template <typename Req, typename Resp, typename Local>
absl::Status Router::Run(Rpc rpc, const Req& req, Resp* resp, const Caller& caller, Local local) {
  // Shared with the answer's callback, which may still be returning when the wait ends.
  struct Wait {
    grpc::ByteBuffer response;
    absl::Status status;
    std::string served_by;
    absl::Notification done;
  };
  auto wait = std::make_shared<Wait>();
  if (Dispatch(rpc, req, caller, &wait->response, [wait](absl::Status s, std::string served_by) {
        wait->status = std::move(s);
        wait->served_by = std::move(served_by);
        wait->done.Notify();
      }) == Placement::kHere)
    return local();
  wait->done.WaitForNotification();
  if (!wait->status.ok()) return wait->status;
  if (!grpc::SerializationTraits<Resp>::Deserialize(&wait->response, resp).ok())
    return absl::InternalError(absl::StrCat("the answer of node '", wait->served_by, "' to ",
                                            RpcName(rpc), " could not be parsed"));
  return absl::OkStatus();
}

template <typename Req>
absl::StatusOr<ForwardedStream*> Router::DispatchStream(Rpc rpc, const Req& req,
                                                        const Caller& caller,
                                                        ForwardedStream::Sink* sink) {
  absl::StatusOr<Route> route = Decide(RoutingKeyOf(req), caller.forwarded);
  if (!route.ok()) return route.status();
  if (route->local) return nullptr;
  grpc::ByteBuffer request;
  bool own = false;
  if (grpc::Status s = grpc::SerializationTraits<Req>::Serialize(req, &request, &own); !s.ok())
    return absl::InternalError("a request to forward could not be serialized: " +
                               s.error_message());
  // The stream (unlike a unary forward) keeps the caller's deadline: a long export may run past
  // the cap, and a caller's cancel cancels the owner's call.
  return ForwardStream(*route, rpc, std::move(request), caller.metadata, caller.deadline, sink);
}

}  // namespace bandit::server::cluster
