#include "bench/loadgen/workload.h"

#include <google/protobuf/text_format.h>

#include "absl/strings/str_cat.h"

namespace bandit::loadgen {

Workload MakeWorkload(bandit::ContextKind kind, int d, int arms, const std::string& instance,
                      uint64_t seed) {
  Workload w;
  w.kind = kind;
  w.d = d;
  w.arms = arms;
  Gen g(seed);
  w.theta.resize(d);
  double n = 0;
  for (auto& t : w.theta) {
    t = g.Normal();
    n += t * t;
  }
  for (auto& t : w.theta) t *= 3.0 / std::sqrt(n);
  const int pool = 64;
  for (int i = 0; i < pool; ++i) {
    v1::SelectRequest req;
    req.set_instance(instance);
    if (kind == bandit::ContextKind::kCandidates) {
      for (int a = 0; a < arms; ++a) {
        auto* c = req.add_candidates();
        double s = 0;
        std::vector<double> x(d);
        for (auto& v : x) {
          v = g.Normal();
          s += v * v;
        }
        for (auto& v : x) c->add_values(v / std::sqrt(s));
      }
    } else if (kind == bandit::ContextKind::kPoint) {
      for (int j = 0; j < d; ++j) req.add_x(g.Normal() / std::sqrt(static_cast<double>(d)));
    }
    w.requests.push_back(std::move(req));
  }
  return w;
}

absl::StatusOr<v1::PolicyConfig> MakePolicyConfig(const std::string& p, const std::string& text,
                                                  int d, int arms, Gen& g) {
  v1::PolicyConfig c;
  if (!text.empty()) {
    if (!google::protobuf::TextFormat::ParseFromString(text, &c))
      return absl::InvalidArgumentError(
          "--policy_config is not a text-format bandit.v1.PolicyConfig");
    return c;
  }
  auto feature_arms = [&] {
    for (int a = 0; a < arms; ++a) {
      auto* spec = c.add_arms();
      spec->set_id(std::to_string(a));
      for (int j = 0; j < d; ++j) spec->add_features(g.Uniform());
    }
  };
  // GLB family: S = 3 = ||theta*|| of the reward model below (as in bench/micro/glb_bench.cc).
  if (p == "glb_omd") {
    c.mutable_glb_omd()->set_dimension(d);
    c.mutable_glb_omd()->set_s(3);
  } else if (p == "domd_glb") {
    c.mutable_domd_glb()->set_dimension(d);
    c.mutable_domd_glb()->set_s(3);
  } else if (p == "glm_ucb") {
    c.mutable_glm_ucb()->set_dimension(d);
    c.mutable_glm_ucb()->set_s(3);
  } else if (p == "linucb") {
    c.mutable_linucb()->set_dimension(d);
  } else if (p == "epsilon_greedy") {
    c.mutable_epsilon_greedy()->set_epsilon(0.1);
    c.set_num_arms(arms);
  } else if (p == "ucb1") {
    c.mutable_ucb1();
    c.set_num_arms(arms);
  } else if (p == "thompson") {
    c.mutable_thompson();
    c.set_num_arms(arms);
  } else if (p == "bkb") {
    c.mutable_bkb();
    feature_arms();
  } else if (p == "gp_ucb") {
    c.mutable_gp_ucb();
    feature_arms();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--policy=", p, " is not a shortcut; use --policy_config"));
  }
  return c;
}

}  // namespace bandit::loadgen
