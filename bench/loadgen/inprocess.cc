// bandit-loadgen --inprocess: per-round time (Select + Update) of every registered policy against
// the round index t, in-process (no gRPC). A policy whose state is constant must show a flat curve;
// the state size (StateBytes) is recorded at the same points so growth is visible where the
// paper's method inherently grows (GLM-UCB, GP-UCB, BKB's dictionary).
#include "bench/loadgen/inprocess.h"

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "core/registry.h"
#include "core/rng.h"

namespace bandit::loadgen {
namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = bandit::v1;

struct Case {
  std::string name;
  v1::PolicyConfig config;
  int d = 0;     // feature / embedding / x dimension
  int arms = 0;  // candidates per round (contextual) or arm count
};

std::vector<Case> Cases(int d, int arms) {
  std::vector<Case> out;
  auto add = [&](std::string name, v1::PolicyConfig c, int dd, int aa) {
    out.push_back({std::move(name), std::move(c), dd, aa});
  };
  {
    v1::PolicyConfig c;
    c.mutable_epsilon_greedy()->set_epsilon(0.1);
    c.set_num_arms(arms);
    add("epsilon_greedy", c, 0, arms);
  }
  {
    v1::PolicyConfig c;
    c.mutable_ucb1();
    c.set_num_arms(arms);
    add("ucb1", c, 0, arms);
  }
  {
    v1::PolicyConfig c;
    c.mutable_thompson();
    c.set_num_arms(arms);
    add("thompson", c, 0, arms);  // default: quadrature propensity
  }
  {
    v1::PolicyConfig c;
    c.mutable_thompson()->set_propensity_samples(0);
    c.set_num_arms(arms);
    add("thompson_no_propensity", c, 0, arms);
  }
  {
    v1::PolicyConfig c;
    c.mutable_linucb()->set_dimension(d);
    add("linucb", c, d, arms);
  }
  {
    v1::PolicyConfig c;
    c.mutable_glb_omd()->set_dimension(d);
    c.mutable_glb_omd()->set_s(3);  // = ||theta*|| of Env (as in bench/micro/glb_bench.cc)
    add("glb_omd", c, d, arms);
  }
  {
    v1::PolicyConfig c;
    c.mutable_domd_glb()->set_dimension(d);
    c.mutable_domd_glb()->set_s(3);  // = ||theta*|| of Env (as in bench/micro/glb_bench.cc)
    c.mutable_domd_glb()->set_gamma(0.99);
    add("domd_glb", c, d, arms);
  }
  {
    v1::PolicyConfig c;
    c.mutable_glm_epsilon_greedy()->set_dimension(d);
    c.mutable_glm_epsilon_greedy()->set_s(
        3);  // = ||theta*|| of Env (as in bench/micro/glb_bench.cc)
    add("glm_epsilon_greedy", c, d, arms);
  }
  {
    v1::PolicyConfig c;
    c.mutable_glm_ucb()->set_dimension(d);
    c.mutable_glm_ucb()->set_s(3);  // = ||theta*|| of Env (as in bench/micro/glb_bench.cc)
    add("glm_ucb", c, d, arms);
  }
  {
    Rng g(11);
    v1::PolicyConfig c;
    c.mutable_bkb();
    for (int a = 0; a < arms; ++a) {
      auto* s = c.add_arms();
      for (int j = 0; j < 5; ++j) s->add_features(g.Uniform());
    }
    add("bkb", c, 5, arms);
  }
  {
    Rng g(12);
    v1::PolicyConfig c;
    c.mutable_gp_ucb();
    for (int a = 0; a < arms; ++a) {
      auto* s = c.add_arms();
      for (int j = 0; j < 5; ++j) s->add_features(g.Uniform());
    }
    add("gp_ucb", c, 5, arms);
  }
  {
    v1::PolicyConfig c;
    auto* o = c.mutable_oks();
    o->set_dimension(5);
    for (double bw : {0.5, 1.0, 2.0}) {
      auto* k = o->add_kernels();
      k->set_bandwidth(bw);
    }
    o->set_random_features(200);
    add("oks_rf", c, 5, 3);
  }
  {
    v1::PolicyConfig c;
    auto* m = c.mutable_mixture();
    m->set_objective(v1::RKE);
    m->set_num_arms(5);
    m->set_dimension(5);
    m->set_random_features(100);
    add("mixture_greedy_rke", c, 5, 5);
  }
  return out;
}

// One environment per case: candidate-set pool (contextual), per-arm means (arm sets), inputs x
// (kernel selection), per-arm embedding centres (mixtures).
struct Env {
  ContextKind kind;
  int d, arms;
  Rng rng{42};
  Vector theta;
  std::vector<std::vector<Vector>> sets;
  std::vector<Vector> xs;
  size_t next = 0;

