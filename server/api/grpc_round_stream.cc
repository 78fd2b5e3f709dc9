// The Rounds stream: Select, Update and Activate requests on one long-lived call, each served as
// the unary call of its kind is (the role check, the cluster's routing, the DecisionService
// method of the same name, the durability wait, the same latency metric and status codes), and
// answered in the order they came. What a stream saves is the per-call work: one call's
// headers, stream set-up and thread hand-offs for many requests, and a client may send the next
// request before the previous answer arrived.
//
// Requests are served one at a time, in order, on the thread that read them: a request forwarded
// to another node holds the next until its answer is back, so a request never overtakes an
// earlier one. Answers wait in `answers_` until they are ready (a write waits for its records
// to be as durable as --durability promises, as a unary write does) and are written in order,
// one write in flight; answers ready together are written with gRPC's buffer hint, so they
// leave in one send.
#include <grpcpp/impl/codegen/proto_utils.h>

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/bandit/v1/metadata.h"
#include "server/api/grpc_service.h"
#include "server/cluster/router.h"
#include "server/service/status_util.h"

namespace bandit::server {

class GrpcBanditService::RoundStream final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // A client that sends without reading holds at most this many answers here; beyond, the
  // stream stops reading and HTTP/2's flow control holds the client back.
  static constexpr size_t kMaxUnansweredRequests = 64;

  RoundStream(GrpcBanditService* owner, Ctx* ctx)
      : owner_(owner),
        active_(&owner->active_calls_),
        ctx_(ctx),
        caller_(owner->router_ != nullptr ? CallerOf(*ctx) : cluster::Caller()),
        opened_(std::chrono::steady_clock::now()) {}

