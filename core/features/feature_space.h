// Named features turned into hashed sparse vectors exactly as Vowpal Wabbit (VW) does for a
// cb_adf decision: a JSON context shared by every action, each action's own JSON features, the
// shared namespaces merged into each action, the constant feature, and namespace interactions
// (`-q UA`, `-q ::`, `--interactions UAB`, `:::`). The result is a sparse vector over a weight
// space of 2^bits; every index equals the weight index VW prints for the same input
// (`--audit`, `--invert_hash`).
//
// JSON rules (VW's json parser): an object's scalar members are features of the namespace the
// object stands for (the top level: the default namespace " "); a nested object is a namespace
// named by its key (its first byte is VW's namespace letter; several namespaces may share a
// letter); a string is the categorical feature key+value (value 1; ' ', '\t', '|' and ':' in
// the value become '_'); a number is the feature `key` with that value (as a float; 0 drops
// it); true is the feature `key`, false nothing; an array of numbers is a namespace named by
// the key whose i-th number has index hash(key) + i; an array of objects is one namespace per
// element, named like the array; keys beginning with '_' are ignored (but `_text`, whose value
// is split on blanks into features of value 1); null is ignored.
//
// Sources: vw_input.cc reads VW's JSON and text formats (Parse, ParseText, ParseVwFloat,
// ParsedDocuments); feature_space.cc compiles the interactions and featurizes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace bandit::features {

// How an instance hashes named features (InstanceConfig.feature_space).
struct FeatureSpaceOptions {
  int bits = 18;  // weight space 2^bits (VW's -b)
  // VW syntax: "UA" (-q UA), "UAB" (--interactions UAB), ":" is the wildcard ("::", ":::",
  // "U:"): every namespace letter present. Two or three letters each.
  std::vector<std::string> interactions;
  uint32_t hash_seed = 0;    // VW's --hash_seed
  bool constant = true;      // VW's constant feature (--noconstant turns it off)
  std::string ignore;        // namespace letters whose features are dropped (VW's --ignore)
};

// Request-shape limits (banditd flags); exceeding one is INVALID_ARGUMENT naming the JSON path.
struct InputLimits {
  int64_t max_features = 10'000;     // features parsed from one JSON document
  int64_t max_namespaces = 256;      // namespaces opened in one JSON document
  int64_t max_depth = 16;            // nesting of objects and arrays
  int64_t max_string_bytes = 4'096;  // one key or string value
  int64_t max_json_bytes = 1 << 20;  // one document
  // Terms of one action's vector (linear + interactions): a cubic interaction of n features
  // makes about n^3 / 6, so this bounds what a request can make the server compute.
  int64_t max_terms = 100'000;
};

// One feature as VW's parser leaves it: the index before the hash-space mask (array elements
// and the constant are not masked by VW's parser) and its value as VW holds it (a float).
struct ParsedFeature {
  uint64_t index = 0;
  float value = 0;
};

// The features of one JSON document grouped by namespace letter, each group in the order VW
// appends them (the order matters for self-interactions, which pair each feature with itself
// and those after it).
struct FeatureGroup {
  unsigned char letter = 0;
  std::vector<ParsedFeature> features;
  // With audit: "namespace^name" per feature, as VW prints it.
  std::vector<std::string> names;
};

struct ParsedFeatures {
  std::vector<FeatureGroup> groups;  // in order of each letter's first feature
  // Groups emptied by Clear(), their arrays' capacity kept for the next document (a request
  // parses one document per action).
  std::vector<FeatureGroup> spare;
  void Clear();
  FeatureGroup* Find(unsigned char letter);
  const FeatureGroup* Find(unsigned char letter) const;
  FeatureGroup& Get(unsigned char letter);
  int64_t size() const;
};

// The vector a policy sees: weight indices in [0, 2^bits) and values, in VW's generation order
// (linear terms by namespace, then interactions); an index may repeat (hash collisions and
// duplicate features add up, as they do in VW's dot product).
struct SparseFeatures {
  std::vector<uint32_t> index;
  std::vector<double> value;
  std::vector<std::string> names;  // with audit: VW's audit name of each term
  void clear() {
    index.clear();
    value.clear();
    names.clear();
  }
};

// A number as VW's text parser reads it (parse_primitives.h parse_float: a float accumulator
// scaled by a float power of ten, an ulp off strtof at times), or none when `text` is not a
// whole number.
std::optional<float> ParseVwFloat(std::string_view text);

class FeatureSpace {
 public:
  // Validates the options: bits in [1, 30], interactions of 2 or 3 printable namespace letters
  // or ':', ignore letters printable. INVALID_ARGUMENT naming the field otherwise.
  static absl::StatusOr<FeatureSpace> Create(const FeatureSpaceOptions& options);

  // Parses one JSON document: an object, or an array of objects meaning their union (how
  // Personalizer sends contextFeatures and an action's features). `path` names the document in
  // errors ("context", "actions[2].features"). Appends to `out`; on error `out` is unspecified.
  absl::Status Parse(std::string_view json, std::string_view path, const InputLimits& limits,
                     bool audit, ParsedFeatures* out) const;

  // Parses one example line in VW's text format (`[label] |ns[:scale] name[:value] ... |ns2 ...`;
  // whatever precedes the first '|' is the label and tag, ignored here) as VW's text parser does:
  // a namespace is hashed by its whole name, the default namespace "| " by the seed, a feature
  // `name:value` scaled by its namespace's value, `name:string` chain-hashed, `:value`
  // anonymous (the namespace's hash plus its position). Appends to `out`.
  absl::Status ParseText(std::string_view line, std::string_view path, const InputLimits& limits,
                         bool audit, ParsedFeatures* out) const;

