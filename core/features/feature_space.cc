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

// CheckTerms' refusal (and FeaturizeChecked's): `terms` counted in doubles.
absl::Status TooManyTerms(std::string_view path, int64_t max_terms, double terms) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(path), ": expected at most ", max_terms,
                   " terms per action (features plus their interactions), got ",
                   static_cast<int64_t>(std::min(terms, 9e18))));
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
  if (terms > static_cast<double>(max_terms)) return TooManyTerms(path, max_terms, terms);
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
absl::Status FeatureSpace::FeaturizeInto(const ParsedFeatures& action, const ParsedFeatures* shared,
                                         const int64_t* max_terms, std::string_view path,
                                         std::vector<uint32_t>* index_out,
                                         std::vector<double>* value_out,
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
  // Counted in doubles, as CheckTerms counts them: an oversized request is refused before
  // anything is written, without overflowing on the way.
  double terms = options_.constant ? 1 : 0;
  for (const auto& g : merged) terms += static_cast<double>(g.size);
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
      terms +=
          InteractionTerms(static_cast<double>(r.g[0]->size), static_cast<double>(r.g[1]->size),
                           triple ? static_cast<double>(r.g[2]->size) : 0.0, triple,
                           r.g[0] == r.g[1], triple && r.g[1] == r.g[2]);
      resolved.push_back(r);
    }
  }

  if (max_terms != nullptr && terms > static_cast<double>(*max_terms))
    return TooManyTerms(path, *max_terms, terms);
  const auto total = static_cast<size_t>(terms);
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
  return absl::OkStatus();
}

void FeatureSpace::Featurize(const ParsedFeatures& action, const ParsedFeatures* shared, bool audit,
                             SparseFeatures* out) const {
  if (audit) {
    FeaturizeInto<true>(action, shared, nullptr, {}, &out->index, &out->value, &out->names)
        .IgnoreError();  // no limit: never refused
  } else {
    out->names.clear();
    FeaturizeInto<false>(action, shared, nullptr, {}, &out->index, &out->value, nullptr)
        .IgnoreError();
  }
}

void FeatureSpace::Featurize(const ParsedFeatures& action, const ParsedFeatures* shared,
                             std::vector<uint32_t>* index, std::vector<double>* value) const {
  FeaturizeInto<false>(action, shared, nullptr, {}, index, value, nullptr).IgnoreError();
}

absl::Status FeatureSpace::FeaturizeChecked(const ParsedFeatures& action,
                                            const ParsedFeatures* shared, int64_t max_terms,
                                            std::string_view path, std::vector<uint32_t>* index,
                                            std::vector<double>* value) const {
  return FeaturizeInto<false>(action, shared, &max_terms, path, index, value, nullptr);
}

}  // namespace bandit::features
