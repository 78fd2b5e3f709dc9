// The instance configs request_fuzz starts from (its input's first choice) and fuzz/make_seeds.py
// writes seeds for, in this order: every example of every served policy in the registry
// (core/registry.cc: RegisteredPolicies), then variations of the instance around the first one.
// Derived from the registry, so a new policy is fuzzed without anyone listing it; the committed
// seeds are checked against this list (tests/fuzz/seed_corpus_test.cc).
#pragma once

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/registry.h"

namespace bandit::fuzz {

// Text-format bandit.v1.InstanceConfig, one per seed config.
inline std::vector<std::string> SeedConfigs() {
  std::vector<std::string> out;
  for (const auto& r : RegisteredPolicies())
    for (const auto& example : r.examples)
      out.push_back(absl::StrCat("policy { ", example.config, " }"));
  // A pending table small enough that Selects evict (DROP) unrewarded decisions.
  out.push_back(absl::StrCat("policy { ", RegisteredPolicies().front().examples.front().config,
                             " } pending { capacity: 2 on_expiry: DROP }"));
  return out;
}

}  // namespace bandit::fuzz