  Env(ContextKind k, int d_, int arms_) : kind(k), d(std::max(d_, 1)), arms(arms_) {
    Rng g(7);
    theta = Vector(d);
    for (int j = 0; j < d; ++j) theta[j] = g.Normal();
    theta *= 3.0 / theta.norm();
    if (kind == ContextKind::kCandidates) {
      sets.resize(32);
      for (auto& s : sets) {
        s.resize(arms);
        for (auto& x : s) {
          x = Vector(d);
          for (int j = 0; j < d; ++j) x[j] = g.Normal();
          x /= x.norm();
        }
      }
    } else if (kind == ContextKind::kPoint) {
      xs.resize(256);
      for (auto& x : xs) {
        x = Vector(d);
        for (int j = 0; j < d; ++j) x[j] = g.Normal();
        x /= std::sqrt(static_cast<double>(d));
      }
    }
  }

  absl::Status Round(Policy& p) {
    SelectContext ctx;
    const std::vector<Vector>* set = nullptr;
    const Vector* x = nullptr;
    if (kind == ContextKind::kCandidates) {
      set = &sets[next++ % sets.size()];
      ctx.candidates = *set;
    } else if (kind == ContextKind::kPoint) {
      x = &xs[next++ % xs.size()];
      ctx.point = x;
    }
    auto dec = p.Select(ctx);
    if (!dec.ok()) return dec.status();
    Observation obs;
    obs.arm = dec->arm;
    obs.arm_id = dec->arm_id;
    obs.memo = std::move(dec->memo);
    if (kind == ContextKind::kCandidates) {
      obs.features = (*set)[dec->arm];
      obs.reward = rng.Bernoulli(1.0 / (1.0 + std::exp(-obs.features.dot(theta)))) ? 1.0 : 0.0;
    } else if (kind == ContextKind::kPoint) {
      obs.features = *x;
      obs.reward = x->dot(theta) >= 0 ? 1.0 : -1.0;
    } else {
      const double mean = (dec->arm + 1.0) / (arms + 1.0);
      obs.reward = rng.Bernoulli(mean) ? 1.0 : 0.0;
      // Mixtures learn from the generated sample's embedding: a noisy arm-specific point.
      obs.embedding = Vector(d);
      for (int j = 0; j < d; ++j) obs.embedding[j] = 0.3 * dec->arm + 0.5 * rng.Normal();
    }
    return p.Update(obs);
  }
};

}  // namespace

nlohmann::ordered_json RunInProcess(const InProcessOptions& o) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& c : Cases(o.d, o.arms)) {
    if (!o.only.empty() && c.name.find(o.only) == std::string::npos) continue;
    nlohmann::ordered_json j;
    j["policy"] = c.name;
    j["d"] = c.d;
    j["arms"] = c.arms;
    auto p = CreatePolicy(c.config, 1);
    if (!p.ok()) {
      j["error"] = std::string(p.status().message());
      out.push_back(j);
      continue;
    }
    Env env((*p)->context_kind(), c.d, c.arms);
    // Blocks of `block` rounds; the block at each power-of-ten-ish checkpoint is timed and kept.
    std::vector<int64_t> checkpoints;
    for (int64_t t = 100; t <= o.max_rounds; t *= 10) {
      checkpoints.push_back(t);
      if (3 * t <= o.max_rounds) checkpoints.push_back(3 * t);
    }
    nlohmann::ordered_json curve = nlohmann::ordered_json::array();
    const auto start = Clock::now();
    int64_t t = 0;
    bool stopped = false;
    std::string error;
    for (int64_t cp : checkpoints) {
      // Untimed rounds up to the checkpoint.
      while (t < cp) {
        if (auto s = env.Round(**p); !s.ok()) {
          error = std::string(s.message());
          break;
        }
        ++t;
        if ((t & 255) == 0 &&
            std::chrono::duration<double>(Clock::now() - start).count() > o.budget_s) {
          stopped = true;
          break;
        }
      }
      if (!error.empty() || stopped) break;
      const int64_t block = std::max<int64_t>(50, std::min<int64_t>(o.block, cp / 2));
      const auto b0 = Clock::now();
      for (int64_t i = 0; i < block && error.empty(); ++i) {
        if (auto s = env.Round(**p); !s.ok()) error = std::string(s.message());
      }
      const double us =
          std::chrono::duration<double, std::micro>(Clock::now() - b0).count() / block;
      t += block;
      curve.push_back({{"t", cp}, {"us_per_round", us}, {"state_bytes", (*p)->StateBytes()}});
      if (!error.empty()) break;
    }
    j["curve"] = curve;
    j["rounds_run"] = t;
    if (stopped) j["stopped_by_budget_s"] = o.budget_s;
    if (!error.empty()) j["error"] = error;
    out.push_back(j);
  }
  return out;
}

}  // namespace bandit::loadgen
