// Vowpal Wabbit's input formats read into ParsedFeatures for a FeatureSpace: its JSON (a SAX
// handler that follows VW's json_parser state by state), its text format, its float parser, and
// the per-thread memory of parsed action documents (ParsedDocuments). The featurization of what
// they read (the hashing of interactions, the terms a policy sees) is feature_space.cc's.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/features/feature_space.h"
#include "core/features/vw_hash.h"

namespace bandit::features {
namespace {

// One namespace on the parser's stack (VW's namespace_builder). Names point into the parsed
// buffer (or are the default namespace's " ").
struct OpenNamespace {
  unsigned char letter;
  uint32_t hash;
  std::string_view name;
};

// A RapidJSON SAX handler that follows VW's json parser state by state (DefaultState for
// objects, ArrayState for arrays, TextState for "_text"), with the limits checked on the way.
// RapidJSON parses as in VW (in situ, its default number parsing), so a number becomes the same
// float VW holds.
class Reader : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Reader> {
 public:
  Reader(const FeatureSpaceOptions& options, const bool* ignored, uint64_t mask,
         std::string_view path, const InputLimits& limits, bool audit, ParsedFeatures* out)
      : options_(options),
        ignored_(ignored),
        mask_(mask),
        path_(path),
        limits_(limits),
        audit_(audit),
        out_(out) {
    // Per-thread stacks, reused: a request parses one document per action.
    frames_.clear();
    namespaces_.clear();
  }

  const absl::Status& status() const { return status_; }
  // What a completed parse must have seen: a top-level object or array of objects.
  bool saw_document() const { return saw_document_; }

  bool Null() {
    if (skip_) return SkipScalar();
    text_ = false;
    return true;  // VW ignores null everywhere
  }
  bool Bool(bool b) {
    if (skip_) return SkipScalar();
    if (InArray()) return Fail("a number, an object or null (VW's arrays hold numbers)");
    if (text_) return Fail("a string (\"_text\" holds words)");
    if (!InObject()) return Fail("an object");
    if (b) return AddHashed(key_, 1.0f, key_);
    return true;
  }
  bool Int(int v) { return Number(static_cast<float>(v)); }
  bool Uint(unsigned v) { return Number(static_cast<float>(v)); }
  bool Int64(int64_t v) { return Number(static_cast<float>(v)); }
  bool Uint64(uint64_t v) { return Number(static_cast<float>(v)); }
  bool Double(double v) {
    if (skip_) return SkipScalar();
    if (!std::isfinite(v)) return Fail("a finite number");
    // VW casts to float; a double beyond float's range would make that cast undefined.
    if (std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max()))
      return Fail("a number within a float's range (VW's features are floats)");
    return Number(static_cast<float>(v));
  }
  bool RawNumber(const char*, rapidjson::SizeType, bool) { return false; }  // not requested
  bool String(const char* str, rapidjson::SizeType length, bool) {
    if (skip_) return SkipScalar();
    if (static_cast<int64_t>(length) > limits_.max_string_bytes)
      return Fail(absl::StrCat("a string of at most ", limits_.max_string_bytes, " bytes (got ",
                               length, ")"));
    if (InArray()) return Fail("a number, an object or null (VW's arrays hold numbers)");
    if (!InObject()) return Fail("an object");
    char* value = const_cast<char*>(str);  // in situ: the buffer is ours
    if (text_) {
      text_ = false;
      return Text(value, length);
    }
    // VW escapes the value (not the key) and hashes key+value as one name.
    for (char* p = value; p != value + length; ++p)
      if (*p == ' ' || *p == '\t' || *p == '|' || *p == ':') *p = '_';
    name_.assign(key_);
    name_.append(value, length);
    return AddHashed(name_, 1.0f, name_);
  }
  bool StartObject() {
    if (skip_) return SkipOpen();
    if (text_) return Fail("a string (\"_text\" holds words)");
    if (!Enter()) return false;
    if (frames_.empty()) return Push(" ", /*array=*/false);  // the default namespace
    Frame& parent = frames_.back();
    if (parent.kind == Frame::kObject) return Push(key_, /*array=*/false);
    // An object in an array is a namespace named like the array's (at the top level, the
    // default namespace: Personalizer's list of objects meaning their union).
    const int64_t element = parent.count++;
    const std::string_view name =
        parent.kind == Frame::kTopArray ? std::string_view(" ") : namespaces_.back().name;
    if (!Push(name, /*array=*/false)) return false;
    frames_.back().element = element;
    return true;
  }
  bool EndObject(rapidjson::SizeType) {
    if (skip_) return SkipClose();
    Pop();
    return true;
  }
  bool StartArray() {
    if (skip_) return SkipOpen();
    if (text_) return Fail("a string (\"_text\" holds words)");
    if (!Enter()) return false;
    if (frames_.empty()) {
      // A document that is an array of objects: their union (Personalizer's form).
      frames_.emplace_back().kind = Frame::kTopArray;
      return true;
    }
    if (InArray()) return Fail("a number, an object or null (VW does not nest arrays)");
    if (frames_.back().kind == Frame::kTopArray)
      return Fail("an object (a list at the top level holds objects)");
    if (!Push(key_, /*array=*/true)) return false;
    frames_.back().array_hash = namespaces_.back().hash;
    return true;
  }
  bool EndArray(rapidjson::SizeType) {
    if (skip_) return SkipClose();
    if (frames_.back().kind == Frame::kTopArray) {
      frames_.pop_back();
      --depth_;
      return true;
    }
    Pop();
    return true;
  }
  bool Key(const char* str, rapidjson::SizeType length, bool) {
    if (skip_) return true;
    if (static_cast<int64_t>(length) > limits_.max_string_bytes)
      return Fail(
          absl::StrCat("a key of at most ", limits_.max_string_bytes, " bytes (got ", length, ")"));
    key_ = std::string_view(str, length);
    text_ = false;
    if (!key_.empty() && key_[0] == '_') {
      if (key_ == "_text") {
        text_ = true;
      } else {
        skip_ = true;  // VW ignores every other '_' key (labels, tags, ids) with its value
        skip_depth_ = 0;
      }
    }
    return true;
  }

