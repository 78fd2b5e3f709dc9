// In-process per-round timing of every registered policy against t (see inprocess.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bandit/v1/policy.pb.h"

namespace bandit::loadgen {

struct InProcessOptions {
  int d = 20;                   // contextual dimension
  int arms = 50;                // candidates per round / arm count
  int64_t max_rounds = 100000;  // last checkpoint
  int64_t block = 1000;         // rounds timed at each checkpoint
  double budget_s = 6.0;        // per policy; slower policies stop early (reported)
  std::string only;             // substring filter on the case name
};

// One timed policy config.
struct InProcessCase {
  std::string name;     // the policy's name, "/k" for its k-th registered example (k > 0)
  std::string example;  // the registered example the config was made from
  bandit::v1::PolicyConfig config;
  bool sized = true;    // false: the example as registered (the policy refused it at d / arms)
  std::string sizing_refused;
  int d = 0;     // feature / embedding / x dimension
  int arms = 0;  // candidates per round (contextual) or arm count
};

// Every example of every registered (served) policy, at dimension d with `arms` arms where the
// policy takes those sizes (SizedExample), else as registered: derived from the registry, so a
// new policy is timed without being listed.
std::vector<InProcessCase> InProcessCases(int d, int arms);

nlohmann::ordered_json RunInProcess(const InProcessOptions& o);

}  // namespace bandit::loadgen
