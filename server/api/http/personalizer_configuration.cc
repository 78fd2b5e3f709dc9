// PersonalizerApi's configuration routes: the service configuration (read, and the settings a
// PUT may change, as one ConfigureInstance) and the policy (read only).
#include <cctype>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <google/protobuf/text_format.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/api/http/personalizer_defaults.h"
#include "core/vw/options.h"
#include "server/api/http/personalizer_internal.h"

namespace bandit::server::http {
namespace {

// ISO 8601 duration (PnDTnHnMnS, as Personalizer writes rewardWaitTime) <-> milliseconds.
std::string IsoDuration(int64_t ms) {
  if (ms % 1000 != 0) return absl::StrCat("PT", ms / 1000.0, "S");
  int64_t s = ms / 1000;
  const int64_t d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60;
  s %= 60;
  std::string out = "P";
  if (d) absl::StrAppend(&out, d, "D");
  if (h || m || s || !d) out += "T";
  if (h) absl::StrAppend(&out, h, "H");
  if (m) absl::StrAppend(&out, m, "M");
  if (s || (!d && !h && !m)) absl::StrAppend(&out, s, "S");
  return out;
}

constexpr int64_t kDefaultAutoOptimizationFrequencyMs = 7LL * 24 * 3600 * 1000;

bool ParseIsoDuration(absl::string_view text, int64_t* ms) {
  if (text.empty() || text[0] != 'P') return false;
  double total = 0;
  bool time = false, any = false;
  size_t i = 1;
  while (i < text.size()) {
    if (text[i] == 'T') {
      if (time) return false;
      time = true;
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.'))
      ++j;
    if (j == i || j == text.size()) return false;
    double value = 0;
    if (!absl::SimpleAtod(text.substr(i, j - i), &value)) return false;
    const char unit = text[j];
    double seconds;
    if (!time && unit == 'D')
      seconds = 86400;
    else if (time && unit == 'H')
      seconds = 3600;
    else if (time && unit == 'M')
      seconds = 60;
    else if (time && unit == 'S')
      seconds = 1;
    else
      return false;
    total += value * seconds;
    any = true;
    i = j + 1;
  }
  if (!any || total > 1e12) return false;
  *ms = static_cast<int64_t>(std::llround(total * 1000));
  return true;
}

// Personalizer's learningMode strings.
const char* LearningModeString(bandit::v1::LearningMode mode) {
  switch (mode) {
    case bandit::v1::APPRENTICE:
      return "Apprentice";
    case bandit::v1::LOGGING_ONLY:
      return "LoggingOnly";
    default:
      return "Online";
  }
}

// The instance's epsilon where its policy has one (explorationPercentage).
std::optional<double> EpsilonOf(const bandit::v1::PolicyConfig& policy) {
  if (policy.has_epsilon_greedy()) return policy.epsilon_greedy().epsilon();
  if (policy.has_glm_epsilon_greedy())
    return policy.glm_epsilon_greedy().has_epsilon() ? policy.glm_epsilon_greedy().epsilon() : 0.1;
  return std::nullopt;
}

// What an instance does, in Personalizer's terms. Fields it has no counterpart for are reported
// at the value that describes the behaviour (no log retention limit, no auto-optimization).
rapidjson::Document ServiceConfigurationOf(const bandit::v1::Instance& instance) {
  const bandit::v1::PendingConfig& pending = instance.config().pending();
  const int64_t wait_ms = pending.reward_wait_ms() > 0 ? pending.reward_wait_ms() : 600'000;
  rapidjson::Document current(rapidjson::kObjectType);
  auto& alloc = current.GetAllocator();
  const std::string wait = IsoDuration(wait_ms);
  current.AddMember("rewardWaitTime", Json(wait.c_str(), alloc), alloc);
  current.AddMember("defaultReward", pending.default_reward(), alloc);
  current.AddMember("rewardAggregation",
                    rapidjson::StringRef(pending.reward_aggregation() == bandit::v1::SUM
                                             ? "sum"
                                             : "earliest"),
                    alloc);
  current.AddMember("explorationPercentage", EpsilonOf(instance.config().policy()).value_or(0.0),
                    alloc);
  current.AddMember("modelExportFrequency", "PT0S", alloc);  // every change is journaled
  current.AddMember("logRetentionDays", -1, alloc);
  current.AddMember("learningMode",
                    rapidjson::StringRef(LearningModeString(instance.config().learning_mode())),
                    alloc);
  const bandit::v1::AutoOptimization& automatic = instance.config().auto_optimization();
  current.AddMember("isAutoOptimizationEnabled", automatic.enabled(), alloc);
  if (automatic.enabled()) {
    const std::string frequency = IsoDuration(automatic.frequency_ms());
    current.AddMember("autoOptimizationFrequency", Json(frequency.c_str(), alloc), alloc);
    if (automatic.start_ms() > 0) {
      const std::string start =
          absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(automatic.start_ms()),
                           absl::UTCTimeZone());
      current.AddMember("autoOptimizationStartDate", Json(start.c_str(), alloc), alloc);
    }
  }
  if (instance.has_apprentice()) {
    // Personalizer's apprentice metrics: events of decisions served as the baseline, their
    // rewards, and the rewards of those where the policy would have chosen the baseline.
    const bandit::v1::ApprenticeStatus& a = instance.apprentice();
    Json metrics(rapidjson::kObjectType);
    metrics.AddMember("numberOfEvents", a.events(), alloc);
    metrics.AddMember("sumOfRewards", a.reward_sum(), alloc);
    metrics.AddMember("sumOfImitatedRewards", a.imitated_reward_sum(), alloc);
    current.AddMember("latestApprenticeModeMetrics", metrics, alloc);
  }
  return current;
}

}  // namespace

ApiResponse PersonalizerApi::ServiceConfiguration(const Target& target, absl::string_view method,
                                                  absl::string_view body) {
  constexpr Route kRoute = Route::kServiceConfiguration;
  bandit::v1::GetInstanceRequest get;
  get.set_name(target.instance);
  bandit::v1::Instance instance;
  if (absl::Status s = FindOrCreate(target); !s.ok()) return Error(s, kRoute);
  if (absl::Status s = target.calls->GetInstance(get, &instance); !s.ok()) return Error(s, kRoute);
  rapidjson::Document current = ServiceConfigurationOf(instance);
  if (method == "PUT") {
    const bandit::v1::PendingConfig& pending = instance.config().pending();
    const bool drops = pending.on_expiry() == bandit::v1::DROP;
    rapidjson::Document put;
    if (absl::Status s = ParseBody(body, options_.max_json_depth, &put); !s.ok())
      return Error(s, kRoute);
    if (!put.IsObject())
      return Invalid(kRoute, "", "the service configuration must be a JSON object");
    // Each field is honoured (a change becomes a field of one ConfigureInstance, applied with
    // the others or not at all) or refused before anything changes; restating a value is fine.
    // (Members by index: RapidJSON's iterator comparisons are ambiguous under C++20.)
    bandit::v1::ConfigureInstanceRequest change;
    change.set_name(target.instance);
    // The three automatic optimization fields make one setting.
    bandit::v1::AutoOptimization automatic = instance.config().auto_optimization();
    bool automatic_named = false;
    for (rapidjson::SizeType i = 0; i < put.MemberCount(); ++i) {
      const auto& member = *(put.MemberBegin() + i);
      const std::string key = AsString(member.name);
      const Json& v = member.value;
      if (key == "lastConfigurationEditDate" || key == "latestApprenticeModeMetrics" ||
          key == "logMirrorEnabled" || key == "logMirrorSasUri" || v.IsNull())
        continue;  // read-only reports, or settings that apply only with one refused below
      if (key == "isAutoOptimizationEnabled") {
        if (!v.IsBool()) return Invalid(kRoute, key, "isAutoOptimizationEnabled: expected a boolean");
        automatic_named |= v.GetBool() != automatic.enabled();
        automatic.set_enabled(v.GetBool());
        continue;
      }
      if (key == "autoOptimizationFrequency") {
        int64_t ms = 0;
        if (!v.IsString() || !ParseIsoDuration(AsString(v), &ms))
          return Invalid(kRoute, key,
                         "autoOptimizationFrequency: expected an ISO 8601 duration such as P7D");
        automatic_named |= ms != automatic.frequency_ms();
        automatic.set_frequency_ms(ms);
        continue;
      }
      if (key == "autoOptimizationStartDate") {
        absl::Time t;
        std::string error;
        if (!v.IsString() || !absl::ParseTime(absl::RFC3339_full, AsString(v), &t, &error))
          return Invalid(kRoute, key,
                         "autoOptimizationStartDate: expected an RFC 3339 date-time such as "
                         "\"2026-12-01T00:00:00Z\"");
        automatic_named |= absl::ToUnixMillis(t) != automatic.start_ms();
        automatic.set_start_ms(absl::ToUnixMillis(t));
        continue;
      }
      const Json* have = current.HasMember(key.c_str()) ? &current[key.c_str()] : nullptr;
      if (have == nullptr)
        return Invalid(kRoute, key, absl::StrCat(key, " is not a setting this server knows"));
      if (key == "rewardWaitTime") {
        int64_t ms = 0;
        if (!v.IsString() || !ParseIsoDuration(AsString(v), &ms))
          return Invalid(kRoute, key,
                         "rewardWaitTime: expected an ISO 8601 duration such as PT10M");
        if (ms != pending.reward_wait_ms()) change.set_reward_wait_ms(ms);
      } else if (key == "defaultReward") {
        if (!v.IsNumber()) return Invalid(kRoute, key, "defaultReward: expected a number");
        if (v.GetDouble() != pending.default_reward()) change.set_default_reward(v.GetDouble());
      } else if (key == "rewardAggregation") {
        const std::string a = v.IsString() ? AsString(v) : "";
        if (a != "earliest" && a != "sum")
          return Invalid(kRoute, key, "rewardAggregation: expected \"earliest\" or \"sum\"");
        const auto wanted = a == "sum" ? bandit::v1::SUM : bandit::v1::EARLIEST;
        if (wanted != pending.reward_aggregation()) change.set_reward_aggregation(wanted);
      } else if (key == "explorationPercentage") {
        if (!v.IsNumber() || !(v.GetDouble() >= 0.0 && v.GetDouble() <= 1.0))
          return Invalid(kRoute, key, "explorationPercentage: expected a number in [0, 1]");
        const std::optional<double> epsilon = EpsilonOf(instance.config().policy());
        if (epsilon.has_value() && std::abs(v.GetDouble() - *epsilon) >= 1e-9) {
          change.set_epsilon(v.GetDouble());
        } else if (!epsilon.has_value() && v.GetDouble() != 0.0) {
          return Invalid(kRoute, key,
                         "changing explorationPercentage is not offered: this instance's policy "
                         "explores without an epsilon (its value is 0; docs/personalizer.md)");
        }
      } else if (key == "learningMode") {
        const std::string m = v.IsString() ? AsString(v) : "";
        bandit::v1::LearningMode wanted;
        if (m == "Online") {
          wanted = bandit::v1::ONLINE;
        } else if (m == "Apprentice") {
          wanted = bandit::v1::APPRENTICE;
        } else if (m == "LoggingOnly") {
          wanted = bandit::v1::LOGGING_ONLY;
        } else {
          return Invalid(kRoute, key,
                         "learningMode: expected \"Online\", \"Apprentice\" or \"LoggingOnly\"");
        }
        const auto have_mode = instance.config().learning_mode() ==
                                       bandit::v1::LEARNING_MODE_UNSPECIFIED
                                   ? bandit::v1::ONLINE
                                   : instance.config().learning_mode();
        if (wanted != have_mode) change.set_learning_mode(wanted);
      } else {
        // The settings this server has no live counterpart for: a restatement only.
        bool same;
        if ((*have).IsNumber()) {
          same = v.IsNumber() && std::abs(v.GetDouble() - (*have).GetDouble()) < 1e-9;
        } else {
          same = v == (*have);
        }
        if (key == "logRetentionDays" && v.IsNumber() && !drops) same = true;  // nothing is deleted
        if (!same)
          return Invalid(kRoute, key,
                         absl::StrCat("changing ", key, " is not offered (its value is ",
                                      ToJson((*have)), "; docs/personalizer.md)"));
      }
    }
    if (automatic_named) {
      // Personalizer's default frequency when it is turned on without one: a week.
      if (automatic.enabled() && automatic.frequency_ms() == 0)
        automatic.set_frequency_ms(kDefaultAutoOptimizationFrequencyMs);
      if (!automatic.enabled()) automatic.Clear();
      *change.mutable_auto_optimization() = automatic;
    }
    if (change.has_reward_wait_ms() || change.has_default_reward() ||
        change.has_reward_aggregation() || change.has_epsilon() || change.has_learning_mode() ||
        change.has_auto_optimization()) {
      uint64_t written_seq = 0;
      absl::Status s = target.calls->ConfigureInstance(change, &instance, &written_seq);
      if (s.ok()) s = AwaitDurable(written_seq);
      if (!s.ok()) return Error(s, kRoute);
      current = ServiceConfigurationOf(instance);
    }
  }
  ApiResponse r;
  r.body = ToJson(current);
  r.route = kRoute;
  return r;
}

ApiResponse PersonalizerApi::Policy(const Target& target, absl::string_view method,
                                    absl::string_view body) {
  constexpr Route kRoute = Route::kPolicy;
  if (method == "DELETE")  // back to the default's learning settings
    return SetLearningSettings(target, kRoute, "default", kPersonalizerVwArguments, false);
  if (method == "PUT") {
    rapidjson::Document doc;
    if (absl::Status s = ParseBody(body, options_.max_json_depth, &doc); !s.ok())
      return Invalid(kRoute, "", s.message());
    const Json* name = doc.IsObject() ? Member(doc, "name") : nullptr;
    const Json* arguments = doc.IsObject() ? Member(doc, "arguments") : nullptr;
    if (name == nullptr || !name->IsString() || arguments == nullptr || !arguments->IsString())
      return Invalid(kRoute, "arguments",
                     "expected a PolicyContract {\"name\": ..., \"arguments\": VW arguments}");
    return SetLearningSettings(target, kRoute, AsString(*name), AsString(*arguments), false);
  }
  bandit::v1::GetInstanceRequest get;
  get.set_name(target.instance);
  bandit::v1::Instance instance;
  if (absl::Status s = target.calls->GetInstance(get, &instance); !s.ok()) return Error(s, kRoute);
  // A vw learner's settings are its VW arguments (Personalizer's form); another policy's, its
  // policy and feature space as text-format config.
  std::string arguments;
  if (instance.config().policy().has_vw()) {
    arguments = instance.config().policy().vw().arguments();
  } else {
    google::protobuf::TextFormat::Printer printer;
    printer.SetSingleLineMode(true);
    bandit::v1::InstanceConfig learning;
    *learning.mutable_policy() = instance.config().policy();
    *learning.mutable_feature_space() = instance.config().feature_space();
    printer.PrintToString(learning, &arguments);
  }
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("name");
  WriteString(w, target.instance);
  w.Key("arguments");
  WriteString(w, absl::StripTrailingAsciiWhitespace(arguments));
  w.EndObject();
  ApiResponse r;
  r.body.assign(buffer.GetString(), buffer.GetSize());
  r.route = kRoute;
  return r;
}

ApiResponse PersonalizerApi::SetLearningSettings(const Target& target, Route route,
                                                 const std::string& name,
                                                 const std::string& arguments, bool no_content) {
  // Trained on the decision log where the instance keeps one (Personalizer retrained its model
  // on its logs when the learning settings changed).
  bandit::v1::GetInstanceRequest get;
  get.set_name(target.instance);
  bandit::v1::Instance instance;
  if (absl::Status s = target.calls->GetInstance(get, &instance); !s.ok()) return Error(s, route);
  bandit::v1::SetLearningPolicyRequest req;
  req.set_name(target.instance);
  req.set_arguments(arguments);
  req.set_train_on_log(instance.config().decision_log().enabled());
  uint64_t written_seq = 0;
  if (absl::Status s = target.calls->SetLearningPolicy(req, &instance, &written_seq); !s.ok()) {
    ApiError e = ErrorFor(s, route, "arguments");
    if (s.code() == absl::StatusCode::kInvalidArgument ||
        s.code() == absl::StatusCode::kFailedPrecondition) {
      e.http_status = 400;
      e.code = "InvalidPolicyConfiguration";
    }
    return Error(e, route);
  }
  if (absl::Status s = AwaitDurable(written_seq); !s.ok()) return Error(s, route);
  if (no_content) return NoContent(route);
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("name");
  WriteString(w, name);
  w.Key("arguments");
  WriteString(w, arguments);
  w.EndObject();
  ApiResponse r;
  r.body.assign(buffer.GetString(), buffer.GetSize());
  r.route = route;
  return r;
}

ApiResponse PersonalizerApi::ApplyFromEvaluation(const Target& target, absl::string_view body) {
  constexpr Route kRoute = Route::kApplyFromEvaluation;
  rapidjson::Document doc;
  if (absl::Status s = ParseBody(body, options_.max_json_depth, &doc); !s.ok())
    return Invalid(kRoute, "", s.message());
  const Json* id = doc.IsObject() ? Member(doc, "evaluationId") : nullptr;
  const Json* policy = doc.IsObject() ? Member(doc, "policyName") : nullptr;
  if (id == nullptr || !id->IsString() || policy == nullptr || !policy->IsString())
    return Invalid(kRoute, "", "expected a PolicyReferenceContract {\"evaluationId\", \"policyName\"}");
  bandit::v1::GetEvaluationRequest get;
  get.set_instance(target.instance);
  get.set_id(AsString(*id));
  bandit::v1::Evaluation e;
  if (absl::Status s = target.calls->GetEvaluation(get, &e); !s.ok()) {
    ApiError error = ErrorFor(s, kRoute, "evaluationId");
    if (s.code() == absl::StatusCode::kNotFound) error.code = "EvaluationNotFound";
    return Error(error, kRoute);
  }
  const std::string wanted = AsString(*policy);
  for (const auto& r : e.results())
    if (r.name() == wanted && (r.source() == bandit::v1::POLICY_SOURCE_CUSTOM ||
                               r.source() == bandit::v1::POLICY_SOURCE_OFFLINE_EXPERIMENTATION))
      return SetLearningSettings(target, kRoute, r.name(), r.arguments(), true);
  // The online policy as it was when the evaluation ran: applied again when it has changed
  // since (how an automatic optimization's change is undone), else already in force. The
  // baseline and uniform choice are not learners.
  for (const auto& r : e.results())
    if (r.name() == wanted && r.source() == bandit::v1::POLICY_SOURCE_ONLINE) {
      bandit::v1::GetInstanceRequest get_instance;
      get_instance.set_name(target.instance);
      bandit::v1::Instance instance;
      if (absl::Status s = target.calls->GetInstance(get_instance, &instance); !s.ok())
        return Error(s, kRoute);
      const bool changed = !instance.config().policy().has_vw() ||
                           instance.config().policy().vw().arguments() != r.arguments();
      if (changed && vw::ParseVwArguments(r.arguments()).ok())
        return SetLearningSettings(target, kRoute, r.name(), r.arguments(), true);
      return NoContent(kRoute);
    }
  return Error(ApiError{404, "LearningSettingsNotFound",
                        absl::StrCat("evaluation '", e.id(), "' has no learning settings named '",
                                     wanted, "'",
                                     e.status() == bandit::v1::EVALUATION_COMPLETED
                                         ? ""
                                         : " (it has not completed)"),
                        "policyName"},
               kRoute);
}

}  // namespace bandit::server::http
