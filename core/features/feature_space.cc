#include "core/features/feature_space.h"

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/features/vw_hash.h"

namespace bandit::features {
namespace {

// The terms one interaction makes of namespaces of a, b (and c, for a triple) features, as
// Featurize enumerates them: a namespace next to itself pairs each feature with itself and the
// later ones (VW's process_quadratic_interaction / process_cubic_interaction without
// --permutations): n(n+1)/2 pairs, n(n+1)(n+2)/6 triples. In doubles, so that CheckTerms can
// count an oversized request without overflowing.
double InteractionTerms(double a, double b, double c, bool triple, bool same1, bool same2) {
  if (!triple) return same1 ? a * (a + 1) / 2 : a * b;
  if (same1 && same2) return a * (a + 1) * (a + 2) / 6;
  if (same1) return a * (a + 1) / 2 * c;
  if (same2) return a * b * (b + 1) / 2;
  return a * b * c;
}

// One run of interaction terms: the features (idx, val)[0, n) of the last namespace of an
// interaction, each folded with the same earlier part (`half`, the FNV-multiplied index of the
// features before it, and `v`, the product of their values):
//   index[q] = (idx[q] ^ half) & mask, value[q] = v * val[q] (a float product, as VW has it).
// Only the low 32 bits of VW's 64-bit fold survive a mask of at most 30 bits, so the fold runs in
// 32 bits. Four terms at a time with SSE2 (x86-64's baseline): the same integer operations and
// the same IEEE single-precision products as the scalar loop, so the same bits.
void FoldTerms(const uint32_t* idx, const float* val, size_t n, uint32_t half, float v,
               uint32_t mask, uint32_t* index, double* value) {
  size_t q = 0;
#if defined(__SSE2__)
  const __m128i h = _mm_set1_epi32(static_cast<int>(half));
  const __m128i m = _mm_set1_epi32(static_cast<int>(mask));
  const __m128 f = _mm_set1_ps(v);
  for (; q + 4 <= n; q += 4) {
    const __m128i i4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(idx + q));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(index + q), _mm_and_si128(_mm_xor_si128(i4, h), m));
    const __m128 p = _mm_mul_ps(f, _mm_loadu_ps(val + q));
    _mm_storeu_pd(value + q, _mm_cvtps_pd(p));
    _mm_storeu_pd(value + q + 2, _mm_cvtps_pd(_mm_movehl_ps(p, p)));
  }
#endif
  for (; q < n; ++q) {
    index[q] = (idx[q] ^ half) & mask;
    value[q] = static_cast<double>(v * val[q]);
  }
}

bool Interactable(unsigned char letter) {
  // VW interacts the printable letters and the CCB slot namespace, never the constant's.
  return (letter >= ' ' && letter <= '~') || letter == kCcbSlotNamespace;
}

// VW's must_be_left_sorted, applied to an interaction already sorted: true when it mixes a
// repeated letter with another ("aab", "abb"), whose letters must then stay sorted (grouped).
bool MustBeLeftSorted(const std::string& sorted) {
  if (sorted.size() <= 1) return true;
  bool diff_found = false, pair_found = false;
  for (size_t i = 0; i + 1 < sorted.size(); ++i) {
    if (sorted[i] == sorted[i + 1]) {
      if (diff_found) return true;
      pair_found = true;
    } else {
      if (pair_found) return true;
      diff_found = true;
    }
  }
  return false;
}

// VW's sort_and_filter_duplicate_interactions with filtering on (no
// --leave_duplicate_interactions): interactions equal as multisets of letters are kept once
// (the first), in their original order; those MustBeLeftSorted are sorted.
void SortAndFilterDuplicates(std::vector<std::string>* interactions) {
  std::vector<std::pair<std::string, size_t>> sorted;
  for (size_t i = 0; i < interactions->size(); ++i) {
    std::string s = (*interactions)[i];
    // As VW's namespace_index, unsigned: the CCB namespaces (139, 140) sort after the letters.
    std::stable_sort(s.begin(), s.end(), [](char a, char b) {
      return static_cast<unsigned char>(a) < static_cast<unsigned char>(b);
    });
    sorted.emplace_back(std::move(s), i);
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  sorted.erase(std::unique(sorted.begin(), sorted.end(),
                           [](const auto& a, const auto& b) { return a.first == b.first; }),
               sorted.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second < b.second; });
  std::vector<std::string> result;
  for (auto& [s, i] : sorted)
    result.push_back(MustBeLeftSorted(s) ? std::move(s) : (*interactions)[i]);
  *interactions = std::move(result);
}

