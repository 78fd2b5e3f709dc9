// gRPC callback-API adapter: one handler per RPC in server/service/rpcs.h, each checks the caller's
// role, times the call, runs the DecisionService method of the same name and finishes the
// reactor. Handlers hold no state of their own and never see storage.
//
// Every method is registered raw (request and response as bytes) and parses its request itself
// into a pooled arena: gRPC's typed callback handlers answer a payload that does not parse with
// UNIMPLEMENTED and an empty message, which clients and proxies read as "no such method". Here
// it is INVALID_ARGUMENT naming the message that was expected, counted in
// bandit_rpc_unparseable_requests_total.
#pragma once

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

#include "bandit/v1/service.grpc.pb.h"
#include "server/api/message_pool.h"
#include "server/api/auth.h"
#include "server/metrics/metrics.h"
#include "server/service/decision_service.h"
#include "server/service/rpcs.h"

namespace bandit::server {

namespace cluster {
class Router;
struct Caller;
}

// The one absl::Status -> grpc::Status conversion (same code numbers; message capped).
grpc::Status ToGrpcStatus(const absl::Status& s);

class GrpcBanditService final : public bandit::v1::BanditService::CallbackService {
 public:
  // `auth` may be null (no authentication); when set, every handler checks the caller's token
  // against RequiredRole(rpc) before doing anything. `router` is set in cluster mode (see
  // below), null otherwise.
  GrpcBanditService(DecisionService* service, Metrics* metrics, const Authorizer* auth = nullptr,
                    cluster::Router* router = nullptr);

  using Ctx = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;

  // Shutdown, once the grace period is over: answers every call still waiting (for durability
  // or snapshot I/O) with `status`, and every call that would start waiting from now on. Their
  // late completions are dropped. Returns how many calls were cut.
  // Rounds streams are cut too: each still holding an unanswered request ends with `status`
  // (counted as one call).
  int CutPendingCalls(const absl::Status& status);
  // Shutdown, at its start: every open Rounds stream takes no new request and ends with
  // `status` once the answers of those it took are written (an idle stream at once); a stream
  // opened later ends at once.
  void EndStreams(const absl::Status& status);
  // Age of the oldest call waiting for its records to become durable (0 if none).
  double OldestDurableWaitSeconds() const;
  // Calls of this service that gRPC has handed over and not yet seen done (answered and sent,
  // or cancelled): a call counts from its handler's start to its reactor's OnDone.
  int64_t ActiveCalls() const { return active_calls_.load(std::memory_order_acquire); }

  // Cluster mode: each call asks the router (server/cluster/router.h) where it goes; a call for
  // an instance another node owns is forwarded there, and every answer carries the serving
  // node's id in the trailing metadata x-bandit-node. The router answers UNAVAILABLE
  // ("joining") until its cluster node is set.

 private:
  // Parses the request bytes into `Req` on the call's arena (INVALID_ARGUMENT if they are not
  // one), then Handle().
  template <typename Req, typename Resp, typename Method>
  Reactor* HandleBytes(Ctx* ctx, Rpc rpc, Method method, const grpc::ByteBuffer* in,
                       grpc::ByteBuffer* out);
  // Checks the role, then calls `method` in whichever of the service's three shapes it has:
  //   read:     Status (const Req&, Resp*)
  //   write:    Status (const Req&, Resp*, uint64_t* written_seq); acknowledged only once the
  //             service says the call's newest record is as durable as --durability promises
  //             (in `always`, after the group-commit fsync, off this thread)
  //   deferred: void (const Req&, Resp*, std::function<void(absl::Status)> done); finished
  //             when `done` runs (work the service does off the RPC thread)
  template <typename Method, typename Req, typename Resp>
  Reactor* Handle(Ctx* ctx, Rpc rpc, Method method, grpc::MessageHolder<Req, Resp>* call,
                  grpc::ByteBuffer* out);
  // The pooled arenas of the per-round RPCs; other RPCs get a fresh arena per call.
  template <typename Req, typename Resp>
  grpc::MessageHolder<Req, Resp>* AllocateMessages();
  void Finish(Reactor* reactor, Rpc rpc, std::chrono::steady_clock::time_point start,
              const absl::Status& status);
  // ExportDecisionLog, registered raw like the unary methods (a payload that does not parse is
  // INVALID_ARGUMENT): the decision log in chunks, one in flight at a time (bounded memory
  // whatever the log's length); the next chunk is read when the previous one was written.
  class DecisionLogWriter;
  // Rounds (grpc_round_stream.cc): each request served as its unary call, answered in order.
  class RoundStream;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* OpenRoundStream(Ctx* ctx);
  void Register(RoundStream* stream);
  void Unregister(RoundStream* stream);
  // The open streams, each held (RoundStream::Hold) for the caller to use and release; `end`,
  // when set, also ends the streams opened from now on.
  std::vector<RoundStream*> HoldStreams(std::optional<absl::Status> end);
  int CutStreams(const absl::Status& status);
  // The call as the router sees it (cluster::Caller): what a forward passes on of its metadata
  // (the caller's token and the routing header), whether another node sent it, its deadline.
  static cluster::Caller CallerOf(const Ctx& ctx);

