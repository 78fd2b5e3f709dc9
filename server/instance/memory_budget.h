// The node's memory budget (--max_memory_bytes): every instance's footprint is accounted here
// by kind (policy state, pending decisions, decision log, shadows, per-instance overhead), and
// whatever would take the total past the budget is refused before it is allocated, with
// RESOURCE_EXHAUSTED naming the size asked for, the budget and what is left. docs/memory.md
// says what each figure counts and how to size a node.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace bandit::server {

// kSnapshot: what a snapshot being written holds beside the instance (charged before it is
// taken, given back once it is stored). kEvaluation: what an offline evaluation's job holds
// while it runs (its policies' learners and direct models, a chunk of the log).
enum class MemoryKind {
  kPolicy,
  kPending,
  kLog,
  kShadows,
  kOverhead,
  kSnapshot,
  kEvaluation,
  kCount
};
const char* MemoryKindName(MemoryKind kind);

// What asked for memory, for the refusal counter.
enum class MemoryOp {
  kCreate,
  kImport,
  kAddArms,
  kAddShadow,
  kConfigChange,  // reset, mixture reference, promote
  kSelect,
  kRecovery,
  kTakeover,
  kSnapshot,    // a snapshot postponed: the instance's journal records are kept until it fits
  kEvaluation,  // an evaluation's job that did not fit: it fails, saying so
  kCount
};
const char* MemoryOpName(MemoryOp op);

class MemoryBudget {
 public:
  // `limit` bytes; <= 0 = no limit (in-process tests and tools that do not ask for one).
  explicit MemoryBudget(int64_t limit = 0) : limit_(limit) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  int64_t limit() const { return limit_; }
  bool limited() const { return limit_ > 0; }
  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  int64_t used(MemoryKind kind) const {
    return by_kind_[static_cast<int>(kind)].load(std::memory_order_relaxed);
  }
  // Bytes left (negative when growth that cannot be refused went past the budget).
  int64_t left() const { return limited() ? limit_ - used() : INT64_MAX; }

  // OK if `bytes` more would fit now; else RESOURCE_EXHAUSTED "`what` needs `bytes` bytes ...",
  // counted as a refusal of `op`. Reserves nothing.
  absl::Status Admit(int64_t bytes, MemoryOp op, absl::string_view what);
  // Admit, then adds `bytes` to `kind` in the same step (so two callers cannot both take the
  // last room).
  absl::Status Reserve(int64_t bytes, MemoryKind kind, MemoryOp op, absl::string_view what);
  // Adds `delta` (any sign) to `kind` unconditionally: what was measured after a change that
  // was admitted (or that frees memory).
  void Charge(int64_t delta, MemoryKind kind);

  int64_t refusals(MemoryOp op) const {
    return refusals_[static_cast<int>(op)].load(std::memory_order_relaxed);
  }
  // Counts a refusal decided elsewhere (a takeover left to another node, an instance's share).
  void CountRefusal(MemoryOp op) {
    refusals_[static_cast<int>(op)].fetch_add(1, std::memory_order_relaxed);
    trim_wanted_.store(true, std::memory_order_relaxed);
  }
  // Whether the allocator's free memory should go back to the system now (TrimAllocator): since
  // the last call something was refused (a node at its budget should not also hold freed
  // pages), or at least kTrimAfterFreedBytes were given back (a deleted instance, expired or
  // rewarded decisions, a snapshot written: glibc keeps freed memory in its arenas otherwise,
  // and the resident size stops following what the instances hold).
  bool TakeTrimWanted() { return trim_wanted_.exchange(false); }
  static constexpr int64_t kTrimAfterFreedBytes = int64_t{16} << 20;

  // The refusal for `bytes` that do not fit: "<what> needs N bytes, but the node's memory budget
  // (--max_memory_bytes) is B bytes of which L are left".
  absl::Status Refusal(int64_t bytes, absl::string_view what) const;

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
  std::array<std::atomic<int64_t>, static_cast<int>(MemoryKind::kCount)> by_kind_{};
  std::array<std::atomic<int64_t>, static_cast<int>(MemoryOp::kCount)> refusals_{};
  std::atomic<bool> trim_wanted_{false};
  std::atomic<int64_t> freed_since_trim_{0};
};

// The most one instance's pending decisions may hold, as a fraction of the budget: an instance
// whose rewards stop coming fills its share, not the node, and the other instances go on
// deciding. (A decision log is bounded by its own retention.)
inline constexpr double kInstanceDecisionShare = 0.5;

// Hands the allocator's free pages back to the system (glibc malloc_trim). Freed request
// buffers and decisions stay in the allocator's per-thread arenas otherwise, and count in the
// process's resident size though no instance holds them.
void TrimAllocator();

// The memory this process may use: the smallest of the machine's MemTotal (/proc/meminfo), the
// cgroup v2 memory.max and the cgroup v1 memory.limit_in_bytes that apply to it (0 when none
// can be read). `root` prefixes the paths (tests).
int64_t AvailableMemoryBytes(const std::string& root = "");
// --max_memory_bytes' default: kDefaultMemoryFraction of AvailableMemoryBytes() (the rest is
// left for what is not accounted per instance: gRPC buffers, requests in flight, the allocator's
// slack, the journal's buffers, the metrics registry).
inline constexpr double kDefaultMemoryFraction = 0.6;
int64_t DefaultMemoryBudgetBytes();
// --max_memory_bytes: empty = DefaultMemoryBudgetBytes(); else bytes, a whole number with an
// optional binary suffix K, M or G (KiB, MiB, GiB); 0 = no limit. INVALID_ARGUMENT otherwise.
absl::StatusOr<int64_t> ParseMemoryBytes(absl::string_view text);

}  // namespace bandit::server
