// PersonalizerApi's evaluations routes (v1.1-preview.3's shapes, as @azure-rest/ai-personalizer
// types them): POST evaluations (EvaluationContract -> 201 EvaluationOutput, Location), GET
// evaluations, GET and DELETE evaluations/{id}; the service's offline evaluations
// (DecisionService::CreateEvaluation) behind them, Personalizer's error codes in front.
#include <functional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/api/http/personalizer_internal.h"
#include "server/service/evaluation_runner.h"

namespace bandit::server::http {
namespace {

constexpr Route kRoute = Route::kEvaluations;

std::string When(int64_t ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(ms), absl::UTCTimeZone());
}

// RFC 3339 (Personalizer's date-time), into ms since the epoch.
bool ParseWhen(const Json& v, int64_t* ms) {
  if (!v.IsString()) return false;
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, AsString(v), &t, &error)) return false;
  *ms = absl::ToUnixMillis(t);
  return true;
}

// The service's refusals as Personalizer names them.
ApiResponse EvaluationError(const absl::Status& s) {
  ApiError e = ErrorFor(s, kRoute, "");
  const absl::string_view m = s.message();
  if (s.code() == absl::StatusCode::kInvalidArgument && absl::StrContains(m, kDistinctPolicyNames))
    e.code = "DuplicateCustomPolicyNames";
  else if (s.code() == absl::StatusCode::kInvalidArgument &&
           absl::StrContains(m, kPolicyArgumentsRefused))
    e.code = "InvalidPolicyConfiguration";
  else if (s.code() == absl::StatusCode::kFailedPrecondition &&
           absl::StrContains(m, kNoDecisionLogged))
    e.code = "NoLogsExistInDateRange";
  else if (s.code() == absl::StatusCode::kNotFound && absl::StrContains(m, kNoSuchEvaluation))
    e.code = "EvaluationNotFound";
  return Error(e, kRoute);
}

void WriteSummary(Writer& w, const bandit::v1::EvaluationSummary& s) {
  w.StartObject();
  w.Key("timeStamp");
  WriteString(w, When(s.start_ms()));
  w.Key("ipsEstimatorNumerator");
  w.Double(s.ips_numerator());
  w.Key("ipsEstimatorDenominator");
  w.Double(s.ips_denominator());
  w.Key("snipsEstimatorDenominator");
  w.Double(s.snips_denominator());
  w.Key("aggregateTimeWindow");
  WriteString(w, IsoDuration(s.window_ms()));
  w.Key("nonZeroProbability");
  w.Double(s.non_zero_probability());
  w.Key("sumOfSquares");
  w.Double(s.sum_of_squares());
  w.Key("confidenceInterval");
  w.Double(s.confidence_interval());
  w.Key("averageReward");
  w.Double(s.average_reward());
  w.EndObject();
}

const char* SourceName(bandit::v1::PolicySource s) {
  switch (s) {
    case bandit::v1::POLICY_SOURCE_ONLINE:
      return "Online";
    case bandit::v1::POLICY_SOURCE_BASELINE:
      return "Baseline";
    case bandit::v1::POLICY_SOURCE_RANDOM:
      return "Random";
    case bandit::v1::POLICY_SOURCE_OFFLINE_EXPERIMENTATION:
      return "OfflineExperimentation";
    default:
      return "Custom";
  }
}

const char* StatusName(bandit::v1::EvaluationStatus s) {
  switch (s) {
    case bandit::v1::EVALUATION_COMPLETED:
      return "completed";
    case bandit::v1::EVALUATION_FAILED:
      return "failed";
    case bandit::v1::EVALUATION_OPTIMAL_POLICY_APPLIED:
      return "optimalPolicyApplied";
    case bandit::v1::EVALUATION_ONLINE_POLICY_RETAINED:
      return "onlinePolicyRetained";
    default:
      return "pending";
  }
}

