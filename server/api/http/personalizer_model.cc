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

ApiResponse PersonalizerApi::ImportModel(const Target& target, absl::string_view body) {
  constexpr Route kRoute = Route::kModel;
  // The instance becomes the one exported: its own state is kept aside (exported) first and
  // imported back if the new one is refused, so a bad file leaves the instance as it was.
  bandit::v1::ExportInstanceRequest keep;
  keep.set_name(target.instance);
  bandit::v1::ExportInstanceResponse kept;
  absl::Status exported = target.calls->ExportInstance(keep, &kept);
  const bool existed = exported.ok();
  if (!existed && exported.code() != absl::StatusCode::kNotFound) return Error(exported, kRoute);
  uint64_t written_seq = 0;
  if (existed) {
    bandit::v1::DeleteInstanceRequest del;
    del.set_name(target.instance);
    if (absl::Status s = target.calls->DeleteInstance(del, nullptr, &written_seq); !s.ok())
      return Error(s, kRoute);
  }
  bandit::v1::ImportInstanceRequest import;
  import.set_name(target.instance);
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
  absl::Status s = target.calls->ImportInstance(import, &imported, &written_seq);
  if (!s.ok() && !existed)
    return Error(s.code() == absl::StatusCode::kInvalidArgument
                     ? s
                     : absl::InvalidArgumentError(s.message()),
                 kRoute);
  if (!s.ok()) {
    import.set_snapshot(std::move(*kept.mutable_snapshot()));
    import.clear_vw_model();
    import.clear_config();
    if (absl::Status back = target.calls->ImportInstance(import, &imported, &written_seq); !back.ok())
      return Error(absl::InternalError(
                       absl::StrCat("the model was refused (", s.message(),
                                    ") and restoring the instance's own failed: ", back.message())),
                   kRoute);
    if (absl::Status d = AwaitDurable(written_seq); !d.ok()) return Error(d, kRoute);
    return Error(s.code() == absl::StatusCode::kInvalidArgument
                     ? s
                     : absl::InvalidArgumentError(s.message()),
                 kRoute);
  }
  if (s = AwaitDurable(written_seq); !s.ok()) return Error(s, kRoute);
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
