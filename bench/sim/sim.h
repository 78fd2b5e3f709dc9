// bandit-sim: runs the papers' environments in-process and writes one JSON document
//   {"env": ..., "params": {...}, "results": [{"algo": ..., ...}, ...]}
// Each family contributes one runner (bench/sim/<family>_sim.cc) and one line in registry.cc.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace bandit::sim {

// The environment keys that were set (main.cc: one Abseil flag per key, empty = unset), with
// typed getters that record which keys a runner read (so main can reject flags nobody used)
// and fail on malformed numbers.
class SimArgs {
 public:
  SimArgs() = default;
  explicit SimArgs(std::map<std::string, std::string> values) : values_(std::move(values)) {}

  bool Has(absl::string_view key) const;
  std::string String(absl::string_view key, absl::string_view fallback) const;
  absl::StatusOr<int64_t> Int(absl::string_view key, int64_t fallback) const;
  absl::StatusOr<double> Double(absl::string_view key, double fallback) const;
  // Comma-separated list.
  std::vector<std::string> List(absl::string_view key, absl::string_view fallback) const;
  // Keys given but never read by anyone.
  std::vector<std::string> Unused() const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
  mutable std::set<std::string, std::less<>> used_;
};

// Runs one env. `env` is the value of --env. Returns the whole JSON document.
using EnvRunner = absl::StatusOr<nlohmann::json> (*)(absl::string_view env, const SimArgs& args);

struct EnvRegistration {
  absl::string_view env;
  absl::string_view description;
  EnvRunner run;
};

const std::vector<EnvRegistration>& RegisteredEnvs();

// Shared output helpers.
// `n` evenly spaced samples (by round index) of a per-round curve: points at rounds
// round((k+1) * T / n) - 1 for k = 0..n-1.
std::vector<double> Downsample(const std::vector<double>& curve, int n = 100);
// Mean and (population) standard deviation.
std::pair<double, double> MeanStd(const std::vector<double>& xs);
// Element-wise mean and std over seeds of equally long curves.
std::pair<std::vector<double>, std::vector<double>> CurveMeanStd(
    const std::vector<std::vector<double>>& curves);

}  // namespace bandit::sim