// EvaluationOutput, with fields of this server beside Personalizer's: `warnings`, `restarted`,
// `error` for a failed job, and `optimization` (the search's held-out estimates and trials).
// `featureImportance` holds one row per namespace, then one per feature, each most important
// first: [namespace, feature ("" in a namespace's row), importance 0..100, occurrences].
void WriteEvaluation(Writer& w, const bandit::v1::Evaluation& e) {
  w.StartObject();
  w.Key("id");
  WriteString(w, e.id());
  w.Key("name");
  WriteString(w, e.name());
  w.Key("startTime");
  WriteString(w, When(e.start_ms()));
  w.Key("endTime");
  WriteString(w, When(e.end_ms()));
  w.Key("jobId");
  WriteString(w, e.id());
  w.Key("status");
  w.String(StatusName(e.status()));
  w.Key("evaluationType");
  w.String(e.type() == bandit::v1::EVALUATION_TYPE_AUTO ? "Auto" : "Manual");
  w.Key("creationTime");
  WriteString(w, When(e.created_at_ms()));
  const bool finished = e.status() != bandit::v1::EVALUATION_PENDING &&
                        e.status() != bandit::v1::EVALUATION_FAILED;
  if (finished) {
    w.Key("policyResults");
    w.StartArray();
    for (const auto& r : e.results()) {
      w.StartObject();
      w.Key("name");
      WriteString(w, r.name());
      w.Key("arguments");
      WriteString(w, r.arguments());
      w.Key("policySource");
      w.String(SourceName(r.source()));
      w.Key("summary");
      w.StartArray();
      for (const auto& s : r.summary()) WriteSummary(w, s);
      w.EndArray();
      w.Key("totalSummary");
      WriteSummary(w, r.total());
      w.EndObject();
    }
    w.EndArray();
    if (e.feature_importance_size() > 0) {
      w.Key("featureImportance");
      w.StartArray();
      for (const auto& f : e.feature_importance()) {
        w.StartArray();
        WriteString(w, f.namespace_());
        WriteString(w, f.feature());
        WriteString(w, absl::StrCat(f.importance()));
        WriteString(w, absl::StrCat(f.occurrences()));
        w.EndArray();
      }
      w.EndArray();
    }
    if (e.has_optimization()) {
      const auto& o = e.optimization();
      w.Key("optimalPolicy");
      WriteString(w, o.optimal_policy());
      w.Key("optimization");
      w.StartObject();
      w.Key("arguments");
      WriteString(w, o.arguments());
      w.Key("heldOutSummary");
      WriteSummary(w, o.optimal_held_out());
      w.Key("onlineHeldOutSummary");
      WriteSummary(w, o.online_held_out());
      w.Key("beatsOnline");
      w.Bool(o.beats_online());
      w.Key("cpuSeconds");
      w.Double(o.cpu_seconds());
      w.Key("budgetExhausted");
      w.Bool(o.budget_exhausted());
      w.Key("trials");
      w.StartArray();
      for (const auto& t : o.trials()) {
        w.StartObject();
        w.Key("name");
        WriteString(w, t.name());
        w.Key("arguments");
        WriteString(w, t.arguments());
        w.Key("searchedSummary");
        WriteSummary(w, t.searched());
        w.EndObject();
      }
      w.EndArray();
      w.EndObject();
    }
    if (!e.replaced_arguments().empty()) {
      w.Key("replacedArguments");
      WriteString(w, e.replaced_arguments());
    }
  }
  if (!e.error().empty()) {
    w.Key("error");
    WriteString(w, e.error());
  }
  if (e.warnings_size() > 0) {
    w.Key("warnings");
    w.StartArray();
    for (const auto& warning : e.warnings()) WriteString(w, warning);
    w.EndArray();
  }
  w.Key("restarted");
  w.Bool(e.restarted());
  w.EndObject();
}

ApiResponse Rendered(int status, const std::function<void(Writer&)>& write) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  write(w);
  ApiResponse r;
  r.status = status;
  r.body.assign(buffer.GetString(), buffer.GetSize());
  r.route = kRoute;
  return r;
}

}  // namespace

