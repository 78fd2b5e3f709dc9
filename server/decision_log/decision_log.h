// An instance's decision log: what each decision was made from, the probability it was made
// with, and later its outcome. Pure like InstanceState, which owns it (no lock, clock or I/O):
// it is rebuilt on recovery by replaying the same journal records that rebuild the policy, and
// saved whole in the instance's snapshot, so it is exactly as durable as the decisions
// themselves and compaction never drops what retention keeps.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "bandit/v1/decision_log.pb.h"

namespace bandit::server {

class DecisionLog {
 public:
  static constexpr int64_t kDefaultMaxEvents = 100'000;
  static constexpr int64_t kDefaultMaxBytes = int64_t{64} << 20;

  // Fills the retention defaults and checks the ranges (INVALID_ARGUMENT naming the field).
  static absl::Status Normalize(bandit::v1::DecisionLogConfig* config);

  explicit DecisionLog(const bandit::v1::DecisionLogConfig& config) : config_(config) {}

  bool enabled() const { return config_.enabled(); }
  // Appends a decision (event_seq above every held one), then applies retention at `now`.
  // Returns how many old decisions retention dropped.
  int64_t Append(bandit::v1::LoggedDecision d, int64_t now);
  // Records the outcome of the decision with `event_seq`, if the log still holds it.
  void SetOutcome(uint64_t event_seq, bandit::v1::DecisionOutcome outcome, double reward,
                  int64_t now);
  // Every decision still pending becomes OUTCOME_DISCARDED (the instance was reset).
  void DiscardPending(int64_t now);

  // Calls `visit` on the decisions with event_seq > after_seq and since_ms <= decided_at_ms
  // < until_ms (0 = unbounded), oldest first, until it returns false.
  void Visit(uint64_t after_seq, int64_t since_ms, int64_t until_ms,
             const std::function<bool(const bandit::v1::LoggedDecision&)>& visit) const;

  int64_t events() const { return static_cast<int64_t>(log_.size()); }
  int64_t bytes() const { return bytes_; }
  // Encoded bytes of every decision appended since this log was built (snapshot scheduling).
  int64_t appended_bytes() const { return appended_bytes_; }
  const std::deque<bandit::v1::LoggedDecision>& entries() const { return log_; }

  // Snapshot form (oldest first). Restore checks the order (a damaged snapshot is refused).
  void Save(google::protobuf::RepeatedPtrField<bandit::v1::LoggedDecision>* out) const;
  absl::Status Restore(const google::protobuf::RepeatedPtrField<bandit::v1::LoggedDecision>& in);

  // The sequence number of an event id ("<uid hex>-<seq hex>"), 0 if it has none.
  static uint64_t EventSeqOf(const std::string& event_id);

 private:
  int64_t ApplyRetention(int64_t now);
  bandit::v1::LoggedDecision* Find(uint64_t event_seq);

  bandit::v1::DecisionLogConfig config_;
  std::deque<bandit::v1::LoggedDecision> log_;
  int64_t bytes_ = 0;  // sum of the held decisions' encoded sizes
  int64_t appended_bytes_ = 0;
};

}  // namespace bandit::server