// parse_args.cc parse_feature_tweaks: VW sorts the whole list (sort_interactions_comparator: by
// length, then by letters as unsigned bytes) before filtering it, and sums an action's terms in
// that order, interaction by interaction.
void SortInteractions(std::vector<std::string>* interactions) {
  std::sort(interactions->begin(), interactions->end(),
            [](const std::string& a, const std::string& b) {
              return a.size() != b.size() ? a.size() < b.size() : a < b;
            });
}

// VW's expand_quadratics_wildcard_interactions: every pair (a, b) of letters with a <= b.
std::vector<std::string> ExpandQuadraticWildcard(const std::string& letters) {
  std::set<std::string> pairs;
  for (size_t i = 0; i < letters.size(); ++i)
    for (size_t j = i; j < letters.size(); ++j) pairs.insert({letters[i], letters[j]});
  return {pairs.begin(), pairs.end()};
}

// VW's generate_namespace_combinations_with_repetition, in its order (the first position
// counts fastest, so a combination's letters come out in descending order).
std::vector<std::string> CombinationsWithRepetition(const std::string& letters, size_t pick) {
  std::vector<std::string> result;
  if (letters.empty()) return result;
  const size_t last = letters.size() - 1;
  std::vector<size_t> idx(pick + 1, 0);
  while (true) {
    for (size_t i = 0; i < pick; ++i) {
      if (idx[i] > last) {
        idx[i + 1] += 1;
        for (size_t k = 0; k <= i; ++k) idx[k] = idx[i + 1];
      }
    }
    if (idx[pick] > 0) break;
    std::string combination;
    for (size_t i = 0; i < pick; ++i) combination.push_back(letters[idx[i]]);
    result.push_back(std::move(combination));
    idx[0] += 1;
  }
  return result;
}

// VW's compile_interaction: the wildcards of one interaction filled with every combination of
// the letters present, the fixed letters kept at their positions.
std::vector<std::string> CompileWildcard(const std::string& interaction,
                                         const std::string& letters) {
  std::vector<size_t> fixed_at;
  size_t wildcards = 0;
  for (size_t i = 0; i < interaction.size(); ++i) {
    if (static_cast<unsigned char>(interaction[i]) == kWildcardNamespace) {
      ++wildcards;
    } else {
      fixed_at.push_back(i);
    }
  }
  std::vector<std::string> result = wildcards == 2 ? ExpandQuadraticWildcard(letters)
                                                   : CombinationsWithRepetition(letters, wildcards);
  for (size_t i : fixed_at)
    for (auto& r : result) r.insert(r.begin() + static_cast<std::ptrdiff_t>(i), interaction[i]);
  return result;
}

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

namespace {
// Identifies a space's options for the per-thread interaction cache (copies share theirs).
std::atomic<uint64_t> next_space_id{0};
}  // namespace

FeatureGroup* ParsedFeatures::Find(unsigned char letter) {
  for (auto& g : groups)
    if (g.letter == letter) return &g;
  return nullptr;
}
const FeatureGroup* ParsedFeatures::Find(unsigned char letter) const {
  for (const auto& g : groups)
    if (g.letter == letter) return &g;
  return nullptr;
}
FeatureGroup& ParsedFeatures::Get(unsigned char letter) {
  if (FeatureGroup* g = Find(letter)) return *g;
  if (spare.empty()) {
    groups.emplace_back().features.reserve(32);
  } else {
    groups.push_back(std::move(spare.back()));
    spare.pop_back();
  }
  groups.back().letter = letter;
  return groups.back();
}
void ParsedFeatures::Clear() {
  for (FeatureGroup& g : groups) {
    g.features.clear();
    g.names.clear();
    spare.push_back(std::move(g));
  }
  groups.clear();
}
int64_t ParsedFeatures::size() const {
  int64_t n = 0;
  for (const auto& g : groups) n += static_cast<int64_t>(g.features.size());
  return n;
}

