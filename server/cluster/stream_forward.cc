#include "server/cluster/stream_forward.h"

namespace bandit::server::cluster {

ForwardedStream* ForwardedStream::Prepare(
    grpc::GenericStub* stub, const std::string& method, grpc::ByteBuffer request,
    const std::vector<std::pair<std::string, std::string>>& metadata,
    std::chrono::system_clock::time_point deadline, std::string owner, Sink* sink) {
  auto* f = new ForwardedStream(std::move(request), std::move(owner), sink);
  f->client_.set_deadline(deadline);
  for (const auto& [key, value] : metadata) f->client_.AddMetadata(key, value);
  stub->PrepareBidiStreamingCall(&f->client_, method, grpc::StubOptions(), f);
  f->StartWrite(&f->request_);
  f->StartWritesDone();
  f->StartRead(&f->message_);
  f->AddHold();  // released by the read that ends the stream
  return f;
}

void ForwardedStream::OnDone(const grpc::Status& status) {
  const auto& trailers = client_.GetServerTrailingMetadata();
  auto it = trailers.find("x-bandit-node");
  const std::string node =
      it == trailers.end() ? owner_ : std::string(it->second.data(), it->second.size());
  sink_->ForwardDone(status, node);
  delete this;
}

}  // namespace bandit::server::cluster
