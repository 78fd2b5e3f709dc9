// An instance's decision log: what each decision was made from, the probability it was made
// with, and later its outcome. Pure like InstanceState, which owns it (no lock, clock or I/O):
// it is rebuilt on recovery by replaying the same journal records that rebuild the policy, and
// saved whole in the instance's snapshot, so it is exactly as durable as the decisions
// themselves and compaction never drops what retention keeps.
//
// Each decision is held as its encoded LoggedDecision (fields 1-14 and 18, written once when it
// is appended), packed into append-only chunks, plus a small index entry with what joins and
// retention need (event seq, decision time, outcome, reward, outcome time). The outcome fields
// (15-17) are encoded only when an entry is read, between the held fields 1-14 and field 18
// (a Thompson entry's posteriors), so an entry's bytes never change once written. So the log's memory is its encoded size plus about
// sizeof(Entry) per decision (max_bytes bounds what it holds, not 10x that as decoded protobuf
// objects did), a snapshot shares the chunks instead of copying the log under the instance's
// lock, and snapshot files take the bytes as they are (Frozen::ForEachPiece).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bandit/v1/decision_log.pb.h"
#include "core/policy.h"
#include "server/instance/calls.h"
#include "server/storage/snapshot_store.h"

namespace bandit::server {

class DecisionLog {
 public:
  static constexpr int64_t kDefaultMaxEvents = 100'000;
  static constexpr int64_t kDefaultMaxBytes = int64_t{64} << 20;
  // Chunks start small (an instance with a short log holds little) and double up to this size;
  // a decision larger than a chunk gets a chunk of its own.
  static constexpr size_t kMinChunkBytes = size_t{4} << 10;
  static constexpr size_t kMaxChunkBytes = size_t{256} << 10;

  // Fills the retention defaults and checks the ranges (INVALID_ARGUMENT naming the field).
  static absl::Status Normalize(bandit::v1::DecisionLogConfig* config);

  // What a decision was made from, by reference: the Select path encodes it straight into the
  // log (no LoggedDecision is built). Fields as in LoggedDecision.
  struct Context {
    uint64_t event_seq = 0;
    absl::string_view event_id;
    int64_t decided_at_ms = 0;
    int32_t num_candidates = 0;
    int32_t candidate_dim = 0;
    std::span<const Vector> candidates;  // row after row
    const Vector* x = nullptr;
    std::span<const std::string> arm_ids;
    int32_t num_actions = 0;
    int32_t chosen_index = 0;
    absl::string_view chosen_arm_id;
    std::optional<double> propensity;
    // Every action's probability; or, when empty and one_hot_actions > 0, the one-hot vector of
    // that length at chosen_index (a deterministic choice).
    std::span<const double> probabilities;
    int32_t one_hot_actions = 0;
    absl::string_view policy;
    // Thompson sampling: the posteriors the probabilities are computed from at export, in
    // their place (LoggedDecision.posteriors).
    const ArgmaxPosteriors* posteriors = nullptr;
    // Named decisions: the Select whose context and actions (those at `named_actions`, in
    // candidate order) the entry holds in place of the hashed candidates (fields 19-20).
    const SelectCall* named = nullptr;
    std::span<const int> named_actions;
    // Multi-slot decisions: this entry's slot (fields 21-25). `slot` null for a single decision;
    // slot_actions the positions of the actions the slot could choose, in candidate order.
    const SlotRequest* slot = nullptr;
    int32_t slot_index = 0;
    std::span<const int> slot_actions;
    int32_t baseline_index = -1;
  };

  // One held decision. `data`/`size`: its encoded fields 1-14 and 18 in a chunk, field 18 (if
  // any) the last `tail` bytes.
  struct Entry {
    uint64_t event_seq = 0;
    int64_t decided_at_ms = 0;
    int64_t outcome_at_ms = 0;
    double reward = 0;
    const char* data = nullptr;
    uint32_t size = 0;
    uint32_t tail = 0;
    bandit::v1::DecisionOutcome outcome = bandit::v1::OUTCOME_PENDING;
    uint64_t chunk = 0;  // id of the chunk holding `data`
  };
  struct Chunk {
    std::unique_ptr<char[]> data;
    size_t capacity = 0;
    size_t used = 0;  // appended under the owner's lock; bytes below it never change
  };

  // The log as of one moment, for a snapshot: shares the chunks (taken under the instance's
  // lock: copies the index, not the bytes) and is encoded later, outside the lock, as
  // InstanceSnapshot.decision_log.
  class Frozen final : public EncodedSnapshotFields {
   public:
    size_t size() const override;
    void ForEachPiece(absl::FunctionRef<void(absl::string_view)> piece) const override;
    // The same decisions decoded (exports, tests).
    void AddTo(google::protobuf::RepeatedPtrField<bandit::v1::LoggedDecision>* out) const;

