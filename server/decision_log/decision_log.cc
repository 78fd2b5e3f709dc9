#include "server/decision_log/decision_log.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace bandit::server {

absl::Status DecisionLog::Normalize(bandit::v1::DecisionLogConfig* c) {
  if (c->max_events() < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "config.decision_log.max_events is ", c->max_events(), ", expected 0 (default) or more"));
  if (c->max_bytes() < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "config.decision_log.max_bytes is ", c->max_bytes(), ", expected 0 (default) or more"));
  if (c->max_age_ms() < 0)
    return absl::InvalidArgumentError(absl::StrCat("config.decision_log.max_age_ms is ",
                                                   c->max_age_ms(),
                                                   ", expected 0 (no age bound) or more"));
  if (!c->enabled()) return absl::OkStatus();
  if (c->max_events() == 0) c->set_max_events(kDefaultMaxEvents);
  if (c->max_bytes() == 0) c->set_max_bytes(kDefaultMaxBytes);
  return absl::OkStatus();
}

uint64_t DecisionLog::EventSeqOf(const std::string& event_id) {
  const size_t dash = event_id.rfind('-');
  if (dash == std::string::npos) return 0;
  uint64_t seq = 0;
  if (!absl::SimpleHexAtoi(absl::string_view(event_id).substr(dash + 1), &seq)) return 0;
  return seq;
}

int64_t DecisionLog::Append(bandit::v1::LoggedDecision d, int64_t now) {
  const int64_t size = static_cast<int64_t>(d.ByteSizeLong());
  bytes_ += size;
  appended_bytes_ += size;
  log_.push_back(std::move(d));
  return ApplyRetention(now);
}

int64_t DecisionLog::ApplyRetention(int64_t now) {
  int64_t dropped = 0;
  // The newest decision always stays: a bound smaller than one decision keeps one.
  while (log_.size() > 1) {
    const auto& oldest = log_.front();
    const bool over =
        static_cast<int64_t>(log_.size()) > config_.max_events() || bytes_ > config_.max_bytes() ||
        (config_.max_age_ms() > 0 && oldest.decided_at_ms() < now - config_.max_age_ms());
    if (!over) break;
    bytes_ -= static_cast<int64_t>(oldest.ByteSizeLong());
    log_.pop_front();
    ++dropped;
  }
  return dropped;
}

bandit::v1::LoggedDecision* DecisionLog::Find(uint64_t event_seq) {
  auto it = std::lower_bound(
      log_.begin(), log_.end(), event_seq,
      [](const bandit::v1::LoggedDecision& d, uint64_t seq) { return d.event_seq() < seq; });
  if (it == log_.end() || it->event_seq() != event_seq) return nullptr;
  return &*it;
}

void DecisionLog::SetOutcome(uint64_t event_seq, bandit::v1::DecisionOutcome outcome, double reward,
                             int64_t now) {
  bandit::v1::LoggedDecision* d = Find(event_seq);
  if (d == nullptr) return;  // retention already dropped it
  bytes_ -= static_cast<int64_t>(d->ByteSizeLong());
  d->set_outcome(outcome);
  d->set_reward(reward);
  d->set_outcome_at_ms(now);
  bytes_ += static_cast<int64_t>(d->ByteSizeLong());
}

void DecisionLog::DiscardPending(int64_t now) {
  for (auto& d : log_)
    if (d.outcome() == bandit::v1::OUTCOME_PENDING) {
      bytes_ -= static_cast<int64_t>(d.ByteSizeLong());
      d.set_outcome(bandit::v1::OUTCOME_DISCARDED);
      d.set_outcome_at_ms(now);
      bytes_ += static_cast<int64_t>(d.ByteSizeLong());
    }
}

void DecisionLog::Visit(uint64_t after_seq, int64_t since_ms, int64_t until_ms,
                        const std::function<bool(const bandit::v1::LoggedDecision&)>& visit) const {
  auto it = std::upper_bound(
      log_.begin(), log_.end(), after_seq,
      [](uint64_t seq, const bandit::v1::LoggedDecision& d) { return seq < d.event_seq(); });
  for (; it != log_.end(); ++it) {
    if (it->decided_at_ms() < since_ms) continue;
    if (until_ms > 0 && it->decided_at_ms() >= until_ms) continue;
    if (!visit(*it)) return;
  }
}

void DecisionLog::Save(google::protobuf::RepeatedPtrField<bandit::v1::LoggedDecision>* out) const {
  out->Reserve(static_cast<int>(log_.size()));
  for (const auto& d : log_) *out->Add() = d;
}

absl::Status DecisionLog::Restore(
    const google::protobuf::RepeatedPtrField<bandit::v1::LoggedDecision>& in) {
  std::deque<bandit::v1::LoggedDecision> log;
  int64_t bytes = 0;
  uint64_t last = 0;
  for (int i = 0; i < in.size(); ++i) {
    if (in[i].event_seq() <= last)
      return absl::InvalidArgumentError(
          absl::StrCat("decision_log[", i, "] has event_seq ", in[i].event_seq(),
                       ", expected more than the previous entry's ", last));
    last = in[i].event_seq();
    bytes += static_cast<int64_t>(in[i].ByteSizeLong());
    log.push_back(in[i]);
  }
  log_ = std::move(log);
  bytes_ = bytes;
  return absl::OkStatus();
}

}  // namespace bandit::server
