// The decision log's export formats, shared by banditctl (writing) and bandit-ope (reading).
//
//   dsjson  Vowpal Wabbit's Decision Service JSON, one event per line, readable by
//           `vw --cb_adf --dsjson`; the exact field mapping is in docs/api.md.
//   jsonl   one bandit.v1.LoggedDecision per line in protobuf's JSON mapping.
//   csv     one row per decision, a header first; vectors inside a cell are space-separated,
//           candidates separated by '|'.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <span>
#include <vector>

#include <string>

#include "absl/status/statusor.h"
#include "bandit/v1/decision_log.pb.h"

namespace bandit::client {

enum class LogFormat { kDsjson, kJsonl, kCsv };
absl::StatusOr<LogFormat> ParseLogFormat(const std::string& name);

// The header line a format starts with ("" for line formats without one).
std::string LogHeader(LogFormat format);
// One decision as one line (no trailing newline). `instance` names the logging instance.
std::string FormatDecision(LogFormat format, const bandit::v1::LoggedDecision& d,
                           const std::string& instance);

// A multi-slot decision (its log entries, one per slot, in slot order: consecutive entries with
// the event id and slot_index 0, 1, ...) as one line. DSJSON with named actions: Vowpal Wabbit's
// conditional contextual bandit form (`vw --ccb_explore_adf --dsjson`): the actions offered to
// any slot in "_multi", "_slots" with each slot's "_id", "_inc" (the actions it was offered) and
// features, "_outcomes" with each slot's "_id", "_a" (its choice first, then the others it was
// offered), "_p" (aligned with "_a") and, for a slot whose reward was learned, "_label_cost"
// (-reward); "_ba" the slots' baselines when every slot has one. Otherwise (another format, or
// dense candidates): one line per slot as FormatDecision writes it.
std::string FormatSlots(LogFormat format, std::span<const bandit::v1::LoggedDecision> slots,
                        const std::string& instance);
// Groups a log's entries into decisions: calls `each` with every single decision alone and with
// the entries of each multi-slot decision together (entries arrive in log order; consecutive
// entries with one event id and slot_index 0, 1, ... are one decision). The two-argument form
// also gets the `line` its decision's first entry was added with, for a reader's messages.
class DecisionGrouper {
 public:
  using Each = std::function<void(std::span<const bandit::v1::LoggedDecision>)>;
  using EachFrom = std::function<void(std::span<const bandit::v1::LoggedDecision>, int64_t line)>;
  explicit DecisionGrouper(Each each)
      : each_([each = std::move(each)](std::span<const bandit::v1::LoggedDecision> decision,
                                       int64_t) { each(decision); }) {}
  explicit DecisionGrouper(EachFrom each) : each_(std::move(each)) {}
  // `line`: where `d` was read (any caller's numbering; 0 when there is none).
  void Add(bandit::v1::LoggedDecision d, int64_t line = 0);
  void Flush();

 private:
  EachFrom each_;
  std::vector<bandit::v1::LoggedDecision> held_;
  int64_t held_line_ = 0;
};

// One DSJSON line back into a decision. Refuses (INVALID_ARGUMENT naming the field) what
// cannot be a decision of this service's log: missing EventId or actions, a chosen action
// outside the action list, probabilities that are not finite or not in [0, 1], a context this
// service cannot have made (neither candidate vectors "x", arm ids "arm" nor a shared "x").
// A labeled event (one with _label_cost) must carry _label_probability.
absl::StatusOr<bandit::v1::LoggedDecision> ParseDsjson(const std::string& line);
// One DSJSON line back into its decisions: a CCB line (FormatSlots' named multi-slot form, or
// any line with "_outcomes" and "c._slots") gives one decision per slot in slot order, each
// among the actions that slot was offered ("_inc", or VW's default: those no earlier slot
// took), with its slot's features and, when labeled ("_a", "_p" and "_label_cost" in its
// outcome), its reward and propensity; any other line gives the one ParseDsjson reads.
absl::StatusOr<std::vector<bandit::v1::LoggedDecision>> ParseDsjsonDecisions(
    const std::string& line);

// Milliseconds since the Unix epoch <-> DSJSON's "2021-07-29T10:00:00.999Z".
std::string DsjsonTimestamp(int64_t ms);

}  // namespace bandit::client
