// Rendering PersonalizerApi's answers: Personalizer's error shape (through personalizer_errors.h,
// the one mapping from the service's status), its 204s, and its rank responses.
#include <string>

#include "server/api/http/personalizer_internal.h"

namespace bandit::server::http {

ApiResponse Error(const ApiError& e, Route route) {
  ApiResponse r;
  r.status = e.http_status;
  r.body = ErrorBody(e);
  r.route = route;
  return r;
}

ApiResponse Error(const absl::Status& s, Route route, absl::string_view target) {
  return Error(ErrorFor(s, route, target), route);
}

ApiResponse Invalid(Route route, absl::string_view target, absl::string_view message) {
  return Error(ErrorFor(absl::InvalidArgumentError(message), route, target), route);
}

ApiResponse NoContent(Route route) {
  ApiResponse r;
  r.status = 204;
  r.content_type.clear();
  r.route = route;
  return r;
}

ApiResponse NoContentBecause(Route route, absl::string_view header, const absl::Status& why) {
  ApiResponse r = NoContent(route);
  std::string reason(why.message().substr(0, 256));
  for (char& c : reason)
    if (c == '\r' || c == '\n') c = ' ';
  r.headers.emplace_back(std::string(header), reason);
  return r;
}

ApiResponse RankResponse(Route route, const bandit::v1::Decision& decision, bool multislot) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  if (multislot) {
    // MultiSlotRankResponse: {slots: [{id, rewardActionId}], eventId}.
    w.StartObject();
    w.Key("slots");
    w.StartArray();
    for (const auto& slot : decision.slots()) {
      w.StartObject();
      w.Key("id");
      WriteString(w, slot.slot_id());
      w.Key("rewardActionId");
      WriteString(w, slot.action_id());
      w.EndObject();
    }
    w.EndArray();
    w.Key("eventId");
    WriteString(w, decision.event_id());
    w.EndObject();
  } else {
    // RankResponse: {ranking: [{id, probability}], eventId, rewardActionId}.
    w.StartObject();
    w.Key("ranking");
    w.StartArray();
    for (const auto& ranked : decision.ranking()) {
      w.StartObject();
      w.Key("id");
      WriteString(w, ranked.id());
      w.Key("probability");
      w.Double(ranked.probability());
      w.EndObject();
    }
    w.EndArray();
    w.Key("eventId");
    WriteString(w, decision.event_id());
    w.Key("rewardActionId");
    WriteString(w, decision.action_id());
    w.EndObject();
  }
  ApiResponse r;
  r.status = 201;
  r.body.assign(buffer.GetString(), buffer.GetSize());
  r.route = route;
  return r;
}

void ToJson(const Json& value, std::string* out) {
  // One buffer per thread, kept between calls (a rank writes one document per action); one
  // that grew past 1 MB gives its memory back.
  thread_local rapidjson::StringBuffer buffer;
  buffer.Clear();
  Writer w(buffer);
  value.Accept(w);
  out->assign(buffer.GetString(), buffer.GetSize());
  if (buffer.GetSize() > (1 << 20)) {
    buffer.Clear();
    buffer.ShrinkToFit();
  }
}

std::string ToJson(const Json& value) {
  std::string out;
  ToJson(value, &out);
  return out;
}

void WriteString(Writer& w, absl::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

}  // namespace bandit::server::http
