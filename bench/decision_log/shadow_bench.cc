// The cost of shadow policies per round: Select + Update through DecisionService, without and
// with shadows, CPU time of the whole process (journal writer and snapshot threads included),
// interleaved repetitions, medians. Served policy and shadows are GLB-OMD (logistic link) on
// --candidates candidate vectors of dimension --dim; the shadows differ from the served policy
// in their confidence radius (radius_multiplier 0.5), so their choices and weights differ.
// In-process (no gRPC): the overhead is what a server round gains, not its share of one.
//
//   bandit-shadow-bench [--rounds=N] [--reps=R] [--candidates=50] [--dim=20] [--shadows=1]
//       [--storage=file|none] [--data_dir=/tmp/shadow_bench]
//
// With --storage=file the journal runs with --durability=none.
//
// Every "with" run ends with a fingerprint: the served policy's and the first shadow's learned
// figures and the shadow's estimates as exact hexadecimal floats. The runs are deterministic, so
// every repetition prints the same one (the bench stops if not), and two builds that print the
// same fingerprint computed the same numbers bit for bit (a speed-up must not change them).
#include <time.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>
#include <vector>

#include <google/protobuf/text_format.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/decision_log/bench_common.h"
#include "server/service/decision_service.h"
#include "server/service/persistence.h"

ABSL_FLAG(int, rounds, 20000, "Select + Update rounds per run");
ABSL_FLAG(int, reps, 5, "interleaved repetitions of (without, with shadows)");
ABSL_FLAG(int, candidates, 50, "candidates per Select");
ABSL_FLAG(int, dim, 20, "feature dimension");
ABSL_FLAG(int, shadows, 1, "shadows in the 'with' runs");
ABSL_FLAG(std::string, storage, "file", "file (journal, durability none) or none");
ABSL_FLAG(std::string, data_dir, "/tmp/shadow_bench", "journal directory (wiped per run)");

namespace {

using bandit::bench::CpuSeconds;
using bandit::bench::Median;

namespace v1 = bandit::v1;
using bandit::server::DecisionService;

[[noreturn]] void Die(const absl::Status& s) {
  std::cerr << s << "\n";
  std::exit(1);
}

// What a "with" run computed, exactly: hexadecimal floats.
std::string Fingerprint(const v1::Instance& in) {
  std::string out = absl::StrFormat("rounds %d regret %a", in.stats().rounds(),
                                    in.stats().estimated_regret());
  auto summary = [&](const std::string& who,
                     const google::protobuf::Map<std::string, double>& m) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : m) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    for (const auto& k : keys) absl::StrAppendFormat(&out, " %s.%s %a", who, k, m.at(k));
  };
  summary("served", in.summary());
  out += " served.theta";
  for (double w : in.weights()) absl::StrAppendFormat(&out, " %a", w);
  const auto& sh = in.shadows(0);
  summary("shadow", sh.summary());
  absl::StrAppendFormat(&out, " events %d ips %a snips %a dr %a dm %a served %a ess %a",
                        sh.events(), sh.ips().value(), sh.snips().value(), sh.dr().value(),
                        sh.dm().value(), sh.served().value(), sh.effective_sample_size());
  absl::StrAppendFormat(&out, " se %a %a %a %a", sh.ips().se(), sh.snips().se(), sh.dr().se(),
                        sh.dm().se());
  return out;
}

std::string last_fingerprint;

