// bandit-echo: the physical ceiling for banditd on this machine.
//
// A callback-API gRPC server (the same API, builder settings and message types as banditd) whose
// Select/Update handlers do no work: they fill a response shaped like banditd's (an event id of the
// same format and length, arm index, arm id for arm-set requests, propensity, the diagnostics map
// GLB-OMD fills, expiry time) and
// finish the reactor at once. Everything banditd costs beyond this is the service's own cost.
//
//   bandit-echo --listen=127.0.0.1:0 --port_file=/tmp/echo.port [--arms=50]
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "echo.grpc.pb.h"
#include "server/api/message_pool.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0", "gRPC listen address (host:port; port 0 = any)");
ABSL_FLAG(std::string, port_file, "",
          "If set, write \"GRPC_PORT 0\\n\" to this file once listening");
ABSL_FLAG(int32_t, arms, 50,
          "Arm-set requests (no candidates): arm ids are drawn from 0..arms-1 like banditd's");
ABSL_FLAG(std::string, diagnostics, "ucb,mean,bonus,beta",
          "Keys of Decision.diagnostics to fill (default: the four GLB-OMD reports), empty = none");
ABSL_FLAG(int32_t, max_message_bytes, 16 << 20, "Max gRPC message size, both directions");

namespace {

using bandit::v1::Decision;
using bandit::v1::SelectBatchRequest;
using bandit::v1::SelectBatchResponse;
using bandit::v1::SelectRequest;
using bandit::v1::UpdateBatchRequest;
using bandit::v1::UpdateBatchResponse;
using bandit::v1::UpdateRequest;
using bandit::v1::UpdateResponse;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class EchoService final : public bandit::bench::Echo::CallbackService {
 public:
  EchoService(int arms, std::vector<std::string> diagnostics)
      : arms_(arms > 0 ? arms : 1), diagnostics_(std::move(diagnostics)) {
    allocators_.Install(*this);  // the same pooled arenas as banditd
  }

  grpc::ServerUnaryReactor* Select(grpc::CallbackServerContext* ctx, const SelectRequest* req,
                                   Decision* resp) override {
    Fill(*req, resp);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* Update(grpc::CallbackServerContext* ctx, const UpdateRequest*,
                                   UpdateResponse* resp) override {
    resp->set_updates(updates_.fetch_add(1, std::memory_order_relaxed) + 1);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* SelectBatch(grpc::CallbackServerContext* ctx,
                                        const SelectBatchRequest* req,
                                        SelectBatchResponse* resp) override {
    for (const auto& item : req->requests()) {
      Fill(item, resp->add_decisions());
      resp->add_statuses();
    }
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* UpdateBatch(grpc::CallbackServerContext* ctx,
                                        const UpdateBatchRequest* req,
                                        UpdateBatchResponse* resp) override {
    for (int i = 0; i < req->requests_size(); ++i) {
      resp->add_responses()->set_updates(updates_.fetch_add(1, std::memory_order_relaxed) + 1);
      resp->add_statuses();
    }
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

 private:
  // A Decision of the same shape as banditd's: "%016x-%x" event id, arm index, arm id for
  // arm-set policies, propensity, expiry time.
  void Fill(const SelectRequest& req, Decision* out) {
    const uint64_t seq = seq_.fetch_add(1, std::memory_order_relaxed) + 1;
    out->set_event_id(absl::StrFormat("%016x-%x", kUid, seq));
    if (req.candidates_size() > 0) {
      out->set_arm_index(static_cast<int>(seq % static_cast<uint64_t>(req.candidates_size())));
    } else {
      const int arm = static_cast<int>(seq % static_cast<uint64_t>(arms_));
      out->set_arm_index(arm);
      out->set_arm_id(std::to_string(arm));
    }
    out->set_propensity(1.0);
    // Values of the same magnitude as GLB-OMD's (doubles are fixed 8 bytes on the wire anyway).
    double v = 0.5 + 1e-9 * static_cast<double>(seq);
    for (const auto& k : diagnostics_) (*out->mutable_diagnostics())[k] = (v += 0.25);
    out->set_expires_at_ms(NowMs() + 600'000);
  }

  bandit::server::RoundMessageAllocators allocators_;
  static constexpr uint64_t kUid = 0x5eed5eed5eed5eedULL;
  const int arms_;
  const std::vector<std::string> diagnostics_;
  std::atomic<uint64_t> seq_{0};
  std::atomic<int64_t> updates_{0};
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex::Lock (ours and gRPC's)
  // maintains the deadlock-detection graph: ~3% of the CPU under load. It is a debugging aid;
  // release builds of Abseil have it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::vector<std::string> diagnostics;
  for (absl::string_view k :
       absl::StrSplit(absl::GetFlag(FLAGS_diagnostics), ',', absl::SkipEmpty()))
    diagnostics.emplace_back(k);
  EchoService service(absl::GetFlag(FLAGS_arms), std::move(diagnostics));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen), grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  // The same limits and keepalive settings as banditd (server/server.cc).
  builder.SetMaxReceiveMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.SetMaxSendMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "bandit-echo: cannot listen on %s\n", absl::GetFlag(FLAGS_listen).c_str());
    return 1;
  }
  std::fprintf(stderr, "bandit-echo listening on port %d\n", port);
  if (const std::string pf = absl::GetFlag(FLAGS_port_file); !pf.empty()) {
    const std::string tmp = pf + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "%d 0\n", port);
      std::fclose(f);
      std::rename(tmp.c_str(), pf.c_str());
    }
  }
  int sig = 0;
  sigwait(&signals, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}