  std::string Path() const {
    std::string p(path_);
    for (size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.element >= 0) absl::StrAppend(&p, "[", f.element, "]");
      if (f.kind == Frame::kObject) {
        const std::string_view key = i + 1 == frames_.size() ? key_ : f.key;
        if (!key.empty()) absl::StrAppend(&p, ".", std::string(key));
      } else if (i + 1 == frames_.size()) {
        absl::StrAppend(&p, "[", f.count, "]");
      }
    }
    return p;
  }

 private:
  struct Frame {
    enum Kind { kObject, kArray, kTopArray } kind = kObject;
    std::string_view key;     // kObject: the member holding the child being read
    int64_t count = 0;        // kArray / kTopArray: elements read so far
    int64_t element = -1;     // kObject inside an array: its position
    uint64_t array_hash = 0;  // kArray: VW's array_hash (the next element's index)
  };

  bool InArray() const { return !frames_.empty() && frames_.back().kind == Frame::kArray; }
  bool InObject() const { return !frames_.empty() && frames_.back().kind == Frame::kObject; }
  bool SkipScalar() {
    if (skip_depth_ == 0) skip_ = false;
    return true;
  }
  // Skipped values count toward the depth limit too: RapidJSON recurses into them.
  bool SkipOpen() {
    if (depth_ + ++skip_depth_ > limits_.max_depth)
      return Fail(absl::StrCat("nesting at most ", limits_.max_depth, " deep"));
    return true;
  }
  bool SkipClose() {
    if (--skip_depth_ == 0) skip_ = false;
    return true;
  }

  bool Enter() {
    if (++depth_ > limits_.max_depth)
      return Fail(absl::StrCat("nesting at most ", limits_.max_depth, " deep"));
    saw_document_ = true;
    return true;
  }

  bool Push(std::string_view name, bool array) {
    // The parent's member being opened, for error paths (the innermost one's is key_).
    if (!frames_.empty() && frames_.back().kind == Frame::kObject) frames_.back().key = key_;
    if (++namespace_count_ > limits_.max_namespaces)
      return Fail(absl::StrCat("at most ", limits_.max_namespaces, " namespaces"));
    namespaces_.push_back(OpenNamespace{static_cast<unsigned char>(name.empty() ? 0 : name[0]),
                                        HashString(name, options_.hash_seed), name});
    frames_.emplace_back().kind = array ? Frame::kArray : Frame::kObject;
    return true;
  }
  void Pop() {
    namespaces_.pop_back();
    frames_.pop_back();
    --depth_;
  }