ApiResponse PersonalizerApi::Evaluations(const Target& target, absl::string_view method,
                                         absl::string_view id, absl::string_view body,
                                         absl::string_view prefix) {
  if (method == "GET" && id.empty()) {
    bandit::v1::ListEvaluationsRequest req;
    req.set_instance(target.instance);
    bandit::v1::ListEvaluationsResponse listed;
    if (absl::Status s = target.calls->ListEvaluations(req, &listed); !s.ok())
      return EvaluationError(s);
    return Rendered(200, [&](Writer& w) {
      w.StartArray();
      for (const auto& e : listed.evaluations()) WriteEvaluation(w, e);
      w.EndArray();
    });
  }
  if (method == "GET") {
    bandit::v1::GetEvaluationRequest req;
    req.set_instance(target.instance);
    req.set_id(std::string(id));
    bandit::v1::Evaluation e;
    if (absl::Status s = target.calls->GetEvaluation(req, &e); !s.ok()) return EvaluationError(s);
    return Rendered(200, [&](Writer& w) { WriteEvaluation(w, e); });
  }
  if (method == "DELETE") {
    bandit::v1::DeleteEvaluationRequest req;
    req.set_instance(target.instance);
    req.set_id(std::string(id));
    bandit::v1::DeleteEvaluationResponse resp;
    uint64_t written_seq = 0;
    if (absl::Status s = target.calls->DeleteEvaluation(req, &resp, &written_seq); !s.ok())
      return EvaluationError(s);
    if (absl::Status s = AwaitDurable(written_seq); !s.ok()) return Error(s, kRoute);
    return NoContent(kRoute);
  }
  // POST: an EvaluationContract.
  rapidjson::Document doc;
  if (absl::Status s = ParseBody(body, options_.max_json_depth, &doc); !s.ok())
    return Invalid(kRoute, "", s.message());
  if (!doc.IsObject()) return Invalid(kRoute, "", "the body is not a JSON object (EvaluationContract)");
  bandit::v1::CreateEvaluationRequest req;
  req.set_instance(target.instance);
  const Json* name = Member(doc, "name");
  if (name == nullptr || !name->IsString())
    return Invalid(kRoute, "name", "name is missing, expected the evaluation's name (a string)");
  req.set_name(AsString(*name));
  for (const char* field : {"startTime", "endTime"}) {
    const Json* v = Member(doc, field);
    int64_t ms = 0;
    if (v == nullptr || !ParseWhen(*v, &ms))
      return Invalid(kRoute, field,
                     absl::StrCat(field, " is missing or not a date-time, expected RFC 3339 "
                                         "such as \"2026-12-01T00:00:00Z\""));
    if (absl::string_view(field) == "startTime")
      req.set_start_ms(ms);
    else
      req.set_end_ms(ms);
  }
  if (const Json* x = Member(doc, "enableOfflineExperimentation"); x != nullptr) {
    if (!x->IsBool())
      return Invalid(kRoute, "enableOfflineExperimentation",
                     "enableOfflineExperimentation is not a boolean");
    req.set_offline_experimentation(x->GetBool());
  }
  if (const Json* policies = Member(doc, "policies"); policies != nullptr) {
    if (!policies->IsArray())
      return Invalid(kRoute, "policies", "policies is not an array of {name, arguments}");
    for (rapidjson::SizeType i = 0; i < policies->Size(); ++i) {
      const Json& p = (*policies)[i];
      const Json* pn = p.IsObject() ? Member(p, "name") : nullptr;
      const Json* pa = p.IsObject() ? Member(p, "arguments") : nullptr;
      if (pn == nullptr || !pn->IsString() || pa == nullptr || !pa->IsString())
        return Invalid(kRoute, absl::StrCat("policies[", i, "]"),
                       absl::StrCat("policies[", i, "] is not {name, arguments} with strings"));
      auto* out = req.add_policies();
      out->set_name(AsString(*pn));
      out->set_arguments(AsString(*pa));
    }
  }
  bandit::v1::Evaluation created;
  uint64_t written_seq = 0;
  if (absl::Status s = target.calls->CreateEvaluation(req, &created, &written_seq); !s.ok())
    return EvaluationError(s);
  if (absl::Status s = AwaitDurable(written_seq); !s.ok()) return Error(s, kRoute);
  ApiResponse r = Rendered(201, [&](Writer& w) { WriteEvaluation(w, created); });
  r.headers.emplace_back("Location", absl::StrCat(prefix, "/evaluations/", created.id()));
  return r;
}

}  // namespace bandit::server::http
