// bandit-sim --env=NAME [--key=value ...] --out=FILE.json [--plot=FILE.png]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "bench/sim/sim.h"

using bandit::sim::RegisteredEnvs;
using bandit::sim::SimArgs;

static void Usage() {
  std::cerr << "usage: bandit-sim --env=NAME [--algos=a,b] [--seeds=N] ... --out=FILE.json "
               "[--plot=FILE.png]\nenvironments:\n";
  for (const auto& e : RegisteredEnvs()) std::cerr << "  " << e.env << "  " << e.description << "\n";
}

int main(int argc, char** argv) {
  auto args = SimArgs::Parse(argc, argv);
  if (!args.ok()) {
    std::cerr << args.status().message() << "\n";
    Usage();
    return 2;
  }
  const std::string env = args->String("env", "");
  const std::string out = args->String("out", "");
  const std::string plot = args->String("plot", "");
  if (args->Has("help") || env.empty()) {
    Usage();
    return env.empty() ? 2 : 0;
  }
  for (const auto& e : RegisteredEnvs()) {
    if (e.env != env) continue;
    auto result = e.run(env, *args);
    if (!result.ok()) {
      std::cerr << "bandit-sim: " << result.status().message() << "\n";
      return 2;
    }
    if (auto unused = args->Unused(); !unused.empty()) {
      for (const auto& k : unused) std::cerr << "bandit-sim: unknown flag --" << k << " for env " << env << "\n";
      return 2;
    }
    const std::string text = result->dump(1);
    if (out.empty()) {
      std::cout << text << "\n";
    } else {
      std::ofstream f(out);
      f << text << "\n";
      if (!f) {
        std::cerr << "bandit-sim: cannot write " << out << "\n";
        return 1;
      }
    }
    if (!plot.empty()) {
      if (out.empty()) {
        std::cerr << "bandit-sim: --plot needs --out\n";
        return 2;
      }
      const char* src = std::getenv("BANDIT_SOURCE_DIR");
      const std::string script = absl::StrCat(src ? src : ".", "/bench/plot_sim.py");
      const std::string cmd = absl::StrCat("/usr/bin/python3 '", script, "' '", out, "' '", plot, "'");
      if (std::system(cmd.c_str()) != 0) {
        std::cerr << "bandit-sim: plotting failed: " << cmd << "\n";
        return 1;
      }
    }
    return 0;
  }
  std::cerr << "bandit-sim: unknown --env=" << env << "\n";
  Usage();
  return 2;
}
