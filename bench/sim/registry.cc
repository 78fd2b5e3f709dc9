// One line per environment family. A runner lives in bench/sim/<family>_sim.cc.
#include "bench/sim/sim.h"

namespace bandit::sim {

const std::vector<EnvRegistration>& RegisteredEnvs() {
  static const auto* envs = new std::vector<EnvRegistration>{
  };
  return *envs;
}

}  // namespace bandit::sim