  // After Register: starts reading (or ends at once when the server is shutting down).
  void Start() { Advance(); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      {
        absl::MutexLock lock(&mu_);
        read_busy_ = false;
        read_closed_ = true;
      }
      Advance();
      return;
    }
    Answer* answer = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (end_.has_value() || cut_.has_value()) {
        // Read after the stream began to end: not served (its answer never comes).
        read_busy_ = false;
      } else {
        answer = NewAnswer();
      }
    }
    if (answer != nullptr) Serve(answer);
    {
      absl::MutexLock lock(&mu_);
      read_busy_ = false;
    }
    Advance();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok && !cut_.has_value())
        cut_ = absl::CancelledError("the client stopped reading the Rounds stream");
    }
    Advance();
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      if (!cut_.has_value()) cut_ = absl::CancelledError("the Rounds stream was cancelled");
    }
    Advance();
  }

  void OnDone() override {
    owner_->Unregister(this);
    bool last;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      last = holds_ == 0;
    }
    if (last) delete this;
  }

  // Shutdown (EndStreams): no new request is read; the stream ends with `status` once the
  // answers of the requests it took are written.
  void End(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (!end_.has_value()) end_ = status;
    }
    Advance();
  }

  // The grace period is over (CutPendingCalls): a stream still holding an unanswered request ends
  // now with `status`. True if it held one.
  bool Cut(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || answers_.empty()) return false;
      if (!cut_.has_value()) cut_ = status;
    }
    Advance();
    return true;
  }

  // Someone who will call into this stream later (a callback, EndStreams): the reactor outlives
  // every hold, released with Release().
  void Hold(bool block_reading) {
    absl::MutexLock lock(&mu_);
    ++holds_;
    if (block_reading) blocked_ = true;
  }
  void Release() {
    bool last;
    {
      absl::MutexLock lock(&mu_);
      --holds_;
      last = done_ && holds_ == 0;
    }
    if (last) delete this;
  }

 private:
  // One request and its answer, from its read until the answer is written.
  struct Answer {
    ~Answer() {
      if (messages != nullptr) messages->Release();
    }
    // The request and its answer, pooled (GrpcBanditService::round_messages_): a Select with
    // 50 actions and its ranking are a few hundred allocations on the heap when parsed fresh.
    RoundMessages* messages = nullptr;
    Rpc rpc = Rpc::kRounds;  // the request's kind (kRounds: none, it did not parse)
    std::chrono::steady_clock::time_point start;
    grpc::ByteBuffer forwarded;  // cluster mode: the owner's answer, as it came
    bool ready = false;          // guarded by mu_
  };

  // A fresh answer at the back of the queue (recycled from those written).
  Answer* NewAnswer() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::unique_ptr<Answer> answer;
    if (spare_.empty()) {
      answer = std::make_unique<Answer>();
    } else {
      answer = std::move(spare_.back());
      spare_.pop_back();
      answer->ready = false;
      answer->rpc = Rpc::kRounds;
    }
    answer->messages = owner_->round_messages_.Allocate();
    answer->start = std::chrono::steady_clock::now();
    answers_.push_back(std::move(answer));
    return answers_.back().get();
  }

  void Serve(Answer* answer) {
    const bandit::v1::RoundRequest& request = *answer->messages->request();
    const size_t size = in_.Length();
    if (!answer->messages->Parse(&in_).ok()) {
      if (owner_->metrics_ != nullptr) owner_->metrics_->CountUnparseable(Rpc::kRounds);
      Ready(answer, absl::InvalidArgumentError(absl::StrCat(
                        "the message (", size, " bytes) is not a valid protobuf-encoded ",
                        bandit::v1::RoundRequest::descriptor()->full_name(),
                        " (expected by Rounds); the stream goes on")));
      return;
    }
    answer->messages->LendResult();
    bandit::v1::RoundResponse& response = *answer->messages->response();
    switch (request.call_case()) {
      case bandit::v1::RoundRequest::kSelect:
        Call(answer, Rpc::kSelect, &DecisionService::Select, request.select(),
             response.mutable_decision());
        return;
      case bandit::v1::RoundRequest::kUpdate:
        Call(answer, Rpc::kUpdate, &DecisionService::Update, request.update(),
             response.mutable_update());
        return;
      case bandit::v1::RoundRequest::kActivate:
        Call(answer, Rpc::kActivate, &DecisionService::Activate, request.activate(),
             response.mutable_activate());
        return;
      case bandit::v1::RoundRequest::CALL_NOT_SET:
        break;
    }
    Ready(answer, absl::InvalidArgumentError(
                      "the RoundRequest sets none of select, update, activate: expected one"));
  }

  // The unary handler's steps (GrpcBanditService::Handle) for one request, answering into
  // `answer` instead of finishing a call.
  template <typename Req, typename Resp, typename Method>
  void Call(Answer* answer, Rpc rpc, Method method, const Req& req, Resp* resp) {
    answer->rpc = rpc;
    if (owner_->auth_ != nullptr) {
      if (absl::Status denied = owner_->auth_->Check(rpc, *ctx_, cluster::RoutingKeyOf(req).name);
          !denied.ok()) {
        Ready(answer, denied);
        return;
      }
    }
    if (owner_->router_ != nullptr) {
      // The next request is read once this one's answer is back (Dispatch may answer at once,
      // on this thread).
      Hold(/*block_reading=*/true);
      if (owner_->router_->Dispatch(
              rpc, req, caller_, &answer->forwarded,
              [this, answer, resp](absl::Status status, std::string /*served_by*/) {
                if (status.ok() &&
                    !grpc::SerializationTraits<Resp>::Deserialize(&answer->forwarded, resp).ok())
                  status = absl::InternalError(
                      absl::StrCat("the owner's answer to ", RpcName(answer->rpc),
                                   " could not be parsed"));
                {
                  absl::MutexLock lock(&mu_);
                  blocked_ = false;
                }
                Ready(answer, status);
                Advance();
                Release();
              }) == cluster::Router::Placement::kAnswered)
        return;
      // Served here: the callback never runs. Its hold is dropped without Release: OnDone waits
      // for this reaction (OnReadDone) to return, so the stream cannot be done yet.
      absl::MutexLock lock(&mu_);
      blocked_ = false;
      --holds_;
    }
    uint64_t written_seq = 0;  // the newest record this request appended (0 = none)
    absl::Status status = (owner_->service_->*method)(req, resp, &written_seq);
    if (!status.ok() || !owner_->service_->MustWaitForDurability(written_seq)) {
      Ready(answer, status);
      return;
    }
    if (absl::Status cut = owner_->pending_->cut_status(); !cut.ok()) {
      Ready(answer, cut);
      return;
    }
    Hold(/*block_reading=*/false);
    owner_->service_->WhenDurable(written_seq, [this, answer](absl::Status durable) {
      Ready(answer, durable);
      Advance();
      Release();
    });
  }

  // The request's outcome: its status in the answer when refused (no result then), timed and
  // counted as its unary call.
  void Ready(Answer* answer, const absl::Status& status) {
    if (!status.ok()) {
      answer->messages->response()->clear_result();
      ToItemStatus(status, answer->messages->response()->mutable_status());
    }
    if (owner_->metrics_ != nullptr && answer->rpc != Rpc::kRounds)
      owner_->metrics_->ObserveRpc(
          answer->rpc, static_cast<grpc::StatusCode>(status.code()),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - answer->start).count());
    absl::MutexLock lock(&mu_);
    answer->ready = true;
  }

  // Whatever the state allows next: write the oldest answer if it is ready, read the next
  // request, or finish. Decided under mu_, done outside it (gRPC's calls may react at once).
  void Advance() {
    bool write = false;
    grpc::WriteOptions options;
    bool read = false;
    std::optional<absl::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      if (cut_.has_value()) {
        if (!writing_) finish = *cut_;
      } else {
        if (!writing_ && !answers_.empty() && answers_.front()->ready) {
          std::unique_ptr<Answer> next = std::move(answers_.front());
          answers_.pop_front();
          bool own_buffer = false;
          out_.Clear();
          grpc::Status s = grpc::SerializationTraits<bandit::v1::RoundResponse>::Serialize(
              *next->messages->response(), &out_, &own_buffer);
          next->messages->Release();
          next->messages = nullptr;
          if (!s.ok()) {
            cut_ = absl::InternalError("an answer could not be serialized: " + s.error_message());
            finish = *cut_;
          } else {
            writing_ = write = true;
            if (!answers_.empty() && answers_.front()->ready) options.set_buffer_hint();
          }
          if (spare_.size() < kMaxUnansweredRequests) spare_.push_back(std::move(next));
        }
        if (!finish.has_value() && !writing_ && answers_.empty() &&
            (read_closed_ || end_.has_value())) {
          finish = end_.value_or(absl::OkStatus());
        } else if (!finish.has_value() && !read_busy_ && !read_closed_ && !end_.has_value() &&
                   !blocked_ && answers_.size() < kMaxUnansweredRequests) {
          read_busy_ = read = true;
        }
      }
      if (finish.has_value()) finished_ = true;
    }
    if (write) StartWrite(&out_, options);
    if (read) StartRead(&in_);
    if (finish.has_value()) {
      const grpc::Status g = ToGrpcStatus(*finish);
      if (owner_->metrics_ != nullptr)
        owner_->metrics_->ObserveRpc(
            Rpc::kRounds, g.error_code(),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - opened_).count());
      if (owner_->router_ != nullptr) {
        if (std::string id = owner_->router_->node_id(); !id.empty())
          ctx_->AddTrailingMetadata(bandit::v1::kNodeKey, id);
      }
      Finish(g);
    }
  }

  GrpcBanditService* const owner_;
  const ActiveCall active_;  // the stream counts as one call until OnDone
  Ctx* const ctx_;
  const cluster::Caller caller_;  // cluster mode: what a forward passes on
  const std::chrono::steady_clock::time_point opened_;

  // Touched only by the thread serving the current read (one at a time).
  grpc::ByteBuffer in_;

  absl::Mutex mu_;
  std::deque<std::unique_ptr<Answer>> answers_ ABSL_GUARDED_BY(mu_);  // unwritten, in order
  std::vector<std::unique_ptr<Answer>> spare_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer out_ ABSL_GUARDED_BY(mu_);  // the write in flight
  bool read_busy_ ABSL_GUARDED_BY(mu_) = false;  // a read in flight, or its request being served
  bool read_closed_ ABSL_GUARDED_BY(mu_) = false;  // the client closed its side
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool blocked_ ABSL_GUARDED_BY(mu_) = false;  // a forwarded request's answer is awaited
  std::optional<absl::Status> end_ ABSL_GUARDED_BY(mu_);  // shutting down: end after the answers
  std::optional<absl::Status> cut_ ABSL_GUARDED_BY(mu_);  // end now
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int holds_ ABSL_GUARDED_BY(mu_) = 0;  // callbacks still to come
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // OnDone ran
};