  // One action's vector as VW's cb_adf builds it: the action's groups with the shared
  // context's groups appended (shared_feature_merger), then the constant, then the
  // interactions (wildcards expanded over the letters present). `shared` may be null.
  void Featurize(const ParsedFeatures& action, const ParsedFeatures* shared, bool audit,
                 SparseFeatures* out) const;
  // The same vector into a caller's index and value arrays (no audit names).
  void Featurize(const ParsedFeatures& action, const ParsedFeatures* shared,
                 std::vector<uint32_t>* index, std::vector<double>* value) const;
  // How many terms Featurize would produce, counted from the group sizes without producing
  // them; INVALID_ARGUMENT naming `path` when more than `max_terms`. Untrusted input goes
  // through FeaturizeChecked, which counts as it builds; this independent count is what the
  // tests and the features fuzzer hold FeaturizeChecked and Featurize to.
  absl::Status CheckTerms(const ParsedFeatures& action, const ParsedFeatures* shared,
                          int64_t max_terms, std::string_view path) const;
  // CheckTerms then Featurize, counting once: INVALID_ARGUMENT as CheckTerms refuses (nothing
  // written then), else the vector into `index` and `value`.
  absl::Status FeaturizeChecked(const ParsedFeatures& action, const ParsedFeatures* shared,
                                int64_t max_terms, std::string_view path,
                                std::vector<uint32_t>* index, std::vector<double>* value) const;

  const FeatureSpaceOptions& options() const { return options_; }
  // Equal for spaces that parse and featurize alike (a space and its copies); never reused.
  uint64_t id() const { return id_; }
  int64_t dimension() const { return int64_t{1} << options_.bits; }
  uint64_t mask() const { return (uint64_t{1} << options_.bits) - 1; }

  // Multi-slot decisions as VW's conditional contextual bandits (ccb_explore_adf) featurize
  // them. The space a slot's actions are featurized in: this one's interactions, each also with
  // the slot-index namespace appended, and every namespace with the slot-index namespace (VW's
  // insert_ccb_interactions). INVALID_ARGUMENT when an interaction has three letters (with the
  // slot index it would make four-way terms, which this featurization does not build).
  absl::StatusOr<FeatureSpace> ForSlots() const;
  // Adds slot `index`'s features (parsed like any document) to a copy of the shared context as
  // VW's CCB does for that slot: the slot's default-namespace features into the slot namespace
  // (139), its other namespaces into the shared namespaces of the same letter, then the feature
  // "index<k>" of the slot-index namespace (140).
  // (index < 0: no index feature, VW's --ccb_no_slot_index.)
  void AddSlotFeatures(const ParsedFeatures& slot, int index, bool audit,
                       ParsedFeatures* shared) const;
  // Each slot's shared context as VW's CCB builds it, slot after slot in one example: the shared
  // groups, then the namespaces earlier slots brought into the shared example (empty: VW leaves
  // them in place after an earlier slot, and their positions order the float sum of the later
  // slots' terms), then slot k's features (AddSlotFeatures), with "index<k>" when `slot_index`.
  void SlotContexts(const ParsedFeatures& shared, std::span<const ParsedFeatures> slots,
                    bool slot_index, bool audit, std::vector<ParsedFeatures>* out) const;

  // The interactions VW evaluates for an example holding `letters` (sorted, unique): explicit
  // ones with wildcards expanded over the interactable letters, sorted and deduplicated by VW's
  // rules (VW's compile_interactions without --leave_duplicate_interactions).
  std::vector<std::string> CompileInteractions(const std::string& letters) const;

 private:
  explicit FeatureSpace(FeatureSpaceOptions options);
  // CompileInteractions(letters), compiled once (no wildcard) or cached per thread.
  const std::vector<std::string>& InteractionsFor(const std::string& letters) const;
  // The vector, or (with `max_terms`) CheckTerms' refusal when it would have more terms.
  template <bool kAudit>
  absl::Status FeaturizeInto(const ParsedFeatures& action, const ParsedFeatures* shared,
                             const int64_t* max_terms, std::string_view path,
                             std::vector<uint32_t>* index, std::vector<double>* value,
                             std::vector<std::string>* names) const;
  FeatureSpaceOptions options_;
  uint64_t id_ = 0;  // for the per-thread cache of compiled interactions
  bool ignored_[256] = {};
  bool has_wildcard_ = false;
  std::vector<std::string> fixed_interactions_;  // compiled once when there is no wildcard
};

// Parsed JSON documents remembered by their text, for one thread: clients send the same action
// documents round after round (a catalogue's items), and parsing one again (the JSON, the hash
// of every name) costs more than finding it. A remembered document is what Parse made of the
// same text in the same space under the same limits, so what it yields never differs from
// parsing it again. Bounded: documents over kMaxDocumentBytes are parsed every time; a space's
// documents are forgotten together once they reach kMaxSpaceBytes of text; the spaces of the
// kMaxSpaces most recently used are kept.
class ParsedDocuments {
 public:
  static constexpr size_t kMaxDocumentBytes = 4 << 10;
  static constexpr size_t kMaxSpaceBytes = 128 << 10;
  static constexpr size_t kMaxSpaces = 4;

  ParsedDocuments();
  ~ParsedDocuments();

  // `json` as space.Parse(json, path, limits, /*audit=*/false, out) parses it into an empty
  // `out`; refusals are Parse's (and not remembered). The pointer is valid until the next call.
  absl::StatusOr<const ParsedFeatures*> Parse(const FeatureSpace& space, std::string_view json,
                                              std::string_view path, const InputLimits& limits);

 private:
  struct Space;
  std::vector<std::unique_ptr<Space>> spaces_;  // most recently used last
  ParsedFeatures unremembered_;                 // a document too long to remember
};

}  // namespace bandit::features
