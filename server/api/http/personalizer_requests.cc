// Reading PersonalizerApi's request bodies: JSON (depth-limited) into the service's request
// messages, each malformed element answered with Personalizer's 400 naming it.
#include <cctype>
#include <cstdint>
#include <string>

#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/api/http/personalizer_internal.h"

namespace bandit::server::http {
namespace {

// Forwards RapidJSON's SAX events to a Document, refusing nesting deeper than `max_depth`
// before the parser recurses into it (a body of a million '[' must not exhaust the stack).
class DepthLimitedHandler {
 public:
  DepthLimitedHandler(rapidjson::Document* doc, int max_depth) : doc_(doc), max_depth_(max_depth) {}
  bool Null() { return doc_->Null(); }
  bool Bool(bool b) { return doc_->Bool(b); }
  bool Int(int i) { return doc_->Int(i); }
  bool Uint(unsigned u) { return doc_->Uint(u); }
  bool Int64(int64_t i) { return doc_->Int64(i); }
  bool Uint64(uint64_t u) { return doc_->Uint64(u); }
  bool Double(double d) { return doc_->Double(d); }
  // The body is read with its numbers as text (kParseNumbersAsStringsFlag: the syntax and range
  // checks are the same) so that a number whose digits are all zero is made ±0.0 here: RapidJSON
  // 1.1.0's full-precision conversion normalizes a zero significand (clz(0), undefined) and reads
  // 0.000000000000000000000000 as -2^-640. Every other number goes through that conversion.
  bool RawNumber(const char* s, rapidjson::SizeType n, bool /*copy*/) {
    if (IsZeroWithFraction(absl::string_view(s, n))) return doc_->Double(s[0] == '-' ? -0.0 : 0.0);
    rapidjson::MemoryStream number(s, n);
    return !numbers_.Parse<rapidjson::kParseFullPrecisionFlag>(number, *this).IsError();
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return doc_->String(s, n, copy); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return doc_->Key(s, n, copy); }
  bool StartObject() { return Enter() && doc_->StartObject(); }
  bool EndObject(rapidjson::SizeType n) {
    --depth_;
    return doc_->EndObject(n);
  }
  bool StartArray() { return Enter() && doc_->StartArray(); }
  bool EndArray(rapidjson::SizeType n) {
    --depth_;
    return doc_->EndArray(n);
  }
  bool too_deep() const { return too_deep_; }

 private:
  bool Enter() {
    if (++depth_ > max_depth_) too_deep_ = true;
    return !too_deep_;
  }
  // A JSON number (already checked) written with a fraction or an exponent whose digits before
  // the exponent are all zero.
  static bool IsZeroWithFraction(absl::string_view number) {
    const size_t exponent = number.find_first_of("eE");
    const absl::string_view digits = number.substr(0, exponent);
    if (exponent == absl::string_view::npos && digits.find('.') == absl::string_view::npos)
      return false;  // an integer: "0" and "-0" stay the integer 0, as RapidJSON reads them
    return digits.find_first_not_of("-0.") == absl::string_view::npos;
  }