   private:
    friend class DecisionLog;
    std::vector<std::shared_ptr<const Chunk>> chunks_;
    std::vector<Entry> entries_;
  };

  explicit DecisionLog(const bandit::v1::DecisionLogConfig& config) : config_(config) {}
  DecisionLog(DecisionLog&&) = default;
  DecisionLog& operator=(DecisionLog&&) = default;

  bool enabled() const { return config_.enabled(); }
  // Appends a decision (event_seq above every held one), then applies retention at `now`.
  // Returns how many old decisions retention dropped.
  int64_t Append(const Context& c, int64_t now);
  // The same from a decoded decision (snapshots, tests), its outcome included.
  int64_t Append(const bandit::v1::LoggedDecision& d, int64_t now);
  // Records the outcome of the decision with `event_seq`, if the log still holds it.
  void SetOutcome(uint64_t event_seq, bandit::v1::DecisionOutcome outcome, double reward,
                  int64_t now);
  // Every decision still pending becomes OUTCOME_DISCARDED (the instance was reset).
  void DiscardPending(int64_t now);

  // Calls `visit` on the decisions with event_seq > after_seq and since_ms <= decided_at_ms
  // < until_ms (0 = unbounded), oldest first, until it returns false.
  void Visit(uint64_t after_seq, int64_t since_ms, int64_t until_ms,
             const std::function<bool(const Entry&)>& visit) const;
  // An entry as a LoggedDecision, and its encoded size (LoggedDecision::ByteSizeLong).
  static void Decode(const Entry& e, bandit::v1::LoggedDecision* out);
  static size_t EncodedSize(const Entry& e);

  // The newest decision's bytes as held (fields 1-14 and 18; empty when the log is empty):
  // valid until the next Append or Restore. A Select journals these bytes instead of its request.
  absl::string_view last_entry() const {
    return log_.empty() ? absl::string_view() : absl::string_view(log_.back().data, log_.back().size);
  }

  int64_t events() const { return static_cast<int64_t>(log_.size()); }
  // When the oldest and the newest held decisions were made (0 when none is held).
  int64_t first_decided_ms() const { return log_.empty() ? 0 : log_.front().decided_at_ms; }
  int64_t last_decided_ms() const { return log_.empty() ? 0 : log_.back().decided_at_ms; }
  // Sum of the held decisions' encoded sizes (what max_bytes bounds).
  int64_t bytes() const { return bytes_; }
  // Encoded bytes of every decision appended since this log was built (snapshot scheduling).
  int64_t appended_bytes() const { return appended_bytes_; }
  // Bytes the held chunks reserve (memory accounting: at most one partly used chunk beyond the
  // held decisions' fields 1-14, plus the spare kept for reuse).
  int64_t chunk_bytes() const;
  // Bytes the log holds in memory, what the node's memory budget counts: its chunks as
  // allocated (chunk_bytes) and its index, one Entry per decision. At the retention bound this
  // is about max_bytes plus sizeof(Entry) per decision plus one chunk.
  int64_t MemoryBytes() const;

  // Snapshot form (oldest first). Restore checks the order (a damaged snapshot is refused).
  void Save(google::protobuf::RepeatedPtrField<bandit::v1::LoggedDecision>* out) const;
  std::unique_ptr<Frozen> Freeze() const;
  absl::Status Restore(const google::protobuf::RepeatedPtrField<bandit::v1::LoggedDecision>& in);

  // A Thompson sampling entry's posteriors, from which its probabilities are computed at
  // export; INVALID_ARGUMENT naming what is out of range (only a damaged or hand-made snapshot
  // holds such an entry).
  static absl::StatusOr<ArgmaxPosteriors> PosteriorsOf(const bandit::v1::LoggedDecision& d);

  // The sequence number of an event id ("<uid hex>-<seq hex>"), 0 if it has none.
  static uint64_t EventSeqOf(const std::string& event_id);

 private:
  // Room for `size` bytes at the end of the newest chunk (a new chunk if it has none).
  char* Reserve(size_t size, uint64_t* chunk_id);
  // Holds `d` (its outcome included) without applying retention.
  void Hold(const bandit::v1::LoggedDecision& d);
  void Push(const Entry& e);
  int64_t ApplyRetention(int64_t now);
  Entry* Find(uint64_t event_seq);

  bandit::v1::DecisionLogConfig config_;
  std::deque<Entry> log_;
  // chunks_[i] has id first_chunk_ + i; the oldest is dropped once no entry points into it.
  std::deque<std::shared_ptr<Chunk>> chunks_;
  uint64_t first_chunk_ = 0;
  // A full-size chunk retention released and no snapshot shares: the next chunk reuses it, so a
  // log at its retention bound allocates (and page-faults) nothing new.
  std::shared_ptr<Chunk> spare_;
  int64_t bytes_ = 0;  // sum of the held decisions' encoded sizes
  int64_t appended_bytes_ = 0;
};

}  // namespace bandit::server