FeatureSpace::FeatureSpace(FeatureSpaceOptions options)
    : options_(std::move(options)), id_(next_space_id.fetch_add(1) + 1) {
  for (unsigned char c : options_.ignore) ignored_[c] = true;
  for (const auto& i : options_.interactions)
    if (i.find(static_cast<char>(kWildcardNamespace)) != std::string::npos) has_wildcard_ = true;
  fixed_interactions_ = options_.interactions;
  SortInteractions(&fixed_interactions_);
  SortAndFilterDuplicates(&fixed_interactions_);
}

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

absl::StatusOr<FeatureSpace> FeatureSpace::Create(const FeatureSpaceOptions& options) {
  if (options.bits < 1 || options.bits > 30)
    return absl::InvalidArgumentError(absl::StrCat(
        "feature_space.bits must be in [1, 30] (a weight space of 2^bits), got ", options.bits));
  for (size_t i = 0; i < options.interactions.size(); ++i) {
    const std::string& s = options.interactions[i];
    if (s.size() < 2 || s.size() > 3)
      return absl::InvalidArgumentError(
          absl::StrCat("feature_space.interactions[", i,
                       "] must be 2 or 3 namespace letters (VW's -q UA, "
                       "--interactions UAB, ':' for any), got '",
                       s, "'"));
    for (unsigned char c : s)
      if (c < ' ' || c > '~')
        return absl::InvalidArgumentError(absl::StrCat(
            "feature_space.interactions[", i, "] must hold printable ASCII namespace letters"));
  }
  for (unsigned char c : options.ignore)
    if (c < ' ' || c > '~')
      return absl::InvalidArgumentError(
          "feature_space.ignore must hold printable ASCII namespace letters");
  return FeatureSpace(options);
}

absl::StatusOr<FeatureSpace> FeatureSpace::ForSlots() const {
  FeatureSpaceOptions o = options_;
  o.interactions.clear();
  for (const std::string& inter : options_.interactions) {
    if (inter.size() > 2)
      return absl::InvalidArgumentError(absl::StrCat(
          "feature_space.interactions has '", inter,
          "', expected pairs only with slots (a "
          "multi-slot decision interacts every term with the slot index: a triple would make "
          "four-way terms, which are not built)"));
    o.interactions.push_back(inter + static_cast<char>(kCcbIdNamespace));
    o.interactions.push_back(inter);
  }
  o.interactions.push_back(
      std::string{static_cast<char>(kWildcardNamespace), static_cast<char>(kCcbIdNamespace)});
  return FeatureSpace(std::move(o));
}

void FeatureSpace::AddSlotFeatures(const ParsedFeatures& slot, int index, bool audit,
                                   ParsedFeatures* shared) const {
  for (const FeatureGroup& g : slot.groups) {
    if (g.letter == kConstantNamespace || g.features.empty()) continue;
    FeatureGroup& to = shared->Get(g.letter == kDefaultNamespace ? kCcbSlotNamespace : g.letter);
    to.features.insert(to.features.end(), g.features.begin(), g.features.end());
    if (audit) to.names.insert(to.names.end(), g.names.begin(), g.names.end());
  }
  if (index < 0) return;
  const std::string name = absl::StrCat("index", index);
  FeatureGroup& id = shared->Get(kCcbIdNamespace);
  id.features.push_back(
      ParsedFeature{HashString(name, HashString("_id", options_.hash_seed)) & mask(), 1.0f});
  if (audit) id.names.push_back(absl::StrCat("_ccb_slot_index^", name));
}

