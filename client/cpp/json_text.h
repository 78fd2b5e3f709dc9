// JSON text read as written, for the decision log's DSJSON: the members of an object in order,
// a key given twice included. JSON libraries (nlohmann's among them) keep one value per key,
// while the featurizer, like VW, hashes every occurrence; a log must carry what was hashed.
// The input is JSON already checked by a parser (the functions assume it is well formed).
// Internal to client/cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bandit::client::json_text {

struct Member {
  std::string_view key;  // as written, without its quotes (escapes kept)
  std::string_view value;
};

// The members of a JSON object, in order; of an array of objects, every object's in order.
std::vector<Member> Members(std::string_view json);
// The first value of `key` (written without escapes) in a JSON object.
std::optional<std::string_view> Value(std::string_view object, std::string_view key);
// The elements of a JSON array.
std::vector<std::string_view> Elements(std::string_view array);
// JSON text without the whitespace outside its strings (a DSJSON record is one line).
std::string Minified(std::string_view json);
// `"key":value` of a member, minified.
std::string MemberText(const Member& m);

}  // namespace bandit::client::json_text
