#include "client/cpp/json_text.h"

namespace bandit::client::json_text {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i;
}

// The end of the string starting at s[i] == '"' (one past its closing quote).
size_t StringEnd(std::string_view s, size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return s.size();
}

// The end of the value starting at s[i].
size_t ValueEnd(std::string_view s, size_t i) {
  if (i >= s.size()) return s.size();
  if (s[i] == '"') return StringEnd(s, i);
  if (s[i] == '{' || s[i] == '[') {
    int depth = 0;
    while (i < s.size()) {
      const char c = s[i];
      if (c == '"') {
        i = StringEnd(s, i);
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      if (c == '}' || c == ']') {
        if (--depth == 0) return i + 1;
      }
      ++i;
    }
    return s.size();
  }
  while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && !IsSpace(s[i])) ++i;
  return i;
}

void ObjectMembers(std::string_view s, std::vector<Member>* out) {
  size_t i = SkipSpace(s, 0);
  if (i >= s.size() || s[i] != '{') return;
  i = SkipSpace(s, i + 1);
  while (i < s.size() && s[i] == '"') {
    const size_t key_end = StringEnd(s, i);
    Member m;
    m.key = s.substr(i + 1, key_end - i - 2);
    i = SkipSpace(s, key_end);
    if (i >= s.size() || s[i] != ':') return;
    i = SkipSpace(s, i + 1);
    const size_t value_end = ValueEnd(s, i);
    m.value = s.substr(i, value_end - i);
    out->push_back(m);
    i = SkipSpace(s, value_end);
    if (i < s.size() && s[i] == ',') i = SkipSpace(s, i + 1);
  }
}

}  // namespace

std::vector<std::string_view> Elements(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = SkipSpace(s, 0);
  if (i >= s.size() || s[i] != '[') return out;
  i = SkipSpace(s, i + 1);
  while (i < s.size() && s[i] != ']') {
    const size_t end = ValueEnd(s, i);
    out.push_back(s.substr(i, end - i));
    i = SkipSpace(s, end);
    if (i < s.size() && s[i] == ',') i = SkipSpace(s, i + 1);
  }
  return out;
}

std::vector<Member> Members(std::string_view json) {
  std::vector<Member> out;
  const size_t i = SkipSpace(json, 0);
  if (i < json.size() && json[i] == '[') {
    for (std::string_view element : Elements(json)) ObjectMembers(element, &out);
  } else {
    ObjectMembers(json, &out);
  }
  return out;
}

std::optional<std::string_view> Value(std::string_view object, std::string_view key) {
  std::vector<Member> members;
  ObjectMembers(object, &members);
  for (const Member& m : members)
    if (m.key == key) return m.value;
  return std::nullopt;
}

std::string Minified(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '"') {
      const size_t end = StringEnd(s, i);
      out.append(s.substr(i, end - i));
      i = end;
    } else {
      if (!IsSpace(s[i])) out.push_back(s[i]);
      ++i;
    }
  }
  return out;
}

std::string MemberText(const Member& m) {
  std::string out = "\"";
  out.append(m.key);
  out.append("\":");
  out.append(Minified(m.value));
  return out;
}

}  // namespace bandit::client::json_text