// Microseconds of process CPU per round.
double RunOnce(int shadows, const std::vector<v1::SelectRequest>& requests,
               const std::vector<double>& uniforms) {
  const std::string dir = absl::GetFlag(FLAGS_data_dir);
  std::filesystem::remove_all(dir);
  DecisionService svc;
  std::unique_ptr<bandit::server::Persistence> persistence;
  if (absl::GetFlag(FLAGS_storage) == "file") {
    bandit::server::PersistenceOptions o;
    o.data_dir = dir;
    o.durability = bandit::server::Durability::kNone;
    auto p = bandit::server::Persistence::Open(o, &svc);
    if (!p.ok()) Die(p.status());
    persistence = *std::move(p);
  }
  const int d = absl::GetFlag(FLAGS_dim);
  v1::CreateInstanceRequest create;
  create.set_name("bench");
  google::protobuf::TextFormat::ParseFromString(
      absl::StrCat("policy { glb_omd { dimension: ", d, " link: LOGISTIC } } seed: 1"),
      create.mutable_config());
  v1::Instance out;
  if (auto s = svc.CreateInstance(create, &out); !s.ok()) Die(s);
  for (int i = 0; i < shadows; ++i) {
    v1::AddShadowRequest add;
    add.set_name("bench");
    add.set_shadow(absl::StrCat("shadow", i));
    google::protobuf::TextFormat::ParseFromString(
        absl::StrCat("policy { glb_omd { dimension: ", d,
                     " link: LOGISTIC radius_multiplier: 0.5 } } seed: ", 2 + i),
        add.mutable_config());
    if (auto s = svc.AddShadow(add, &out); !s.ok()) Die(s);
  }
  const double start = CpuSeconds();
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& req = requests[i];
    v1::Decision dec;
    if (auto s = svc.Select(req, &dec); !s.ok()) Die(s);
    // Bernoulli reward, logistic in the chosen candidate's first coordinate.
    const double z = 2 * req.candidates(dec.arm_index()).values(0);
    v1::UpdateRequest up;
    up.set_instance("bench");
    up.set_event_id(dec.event_id());
    up.set_reward(uniforms[i] < 1 / (1 + std::exp(-z)) ? 1.0 : 0.0);
    v1::UpdateResponse r;
    if (auto s = svc.Update(up, &r); !s.ok()) Die(s);
  }
  const double us = (CpuSeconds() - start) * 1e6 / requests.size();
  if (shadows > 0) {
    v1::GetInstanceRequest get;
    get.set_name("bench");
    if (auto s = svc.GetInstance(get, &out); !s.ok()) Die(s);
    const auto& sh = out.shadows(0);
    if (sh.events() != static_cast<int64_t>(requests.size()) || sh.errors() != 0)
      Die(absl::InternalError(absl::StrCat("the shadow scored ", sh.events(), " of ",
                                           requests.size(), " rounds, ", sh.errors(), " errors")));
    const std::string fp = Fingerprint(out);
    if (!last_fingerprint.empty() && fp != last_fingerprint)
      Die(absl::InternalError(absl::StrCat("a repetition computed other numbers:\n", fp,
                                           "\nwhere an earlier one had\n", last_fingerprint)));
    last_fingerprint = fp;
  }
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int n = absl::GetFlag(FLAGS_candidates);
  const int d = absl::GetFlag(FLAGS_dim);
  const int shadows = absl::GetFlag(FLAGS_shadows);
  std::mt19937_64 rng(7);
  // Coordinates uniform in [-1, 1] / sqrt(d): norms <= 1, as GLB-OMD's max_feature_norm asks.
  std::uniform_real_distribution<double> coordinate(-1 / std::sqrt(d), 1 / std::sqrt(d));
  std::uniform_real_distribution<double> uniform(0, 1);
  std::vector<v1::SelectRequest> requests(rounds);
  std::vector<double> uniforms(rounds);
  for (int i = 0; i < rounds; ++i) {
    requests[i].set_instance("bench");
    for (int c = 0; c < n; ++c) {
      auto* v = requests[i].add_candidates();
      for (int j = 0; j < d; ++j) v->add_values(coordinate(rng));
    }
    uniforms[i] = uniform(rng);
  }
  std::vector<double> without, with;
  for (int rep = 0; rep < absl::GetFlag(FLAGS_reps); ++rep) {
    without.push_back(RunOnce(0, requests, uniforms));
    with.push_back(RunOnce(shadows, requests, uniforms));
    std::cout << absl::StrFormat("rep %d: without %.2f us/round, with %d shadow(s) %.2f us/round\n",
                                 rep, without.back(), shadows, with.back());
  }
  const double a = Median(without), b = Median(with);
  std::cout << absl::StrFormat(
      "median over %zu reps (%d rounds, %d candidates, d=%d, storage=%s):\n"
      "  without shadows  %.2f us CPU/round\n"
      "  with %d shadow(s) %.2f us CPU/round\n"
      "  overhead         %.2f us/round per shadow (ratio %.3fx)\n",
      without.size(), rounds, n, d, absl::GetFlag(FLAGS_storage), a, shadows, b,
      (b - a) / std::max(1, shadows), b / a);
  if (shadows > 0) std::cout << "fingerprint: " << last_fingerprint << "\n";
  std::filesystem::remove_all(absl::GetFlag(FLAGS_data_dir));
  return 0;
}
