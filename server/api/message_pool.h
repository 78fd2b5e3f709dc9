// Request and response messages of a callback-API RPC, pooled and reused across calls. A
// Select request with 50 named actions is ~100 heap allocations when parsed into fresh
// messages (its strings, its repeated fields' elements), and as many frees; a message that is
// cleared and parsed into again keeps those buffers (protobuf's Clear keeps a string's capacity
// and a repeated field's elements), so that after its first calls a pooled holder parses the
// same shape of request with no allocation. An arena would not do it: a string's characters on
// an arena are still the heap's, allocated and freed per call. Under sustained load glibc's
// malloc fragments and its cost per round grows (by half within 20 s, measured before pooling).
//
//   ReusedMessageAllocator<SelectRequest, Decision> select_alloc;
//   service.SetMessageAllocatorFor_Select(&select_alloc);   // before the server starts
//
// Memory stays bounded: a holder whose request or response ran over `max_kept_bytes` (its
// serialized size) gets fresh messages when released, so what a pooled holder keeps is about
// what requests of up to that size take; at most `max_pooled` idle holders are kept.
//
// The allocator must outlive the server (gRPC releases every holder before Server::Wait
// returns). RoundMessageAllocators below is the set banditd and the bench echo server both
// install, so the two are built the same way.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include <google/protobuf/arena.h>
#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/message_allocator.h>
#include <grpcpp/support/status.h>

#include "bandit/v1/service.pb.h"

namespace bandit::server {

// Whether a message's buffers are kept for the next call: its serialized size is at most
// `max_kept_bytes` (a larger call's messages are freed instead).
inline bool Keepable(const google::protobuf::MessageLite& m, size_t max_kept_bytes) {
  return static_cast<size_t>(m.ByteSizeLong()) <= max_kept_bytes;
}

// Idle holders of messages kept for reuse: at most `max_pooled`, each reset as it comes back
// (H::Reset(max_kept_bytes): emptied, its buffers kept unless they grew past the bound).
template <typename H>
class HolderPool {
 public:
  HolderPool(size_t max_kept_bytes, size_t max_pooled)
      : max_kept_bytes_(max_kept_bytes), max_pooled_(max_pooled) {}
  ~HolderPool() {
    for (H* h : pool_) delete h;
  }
  HolderPool(const HolderPool&) = delete;
  HolderPool& operator=(const HolderPool&) = delete;

  // An idle holder, or null when there is none.
  H* Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (pool_.empty()) return nullptr;
    H* h = pool_.back();
    pool_.pop_back();
    return h;
  }
  void Recycle(H* h) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pool_.size() >= max_pooled_) {
        delete h;
        return;
      }
    }
    h->Reset(max_kept_bytes_);  // outside the lock: clearing a large message takes a while
    std::lock_guard<std::mutex> lock(mu_);
    if (pool_.size() < max_pooled_) {
      pool_.push_back(h);
      return;
    }
    delete h;
  }
  size_t pooled() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pool_.size();
  }

 private:
  const size_t max_kept_bytes_;
  const size_t max_pooled_;
  mutable std::mutex mu_;
  std::vector<H*> pool_;
};

template <typename Request, typename Response>
class ReusedMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  explicit ReusedMessageAllocator(size_t max_kept_bytes = 64 << 10, size_t max_pooled = 512)
      : pool_(max_kept_bytes, max_pooled) {}

  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    Holder* h = pool_.Take();
    return h != nullptr ? h : new Holder(this);
  }

  size_t pooled() const { return pool_.pooled(); }  // idle holders (for tests)

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    explicit Holder(ReusedMessageAllocator* owner)
        : owner_(owner), request_(new Request), response_(new Response) {
      this->set_request(request_.get());
      this->set_response(response_.get());
    }
    // Empty messages for the next call: cleared (their buffers kept), or fresh after a call
    // whose messages ran over the bound.
    void Reset(size_t max_kept_bytes) {
      if (!Keepable(*request_, max_kept_bytes) || !Keepable(*response_, max_kept_bytes)) {
        request_ = std::make_unique<Request>();
        response_ = std::make_unique<Response>();
        this->set_request(request_.get());
        this->set_response(response_.get());
        return;
      }
      request_->Clear();
      response_->Clear();
    }
    void Release() override { owner_->pool_.Recycle(this); }

   private:
    ReusedMessageAllocator* const owner_;
    std::unique_ptr<Request> request_;
    std::unique_ptr<Response> response_;
  };

  HolderPool<Holder> pool_;
};

