// What the DSJSON readers share (decision_log_format.cc reads single-decision lines,
// dsjson_ccb.cc the multi-slot CCB lines). Internal to client/cpp.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bandit/v1/decision_log.pb.h"

namespace bandit::client::dsjson {

using Json = nlohmann::ordered_json;

// A decision whose reward was learned (or defaulted at expiry): the ones a log labels.
bool HasReward(const bandit::v1::LoggedDecision& d);
// INVALID_ARGUMENT "field <field>: <why>".
absl::Status Bad(const std::string& field, const std::string& why);
// A JSON number in [0, 1]; Bad naming `field` otherwise.
absl::StatusOr<double> Probability(const Json& v, const std::string& field);
// What every DSJSON line has around its decision: EventId (required), Timestamp and the logging
// model in VWState.m ("<instance>/<policy>").
absl::Status ReadEnvelope(const Json& j, bandit::v1::LoggedDecision* d);
// A CCB line (VW's conditional contextual bandit DSJSON, as FormatSlots writes it; `line` its
// text, `j` parsed) into one decision per slot, in slot order.
absl::StatusOr<std::vector<bandit::v1::LoggedDecision>> ParseCcb(const Json& j,
                                                                 std::string_view line);
// A JSON object's members but those named in `drop`, as JSON text as written (a key given twice
// included; "" when none is left).
std::string MembersBut(std::string_view object, std::initializer_list<std::string_view> drop);

}  // namespace bandit::client::dsjson
