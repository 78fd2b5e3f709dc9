// The client half of a server-streaming call forwarded to the node that owns its instance
// (ExportDecisionLog in cluster mode). Messages pass through as bytes, one at a time: the next is
// read from the owner only after the previous one was written to the caller, so a forwarded
// stream holds one message in memory however long it is, and a slow caller slows the owner's
// stream down rather than filling this node's memory.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/client_callback.h>

namespace bandit::server::cluster {

class ForwardedStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // The caller's side of the stream.
  class Sink {
   public:
    virtual ~Sink() = default;
    // Write `message` to the caller, then call Next() (the buffer stays valid until then).
    virtual void ForwardMessage(grpc::ByteBuffer* message) = 0;
    // The owner's stream ended with `status`; `node` is the node that served it (its
    // x-bandit-node trailer, else the owner's id). The stream is gone once this returns.
    virtual void ForwardDone(const grpc::Status& status, const std::string& node) = 0;
  };

  // Prepares the call to `method` on `stub` with `metadata`: `request`, half-close, the first
  // read. `owner` names the node in ForwardDone when its answer carries no trailer. Nothing is
  // sent (and no Sink method runs) before Go().
  static ForwardedStream* Prepare(grpc::GenericStub* stub, const std::string& method,
                                  grpc::ByteBuffer request,
                                  const std::vector<std::pair<std::string, std::string>>& metadata,
                                  std::chrono::system_clock::time_point deadline, std::string owner,
                                  Sink* sink);

  void Go() { StartCall(); }
  // The last message was written (or could not be: call Cancel() first): read the next one.
  void Next() { StartRead(&message_); }
  // The caller went away: the owner's call is cancelled (safe from any thread until
  // ForwardDone).
  void Cancel() { client_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (ok) {
      sink_->ForwardMessage(&message_);
    } else {
      // The stream ended (or was cancelled). The hold kept OnDone from running while a message
      // was with the sink and no read was outstanding.
      RemoveHold();
    }
  }
  void OnDone(const grpc::Status& status) override;

 private:
  ForwardedStream(grpc::ByteBuffer request, std::string owner, Sink* sink)
      : request_(std::move(request)), owner_(std::move(owner)), sink_(sink) {}

  grpc::ClientContext client_;
  grpc::ByteBuffer request_, message_;
  const std::string owner_;
  Sink* const sink_;
};

}  // namespace bandit::server::cluster