// The Rounds stream's request and answer, reused like ReusedMessageAllocator's. Their
// submessages sit in a oneof (a RoundRequest is a Select one time and an Update the next),
// which Clear would delete and the next parse allocate again; so each holder keeps one of each
// kind aside and lends the request the one its payload names (Parse: its first field) and the
// answer the result of the request's kind (LendResult), taking them back when released.
class RoundMessages final
    : public grpc::MessageHolder<bandit::v1::RoundRequest, bandit::v1::RoundResponse> {
 public:
  class Pool;
  // Parses `in` into the request, its Select or Update parsed into the kept one.
  grpc::Status Parse(grpc::ByteBuffer* in);
  // Sets the answer's result to the kept one of the parsed request's kind (empty), to fill.
  void LendResult();
  void Release() override;

 private:
  friend class HolderPool<RoundMessages>;
  explicit RoundMessages(Pool* owner);
  // Takes the submessages back, cleared (or forgotten when the call's messages ran over the
  // pool's bound), and clears the messages.
  void Reset(size_t max_kept_bytes);
  Pool* const owner_;
  bandit::v1::RoundRequest request_;
  bandit::v1::RoundResponse response_;
  std::unique_ptr<bandit::v1::SelectRequest> select_;
  std::unique_ptr<bandit::v1::UpdateRequest> update_;
  std::unique_ptr<bandit::v1::Decision> decision_;
  std::unique_ptr<bandit::v1::UpdateResponse> update_result_;
};

class RoundMessages::Pool {
 public:
  explicit Pool(size_t max_kept_bytes = 64 << 10, size_t max_pooled = 512)
      : pool_(max_kept_bytes, max_pooled) {}
  RoundMessages* Allocate() {
    RoundMessages* m = pool_.Take();
    return m != nullptr ? m : new RoundMessages(this);
  }
  size_t pooled() const { return pool_.pooled(); }  // idle holders (for tests)

 private:
  friend class RoundMessages;
  HolderPool<RoundMessages> pool_;
};

// A request/response pair on an arena of its own, deleted when released: for RPCs too rare to
// be worth a pool.
template <typename Request, typename Response>
class ArenaMessages final : public grpc::MessageHolder<Request, Response> {
 public:
  ArenaMessages() {
    this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
    this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
  }
  void Release() override { delete this; }

 private:
  google::protobuf::Arena arena_;
};

// Pooled messages for the per-round RPCs (Select, Update and their batches). Install() works
// on any callback service with these four methods: banditd's BanditService and the echo.
struct RoundMessageAllocators {
  ReusedMessageAllocator<bandit::v1::SelectRequest, bandit::v1::Decision> select;
  ReusedMessageAllocator<bandit::v1::UpdateRequest, bandit::v1::UpdateResponse> update;
  ReusedMessageAllocator<bandit::v1::SelectBatchRequest, bandit::v1::SelectBatchResponse>
      select_batch{512 << 10, 64};
  ReusedMessageAllocator<bandit::v1::UpdateBatchRequest, bandit::v1::UpdateBatchResponse>
      update_batch{512 << 10, 64};

  template <typename CallbackService>
  void Install(CallbackService& service) {
    service.SetMessageAllocatorFor_Select(&select);
    service.SetMessageAllocatorFor_Update(&update);
    service.SetMessageAllocatorFor_SelectBatch(&select_batch);
    service.SetMessageAllocatorFor_UpdateBatch(&update_batch);
  }
};

}  // namespace bandit::server
