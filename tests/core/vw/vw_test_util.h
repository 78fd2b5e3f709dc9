// Shared by the vw tests: VW's text format read as VW reads it, its printed predictions, a
// generated stream, and the prebuilt VW binary.
#pragma once

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/features/feature_space.h"
#include "core/policy.h"

namespace bandit::vw::testing {

inline std::string SourceDir() {
  const char* source = std::getenv("BANDIT_SOURCE_DIR");  // set by ctest
  return source ? source : ".";
}

inline std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One multiline example of VW's text format: an optional shared line, the action lines, and the
// label (`action:cost:probability` before an action's first '|').
struct Example {
  std::string shared;
  std::vector<std::string> actions;
  int labeled = -1;
  float cost = 0, probability = 1;
};

inline std::vector<Example> ReadExamples(const std::string& text) {
  std::vector<Example> out;
  Example current;
  std::stringstream ss(text);
  std::string line;
  auto flush = [&] {
    if (!current.actions.empty() || !current.shared.empty()) out.push_back(current);
    current = Example();
  };
  while (std::getline(ss, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      flush();
      continue;
    }
    if (line.rfind("shared", 0) == 0) {
      current.shared = line;
      continue;
    }
    const std::string label(absl::StripAsciiWhitespace(line.substr(0, line.find('|'))));
    std::vector<std::string> parts = absl::StrSplit(label, ':');
    if (parts.size() == 3) {
      current.labeled = static_cast<int>(current.actions.size());
      // As VW's text parser reads them (an ulp off strtof at times).
      const auto cost = features::ParseVwFloat(parts[1]);
      const auto probability = features::ParseVwFloat(parts[2]);
      EXPECT_TRUE(cost && probability) << line;
      current.cost = cost.value_or(0);
      current.probability = probability.value_or(1);
    }
    current.actions.push_back(line);
  }
  flush();
  return out;
}

// VW's -p output of a cb_explore_adf or --rank_all run: one `action:value,...` line per example
// (each followed by a blank line).
inline std::vector<std::map<int, double>> ReadPredictions(const std::string& text) {
  std::vector<std::map<int, double>> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    if (line.find(':') == std::string::npos) continue;
    std::map<int, double> p;
    for (absl::string_view pair : absl::StrSplit(line, ',')) {
      std::vector<std::string> av = absl::StrSplit(pair, ':');
      int a = 0;
      double v = 0;
      EXPECT_TRUE(av.size() == 2 && absl::SimpleAtoi(av[0], &a) && absl::SimpleAtod(av[1], &v))
          << line;
      p[a] = v;
    }
    out.push_back(p);
  }
  return out;
}

inline std::vector<SparseVector> Featurize(const features::FeatureSpace& space, const Example& e) {
  features::InputLimits limits;
  features::ParsedFeatures shared, action;
  if (!e.shared.empty())
    EXPECT_TRUE(space.ParseText(e.shared, "shared", limits, false, &shared).ok());
  std::vector<SparseVector> out;
  for (const auto& line : e.actions) {
    action.Clear();
    EXPECT_TRUE(space.ParseText(line, "action", limits, false, &action).ok()) << line;
    SparseVector x;
    space.Featurize(action, e.shared.empty() ? nullptr : &shared, &x.index, &x.value);
    out.push_back(std::move(x));
  }
  return out;
}

inline std::string VwBinary() {
  if (const char* vw = std::getenv("VW")) return vw;
  return SourceDir() + "/../shared/tools/vw/vw";
}

inline bool VwRuns(const std::string& vw) {
  return std::filesystem::exists(vw) &&
         std::system((vw + " --version > /dev/null 2>&1").c_str()) == 0;
}

// A stream of multiline examples in VW's text format: a shared context (categorical and
// numeric features in two namespaces), 2 to 7 actions of 1 to 4 features each, numbers of
// varied magnitude (the normalized update rescales), a label on most rounds.
inline std::string GenerateStream(uint32_t seed, int rounds) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> actions(2, 7), features(1, 4), category(0, 5);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  std::string out;
  for (int r = 0; r < rounds; ++r) {
    absl::StrAppend(&out, "shared |User u", category(rng), " age:", unit(rng) * 3, " |Context c",
                    category(rng) % 3, " hour:", 1 + category(rng), "\n");
    const int k = actions(rng);
    const bool labeled = unit(rng) < 0.9f;
    const int chosen = std::uniform_int_distribution<int>(0, k - 1)(rng);
    for (int a = 0; a < k; ++a) {
      if (labeled && a == chosen) {
        const float cost = std::round((unit(rng) * 2 - 1) * 100) / 100;
        const float p = std::round((0.1f + 0.9f * unit(rng)) * 1000) / 1000;
        absl::StrAppend(&out, "0:", cost, ":", p, " ");
      }
      absl::StrAppend(&out, "|Action");
      const int f = features(rng);
      for (int j = 0; j < f; ++j) {
        if (unit(rng) < 0.6f)
          absl::StrAppend(&out, " a", category(rng) + 6 * j);
        else
          absl::StrAppend(&out, " v", j, ":", (unit(rng) - 0.3f) * (j == 0 ? 10.f : 0.5f));
      }
      absl::StrAppend(&out, "\n");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace bandit::vw::testing