  bool Number(float v) {
    if (skip_) return SkipScalar();
    if (text_) return Fail("a string (\"_text\" holds words)");
    if (!std::isfinite(v))
      return Fail("a number within a float's range (VW's features are floats)");
    if (InArray()) {
      Frame& f = frames_.back();
      const uint64_t index = f.array_hash++;
      ++f.count;
      if (v == 0) return true;  // VW drops zero values but counts their position
      if (!audit_) return Add(index, v, {});
      return Add(index, v, absl::StrCat("[", index - namespaces_.back().hash, "]"));
    }
    if (!InObject()) return Fail("an object");
    if (v == 0) return true;
    return AddHashed(key_, v, key_);
  }

  // VW's TextState: words split on blanks, ':' and '|' escaped, each a feature of value 1.
  bool Text(char* text, size_t length) {
    size_t start = 0;
    for (size_t i = 0; i <= length; ++i) {
      if (i == length || text[i] == ' ' || text[i] == '\t') {
        if (i > start) {
          const std::string_view word(text + start, i - start);
          if (!AddHashed(word, 1.0f, word)) return false;
        }
        start = i + 1;
      } else if (text[i] == ':' || text[i] == '|') {
        text[i] = '_';
      }
    }
    return true;
  }

  bool AddHashed(std::string_view name, float value, std::string_view audit_name) {
    return Add(HashString(name, namespaces_.back().hash) & mask_, value, audit_name);
  }

  bool Add(uint64_t index, float value, std::string_view audit_name) {
    if (!status_.ok()) return false;
    const OpenNamespace& ns = namespaces_.back();
    if (ignored_[ns.letter]) return true;
    if (++feature_count_ > limits_.max_features)
      return Fail(absl::StrCat("at most ", limits_.max_features, " features"));
    FeatureGroup& g = out_->Get(ns.letter);
    g.features.push_back(ParsedFeature{index, value});
    if (audit_) {
      // VW writes no namespace prefix for the default namespace or an empty name (to_string of
      // audit_strings).
      g.names.push_back(ns.name == " " || ns.name.empty()
                            ? std::string(audit_name)
                            : absl::StrCat(std::string(ns.name), "^", std::string(audit_name)));
    }
    return true;
  }

  bool Fail(const std::string& expected) {
    if (status_.ok())
      status_ = absl::InvalidArgumentError(absl::StrCat(Path(), ": expected ", expected));
    return false;
  }

  const FeatureSpaceOptions& options_;
  const bool* ignored_;
  const uint64_t mask_;
  const std::string_view path_;
  const InputLimits& limits_;
  const bool audit_;
  ParsedFeatures* out_;
  absl::Status status_;
  static thread_local std::vector<Frame> frames_;
  static thread_local std::vector<OpenNamespace> namespaces_;
  static thread_local std::string name_;  // key+value of a string feature
  std::string_view key_;
  bool text_ = false;
  bool skip_ = false;
  int64_t skip_depth_ = 0;
  int64_t depth_ = 0;
  int64_t namespace_count_ = 0;
  int64_t feature_count_ = 0;
  bool saw_document_ = false;
};

thread_local std::vector<Reader::Frame> Reader::frames_;
thread_local std::vector<OpenNamespace> Reader::namespaces_;
thread_local std::string Reader::name_;

}  // namespace

std::optional<float> ParseVwFloat(std::string_view text) {
  // parse_primitives.h parse_float: digits accumulated in a float, then scaled by a float power
  // of ten from fast_pow10.h's table (10^k built by repeated *10 and /10 in float). Not correctly
  // rounded, so a value can differ from strtof's by an ulp: VW's value is the one it learns from.
  size_t at = 0;
  float sign = 1;
  if (at < text.size() && text[at] == '-') {
    sign = -1;
    ++at;
  }
  const auto digit = [&](size_t i) { return i < text.size() && text[i] >= '0' && text[i] <= '9'; };
  float acc = 0;
  const size_t first_digit = at;
  while (digit(at)) acc = acc * 10 + static_cast<float>(text[at++] - '0');
  int num_dec = 0;
  bool any_digit = at > first_digit;
  if (at < text.size() && text[at] == '.') {
    ++at;
    while (digit(at)) {
      any_digit = true;
      if (num_dec < 35) {
        acc = acc * 10 + static_cast<float>(text[at] - '0');
        ++num_dec;
      }
      ++at;
    }
  }
  // VW accumulates the exponent in an int and lets a long one wrap; unsigned arithmetic wraps
  // the same way without the undefined behaviour, and the int8_t cast keeps VW's low byte.
  uint32_t exponent = 0;
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    bool negative_exponent = false;
    if (at < text.size() && text[at] == '-') {
      negative_exponent = true;
      ++at;
    }
    while (digit(at)) exponent = exponent * 10u + static_cast<uint32_t>(text[at++] - '0');
    if (negative_exponent) exponent = 0u - exponent;
  }
  if (at == text.size() && any_digit) {
    const int k = static_cast<int8_t>(exponent - static_cast<uint32_t>(num_dec));
    float pow10 = 1;
    if (k >= 0) {
      for (int i = 0; i < k && i <= FLT_MAX_10_EXP; ++i) pow10 *= 10.f;
      if (k > FLT_MAX_10_EXP + 1) pow10 = std::numeric_limits<float>::infinity();
    } else {
      for (int i = 0; i < -k && i <= -FLT_MIN_10_EXP; ++i) pow10 /= 10.f;
      if (-k > -FLT_MIN_10_EXP) pow10 = 0;
    }
    return sign * (acc * pow10);
  }
  // Not the easy case: VW falls back to strtof, which must read the whole token here.
  const std::string copy(text);
  char* stop = nullptr;
  const float f = std::strtof(copy.c_str(), &stop);
  if (copy.empty() || *stop != '\0') return std::nullopt;
  return f;
}