void FeatureSpace::SlotContexts(const ParsedFeatures& shared, std::span<const ParsedFeatures> slots,
                                bool slot_index, bool audit,
                                std::vector<ParsedFeatures>* out) const {
  out->assign(slots.size(), shared);
  // conditional_contextual_bandit.cc inject_slot_features and remove_slot_features: a namespace
  // a slot adds to the shared example is truncated to empty afterwards but stays in its place
  // (example.cc truncate_example_namespace only pops the last one, the slot index).
  std::vector<unsigned char> brought;
  for (size_t k = 0; k < slots.size(); ++k) {
    ParsedFeatures& context = (*out)[k];
    for (unsigned char letter : brought) context.Get(letter);
    for (const FeatureGroup& g : slots[k].groups) {
      if (g.letter == kConstantNamespace || g.features.empty()) continue;
      const unsigned char to = g.letter == kDefaultNamespace ? kCcbSlotNamespace : g.letter;
      if (shared.Find(to) == nullptr &&
          std::find(brought.begin(), brought.end(), to) == brought.end())
        brought.push_back(to);
    }
    AddSlotFeatures(slots[k], slot_index ? static_cast<int>(k) : -1, audit, &context);
  }
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

std::vector<std::string> FeatureSpace::CompileInteractions(const std::string& letters) const {
  if (!has_wildcard_) return fixed_interactions_;
  std::string interactable;
  for (unsigned char c : letters)
    if (Interactable(c)) interactable.push_back(static_cast<char>(c));
  std::vector<std::string> compiled;
  for (const auto& i : fixed_interactions_) {
    if (i.find(static_cast<char>(kWildcardNamespace)) == std::string::npos) {
      compiled.push_back(i);
    } else {
      for (auto& c : CompileWildcard(i, interactable)) compiled.push_back(std::move(c));
    }
  }
  SortInteractions(&compiled);
  SortAndFilterDuplicates(&compiled);
  return compiled;
}

absl::Status FeatureSpace::CheckTerms(const ParsedFeatures& action, const ParsedFeatures* shared,
                                      int64_t max_terms, std::string_view path) const {
  // Group sizes after the merge, by letter.
  int64_t size[256] = {};
  std::string letters;
  auto count = [&](const ParsedFeatures& p) {
    for (const auto& g : p.groups) {
      if (g.features.empty()) continue;
      if (size[g.letter] == 0) letters.push_back(static_cast<char>(g.letter));
      size[g.letter] += static_cast<int64_t>(g.features.size());
    }
  };
  count(action);
  if (shared) count(*shared);
  double terms = options_.constant ? 1 : 0;
  for (unsigned char c : letters) terms += static_cast<double>(size[c]);
  std::sort(letters.begin(), letters.end(), [](char a, char b) {
    return static_cast<unsigned char>(a) < static_cast<unsigned char>(b);
  });
  if (!options_.interactions.empty()) {
    for (const std::string& inter : InteractionsFor(letters)) {
      auto n = [&](size_t i) {
        return i < inter.size() ? static_cast<double>(size[static_cast<unsigned char>(inter[i])])
                                : 0.0;
      };
      terms += InteractionTerms(n(0), n(1), n(2), inter.size() == 3, inter[0] == inter[1],
                                inter.size() == 3 && inter[1] == inter[2]);
    }
  }
  if (terms > static_cast<double>(max_terms))
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(path), ": expected at most ", max_terms,
                     " terms per action (features plus their interactions), got ",
                     static_cast<int64_t>(std::min(terms, 9e18))));
  return absl::OkStatus();
}

const std::vector<std::string>& FeatureSpace::InteractionsFor(const std::string& letters) const {
  if (!has_wildcard_) return fixed_interactions_;
  // The expansion depends only on the letters present, and a request's actions mostly share
  // them: keep the last one per thread (a space is shared by the threads serving it).
  struct Compiled {
    uint64_t space = 0;
    std::string letters;
    std::vector<std::string> interactions;
  };
  thread_local Compiled last;
  if (last.space != id_ || last.letters != letters) {
    last.interactions = CompileInteractions(letters);
    last.letters = letters;
    last.space = id_;
  }
  return last.interactions;
}