  // Calls whose handler returned before their answer was ready. Each is answered exactly once,
  // by whoever claims it first: its completion or CutPendingCalls. Shared with the completion
  // callbacks, which may run after a cut.
  class PendingCalls {
   public:
    struct Call {
      Reactor* reactor;
      Rpc rpc;
      std::chrono::steady_clock::time_point start;
      bool durability;  // waiting for the journal (else for snapshot I/O)
    };
    // The id to Claim() it by later, or nullopt once cut (answer it now with cut_status()).
    std::optional<uint64_t> Add(const Call& call);
    std::optional<Call> Claim(uint64_t id);
    std::vector<Call> Cut(const absl::Status& status);
    absl::Status cut_status() const;
    double OldestDurableWaitSeconds() const;

   private:
    mutable absl::Mutex mu_;
    uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
    std::map<uint64_t, Call> calls_ ABSL_GUARDED_BY(mu_);  // by id = arrival order
    std::optional<absl::Status> cut_ ABSL_GUARDED_BY(mu_);
  };
  // Registers `call` and returns its id, or answers it at once (and returns nullopt) when
  // pending calls were already cut.
  std::optional<uint64_t> AddPending(const PendingCalls::Call& call);

  // Cluster mode: the router's routing step, the same as the HTTP door's (Router::Dispatch;
  // ListInstances: Router::ListAll). False when the call is to be served here; true when the
  // router answered it (refused, forwarded to the owner, or the list merged across nodes).
  template <typename Req, typename Resp>
  bool RouteElsewhere(Ctx* ctx, Reactor* reactor, Rpc rpc,
                      std::chrono::steady_clock::time_point start,
                      grpc::MessageHolder<Req, Resp>* call, grpc::ByteBuffer* out);

  // One call in active_calls_ for the lifetime of its reactor, which ends in OnDone.
  class ActiveCall {
   public:
    explicit ActiveCall(std::atomic<int64_t>* active) : active_(active) {
      active_->fetch_add(1, std::memory_order_relaxed);
    }
    ~ActiveCall() { active_->fetch_sub(1, std::memory_order_release); }
    ActiveCall(const ActiveCall&) = delete;
    ActiveCall& operator=(const ActiveCall&) = delete;

   private:
    std::atomic<int64_t>* const active_;
  };
  // A unary call's reactor, counted in active_calls_ until gRPC is done with the call.
  class CountedReactor;
  Reactor* NewReactor();

  // The open Rounds streams, for EndStreams and CutPendingCalls (lock order: streams_mu_, then
  // a stream's own).
  absl::Mutex streams_mu_;
  absl::flat_hash_set<RoundStream*> streams_ ABSL_GUARDED_BY(streams_mu_);
  std::optional<absl::Status> streams_end_ ABSL_GUARDED_BY(streams_mu_);

  cluster::Router* const router_;
  std::atomic<int64_t> active_calls_{0};
  const std::shared_ptr<PendingCalls> pending_ = std::make_shared<PendingCalls>();
  RoundMessageAllocators allocators_;
  // Each Rounds request and its answer, reused (the pool outlives every stream: the service
  // outlives the server).
  RoundMessages::Pool round_messages_;
  DecisionService* service_;
  Metrics* metrics_;
  const Authorizer* auth_;
};

}  // namespace bandit::server
