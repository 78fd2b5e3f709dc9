// Every feature VW printed in its own reference outputs, checked against our index. The files
// are VW's own, copied unchanged into tests/data/vowpal_wabbit (its README names the commit);
// VW_SOURCE_DIR points the test at another checkout of github.com/VowpalWabbit/vowpal_wabbit
// (its test/ folder is enough). For each case: the input file VW read, the options of VW's command line
// (test/core.vwtest.json), and the file VW printed (`--invert_hash` model or `--audit` output).
// Every printed name is looked up among the names our featurizer produces for the same input;
// a name we produce with another index is a mismatch, listed.
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/features/feature_space.h"

namespace bandit::features {
namespace BANDIT_UNITY_ID {

enum class Format { kDsjson, kText, kTextAdf };

struct Case {
  std::string input;    // under VW's test/
  Format format;
  int bits;
  std::vector<std::string> interactions;
  bool constant;
  std::string printed;  // under VW's test/
};

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) lines.push_back(line);
  return lines;
}

// name -> index for everything our featurizer produces from the case's input.
std::map<std::string, uint32_t> Ours(const FeatureSpace& space, const Case& c,
                                     const std::string& root, std::vector<std::string>* conflicts) {
  std::map<std::string, uint32_t> names;
  InputLimits limits;
  limits.max_features = 1 << 20;
  auto add = [&](const ParsedFeatures& action, const ParsedFeatures* shared) {
    SparseFeatures out, plain;
    space.Featurize(action, shared, /*audit=*/true, &out);
    // The served path builds no names: its vector must be the audited one's, term for term.
    space.Featurize(action, shared, /*audit=*/false, &plain);
    EXPECT_EQ(plain.index, out.index);
    EXPECT_EQ(plain.value, out.value);
    for (size_t i = 0; i < out.index.size(); ++i) {
      auto [it, inserted] = names.emplace(out.names[i], out.index[i]);
      if (!inserted && it->second != out.index[i]) conflicts->push_back(out.names[i]);
    }
  };
  const auto lines = Lines(Read(root + "/" + c.input));
  if (c.format == Format::kDsjson) {
    for (const auto& line : lines) {
      if (line.empty()) continue;
      auto j = nlohmann::json::parse(line);
      const auto& ctx = j.contains("c") ? j["c"] : j;
      ParsedFeatures shared;
      EXPECT_TRUE(space.Parse(ctx.dump(), "c", limits, true, &shared).ok());
      if (!ctx.contains("_multi")) {
        add(shared, nullptr);
        continue;
      }
      for (const auto& a : ctx["_multi"]) {
        ParsedFeatures action;
        EXPECT_TRUE(space.Parse(a.dump(), "a", limits, true, &action).ok());
        add(action, &shared);
      }
    }
  } else if (c.format == Format::kText) {
    for (const auto& line : lines) {
      if (line.find('|') == std::string::npos) continue;
      ParsedFeatures p;
      EXPECT_TRUE(space.ParseText(line, "line", limits, true, &p).ok());
      add(p, nullptr);
    }
  } else {
    ParsedFeatures shared;
    bool has_shared = false;
    std::vector<ParsedFeatures> actions;
    auto flush = [&] {
      for (const auto& a : actions) add(a, has_shared ? &shared : nullptr);
      actions.clear();
      shared = ParsedFeatures();
      has_shared = false;
    };
    for (const auto& line : lines) {
      if (line.find('|') == std::string::npos) {
        flush();
        continue;
      }
      ParsedFeatures p;
      EXPECT_TRUE(space.ParseText(line, "line", limits, true, &p).ok());
      if (line.rfind("shared", 0) == 0) {
        shared = std::move(p);
        has_shared = true;
      } else {
        actions.push_back(std::move(p));
      }
    }
    flush();
  }
  return names;
}

// (name, index) pairs VW printed: `name:index:weight...` lines of an --invert_hash model, or the
// tab-separated `name:index:value:weight` entries of --audit output.
std::vector<std::pair<std::string, uint32_t>> Printed(const std::string& text) {
  std::vector<std::pair<std::string, uint32_t>> printed;
  // `name:index:rest`: the name may itself hold '^' and '*' (not ':'); header lines such as
  // "bits:18" or "Checksum: 123" have no second field of digits.
  auto parse_entry = [&](const std::string& entry) {
    const size_t first = entry.find(':');
    if (first == std::string::npos || first == 0) return;
    const size_t second = entry.find(':', first + 1);
    if (second == std::string::npos) return;
    const std::string field = entry.substr(first + 1, second - first - 1);
    if (field.empty() || field.find_first_not_of("0123456789") != std::string::npos) return;
    printed.emplace_back(entry.substr(0, first), static_cast<uint32_t>(std::stoul(field)));
  };
  for (const auto& line : Lines(text)) {
    if (!line.empty() && line[0] == '\t') {
      std::stringstream ss(line);
      std::string entry;
      while (std::getline(ss, entry, '\t'))
        if (!entry.empty()) parse_entry(entry);
    } else {
      parse_entry(line);
    }
  }
  return printed;
}

