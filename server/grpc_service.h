// gRPC callback-API adapter: one handler per RPC in server/rpcs.h, each checks the caller's
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
#include <grpcpp/support/status.h>

#include "bandit/v1/service.grpc.pb.h"
#include "server/arena_allocator.h"
#include "server/auth.h"
#include "server/decision_service.h"
#include "server/metrics.h"
#include "server/rpcs.h"

namespace bandit::server {

// The one absl::Status -> grpc::Status conversion (same code numbers; message capped).
grpc::Status ToGrpcStatus(const absl::Status& s);

class GrpcBanditService final : public bandit::v1::BanditService::CallbackService {
 public:
  // `auth` may be null (no authentication); when set, every handler checks the caller's token
  // against RequiredRole(rpc) before doing anything.
  GrpcBanditService(DecisionService* service, Metrics* metrics, const Authorizer* auth = nullptr);

  using Ctx = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;

 private:
  // Parses the request bytes into `Req` (INVALID_ARGUMENT if they are not one), then Handle().
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
  // Writes the response bytes (on success), returns the call's arena to its pool, records the
  // metrics and finishes the reactor: the one way every call ends.
  template <typename Req, typename Resp>
  void Finish(Reactor* reactor, Rpc rpc, std::chrono::steady_clock::time_point start,
              const absl::Status& status, grpc::MessageHolder<Req, Resp>* call,
              grpc::ByteBuffer* out);
  // The pooled arenas of the per-round RPCs; other RPCs get a fresh arena per call.
  template <typename Req, typename Resp>
  grpc::MessageHolder<Req, Resp>* AllocateMessages();

  RoundMessageAllocators allocators_;
  DecisionService* service_;
  Metrics* metrics_;
  const Authorizer* auth_;
};

}  // namespace bandit::server
