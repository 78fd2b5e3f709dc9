// bandit-traffic: drives a banditd instance against a simulated environment so that the
// Prometheus dashboards come alive (docker compose) and smoke tests have real traffic.
//
// Every round: Select on --instance, draw the reward from the simulated environment for the
// chosen arm, then Update with reward, best_expected_reward and expected_reward (so the server's
// pseudo-regret is exact, not the noisy realised regret). A fraction --drop of rewards is never
// sent (those decisions stay pending and later expire, which makes the pending/expired panels
// move). Creates the instance if it does not exist.
//
// Environments:
//   finite-arm policies (ucb1, thompson, epsilon_greedy): --arms Bernoulli arms whose means are
//     evenly spaced in [0.1, 0.9] (arm i has mean 0.1 + 0.8 i / (K - 1)).
//   linucb: --arms candidates per round with features uniform in [-1, 1]^d, expected reward
//     0.5 + 0.5 <theta, x> / sqrt(d) with a fixed theta (seeded), Gaussian noise sd 0.1.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cpp/bandit_client.h"
#include "core/rng.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "banditd gRPC address");
ABSL_FLAG(std::string, instance, "traffic", "Instance to drive (created if missing)");
ABSL_FLAG(std::string, policy, "ucb1",
          "Policy when creating: ucb1, thompson, epsilon_greedy, linucb");
ABSL_FLAG(double, rate, 50, "Rounds (Select + Update) per second; 0 = as fast as possible");
ABSL_FLAG(double, duration, 0, "Seconds to run; 0 = until SIGINT/SIGTERM");
ABSL_FLAG(int64_t, rounds, 0, "Stop after this many rounds; 0 = no limit");
ABSL_FLAG(int32_t, arms, 5, "Number of arms (finite-arm) or candidates per round (linucb)");
ABSL_FLAG(int32_t, dimension, 5, "linucb: feature dimension");
ABSL_FLAG(double, drop, 0.0, "Fraction of rewards never sent (decisions expire)");
ABSL_FLAG(int64_t, reward_wait_ms, 60000,
          "When creating: how long a decision waits for its reward");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the simulated environment");
ABSL_FLAG(double, wait_for_server, 60, "Seconds to wait for banditd to report SERVING at start");
ABSL_FLAG(bool, quiet, false, "Print only the final summary");

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

namespace v1 = bandit::v1;

struct Env {
  bool contextual = false;
  int arms = 5;
  int dim = 5;
  std::vector<double> means;  // finite-arm
  std::vector<double> theta;  // contextual
};