TEST(VwReference, EveryPrintedFeatureHasOurIndex) {
  const char* vw = std::getenv("VW_SOURCE_DIR");
  const char* source = std::getenv("BANDIT_SOURCE_DIR");  // set by ctest
  ASSERT_TRUE(vw || source) << "set VW_SOURCE_DIR (a vowpal_wabbit checkout) or BANDIT_SOURCE_DIR";
  const std::string root =
      (vw ? std::string(vw) : std::string(source) + "/tests/data/vowpal_wabbit") + "/test";
  const std::vector<Case> cases = {
      // core.vwtest.json #403, #404: --dsjson --cb_explore_adf (-b 18)
      {"train-sets/dsjson_cb_part1.json", Format::kDsjson, 18, {}, true,
       "train-sets/ref/ignore_feature.interactions"},
      {"train-sets/dsjson_cb_part1.json", Format::kDsjson, 18, {}, true,
       "train-sets/ref/ignore_multiple_features.interactions"},
      // #405: the default namespace
      {"train-sets/dsjson_cb_default_ns.json", Format::kDsjson, 18, {}, true,
       "train-sets/ref/ignore_feature_default_ns.interactions"},
      // #457: --dsjson --cb_explore_adf -q UA -b 17 --noconstant
      {"train-sets/igl_3states_1.dsjson", Format::kDsjson, 17, {"UA"}, false,
       "pred-sets/ref/igl_spinoff.inv"},
      // #334, #335: --interactions aa / aaa --noconstant (text)
      {"train-sets/dupeindex_self.dat", Format::kText, 18, {"aa"}, false,
       "train-sets/ref/dupeindex_self_quadratic.txt"},
      {"train-sets/dupeindex_self.dat", Format::kText, 18, {"aaa"}, false,
       "train-sets/ref/dupeindex_self_cubic.txt"},
      // #386: -q :: (text)
      {"train-sets/regression_simple_1var_overflow.txt", Format::kText, 18, {"::"}, true,
       "train-sets/ref/coin_model_overflow.invert.txt"},
      // #204: -q st --audit (text)
      {"train-sets/cache_interaction_audit.txt", Format::kText, 18, {"st"}, true,
       "train-sets/ref/cache_interaction_audit.stdout"},
      // #376: --cb_explore_adf --noconstant --audit (text, shared + actions)
      {"train-sets/cb_test.ldf", Format::kTextAdf, 18, {}, false,
       "train-sets/ref/cb_shared_noconstant.stdout"},
      // #424: an automl spin-off (text cb_adf, -b 17 --noconstant, every pair of A..F)
      {"train-sets/automl_spin_off.txt", Format::kTextAdf, 17,
       {"AA", "AB", "AC", "AD", "AE", "AF", "BB", "BC", "BD", "BE", "BF",
        "CC", "CD", "CE", "CF", "DD", "DE", "DF", "EE", "EF", "FF"}, false,
       "pred-sets/ref/aml_spinoff.inv"},
      // #448: the same data without interactions
      {"train-sets/automl_spin_off.txt", Format::kTextAdf, 17, {}, false,
       "pred-sets/ref/ep_dec_spinoff.inv"},
      // #495: --invert_hash of a plain text regression set (tags, namespaces, numeric names)
      {"train-sets/0002_25.dat", Format::kText, 18, {}, true,
       "train-sets/ref/invert_hash_test.txt"},
  };
  int64_t checked = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.printed);
    FeatureSpaceOptions o;
    o.bits = c.bits;
    o.interactions = c.interactions;
    o.constant = c.constant;
    auto space = FeatureSpace::Create(o);
    ASSERT_TRUE(space.ok());
    std::vector<std::string> conflicts;
    const auto ours = Ours(*space, c, root, &conflicts);
    EXPECT_TRUE(conflicts.empty()) << conflicts.front();
    const auto printed = Printed(Read(root + "/" + c.printed));
    ASSERT_FALSE(printed.empty());
    int64_t matched = 0, missing = 0;
    std::vector<std::string> mismatches;
    for (const auto& [name, index] : printed) {
      auto it = ours.find(name);
      if (it == ours.end()) {
        ++missing;
        mismatches.push_back("not produced: " + name);
      } else if (it->second != index) {
        mismatches.push_back(name + ": VW " + std::to_string(index) + ", ours " +
                             std::to_string(it->second));
      } else {
        ++matched;
      }
    }
    checked += matched;
    std::string list;
    for (const auto& m : mismatches) list += "\n  " + m;
    EXPECT_TRUE(mismatches.empty()) << mismatches.size() << " of " << printed.size() << list;
    std::cout << c.printed << ": " << matched << " of " << printed.size()
              << " printed features have VW's index\n";
  }
  std::cout << "checked " << checked << " printed features\n";
}

}  // namespace
}  // namespace bandit::features
