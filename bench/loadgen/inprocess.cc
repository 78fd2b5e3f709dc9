// bandit-loadgen --inprocess: per-round time (Select + Update) of every registered policy against
// the round index t, in-process (no gRPC). A policy whose state is constant must show a flat curve;
// the state size (StateBytes) is recorded at the same points so growth is visible where the
// paper's method inherently grows (GLM-UCB, GP-UCB, BKB's dictionary).
#include "bench/loadgen/inprocess.h"

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>

#include "absl/strings/str_cat.h"
#include "bench/loadgen/workload.h"
#include "core/registry.h"
#include "core/rng.h"

namespace bandit::loadgen {
namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = bandit::v1;

// Every example of every registered (served) policy, at the run's sizes where the policy takes
// them (SizedExample), else as registered: derived from the registry, so a new policy is timed
// without being listed here.
std::vector<InProcessCase> CasesOf(int d, int arms) {
  std::vector<InProcessCase> out;
  Gen g(11);
  for (const auto& r : RegisteredPolicies()) {
    for (size_t k = 0; k < r.examples.size(); ++k) {
      InProcessCase c;
      c.name = k == 0 ? std::string(r.name) : absl::StrCat(r.name, "/", k);
      c.example = std::string(r.examples[k].config);
      auto sized = SizedExample(c.example, d, arms, g);
      absl::Status made = sized.status();
      if (sized.ok()) made = CreatePolicy(*sized, 1).status();
      if (made.ok()) {
        c.config = *std::move(sized);
      } else {
        c.sized = false;
        c.sizing_refused = std::string(made.message());
        google::protobuf::TextFormat::ParseFromString(c.example, &c.config);
      }
      c.d = ConfigDimension(c.config);
      const int arm_count = c.config.arms_size() > 0 ? c.config.arms_size() : c.config.num_arms();
      c.arms = arm_count > 0 ? arm_count : arms;
      out.push_back(std::move(c));
    }
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
    theta *= kThetaNorm / theta.norm();
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
      Vector embedding(d);
      for (int j = 0; j < d; ++j) embedding[j] = 0.3 * dec->arm + 0.5 * rng.Normal();
      obs.sample = GeneratedSample{std::move(embedding), std::nullopt};
    }
    return p.Update(obs);
  }
};

}  // namespace

std::vector<InProcessCase> InProcessCases(int d, int arms) { return CasesOf(d, arms); }

nlohmann::ordered_json RunInProcess(const InProcessOptions& o) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& c : CasesOf(o.d, o.arms)) {
    if (!o.only.empty() && c.name.find(o.only) == std::string::npos) continue;
    nlohmann::ordered_json j;
    j["policy"] = c.name;
    j["d"] = c.d;
    j["arms"] = c.arms;
    j["example"] = c.example;
    if (!c.sized) j["sizes_refused"] = c.sizing_refused;
    auto p = CreatePolicy(c.config, 1);
    if (!p.ok()) {
      j["error"] = std::string(p.status().message());
      out.push_back(j);
      continue;
    }
    // An arm-set policy decides among its own arms (a mixture's count is in its own message).
    const int arms = (*p)->context_kind() == ContextKind::kNone && !(*p)->ArmIds().empty()
                         ? static_cast<int>((*p)->ArmIds().size())
                         : c.arms;
    j["arms"] = arms;
    Env env((*p)->context_kind(), c.d, arms);
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