v1::InstanceConfig MakeConfig(const std::string& policy, const Env& env, int64_t reward_wait_ms) {
  v1::InstanceConfig c;
  auto* p = c.mutable_policy();
  if (policy == "ucb1") {
    p->mutable_ucb1();
  } else if (policy == "thompson") {
    p->mutable_thompson()->set_likelihood(v1::ThompsonConfig::BERNOULLI);
  } else if (policy == "epsilon_greedy") {
    p->mutable_epsilon_greedy()->set_epsilon(0.1);
  } else if (policy == "linucb") {
    p->mutable_linucb()->set_dimension(env.dim);
  }
  if (!env.contextual) p->set_num_arms(env.arms);
  c.mutable_pending()->set_reward_wait_ms(reward_wait_ms);
  c.mutable_pending()->set_on_expiry(v1::DROP);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "bandit-traffic --target=HOST:PORT --instance=NAME --policy=ucb1 --rate=50 --duration=0");
  absl::ParseCommandLine(argc, argv);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  const std::string target = absl::GetFlag(FLAGS_target);
  const std::string name = absl::GetFlag(FLAGS_instance);
  const std::string policy = absl::GetFlag(FLAGS_policy);
  const double rate = absl::GetFlag(FLAGS_rate);
  const double duration = absl::GetFlag(FLAGS_duration);
  const int64_t max_rounds = absl::GetFlag(FLAGS_rounds);
  const double drop = absl::GetFlag(FLAGS_drop);
  const bool quiet = absl::GetFlag(FLAGS_quiet);
  if (policy != "ucb1" && policy != "thompson" && policy != "epsilon_greedy" &&
      policy != "linucb") {
    std::fprintf(stderr, "--policy=%s: expected ucb1, thompson, epsilon_greedy or linucb\n",
                 policy.c_str());
    return 2;
  }
  if (!(rate >= 0) || !(duration >= 0) || !(drop >= 0 && drop <= 1) ||
      absl::GetFlag(FLAGS_arms) < 2 || absl::GetFlag(FLAGS_dimension) < 1) {
    std::fprintf(stderr,
                 "expected --rate >= 0, --duration >= 0, --drop in [0,1], --arms >= 2, "
                 "--dimension >= 1\n");
    return 2;
  }

  bandit::Rng rng(absl::GetFlag(FLAGS_seed));
  Env env;
  env.contextual = policy == "linucb";
  env.arms = absl::GetFlag(FLAGS_arms);
  env.dim = absl::GetFlag(FLAGS_dimension);
  for (int i = 0; i < env.arms; ++i) env.means.push_back(0.1 + 0.8 * i / (env.arms - 1));
  {
    double norm = 0;
    for (int j = 0; j < env.dim; ++j) norm += std::pow(env.theta.emplace_back(rng.Normal()), 2);
    for (double& t : env.theta) t /= std::sqrt(norm);  // unit vector: expected reward in [0, 1]
  }

  bandit::client::ClientOptions opts;
  opts.deadline = std::chrono::milliseconds(5000);
  bandit::client::BanditClient client(target, opts);

  // Wait for the server (in docker compose it may start after us).
  const auto start_wait = std::chrono::steady_clock::now();
  for (;;) {
    auto h = client.Health();
    if (h.ok() && *h == grpc::health::v1::HealthCheckResponse::SERVING) break;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_wait).count();
    if (waited > absl::GetFlag(FLAGS_wait_for_server) || g_stop.load()) {
      std::fprintf(stderr, "banditd at %s not SERVING after %.0f s: %s\n", target.c_str(), waited,
                   h.ok() ? "NOT_SERVING" : h.status().ToString().c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }

  if (auto got = client.GetInstance(name); !got.ok()) {
    if (got.status().code() != absl::StatusCode::kNotFound) {
      std::fprintf(stderr, "GetInstance(%s): %s\n", name.c_str(), got.status().ToString().c_str());
      return 1;
    }
    v1::CreateInstanceRequest req;
    req.set_name(name);
    *req.mutable_config() = MakeConfig(policy, env, absl::GetFlag(FLAGS_reward_wait_ms));
    auto created = client.CreateInstance(req);
    if (!created.ok() && created.status().code() != absl::StatusCode::kAlreadyExists) {
      std::fprintf(stderr, "CreateInstance(%s): %s\n", name.c_str(),
                   created.status().ToString().c_str());
      return 1;
    }
    if (!quiet) std::fprintf(stderr, "created instance '%s' (%s)\n", name.c_str(), policy.c_str());
  }

  int64_t rounds = 0, updates = 0, errors = 0;
  double reward_sum = 0, regret = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto next = t0;
  auto last_report = t0;
  const auto period =
      rate > 0 ? std::chrono::duration<double>(1.0 / rate) : std::chrono::duration<double>(0);
  std::vector<std::vector<double>> candidates(env.arms, std::vector<double>(env.dim));
  while (!g_stop.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (duration > 0 && std::chrono::duration<double>(now - t0).count() >= duration) break;
    if (max_rounds > 0 && rounds >= max_rounds) break;
    if (rate > 0) {
      if (now < next) std::this_thread::sleep_until(next);
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
      if (next < now - std::chrono::seconds(1)) next = now;  // do not burst after a stall
    }

    v1::SelectRequest sel;
    sel.set_instance(name);
    std::vector<double> expected(env.arms);
    if (env.contextual) {
      for (int a = 0; a < env.arms; ++a) {
        auto* fv = sel.add_candidates();
        double dot = 0;
        for (int j = 0; j < env.dim; ++j) {
          candidates[a][j] = 2 * rng.Uniform() - 1;
          fv->add_values(candidates[a][j]);
          dot += candidates[a][j] * env.theta[j];
        }
        expected[a] = 0.5 + 0.5 * dot / std::sqrt(static_cast<double>(env.dim));
      }
    } else {
      expected = env.means;
    }
    auto d = client.Select(sel);
    ++rounds;
    if (!d.ok()) {
      ++errors;
      if (!quiet) std::fprintf(stderr, "Select: %s\n", d.status().ToString().c_str());
      if (d.status().code() == absl::StatusCode::kUnavailable)
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    const int arm = d->arm_index();
    if (arm < 0 || arm >= env.arms) {
      ++errors;
      continue;
    }
    const double best = *std::max_element(expected.begin(), expected.end());
    const double mean = expected[arm];
    const double reward =
        env.contextual ? mean + 0.1 * rng.Normal() : (rng.Bernoulli(mean) ? 1.0 : 0.0);
    if (drop > 0 && rng.Uniform() < drop) continue;

    v1::UpdateRequest up;
    up.set_instance(name);
    up.set_event_id(d->event_id());
    up.set_reward(reward);
    up.set_best_expected_reward(best);
    up.set_expected_reward(mean);
    auto u = client.Update(up);
    if (!u.ok()) {
      ++errors;
      if (!quiet) std::fprintf(stderr, "Update: %s\n", u.status().ToString().c_str());
      continue;
    }
    ++updates;
    reward_sum += reward;
    regret += best - mean;
    if (!quiet && now - last_report > std::chrono::seconds(10)) {
      last_report = now;
      std::fprintf(stderr, "%s: rounds=%lld updates=%lld errors=%lld reward_sum=%.1f regret=%.2f\n",
                   name.c_str(), static_cast<long long>(rounds), static_cast<long long>(updates),
                   static_cast<long long>(errors), reward_sum, regret);
    }
  }
  std::printf(
      "{\"instance\":\"%s\",\"rounds\":%lld,\"updates\":%lld,\"errors\":%lld,"
      "\"reward_sum\":%.17g,\"pseudo_regret\":%.17g}\n",
      name.c_str(), static_cast<long long>(rounds), static_cast<long long>(updates),
      static_cast<long long>(errors), reward_sum, regret);
  return errors > 0 && updates == 0 ? 1 : 0;
}
