// The decision log's export formats, shared by banditctl (writing) and bandit-ope (reading).
//
//   dsjson  Vowpal Wabbit's Decision Service JSON, one event per line, readable by
//           `vw --cb_adf --dsjson`; the exact field mapping is in docs/api.md.
//   jsonl   one bandit.v1.LoggedDecision per line in protobuf's JSON mapping.
//   csv     one row per decision, a header first; vectors inside a cell are space-separated,
//           candidates separated by '|'.
#pragma once

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

// One DSJSON line back into a decision. Refuses (INVALID_ARGUMENT naming the field) what
// cannot be a decision of this service's log: missing EventId or actions, a chosen action
// outside the action list, probabilities that are not finite or not in [0, 1], a context this
// service cannot have made (neither candidate vectors "x", arm ids "arm" nor a shared "x").
// A labeled event (one with _label_cost) must carry _label_probability.
absl::StatusOr<bandit::v1::LoggedDecision> ParseDsjson(const std::string& line);

// Milliseconds since the Unix epoch <-> DSJSON's "2021-07-29T10:00:00.999Z".
std::string DsjsonTimestamp(int64_t ms);

}  // namespace bandit::client
