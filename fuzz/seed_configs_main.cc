// fuzz_seed_configs: prints fuzz/seed_configs.h's list, one text-format InstanceConfig a line,
// for fuzz/make_seeds.py (which has no other way to read the registry).
#include <cstdio>

#include "fuzz/seed_configs.h"

int main() {
  for (const std::string& config : bandit::fuzz::SeedConfigs()) std::printf("%s\n", config.c_str());
  return 0;
}
