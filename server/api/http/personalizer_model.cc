// PersonalizerApi's model and log routes: the model exported, imported (all or nothing) or
// reset, its properties, and the decision log's properties.
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/api/http/personalizer_defaults.h"
#include "core/vw/model_file.h"
#include "server/api/http/personalizer_internal.h"

namespace bandit::server::http {

namespace {

// What a refused PUT model answers: the import's status, as Personalizer's
// InvalidModelImportFormat unless it is not about the file.
absl::Status ModelRefusal(const absl::Status& s) {
  switch (s.code()) {
    // Not about the file: the key, the instance's name (refused at recovery), the server or the
    // cluster unable to take a write now. Answered as they are.
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAborted:
    // The file refused as such: already Personalizer's InvalidModelImportFormat.
    case absl::StatusCode::kInvalidArgument:
      return s;
    // The instance the file makes was refused (more shadows than allowed, no room in the
    // memory budget, ...): InvalidModelImportFormat too, with the service's message.
    default:
      return absl::InvalidArgumentError(s.message());
  }
}

}  // namespace

ApiResponse PersonalizerApi::ImportModel(const Target& target, absl::string_view body) {
  constexpr Route kRoute = Route::kModel;
  // The instance becomes the one in the file, in one service call: ImportInstance with
  // `replace` checks the new instance whole before it touches the existing one, and swaps them
  // in one journal record, so a refused file leaves the instance as it was and a crash leaves
  // one of the two.
  bandit::v1::ImportInstanceRequest import;
  import.set_name(target.instance);
  import.set_replace(true);
  if (vw::IsModelFile(body)) {
    // A Vowpal Wabbit model file (what Personalizer's own model export held, `vw -f`): a vw
    // instance of the file's arguments with Personalizer's other defaults (reward wait, default
    // reward).
    import.set_vw_model(std::string(body));
    *import.mutable_config() = PersonalizerDefaultConfig();
    import.mutable_config()->clear_policy();
    import.mutable_config()->clear_feature_space();
  } else {
    import.set_snapshot(std::string(body));
  }
  bandit::v1::Instance imported;
  uint64_t written_seq = 0;
  if (absl::Status s = target.calls->ImportInstance(import, &imported, &written_seq); !s.ok())
    return Error(ModelRefusal(s), kRoute);
  if (absl::Status s = AwaitDurable(written_seq); !s.ok()) return Error(s, kRoute);
  return NoContent(kRoute);
}

ApiResponse PersonalizerApi::Model(const Target& target, absl::string_view method,
                                   absl::string_view body) {
  constexpr Route kRoute = Route::kModel;
  if (method == "GET") {
    bandit::v1::ExportInstanceRequest req;
    req.set_name(target.instance);
    bandit::v1::ExportInstanceResponse resp;
    if (absl::Status s = target.calls->ExportInstance(req, &resp); !s.ok()) return Error(s, kRoute);
    ApiResponse r;
    r.body = std::move(*resp.mutable_snapshot());
    r.content_type = "application/octet-stream";
    r.route = kRoute;
    return r;
  }
  if (method == "PUT") return ImportModel(target, body);
  bandit::v1::ResetInstanceRequest req;
  req.set_name(target.instance);
  bandit::v1::Instance instance;
  uint64_t written_seq = 0;
  absl::Status s = target.calls->ResetInstance(req, &instance, &written_seq);
  if (s.ok()) s = AwaitDurable(written_seq);
  if (!s.ok()) return Error(s, kRoute);
  return NoContent(kRoute);
}

ApiResponse PersonalizerApi::ModelProperties(const Target& target) {
  constexpr Route kRoute = Route::kModelProperties;
  if (absl::Status s = target.calls->Find(target.instance); !s.ok())
    return Error(s, kRoute);
  ApiResponse r;
  r.body = "{}";  // creation and modification times are not kept per instance
  r.route = kRoute;
  return r;
}

ApiResponse PersonalizerApi::Logs(const Target& target, absl::string_view method) {
  const Route route = method == "GET" ? Route::kLogsProperties : Route::kLogs;
  bandit::v1::GetInstanceRequest get;
  get.set_name(target.instance);
  bandit::v1::Instance instance;
  if (absl::Status s = target.calls->GetInstance(get, &instance); !s.ok()) return Error(s, route);
  const bool logs = instance.config().decision_log().ByteSizeLong() > 0;
  if (method == "GET") {
    // LogsProperties: {dateRange: {from, to}}, the times of the oldest and the newest decision
    // the log holds (RFC 3339, UTC, milliseconds); an empty range while it holds none.
    ApiResponse r;
    const bandit::v1::InstanceStats& stats = instance.stats();
    if (stats.decision_log_events() > 0) {
      auto when = [](int64_t ms) {
        return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(ms),
                                absl::UTCTimeZone());
      };
      r.body = absl::StrCat("{\"dateRange\":{\"from\":\"", when(stats.decision_log_first_ms()),
                            "\",\"to\":\"", when(stats.decision_log_last_ms()), "\"}}");
    } else {
      r.body = "{\"dateRange\":{}}";
    }
    r.route = route;
    return r;
  }
  if (logs)
    return Invalid(route, "",
                   "deleting an instance's decision log is not offered; it keeps what its "
                   "decision_log retention says");
  return NoContent(route);  // no decision log kept: nothing to delete
}

}  // namespace bandit::server::http
