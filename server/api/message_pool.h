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
#include <grpcpp/support/message_allocator.h>

#include "bandit/v1/service.pb.h"

namespace bandit::server {

template <typename Request, typename Response>
class ReusedMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  explicit ReusedMessageAllocator(size_t max_kept_bytes = 256 << 10, size_t max_pooled = 512)
      : max_kept_bytes_(max_kept_bytes), max_pooled_(max_pooled) {}
  ~ReusedMessageAllocator() override {
    for (Holder* h : pool_) delete h;
  }
  ReusedMessageAllocator(const ReusedMessageAllocator&) = delete;
  ReusedMessageAllocator& operator=(const ReusedMessageAllocator&) = delete;

  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    Holder* h = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!pool_.empty()) {
        h = pool_.back();
        pool_.pop_back();
      }
    }
    if (h == nullptr) h = new Holder(this);
    return h;
  }

  // Idle holders in the pool (for tests).
  size_t pooled() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pool_.size();
  }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    explicit Holder(ReusedMessageAllocator* owner)
        : owner_(owner), request_(new Request), response_(new Response) {
      this->set_request(request_.get());
      this->set_response(response_.get());
    }
    // Empty messages for the next call: cleared (their buffers kept), or fresh after a call
    // whose messages ran over the allocator's bound.
    void Reset() {
      if (static_cast<size_t>(request_->ByteSizeLong()) > owner_->max_kept_bytes_ ||
          static_cast<size_t>(response_->ByteSizeLong()) > owner_->max_kept_bytes_) {
        request_ = std::make_unique<Request>();
        response_ = std::make_unique<Response>();
        this->set_request(request_.get());
        this->set_response(response_.get());
        return;
      }
      request_->Clear();
      response_->Clear();
    }
    void Release() override { owner_->Recycle(this); }

   private:
    ReusedMessageAllocator* const owner_;
    std::unique_ptr<Request> request_;
    std::unique_ptr<Response> response_;
  };

  void Recycle(Holder* h) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pool_.size() >= max_pooled_) {
        delete h;
        return;
      }
    }
    h->Reset();  // outside the lock: clearing a large message takes a while
    std::lock_guard<std::mutex> lock(mu_);
    if (pool_.size() < max_pooled_) {
      pool_.push_back(h);
      return;
    }
    delete h;
  }

  const size_t max_kept_bytes_;
  const size_t max_pooled_;
  mutable std::mutex mu_;
  std::vector<Holder*> pool_;
};

// Messages on a pooled arena, reset for each call: for messages whose submessages sit in a
// oneof (a stream's RoundRequest is a Select one time and an Update the next), which Clear
// would delete and the next parse allocate again; an arena at least frees them all at once.
template <typename Request, typename Response>
class ArenaMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  // `block_bytes`: each arena's first block, kept across reuse (larger messages spill into
  // further blocks that the next reset frees). `max_pooled`: idle arenas kept for reuse.
  explicit ArenaMessageAllocator(size_t block_bytes = 32 << 10, size_t max_pooled = 512)
      : block_bytes_(block_bytes), max_pooled_(max_pooled) {}
  ~ArenaMessageAllocator() override {
    for (Holder* h : pool_) delete h;
  }
  ArenaMessageAllocator(const ArenaMessageAllocator&) = delete;
  ArenaMessageAllocator& operator=(const ArenaMessageAllocator&) = delete;

  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    Holder* h = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!pool_.empty()) {
        h = pool_.back();
        pool_.pop_back();
      }
    }
    if (h == nullptr) h = new Holder(this, block_bytes_);
    h->Start();
    return h;
  }

  // Idle arenas in the pool (for tests).
  size_t pooled() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pool_.size();
  }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder(ArenaMessageAllocator* owner, size_t block_bytes)
        : owner_(owner),
          block_(new char[block_bytes]),
          arena_(Options(block_.get(), block_bytes)) {}
    // Fresh messages on a reset arena: Reset() frees blocks a large message spilled into and
    // keeps our own first block.
    void Start() {
      if (used_) arena_.Reset();
      used_ = true;
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { owner_->Recycle(this); }

   private:
    static google::protobuf::ArenaOptions Options(char* block, size_t bytes) {
      google::protobuf::ArenaOptions options;
      options.initial_block = block;
      options.initial_block_size = bytes;
      return options;
    }
    ArenaMessageAllocator* const owner_;
    const std::unique_ptr<char[]> block_;  // declared before arena_: outlives it
    google::protobuf::Arena arena_;
    bool used_ = false;
  };

  void Recycle(Holder* h) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pool_.size() < max_pooled_) {
        pool_.push_back(h);
        return;
      }
    }
    delete h;
  }

  const size_t block_bytes_;
  const size_t max_pooled_;
  mutable std::mutex mu_;
  std::vector<Holder*> pool_;
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
      select_batch{1 << 20, 64};
  ReusedMessageAllocator<bandit::v1::UpdateBatchRequest, bandit::v1::UpdateBatchResponse>
      update_batch{1 << 20, 64};

  template <typename CallbackService>
  void Install(CallbackService& service) {
    service.SetMessageAllocatorFor_Select(&select);
    service.SetMessageAllocatorFor_Update(&update);
    service.SetMessageAllocatorFor_SelectBatch(&select_batch);
    service.SetMessageAllocatorFor_UpdateBatch(&update_batch);
  }
};

}  // namespace bandit::server
