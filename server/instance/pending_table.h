// Decisions awaiting their reward, bounded, with expiry in insertion order (every decision of an
// instance waits the same time), and a bounded memory of recently finished event ids so a late or
// duplicate reward gets a precise answer instead of "unknown".
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <Eigen/Dense>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "bandit/v1/storage.pb.h"

namespace bandit::server {

// What one shadow policy made of a decision's context (server/instance/shadows.h): enough to score
// the decision once its reward arrives.
struct ShadowScore {
  uint32_t shadow_id = 0;
  double target = 0;             // pi(a_t|x_t): the shadow's probability of the served action
  double dm = 0;                 // sum_a pi(a|x_t) q(x_t, a) (direct model, before this event)
  double q_logged = 0;           // q(x_t, a_t)
  double logged_propensity = 1;  // mu(a_t|x_t): the served policy's propensity
  bool exact = true;             // pi is the shadow's whole distribution (else its sampled one)
};

// A proto enum held in one byte (the values this server stores are small and checked with
// the enum's _IsValid before they are stored).
template <typename Enum>
class ByteEnum {
 public:
  ByteEnum(Enum e) : value_(static_cast<uint8_t>(e)) {}  // NOLINT: stands in for the enum
  operator Enum() const { return static_cast<Enum>(value_); }

 private:
  uint8_t value_;
};

// Multi-slot decisions: per-position figures (statistics, shadows' estimates) are kept for
// positions 0..kLastSlotPosition; later positions are counted in the last.
inline constexpr int kLastSlotPosition = 15;

struct PendingDecision {
  std::string event_id;
  std::string arm_id;
  int arm = -1;
  Eigen::VectorXd features;  // chosen candidate (contextual) or x (point input)
  // The chosen candidate as a sparse vector (index, value terms), in place of `features`, for
  // a policy that takes sparse input (Policy::TakesSparse).
  std::vector<uint32_t> sparse_index;
  std::vector<double> sparse_value;
  Eigen::VectorXd memo;      // Decision::memo
  int offered = 0;           // the actions the decision was made among (0: not recorded)
  int64_t expires_at_ms = 0;
  std::vector<ShadowScore> shadow_scores;  // empty when the instance has no shadows
  // The decision's number in its instance: the decision log's key, and the number in the event
  // id when the server made the id.
  uint64_t seq = 0;

  // A multi-slot decision holds no choice of its own (arm, features, memo unused) but one
  // PendingDecision per slot, in slot order, each with its slot_id, choice, seq and reward
  // state; it stays pending until every slot is done or the wait passes.
  std::vector<PendingDecision> slots;
  std::string slot_id;
  // (Fields below are ordered so that the flags share one word: a pending table holds up to
  // millions of these, and its memory share is counted per entry.)
  int slot_index = -1;  // a slot's position in its decision (derived, not stored)
  // Rewards received and not learned yet (before activation, or under SUM aggregation).
  int rewards = 0;
  // Deferred activation: not learned from, and given no default, until activated.
  bool awaiting_activation = false;
  // A slot whose reward was learned.
  bool done = false;
  // Made by a served policy since replaced (PromoteShadow), or served as the baseline in
  // APPRENTICE mode: its reward is learned as logged data (Observation::direct, no memo, the
  // arm resolved by id).
  bool learn_direct = false;
  // The learning mode the decision was made under (InstanceConfig.learning_mode): APPRENTICE
  // and LOGGING_ONLY served the baseline. APPRENTICE: whether the policy's own choice was the
  // baseline, and (apprentice_target) its probability of it: its estimate against the
  // baseline's.
  bool apprentice_chose_baseline = false;
  ByteEnum<bandit::v1::LearningMode> learning_mode = bandit::v1::ONLINE;
  // The reward aggregation the decision was made under, once a ConfigureInstance changed the
  // instance's since (UNSPECIFIED: the instance's, which is the one it was made under).
  ByteEnum<bandit::v1::RewardAggregation> aggregation =
      bandit::v1::REWARD_AGGREGATION_UNSPECIFIED;
  double reward_sum = 0;
  double apprentice_target = 0;