absl::Status FeatureSpace::Parse(std::string_view json, std::string_view path,
                                 const InputLimits& limits, bool audit, ParsedFeatures* out) const {
  if (static_cast<int64_t>(json.size()) > limits.max_json_bytes)
    return absl::InvalidArgumentError(absl::StrCat(std::string(path), ": expected at most ",
                                                   limits.max_json_bytes, " bytes of JSON, got ",
                                                   json.size()));
  // In situ, as VW parses: a NUL-terminated copy the reader may write into.
  thread_local std::string buffer;
  buffer.assign(json.data(), json.size());
  Reader reader(options_, ignored_, mask(), path, limits, audit, out);
  rapidjson::InsituStringStream stream(buffer.data());
  rapidjson::Reader parser;
  // VW's flags exactly (in situ, nothing else). The parser recurses per nesting level, which
  // the reader bounds: it refuses an object or array deeper than max_depth before RapidJSON
  // descends into it (skipped values included).
  const rapidjson::ParseResult result = parser.Parse<rapidjson::kParseInsituFlag>(stream, reader);
  if (!reader.status().ok()) return reader.status();
  if (result.IsError())
    return absl::InvalidArgumentError(absl::StrCat(std::string(path), ": malformed JSON at byte ",
                                                   result.Offset(), ": ",
                                                   rapidjson::GetParseError_En(result.Code())));
  if (!reader.saw_document())
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(path), ": expected a JSON object or an array of objects"));
  return absl::OkStatus();
}

