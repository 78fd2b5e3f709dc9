// The side of a storage backend several servers share (PostgreSQL in cluster mode) that a
// cluster node drives: which instances this server may commit, under which lease epoch, and
// until when its membership lease is known to hold. The storage refuses the rest (the fence).
// A backend only one server writes to (files) has none.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace bandit::server {

class InstanceFence {
 public:
  virtual ~InstanceFence() = default;
  // Records of `instance` are from now on committed under lease `epoch`, with sequence numbers
  // above `last_seq` (the instance's newest stored row or snapshot).
  virtual void Own(const std::string& instance, uint64_t epoch, uint64_t last_seq) = 0;
  // Stops committing `instance` (lease released or lost); its buffered rows still carry the
  // epoch they were appended under, so the fence decides them.
  virtual void Disown(const std::string& instance) = 0;
  // The epoch this server holds for `instance` (0 = none).
  virtual uint64_t OwnedEpoch(const std::string& instance) const = 0;
  // Until `deadline` (steady clock) this server's membership lease is known to be valid; after
  // it writes are refused before they change anything.
  virtual void SetLeaseDeadline(std::chrono::steady_clock::time_point deadline) = 0;
  // False once the membership lease may have run out (see SetLeaseDeadline).
  virtual bool LeaseCurrent() const = 0;
};

}  // namespace bandit::server