void GrpcBanditService::Register(RoundStream* stream) {
  std::optional<absl::Status> end;
  {
    absl::MutexLock lock(&streams_mu_);
    streams_.insert(stream);
    end = streams_end_;
  }
  if (end.has_value()) stream->End(*end);
  stream->Start();
}

void GrpcBanditService::Unregister(RoundStream* stream) {
  absl::MutexLock lock(&streams_mu_);
  streams_.erase(stream);
}

std::vector<GrpcBanditService::RoundStream*> GrpcBanditService::HoldStreams(
    std::optional<absl::Status> end) {
  absl::MutexLock lock(&streams_mu_);
  if (end.has_value()) streams_end_ = std::move(end);
  std::vector<RoundStream*> held(streams_.begin(), streams_.end());
  // Still registered, so OnDone has not passed Unregister: the hold keeps each alive until
  // released (ending one may run its OnDone, which takes streams_mu_: so outside it).
  for (RoundStream* stream : held) stream->Hold(/*block_reading=*/false);
  return held;
}

void GrpcBanditService::EndStreams(const absl::Status& status) {
  for (RoundStream* stream : HoldStreams(status)) {
    stream->End(status);
    stream->Release();
  }
}

int GrpcBanditService::CutStreams(const absl::Status& status) {
  int cut = 0;
  for (RoundStream* stream : HoldStreams(std::nullopt)) {
    cut += stream->Cut(status);
    stream->Release();
  }
  return cut;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GrpcBanditService::OpenRoundStream(
    Ctx* ctx) {
  auto* stream = new RoundStream(this, ctx);
  Register(stream);
  return stream;
}

}  // namespace bandit::server