absl::Status FeatureSpace::ParseText(std::string_view line, std::string_view path,
                                     const InputLimits& limits, bool audit,
                                     ParsedFeatures* out) const {
  if (static_cast<int64_t>(line.size()) > limits.max_json_bytes)
    return absl::InvalidArgumentError(absl::StrCat(std::string(path), ": expected at most ",
                                                   limits.max_json_bytes, " bytes, got ",
                                                   line.size()));
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(path), ": ", what));
  };
  auto ends_token = [](char c) { return c == ' ' || c == '\t' || c == '|' || c == '\r'; };
  size_t at = line.find('|');
  int64_t features = 0, namespaces = 0;
  while (at != std::string_view::npos && at < line.size()) {
    ++at;  // past '|'
    if (++namespaces > limits.max_namespaces)
      return fail(absl::StrCat("expected at most ", limits.max_namespaces, " namespaces"));
    unsigned char letter = ' ';
    std::string ns_name = " ";
    uint32_t ns_hash =
        options_.hash_seed == 0 ? 0 : MurmurHash3(std::string_view(), options_.hash_seed);
    float scale = 1.0f;
    if (at < line.size() && !ends_token(line[at])) {
      if (line[at] == ':') return fail("expected a namespace name after '|'");
      size_t end = at;
      while (end < line.size() && !ends_token(line[end]) && line[end] != ':') ++end;
      ns_name = std::string(line.substr(at, end - at));
      letter = static_cast<unsigned char>(ns_name[0]);
      ns_hash = HashString(ns_name, options_.hash_seed);
      at = end;
      if (at < line.size() && line[at] == ':') {
        size_t start = ++at;
        while (at < line.size() && !ends_token(line[at])) ++at;
        const std::optional<float> parsed = ParseVwFloat(line.substr(start, at - start));
        scale = parsed.value_or(0.0f);
        if (!parsed || !std::isfinite(scale))
          return fail(absl::StrCat("expected a finite namespace value after '", ns_name, ":'"));
      }
    }
    uint64_t anonymous = 0;
    while (at < line.size() && line[at] != '|') {
      if (line[at] == ' ' || line[at] == '\t' || line[at] == '\r') {
        ++at;
        continue;
      }
      size_t end = at;
      while (end < line.size() && !ends_token(line[end]) && line[end] != ':') ++end;
      const std::string name(line.substr(at, end - at));
      at = end;
      float value = 1.0f;
      std::string string_value;
      if (at < line.size() && line[at] == ':') {
        size_t start = ++at;
        while (at < line.size() && !ends_token(line[at])) ++at;
        const std::string_view v = line.substr(start, at - start);
        if (const std::optional<float> f = ParseVwFloat(v)) {
          if (!std::isfinite(*f))
            return fail(absl::StrCat("expected a finite value for feature '", name, "'"));
          value = *f;
        } else {
          string_value = std::string(v);  // name:string, VW's chain hash
        }
      }
      if (string_value.empty()) value *= scale;
      uint64_t index;
      if (!string_value.empty()) {
        index = HashString(string_value, HashString(name, ns_hash)) & mask();
      } else if (!name.empty()) {
        index = HashString(name, ns_hash) & mask();
      } else {
        index = uint64_t{ns_hash} + anonymous++;
      }
      if (value == 0 || ignored_[letter]) continue;
      if (++features > limits.max_features)
        return fail(absl::StrCat("expected at most ", limits.max_features, " features"));
      FeatureGroup& g = out->Get(letter);
      g.features.push_back(ParsedFeature{index, value});
      if (audit) {
        std::string n = ns_name == " " ? name : absl::StrCat(ns_name, "^", name);
        if (!string_value.empty()) absl::StrAppend(&n, "^", string_value);
        g.names.push_back(std::move(n));
      }
    }
  }
  return absl::OkStatus();
}

struct ParsedDocuments::Space {
  uint64_t id = 0;
  InputLimits limits;
  size_t bytes = 0;  // of the remembered documents' text
  absl::flat_hash_map<std::string, ParsedFeatures> documents;
};

ParsedDocuments::ParsedDocuments() = default;
ParsedDocuments::~ParsedDocuments() = default;

namespace {

bool SameLimits(const InputLimits& a, const InputLimits& b) {
  return a.max_features == b.max_features && a.max_namespaces == b.max_namespaces &&
         a.max_depth == b.max_depth && a.max_string_bytes == b.max_string_bytes &&
         a.max_json_bytes == b.max_json_bytes && a.max_terms == b.max_terms;
}

}  // namespace

absl::StatusOr<const ParsedFeatures*> ParsedDocuments::Parse(const FeatureSpace& space,
                                                             std::string_view json,
                                                             std::string_view path,
                                                             const InputLimits& limits) {
  if (json.size() > kMaxDocumentBytes) {
    unremembered_.Clear();
    if (auto s = space.Parse(json, path, limits, false, &unremembered_); !s.ok()) return s;
    return &unremembered_;
  }
  // The space's documents, moved to the back (most recently used).
  auto it = std::find_if(spaces_.begin(), spaces_.end(), [&](const std::unique_ptr<Space>& s) {
    return s->id == space.id() && SameLimits(s->limits, limits);
  });
  if (it == spaces_.end()) {
    if (spaces_.size() >= kMaxSpaces) spaces_.erase(spaces_.begin());
    spaces_.push_back(std::make_unique<Space>());
    spaces_.back()->id = space.id();
    spaces_.back()->limits = limits;
  } else if (it + 1 != spaces_.end()) {
    std::rotate(it, it + 1, spaces_.end());
  }
  Space& remembered = *spaces_.back();
  if (auto found = remembered.documents.find(absl::string_view(json.data(), json.size()));
      found != remembered.documents.end())
    return &found->second;
  ParsedFeatures parsed;
  if (auto s = space.Parse(json, path, limits, false, &parsed); !s.ok()) return s;
  if (remembered.bytes + json.size() > kMaxSpaceBytes) {
    remembered.documents.clear();
    remembered.bytes = 0;
  }
  remembered.bytes += json.size();
  return &remembered.documents.emplace(std::string(json), std::move(parsed)).first->second;
}

}  // namespace bandit::features
