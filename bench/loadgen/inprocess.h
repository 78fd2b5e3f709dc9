// In-process per-round timing of every registered policy against t (see inprocess.cc).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace bandit::loadgen {

struct InProcessOptions {
  int d = 20;                   // contextual dimension
  int arms = 50;                // candidates per round / arm count
  int64_t max_rounds = 100000;  // last checkpoint
  int64_t block = 1000;         // rounds timed at each checkpoint
  double budget_s = 6.0;        // per policy; slower policies stop early (reported)
  std::string only;             // substring filter on the case name
};

nlohmann::ordered_json RunInProcess(const InProcessOptions& o);

}  // namespace bandit::loadgen
