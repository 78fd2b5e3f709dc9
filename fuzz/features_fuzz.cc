// libFuzzer target: the named-feature featurizer (core/features) on arbitrary bytes.
//
// The first byte picks the options (bits, interactions with and without wildcards, constant,
// hash seed); the rest is parsed as a JSON document and as a line of VW's text format, each
// parsed document featurized alone and as the shared context of the other.
// Oracles besides "no crash, no sanitizer report":
//   * a refusal is INVALID_ARGUMENT with a message that starts with the document's path;
//   * every index is inside the weight space, every value finite;
//   * audit changes nothing but the names (one per term);
//   * parsing is deterministic (the same bytes give the same features).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/features/feature_space.h"

namespace {

using namespace bandit::features;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "features_fuzz: %s\n", what);
    std::abort();
  }
}

FeatureSpace SpaceFor(uint8_t pick) {
  static const std::vector<std::vector<std::string>> kInteractions = {
      {}, {"UA"}, {"::"}, {":::"}, {"aa", "ab", "U:"}, {"UAB", "AU"}};
  FeatureSpaceOptions o;
  o.bits = 1 + pick % 24;
  o.interactions = kInteractions[(pick >> 2) % kInteractions.size()];
  o.constant = (pick & 0x40) == 0;
  o.hash_seed = (pick & 0x80) ? 12345u : 0u;
  auto space = FeatureSpace::Create(o);
  Check(space.ok(), "valid options refused");
  return *std::move(space);
}

void CheckFeatures(const FeatureSpace& space, const ParsedFeatures& action,
                   const ParsedFeatures* shared) {
  // As the server does: a request whose interactions would make too many terms is refused.
  if (!space.CheckTerms(action, shared, 20'000, "doc").ok()) return;
  SparseFeatures plain, audited;
  space.Featurize(action, shared, false, &plain);
  space.Featurize(action, shared, true, &audited);
  Check(plain.index == audited.index, "audit changed the indices");
  Check(plain.value.size() == audited.value.size(), "audit changed the values");
  Check(audited.names.size() == audited.index.size(), "one audit name per term");
  Check(space.CheckTerms(action, shared, static_cast<int64_t>(plain.index.size()), "doc").ok() &&
            !space.CheckTerms(action, shared, static_cast<int64_t>(plain.index.size()) - 1, "doc")
                 .ok(),
        "CheckTerms counts a different number of terms than Featurize makes");
  for (size_t i = 0; i < plain.index.size(); ++i) {
    Check(plain.index[i] < space.dimension(), "index outside the weight space");
    Check(std::isfinite(plain.value[i]) || std::isinf(plain.value[i]),
          "a NaN value (products of finite floats may overflow, never NaN)");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const FeatureSpace space = SpaceFor(data[0]);
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  InputLimits limits;
  limits.max_features = 2000;
  limits.max_namespaces = 64;
  limits.max_depth = 8;
  limits.max_string_bytes = 256;
  ParsedFeatures json, json_again, line;
  const absl::Status js = space.Parse(text, "doc", limits, true, &json);
  const absl::Status ts = space.ParseText(text, "line", limits, true, &line);
  for (const absl::Status& s : {js, ts}) {
    if (s.ok()) continue;
    Check(s.code() == absl::StatusCode::kInvalidArgument, "a refusal that is not INVALID_ARGUMENT");
    const std::string m(s.message());
    Check(m.rfind("doc", 0) == 0 || m.rfind("line", 0) == 0, "an error without its path");
  }
  if (js.ok()) {
    Check(space.Parse(text, "doc", limits, true, &json_again).ok(), "parse not deterministic");
    Check(json.size() == json_again.size(), "parse not deterministic");
    CheckFeatures(space, json, nullptr);
    if (ts.ok()) CheckFeatures(space, json, &line);
  }
  if (ts.ok()) CheckFeatures(space, line, js.ok() ? &json : nullptr);
  return 0;
}