  rapidjson::Document* doc_;
  rapidjson::Reader numbers_;  // converts each number's text, its stack kept between numbers
  const int max_depth_;
  int depth_ = 0;
  bool too_deep_ = false;
};

// `field` of a rank request holding features (Personalizer's list of objects, or one object),
// as JSON text into `out`; the 400 naming the field otherwise.
std::optional<ApiResponse> ReadFeatures(Route route, const Json& value, const std::string& field,
                                        std::string* out) {
  if (!value.IsArray() && !value.IsObject())
    return Invalid(route, field, absl::StrCat(field, ": expected a list of objects"));
  ToJson(value, out);
  return std::nullopt;
}

// `field` of a rank request holding action ids, each added by `add`; the 400 naming the field
// (or the element) otherwise.
template <typename Add>
std::optional<ApiResponse> ReadIds(Route route, const Json& value, const std::string& field,
                                   Add&& add) {
  if (!value.IsArray())
    return Invalid(route, field, absl::StrCat(field, ": expected a list of action ids"));
  for (rapidjson::SizeType i = 0; i < value.Size(); ++i) {
    if (!value[i].IsString())
      return Invalid(route, field, absl::StrCat(field, "[", i, "]: expected a string"));
    add(AsString(value[i]));
  }
  return std::nullopt;
}

// Element `where` of a rank request's actions or slots: an object with a string "id" and
// optional "features", into `id` and `features`; the 400 naming the element otherwise.
std::optional<ApiResponse> ReadIdAndFeatures(Route route, const Json& element,
                                             const std::string& where, std::string* id,
                                             std::string* features) {
  if (!element.IsObject())
    return Invalid(route, where, absl::StrCat(where, ": expected an object"));
  const Json* id_json = Member(element, "id");
  if (id_json == nullptr || !id_json->IsString())
    return Invalid(route, where + ".id", absl::StrCat(where, ".id: expected a string"));
  id->assign(id_json->GetString(), id_json->GetStringLength());
  if (const Json* f = Member(element, "features"))
    return ReadFeatures(route, *f, where + ".features", features);
  return std::nullopt;
}

// Personalizer's event ids: at most 256 characters (its API), and those the service takes
// for a caller-chosen id (SelectRequest.event_id), which every id it makes also satisfies.
bool ValidEventId(absl::string_view id) {
  if (id.empty() || id.size() > 256) return false;
  for (unsigned char c : id)
    if (!(std::isalnum(c) || c == '.' || c == '_' || c == ':' || c == '-')) return false;
  return true;
}

}  // namespace

// Parses a request body; INVALID_ARGUMENT naming the byte where it stops being JSON.
absl::Status ParseBody(absl::string_view body, int max_depth, rapidjson::Document* doc) {
  if (body.find('\0') != absl::string_view::npos)
    return absl::InvalidArgumentError("the request body holds a NUL byte; expected JSON text");
  rapidjson::ParseResult result;
  bool too_deep = false;
  struct Generator {
    absl::string_view text;
    int max_depth;
    rapidjson::ParseResult* result;
    bool* too_deep;
    bool operator()(rapidjson::Document& d) {
      DepthLimitedHandler handler(&d, max_depth);
      // The body as it is (no NUL in it: the end reads as one, as a C string's would).
      rapidjson::MemoryStream stream(text.data(), text.size());
      rapidjson::Reader reader;
      *result = reader.Parse<rapidjson::kParseNumbersAsStringsFlag>(stream, handler);
      *too_deep = handler.too_deep();
      return !result->IsError();
    }
  } generator{body, max_depth, &result, &too_deep};
  doc->Populate(generator);
  if (too_deep)
    return absl::InvalidArgumentError(
        absl::StrCat("the request body nests objects and arrays deeper than ", max_depth,
                     " (--max_json_depth)"));
  if (result.IsError())
    return absl::InvalidArgumentError(absl::StrCat(
        "the request body is not valid JSON: ", rapidjson::GetParseError_En(result.Code()),
        " at byte ", result.Offset()));
  return absl::OkStatus();
}

std::string AsString(const Json& value) {
  return std::string(value.GetString(), value.GetStringLength());
}

const Json* Member(const Json& object, const char* name) {
  auto it = object.FindMember(name);
  return it == object.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}

std::optional<ApiResponse> CheckEventId(Route route, absl::string_view id) {
  if (!ValidEventId(id))
    return Invalid(route, "eventId", "eventId: expected 1 to 256 characters from [A-Za-z0-9._:-]");
  return std::nullopt;
}

std::optional<ApiResponse> ReadRankRequest(Route route, absl::string_view body, int max_depth,
                                           bool multislot, bandit::v1::SelectRequest* req) {
  // The document's values in a first block on the stack (a rank of 50 actions of 10 features
  // takes about 40 KB); a larger body's spill into blocks of the heap.
  alignas(8) char first_block[48 << 10];
  rapidjson::MemoryPoolAllocator<> values(first_block, sizeof(first_block));
  rapidjson::Document doc(&values);
  if (absl::Status s = ParseBody(body, max_depth, &doc); !s.ok()) return Error(s, route);
  if (!doc.IsObject()) return Invalid(route, "", "the rank request must be a JSON object");
  if (const Json* context = Member(doc, "contextFeatures"))
    if (auto bad = ReadFeatures(route, *context, "contextFeatures", req->mutable_context()))
      return *bad;
  const Json* actions = Member(doc, "actions");
  if (actions == nullptr || !actions->IsArray())
    return Invalid(route, "actions", "actions: expected a list of {\"id\", \"features\"}");
  for (rapidjson::SizeType i = 0; i < actions->Size(); ++i) {
    bandit::v1::NamedAction* action = req->add_actions();
    if (auto bad = ReadIdAndFeatures(route, (*actions)[i], absl::StrCat("actions[", i, "]"),
                                     action->mutable_id(), action->mutable_features()))
      return *bad;
  }
  if (const Json* excluded = Member(doc, "excludedActions"))
    if (auto bad = ReadIds(route, *excluded, "excludedActions",
                           [&](std::string id) { req->add_excluded_actions(std::move(id)); }))
      return *bad;
  if (const Json* event_id = Member(doc, "eventId")) {
    if (!event_id->IsString()) return Invalid(route, "eventId", "eventId: expected a string");
    req->set_event_id(AsString(*event_id));
  }
  if (const Json* defer = Member(doc, "deferActivation")) {
    if (!defer->IsBool())
      return Invalid(route, "deferActivation", "deferActivation: expected true or false");
    req->set_defer_activation(defer->GetBool());
  }
  if (multislot) {
    // MultiSlotRankRequest.slots: [{id, features, excludedActions, baselineAction}].
    const Json* slots = Member(doc, "slots");
    if (slots == nullptr || !slots->IsArray() || slots->Empty())
      return Invalid(route, "slots",
                     "slots: expected a list of {\"id\", \"features\", \"excludedActions\", "
                     "\"baselineAction\"}");
    for (rapidjson::SizeType i = 0; i < slots->Size(); ++i) {
      const Json& s = (*slots)[i];
      const std::string where = absl::StrCat("slots[", i, "]");
      bandit::v1::Slot* slot = req->add_slots();
      if (auto bad = ReadIdAndFeatures(route, s, where, slot->mutable_id(),
                                       slot->mutable_features()))
        return *bad;
      if (const Json* excluded = Member(s, "excludedActions"))
        if (auto bad = ReadIds(route, *excluded, where + ".excludedActions",
                               [&](std::string id) { slot->add_excluded_actions(std::move(id)); }))
          return *bad;
      if (const Json* baseline = Member(s, "baselineAction")) {
        if (!baseline->IsString())
          return Invalid(route, where + ".baselineAction",
                         absl::StrCat(where, ".baselineAction: expected an action id"));
        slot->set_baseline_action(AsString(*baseline));
      }
    }
  }
  return std::nullopt;
}

std::optional<ApiResponse> ReadRewards(Route route, absl::string_view body, int max_depth,
                                       bool multislot,
                                       std::vector<std::pair<std::string, double>>* rewards) {
  rapidjson::Document doc;
  if (absl::Status s = ParseBody(body, max_depth, &doc); !s.ok()) return Error(s, route);
  if (multislot) {
    const Json* list = doc.IsObject() ? Member(doc, "reward") : nullptr;
    if (list == nullptr || !list->IsArray() || list->Empty())
      return Invalid(route, "reward", "expected {\"reward\": [{\"slotId\", \"value\"}, ...]}");
    for (rapidjson::SizeType i = 0; i < list->Size(); ++i) {
      const Json& r = (*list)[i];
      const Json* slot = r.IsObject() ? Member(r, "slotId") : nullptr;
      const Json* v = r.IsObject() ? Member(r, "value") : nullptr;
      if (slot == nullptr || !slot->IsString() || v == nullptr || !v->IsNumber())
        return Invalid(route, absl::StrCat("reward[", i, "]"),
                       absl::StrCat("reward[", i, "]: expected {\"slotId\": a string, "
                                    "\"value\": a number}"));
      rewards->emplace_back(AsString(*slot), v->GetDouble());
    }
  } else {
    const Json* value = doc.IsObject() ? Member(doc, "value") : nullptr;
    if (value == nullptr || !value->IsNumber())
      return Invalid(route, "value", "expected {\"value\": a number}");
    rewards->emplace_back("", value->GetDouble());
  }
  return std::nullopt;
}

}  // namespace bandit::server::http