  // Bytes this decision holds on the heap beyond sizeof(PendingDecision): its ids, features,
  // memo, shadow scores and slots. The pending table's memory accounting counts every field
  // through this one function (a field added above is counted here).
  int64_t HeapBytes() const;
};

// PendingDecision <-> its durable form (snapshots, decided-select journal records).
void ToRecord(const PendingDecision& p, bandit::v1::PendingDecisionRecord* r);
PendingDecision FromRecord(const bandit::v1::PendingDecisionRecord& r);

enum class EventFate { kUnknown, kRewarded, kExpired, kDropped };

// Event ids as instances write them: the instance uid as 16 lowercase hex digits, '-', the
// event's sequence number in lowercase hex without leading zeros ("%016x-%x").
std::string FormatEventId(uint64_t uid, uint64_t seq);
// The inverse on exactly the strings FormatEventId writes (false for any other string, so
// the two are a bijection between those strings and (uid, seq)).
bool ParseEventId(absl::string_view id, uint64_t* uid, uint64_t* seq);

class PendingTable {
 public:
  explicit PendingTable(int64_t capacity);

  int64_t capacity() const { return capacity_; }
  int64_t size() const { return static_cast<int64_t>(by_id_.size()); }
  bool full() const { return size() >= capacity_; }

  // Caller checks full() first. expires_at_ms must not decrease between inserts.
  void Insert(PendingDecision d);
  const PendingDecision* Find(absl::string_view event_id) const;
  // For changes that keep the decision pending (its reward state, activation); must not change
  // the event id or the expiry time.
  PendingDecision* FindMutable(absl::string_view event_id);
  std::optional<PendingDecision> Take(const std::string& event_id, EventFate fate);
  // Removes and returns every decision with expires_at_ms <= now, oldest first.
  std::vector<PendingDecision> TakeExpired(int64_t now_ms);
  // Fate of an event that is no longer pending (kUnknown if never seen or long forgotten).
  EventFate FateOf(absl::string_view event_id) const;
  void RecordFate(const std::string& event_id, EventFate fate);
  void Clear();
  // Calls f(PendingDecision&) on every pending decision (any order); f must not change the
  // event id or the expiry time. (Rare: a reset or a promotion; the held bytes are recounted.)
  template <typename F>
  void ForEach(F&& f) {
    heap_bytes_ = 0;
    for (auto& [id, d] : by_id_) {
      f(d);
      heap_bytes_ += d.HeapBytes();
    }
  }
  // Pending decisions in expiry order (for snapshots).
  std::vector<const PendingDecision*> InOrder() const;
  // Bytes the table holds in memory: its hash table's slots (as allocated), the expiry order,
  // every decision's heap bytes (PendingDecision::HeapBytes) and the memory of finished
  // events. Constant time (kept as decisions come and go): the server reads it every Select.
  // FindMutable's changes must not change a decision's HeapBytes.
  int64_t Bytes() const;
  // What one more decision with `heap_bytes` would add (its slot, its expiry entry, its fate
  // once finished), for admission before it is made.
  static int64_t BytesPerDecision(int64_t heap_bytes);

 private:
  void CompactOrder();

  // An event id as a hash key. Ids in FormatEventId's form (every id an instance issues) are
  // kept as their two numbers: inserting, finding and recording a fate then hash, compare and
  // copy no text (the text copies cost ~5% of a round's server CPU). Any other id (tests,
  // records from elsewhere) is kept by its text.
  struct EventKey {
    bool numbered = false;
    uint64_t uid = 0;
    uint64_t seq = 0;
    std::string other;  // the id's text when not numbered
    static EventKey Of(absl::string_view event_id);
    bool operator==(const EventKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const EventKey& k) {
      return H::combine(std::move(h), k.numbered, k.uid, k.seq, k.other);
    }
  };

  int64_t capacity_;
  int64_t heap_bytes_ = 0;  // sum of the pending decisions' HeapBytes()
  absl::flat_hash_map<EventKey, PendingDecision> by_id_;
  // (expires_at_ms, event) in insertion order; may hold ids already taken (skipped lazily,
  // compacted when it grows past twice the live size).
  std::deque<std::pair<int64_t, EventKey>> order_;
  // Finished events, bounded, oldest forgotten first.
  int64_t fate_capacity_;
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, EventFate> numbered_fates_;
  absl::flat_hash_map<std::string, EventFate> other_fates_;
  std::deque<EventKey> fate_order_;
};

}  // namespace bandit::server
