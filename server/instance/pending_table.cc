#include "server/instance/pending_table.h"

#include <algorithm>

namespace bandit::server {

std::string FormatEventId(uint64_t uid, uint64_t seq) {
  static constexpr char kHex[] = "0123456789abcdef";
  char buf[33];
  for (int i = 15; i >= 0; --i, uid >>= 4) buf[i] = kHex[uid & 0xf];
  buf[16] = '-';
  int digits = 1;
  while (digits < 16 && (seq >> (4 * digits)) != 0) ++digits;
  for (int i = 16 + digits; i > 16; --i, seq >>= 4) buf[i] = kHex[seq & 0xf];
  return std::string(buf, 17 + digits);
}

bool ParseEventId(absl::string_view id, uint64_t* uid, uint64_t* seq) {
  if (id.size() < 18 || id.size() > 33 || id[16] != '-') return false;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  uint64_t u = 0, q = 0;
  for (int i = 0; i < 16; ++i) {
    const int h = digit(id[i]);
    if (h < 0) return false;
    u = u << 4 | static_cast<uint64_t>(h);
  }
  if (id.size() > 18 && id[17] == '0') return false;  // "%x" writes no leading zero
  for (size_t i = 17; i < id.size(); ++i) {
    const int h = digit(id[i]);
    if (h < 0) return false;
    q = q << 4 | static_cast<uint64_t>(h);
  }
  *uid = u;
  *seq = q;
  return true;
}

PendingTable::EventKey PendingTable::EventKey::Of(absl::string_view event_id) {
  EventKey key;
  key.numbered = ParseEventId(event_id, &key.uid, &key.seq);
  if (!key.numbered) key.other = std::string(event_id);
  return key;
}

PendingTable::PendingTable(int64_t capacity)
    : capacity_(capacity), fate_capacity_(std::clamp<int64_t>(capacity, 1024, 1'000'000)) {}

int64_t PendingDecision::HeapBytes() const {
  // A string's characters are on the heap past the small-string buffer.
  auto text = [](const std::string& s) {
    return s.capacity() > 15 ? static_cast<int64_t>(s.capacity()) + 1 : int64_t{0};
  };
  int64_t b = text(event_id) + text(arm_id) + text(slot_id) +
              static_cast<int64_t>((features.size() + memo.size()) * sizeof(double)) +
              static_cast<int64_t>(sparse_index.capacity() * sizeof(uint32_t) +
                                   sparse_value.capacity() * sizeof(double)) +
              static_cast<int64_t>(shadow_scores.capacity() * sizeof(ShadowScore)) +
              static_cast<int64_t>(slots.capacity() * sizeof(PendingDecision));
  for (const PendingDecision& s : slots) b += s.HeapBytes();
  return b;
}

int64_t PendingTable::BytesPerDecision(int64_t heap_bytes) {
  // A hash slot (the table keeps at least 1/8 of its slots free and doubles as it grows: up to
  // 2 slots per decision), the expiry order's entry, the finished event's fate.
  constexpr int64_t kSlot = sizeof(std::pair<const EventKey, PendingDecision>) + 1;
  return 2 * kSlot + sizeof(std::pair<int64_t, EventKey>) + 2 * sizeof(EventKey) + heap_bytes;
}

int64_t PendingTable::Bytes() const {
  constexpr int64_t kSlot = sizeof(std::pair<const EventKey, PendingDecision>) + 1;
  constexpr int64_t kFateSlot = sizeof(std::pair<const std::pair<uint64_t, uint64_t>, EventFate>) + 1;
  constexpr int64_t kOtherFateSlot = sizeof(std::pair<const std::string, EventFate>) + 1;
  int64_t b = static_cast<int64_t>(by_id_.capacity()) * kSlot +
              static_cast<int64_t>(order_.size() * sizeof(order_[0])) + heap_bytes_ +
              static_cast<int64_t>(numbered_fates_.capacity()) * kFateSlot +
              static_cast<int64_t>(other_fates_.capacity()) * kOtherFateSlot +
              static_cast<int64_t>(fate_order_.size() * sizeof(EventKey));
  return b;
}

void PendingTable::Insert(PendingDecision d) {
  heap_bytes_ += d.HeapBytes();
  EventKey key = EventKey::Of(d.event_id);
  order_.emplace_back(d.expires_at_ms, key);
  by_id_.emplace(std::move(key), std::move(d));
  if (order_.size() > 2 * by_id_.size() + 1024) CompactOrder();
}

const PendingDecision* PendingTable::Find(absl::string_view event_id) const {
  auto it = by_id_.find(EventKey::Of(event_id));
  return it == by_id_.end() ? nullptr : &it->second;
}

PendingDecision* PendingTable::FindMutable(absl::string_view event_id) {
  auto it = by_id_.find(EventKey::Of(event_id));
  return it == by_id_.end() ? nullptr : &it->second;
}

std::optional<PendingDecision> PendingTable::Take(const std::string& event_id, EventFate fate) {
  auto it = by_id_.find(EventKey::Of(event_id));
  if (it == by_id_.end()) return std::nullopt;
  // Before the entry moves out: `event_id` may be the entry's own.
  RecordFate(event_id, fate);
  PendingDecision d = std::move(it->second);
  by_id_.erase(it);
  heap_bytes_ -= d.HeapBytes();
  return d;
}

std::vector<PendingDecision> PendingTable::TakeExpired(int64_t now_ms) {
  std::vector<PendingDecision> out;
  while (!order_.empty() && order_.front().first <= now_ms) {
    auto it = by_id_.find(order_.front().second);
    if (it != by_id_.end() && it->second.expires_at_ms == order_.front().first) {
      heap_bytes_ -= it->second.HeapBytes();
      out.push_back(std::move(it->second));
      by_id_.erase(it);
    }
    order_.pop_front();
  }
  return out;
}

EventFate PendingTable::FateOf(absl::string_view event_id) const {
  uint64_t uid, seq;
  if (ParseEventId(event_id, &uid, &seq)) {
    auto it = numbered_fates_.find(std::make_pair(uid, seq));
    return it == numbered_fates_.end() ? EventFate::kUnknown : it->second;
  }
  auto it = other_fates_.find(event_id);
  return it == other_fates_.end() ? EventFate::kUnknown : it->second;
}

void PendingTable::RecordFate(const std::string& event_id, EventFate fate) {
  EventKey key;
  bool inserted;
  key.numbered = ParseEventId(event_id, &key.uid, &key.seq);
  if (key.numbered) {
    inserted = numbered_fates_.insert_or_assign(std::make_pair(key.uid, key.seq), fate).second;
  } else {
    inserted = other_fates_.insert_or_assign(event_id, fate).second;
    if (inserted) key.other = event_id;
  }
  if (!inserted) return;
  fate_order_.push_back(std::move(key));
  while (static_cast<int64_t>(fate_order_.size()) > fate_capacity_) {
    const EventKey& oldest = fate_order_.front();
    if (oldest.numbered) {
      numbered_fates_.erase(std::make_pair(oldest.uid, oldest.seq));
    } else {
      other_fates_.erase(oldest.other);
    }
    fate_order_.pop_front();
  }
}

void PendingTable::Clear() {
  heap_bytes_ = 0;
  by_id_.clear();
  order_.clear();
  numbered_fates_.clear();
  other_fates_.clear();
  fate_order_.clear();
}

std::vector<const PendingDecision*> PendingTable::InOrder() const {
  std::vector<const PendingDecision*> out;
  for (const auto& [expires, key] : order_) {
    auto it = by_id_.find(key);
    if (it != by_id_.end() && it->second.expires_at_ms == expires) out.push_back(&it->second);
  }
  return out;
}

void PendingTable::CompactOrder() {
  std::deque<std::pair<int64_t, EventKey>> live;
  for (auto& e : order_) {
    auto it = by_id_.find(e.second);
    if (it != by_id_.end() && it->second.expires_at_ms == e.first) live.push_back(std::move(e));
  }
  order_ = std::move(live);
}

void ToRecord(const PendingDecision& p, bandit::v1::PendingDecisionRecord* r) {
  r->set_event_id(p.event_id);
  r->set_arm_id(p.arm_id);
  r->set_arm(p.arm);
  r->mutable_features()->Assign(p.features.data(), p.features.data() + p.features.size());
  r->mutable_memo()->Assign(p.memo.data(), p.memo.data() + p.memo.size());
  r->mutable_sparse_index()->Assign(p.sparse_index.begin(), p.sparse_index.end());
  r->mutable_sparse_value()->Assign(p.sparse_value.begin(), p.sparse_value.end());
  r->set_expires_at_ms(p.expires_at_ms);
  for (const ShadowScore& s : p.shadow_scores) {
    auto* out = r->add_shadow_scores();
    out->set_shadow_id(s.shadow_id);
    out->set_target(s.target);
    out->set_dm(s.dm);
    out->set_q_logged(s.q_logged);
    out->set_exact(s.exact);
    out->set_logged_propensity(s.logged_propensity);
  }
  if (p.learn_direct) r->set_learn_direct(true);
  if (p.offered > 0) r->set_offered(p.offered);
  r->set_seq(p.seq);
  for (const PendingDecision& slot : p.slots) ToRecord(slot, r->add_slots());
  if (!p.slot_id.empty()) r->set_slot_id(p.slot_id);
  if (p.awaiting_activation) r->set_awaiting_activation(true);
  if (p.rewards > 0) {
    r->set_reward_sum(p.reward_sum);
    r->set_rewards(p.rewards);
  }
  if (p.done) r->set_done(true);
  if (p.learning_mode != bandit::v1::ONLINE) r->set_learning_mode(p.learning_mode);
  if (p.learning_mode == bandit::v1::APPRENTICE) {
    r->mutable_apprentice()->set_target(p.apprentice_target);
    r->mutable_apprentice()->set_chose_baseline(p.apprentice_chose_baseline);
  }
  if (p.aggregation != bandit::v1::REWARD_AGGREGATION_UNSPECIFIED)
    r->set_reward_aggregation(p.aggregation);
}

PendingDecision FromRecord(const bandit::v1::PendingDecisionRecord& r) {
  PendingDecision d;
  d.event_id = r.event_id();
  d.arm_id = r.arm_id();
  d.arm = r.arm();
  d.features = Eigen::Map<const Eigen::VectorXd>(r.features().data(), r.features_size());
  d.memo = Eigen::Map<const Eigen::VectorXd>(r.memo().data(), r.memo_size());
  d.sparse_index.assign(r.sparse_index().begin(), r.sparse_index().end());
  d.sparse_value.assign(r.sparse_value().begin(), r.sparse_value().end());
  d.expires_at_ms = r.expires_at_ms();
  d.shadow_scores.reserve(r.shadow_scores_size());
  for (const auto& s : r.shadow_scores())
    d.shadow_scores.push_back(
        {s.shadow_id(), s.target(), s.dm(), s.q_logged(), s.logged_propensity(), s.exact()});
  d.learn_direct = r.learn_direct();
  d.offered = std::max(r.offered(), 0);
  d.seq = r.seq();
  uint64_t uid = 0;
  // Written before event ids could be chosen by callers: every id was the server's.
  if (d.seq == 0) (void)ParseEventId(d.event_id, &uid, &d.seq);
  d.slots.reserve(r.slots_size());
  for (const auto& slot : r.slots()) {
    d.slots.push_back(FromRecord(slot));
    d.slots.back().slot_index = static_cast<int>(d.slots.size()) - 1;
  }
  d.slot_id = r.slot_id();
  d.awaiting_activation = r.awaiting_activation();
  d.reward_sum = r.reward_sum();
  d.rewards = r.rewards();
  d.done = r.done();
  // Unknown values (a corrupt or newer record) read as the defaults: an instance restores its
  // own snapshots, and the fuzzers feed it others.
  if (bandit::v1::LearningMode_IsValid(r.learning_mode()) &&
      r.learning_mode() != bandit::v1::LEARNING_MODE_UNSPECIFIED)
    d.learning_mode = r.learning_mode();
  if (d.learning_mode == bandit::v1::APPRENTICE) {
    const double target = r.apprentice().target();
    d.apprentice_target = target >= 0.0 && target <= 1.0 ? target : 0.0;  // a probability
    d.apprentice_chose_baseline = r.apprentice().chose_baseline();
  }
  if (bandit::v1::RewardAggregation_IsValid(r.reward_aggregation()))
    d.aggregation = r.reward_aggregation();
  return d;
}

}  // namespace bandit::server
