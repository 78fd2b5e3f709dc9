// The fuzz seed list (fuzz/seed_configs.h) covers every served policy in the registry, and the
// committed seeds (fuzz/corpus/, written by fuzz/make_seeds.py) match it: for seed config i a
// request sequence cfg<i>_v0..3 that picks config i (request_fuzz and round_stream_fuzz), and a snapshot s<i> of an instance that ran
// that config's policy. A policy registered (or an example changed) without rerunning
// make_seeds.py fails here, naming the config.
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bandit/v1/service.pb.h"
#include "bandit/v1/storage.pb.h"
#include "core/registry.h"
#include "fuzz/seed_configs.h"

namespace bandit::fuzz {
namespace BANDIT_UNITY_ID {

namespace v1 = bandit::v1;

std::string CorpusDir(const std::string& target) {
  const char* root = std::getenv("BANDIT_SOURCE_DIR");
  return absl::StrCat(root != nullptr ? root : ".", "/fuzz/corpus/", target, "/");
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

v1::InstanceConfig Parsed(const std::string& text) {
  v1::InstanceConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config)) << text;
  return config;
}

TEST(FuzzSeeds, EveryRegisteredPolicyAndExampleIsASeedConfig) {
  std::set<std::string> seeded;
  for (const std::string& text : SeedConfigs()) seeded.insert(Parsed(text).policy().DebugString());
  for (const auto& r : RegisteredPolicies()) {
    ASSERT_FALSE(r.examples.empty()) << r.name;
    for (const auto& example : r.examples) {
      v1::PolicyConfig policy;
      ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(std::string(example.config), &policy));
      EXPECT_TRUE(seeded.contains(policy.DebugString()))
          << r.name << " example '" << example.config << "' is not a fuzz seed config";
    }
  }
}

TEST(FuzzSeeds, TheCommittedSeedsMatchTheSeedConfigs) {
  const std::vector<std::string> configs = SeedConfigs();
  const int n = static_cast<int>(configs.size());
  for (int i = 0; i < n; ++i) {
    const v1::InstanceConfig want = Parsed(configs[i]);
    const std::string again = "rerun fuzz/make_seeds.py (its usage is in the file)";
    // request_fuzz and round_stream_fuzz: FuzzedDataProvider takes the config index from the
    // input's last byte.
    for (const char* target : {"request_fuzz", "round_stream_fuzz"}) {
      for (int v = 0; v < 4; ++v) {
        const std::string name = absl::StrFormat("cfg%02d_v%d", i, v);
        std::string bytes;
        ASSERT_TRUE(ReadFile(CorpusDir(target) + name, &bytes))
            << "no " << target << " seed " << name << " for config " << i << " ("
            << configs[i] << "): " << again;
        ASSERT_FALSE(bytes.empty());
        EXPECT_EQ(static_cast<unsigned char>(bytes.back()) % n, i)
            << target << " " << name << ": " << again;
      }
    }
    // snapshot_fuzz: the exported instance ran this config's policy.
    const std::string name = absl::StrFormat("s%02d.payload", i);
    std::string payload;
    ASSERT_TRUE(ReadFile(CorpusDir("snapshot_fuzz") + name, &payload))
        << "no snapshot_fuzz seed " << name << " for config " << i << " (" << configs[i]
        << "): " << again;
    v1::InstanceSnapshot snap;
    ASSERT_TRUE(snap.ParseFromString(payload)) << name;
    EXPECT_EQ(snap.config().policy().policy_case(), want.policy().policy_case())
        << name << " is not an instance of config " << i << " (" << configs[i] << "): " << again;
  }
  std::string stale;
  EXPECT_FALSE(ReadFile(CorpusDir("snapshot_fuzz") + absl::StrFormat("s%02d.payload", n), &stale))
      << "snapshot_fuzz has a seed for config " << n << ", beyond the " << n
      << " seed configs: " << "rerun fuzz/make_seeds.py";
}

}  // namespace
}  // namespace bandit::fuzz
