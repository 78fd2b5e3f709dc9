#include "server/api/http/personalizer_errors.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "server/service/status_util.h"

namespace bandit::server::http {

const char* RouteName(Route route) {
  switch (route) {
    case Route::kRank:
      return "rank";
    case Route::kReward:
      return "reward";
    case Route::kActivate:
      return "activate";
    case Route::kServiceConfiguration:
      return "configurations/service";
    case Route::kPolicy:
      return "configurations/policy";
    case Route::kModel:
      return "model";
    case Route::kModelProperties:
      return "model/properties";
    case Route::kLogs:
      return "logs";
    case Route::kLogsProperties:
      return "logs/properties";
    case Route::kMultiSlot:
      return "multislot";
    case Route::kEvaluations:
      return "evaluations";
    case Route::kApplyFromEvaluation:
      return "configurations/applyFromEvaluation";
    case Route::kFeatureImportances:
      return "featureimportances";
    case Route::kUnmatched:
    case Route::kCount:
      break;
  }
  return "unmatched";
}

const char* InvalidRequestCode(Route route) {
  switch (route) {
    case Route::kRank:
      return "InvalidRankRequest";
    case Route::kReward:
      return "InvalidRewardRequest";
    case Route::kActivate:
      return "InvalidEventIdToActivate";
    case Route::kServiceConfiguration:
      return "InvalidServiceConfiguration";
    case Route::kPolicy:
      return "InvalidPolicyConfiguration";
    case Route::kModel:
      return "InvalidModelImportFormat";
    case Route::kEvaluations:
      return "InvalidEvaluationContract";
    case Route::kApplyFromEvaluation:
      return "InvalidPolicyConfiguration";
    default:
      return "BadRequest";
  }
}

ApiError ErrorFor(const absl::Status& status, Route route, absl::string_view target) {
  ApiError e;
  e.message = CappedMessage(status);
  e.target = std::string(target);
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      e.http_status = 400;
      e.code = InvalidRequestCode(route);
      break;
    case absl::StatusCode::kAlreadyExists:
      // A caller-chosen eventId still pending or finished (while remembered), or a name taken:
      // the request is refused as invalid, as Personalizer refuses what it cannot accept.
      e.http_status = 400;
      e.code = InvalidRequestCode(route);
      break;
    case absl::StatusCode::kFailedPrecondition:
      e.http_status = 400;
      e.code = "BadRequest";
      break;
    case absl::StatusCode::kNotFound:
      e.http_status = 404;
      e.code = "ResourceNotFound";
      break;
    case absl::StatusCode::kUnauthenticated:
      // Azure's gateway answers a missing or wrong key with 401 and the code "401".
      e.http_status = 401;
      e.code = "401";
      break;
    case absl::StatusCode::kPermissionDenied:
      e.http_status = 403;
      e.code = "InvalidApiAccess";
      break;
    case absl::StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.code = "TooManyRequests";
      break;
    case absl::StatusCode::kUnimplemented:
      e.http_status = 404;
      e.code = "ResourceNotFound";
      break;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
      e.http_status = 503;
      e.code = "ServiceUnavailable";
      break;
    default:
      e.http_status = 500;
      e.code = "InternalServerError";
      break;
  }
  return e;
}

std::string ErrorBody(const ApiError& error) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("error");
  w.StartObject();
  w.Key("code");
  w.String(error.code.data(), static_cast<rapidjson::SizeType>(error.code.size()));
  w.Key("message");
  w.String(error.message.data(), static_cast<rapidjson::SizeType>(error.message.size()));
  if (!error.target.empty()) {
    w.Key("target");
    w.String(error.target.data(), static_cast<rapidjson::SizeType>(error.target.size()));
  }
  w.EndObject();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace bandit::server::http