template <bool kAudit>
void FeatureSpace::FeaturizeInto(const ParsedFeatures& action, const ParsedFeatures* shared,
                                 std::vector<uint32_t>* index_out, std::vector<double>* value_out,
                                 std::vector<std::string>* names) const {
  // A namespace of the merged example (VW's shared_feature_merger appends the shared namespaces
  // to each action's): per letter the action's features then the shared ones, contiguous.
  struct MergedGroup {
    unsigned char letter;
    const ParsedFeature* features;
    size_t size;
    const FeatureGroup* first;   // the action's group, or null
    const FeatureGroup* second;  // the shared group, or null
    // The features' indices (their low 32 bits) and values as two arrays, when interacted.
    const uint32_t* low_index = nullptr;
    const float* values = nullptr;
    const std::string& name(size_t i) const {
      const size_t n = first ? first->features.size() : 0;
      return i < n ? first->names[i] : second->names[i - n];
    }
  };
  thread_local std::vector<MergedGroup> merged;
  thread_local std::vector<std::vector<ParsedFeature>> joined;  // letters in both documents
  merged.clear();
  size_t joins = 0;
  auto add = [&](unsigned char letter, const FeatureGroup* first, const FeatureGroup* second) {
    const size_t n1 = first ? first->features.size() : 0;
    const size_t n2 = second ? second->features.size() : 0;
    if (n1 + n2 == 0) return;
    const ParsedFeature* data = n1 ? first->features.data() : second->features.data();
    if (n1 && n2) {
      if (joined.size() <= joins) joined.emplace_back();
      std::vector<ParsedFeature>& j = joined[joins++];
      j.assign(first->features.begin(), first->features.end());
      j.insert(j.end(), second->features.begin(), second->features.end());
      data = j.data();
    }
    merged.push_back(MergedGroup{letter, data, n1 + n2, first, second, nullptr, nullptr});
  };
  for (const auto& g : action.groups) add(g.letter, &g, shared ? shared->Find(g.letter) : nullptr);
  if (shared)
    for (const auto& g : shared->groups)
      if (!action.Find(g.letter)) add(g.letter, nullptr, &g);

  // The interactions over the letters present, each resolved to its groups.
  struct Resolved {
    const MergedGroup* g[3];
    int arity;
  };
  thread_local std::vector<Resolved> resolved;
  resolved.clear();
  size_t total = options_.constant ? 1 : 0;
  for (const auto& g : merged) total += g.size;
  if (!options_.interactions.empty()) {
    char letters_buffer[256];
    size_t count = 0;
    for (const auto& g : merged) letters_buffer[count++] = static_cast<char>(g.letter);
    std::sort(letters_buffer, letters_buffer + count, [](char a, char b) {
      return static_cast<unsigned char>(a) < static_cast<unsigned char>(b);
    });
    auto find = [&](char letter) -> const MergedGroup* {
      for (const auto& g : merged)
        if (g.letter == static_cast<unsigned char>(letter)) return &g;
      return nullptr;
    };
    for (const std::string& inter : InteractionsFor(std::string(letters_buffer, count))) {
      Resolved r{{find(inter[0]), find(inter[1]), inter.size() == 3 ? find(inter[2]) : nullptr},
                 static_cast<int>(inter.size())};
      if (!r.g[0] || !r.g[1] || (r.arity == 3 && !r.g[2])) continue;
      const bool triple = r.arity == 3;
      total += static_cast<size_t>(
          InteractionTerms(static_cast<double>(r.g[0]->size), static_cast<double>(r.g[1]->size),
                           triple ? static_cast<double>(r.g[2]->size) : 0.0, triple,
                           r.g[0] == r.g[1], triple && r.g[1] == r.g[2]));
      resolved.push_back(r);
    }
  }

  index_out->resize(total);
  value_out->resize(total);
  uint32_t* index = index_out->data();
  double* value = value_out->data();
  const uint64_t m = mask();
  size_t k = 0;
  // VW's order of the merged example's namespaces: the action's own (the shared features of the
  // same letter concatenated), the constant (added to the action example when it was parsed),
  // then the shared namespaces the action has not (appended by shared_feature_merger). The
  // order is the order of a prediction's float sum, which VW's bits depend on.
  const auto constant_before = [&](const MergedGroup& g) { return g.first == nullptr; };
  bool constant_done = !options_.constant;
  const auto add_constant = [&] {
    index[k] = static_cast<uint32_t>(kConstantFeature & m);
    value[k++] = 1.0;
    constant_done = true;
  };
  for (const auto& g : merged) {
    if (!constant_done && constant_before(g)) add_constant();
    for (size_t i = 0; i < g.size; ++i) {
      index[k] = static_cast<uint32_t>(g.features[i].index & m);
      value[k++] = g.features[i].value;
    }
  }
  if (!constant_done) add_constant();
  if (!resolved.empty()) {
    // The interacted groups' indices (low 32 bits) and values side by side, for FoldTerms.
    thread_local std::vector<uint32_t> low_index;
    thread_local std::vector<float> values;
    size_t features = 0;
    for (const auto& g : merged) features += g.size;
    low_index.resize(features);
    values.resize(features);
    size_t at = 0;
    for (auto& g : merged) {
      g.low_index = low_index.data() + at;
      g.values = values.data() + at;
      for (size_t i = 0; i < g.size; ++i) {
        low_index[at] = static_cast<uint32_t>(g.features[i].index);
        values[at++] = g.features[i].value;
      }
    }
    const uint32_t m32 = static_cast<uint32_t>(m);
    for (const Resolved& r : resolved) {
      const MergedGroup& a = *r.g[0];
      const MergedGroup& b = *r.g[1];
      const bool same1 = &a == &b;
      if (r.arity == 2) {
        // Index second ^ FNV * first (InteractionIndex), value the floats' product as VW has it.
        for (size_t i = 0; i < a.size; ++i) {
          const uint64_t half = uint64_t{kFnvPrime} * a.features[i].index;
          const size_t j = same1 ? i : 0;
          FoldTerms(b.low_index + j, b.values + j, b.size - j, static_cast<uint32_t>(half),
                    a.features[i].value, m32, index + k, value + k);
          k += b.size - j;
        }
        continue;
      }
      // VW's process_cubic_interaction: index f3 ^ FNV * (FNV * f1 ^ f2), value f1 * f2 * f3.
      const MergedGroup& c = *r.g[2];
      const bool same2 = &b == &c;
      for (size_t i = 0; i < a.size; ++i) {
        const uint64_t half1 = uint64_t{kFnvPrime} * a.features[i].index;
        for (size_t j = same1 ? i : 0; j < b.size; ++j) {
          const uint64_t half = uint64_t{kFnvPrime} * (half1 ^ b.features[j].index);
          const float v12 = a.features[i].value * b.features[j].value;
          const size_t q = same2 ? j : 0;
          FoldTerms(c.low_index + q, c.values + q, c.size - q, static_cast<uint32_t>(half), v12,
                    m32, index + k, value + k);
          k += c.size - q;
        }
      }
    }
  }
  if constexpr (kAudit) {
    // The terms' names, in the order the loops above made the terms.
    names->clear();
    names->reserve(total);
    bool named_constant = !options_.constant;
    for (const auto& g : merged) {
      if (!named_constant && constant_before(g)) {
        names->push_back("Constant");
        named_constant = true;
      }
      for (size_t i = 0; i < g.size; ++i) names->push_back(g.name(i));
    }
    if (!named_constant) names->push_back("Constant");
    for (const Resolved& r : resolved) {
      const MergedGroup& a = *r.g[0];
      const MergedGroup& b = *r.g[1];
      const bool same1 = &a == &b;
      if (r.arity == 2) {
        for (size_t i = 0; i < a.size; ++i)
          for (size_t j = same1 ? i : 0; j < b.size; ++j)
            names->push_back(absl::StrCat(a.name(i), "*", b.name(j)));
        continue;
      }
      const MergedGroup& c = *r.g[2];
      const bool same2 = &b == &c;
      for (size_t i = 0; i < a.size; ++i)
        for (size_t j = same1 ? i : 0; j < b.size; ++j)
          for (size_t q = same2 ? j : 0; q < c.size; ++q)
            names->push_back(absl::StrCat(a.name(i), "*", b.name(j), "*", c.name(q)));
    }
  }
}

void FeatureSpace::Featurize(const ParsedFeatures& action, const ParsedFeatures* shared, bool audit,
                             SparseFeatures* out) const {
  if (audit) {
    FeaturizeInto<true>(action, shared, &out->index, &out->value, &out->names);
  } else {
    out->names.clear();
    FeaturizeInto<false>(action, shared, &out->index, &out->value, nullptr);
  }
}

void FeatureSpace::Featurize(const ParsedFeatures& action, const ParsedFeatures* shared,
                             std::vector<uint32_t>* index, std::vector<double>* value) const {
  FeaturizeInto<false>(action, shared, index, value, nullptr);
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
