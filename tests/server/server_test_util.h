// Helpers shared by the in-process DecisionService tests (tests/server, tests/security).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "core/rng.h"
#include "server/service/decision_service.h"
#include "server/storage/snapshot_store.h"

namespace bandit::server::testing {

inline bandit::v1::CreateInstanceRequest Create(const std::string& name,
                                                const std::string& config_text) {
  bandit::v1::CreateInstanceRequest req;
  req.set_name(name);
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(config_text, req.mutable_config()))
      << config_text;
  return req;
}

// Plays rounds [from, from + n) on instance `name`: a Select without context, then the Update
// for its event id, whose reward or embedding `fill(decision, i, &update)` sets. Returns
// (arm, propensity) per round, to compare an instance with a twin fed the same inputs.
template <typename Fill>
std::vector<std::pair<int, double>> PlayRounds(DecisionService& svc, const std::string& name,
                                               int from, int n, Fill fill) {
  std::vector<std::pair<int, double>> out;
  for (int i = from; i < from + n; ++i) {
    bandit::v1::SelectRequest sel;
    sel.set_instance(name);
    bandit::v1::Decision d;
    EXPECT_TRUE(svc.Select(sel, &d).ok());
    out.emplace_back(d.arm_index(), d.propensity());
    bandit::v1::UpdateRequest up;
    up.set_instance(name);
    up.set_event_id(d.event_id());
    fill(d, i, &up);
    bandit::v1::UpdateResponse r;
    EXPECT_TRUE(svc.Update(up, &r).ok());
  }
  return out;
}

// The reward of one slot of a multi-slot decision.
inline absl::Status SlotReward(DecisionService& svc, const std::string& name,
                               const std::string& event, const std::string& slot, double reward) {
  bandit::v1::UpdateRequest up;
  up.set_instance(name);
  up.set_event_id(event);
  up.set_slot_id(slot);
  up.set_reward(reward);
  bandit::v1::UpdateResponse r;
  return svc.Update(up, &r);
}

// The instance's exported state (ExportInstance's opaque bytes): equal bytes, equal instances.
inline std::string Exported(DecisionService& svc, const std::string& name) {
  bandit::v1::ExportInstanceRequest req;
  req.set_name(name);
  bandit::v1::ExportInstanceResponse resp;
  EXPECT_TRUE(svc.ExportInstance(req, &resp).ok());
  return resp.snapshot();
}

// The instance's exported state, decoded.
inline bandit::v1::InstanceSnapshot SnapshotOf(DecisionService& svc, const std::string& name) {
  auto snap = SnapshotStore::Decode(Exported(svc, name));
  EXPECT_TRUE(snap.ok()) << snap.status();
  return snap.ok() ? *snap : bandit::v1::InstanceSnapshot();
}

// The instance as GetInstance describes it.
inline bandit::v1::Instance InstanceOf(DecisionService& svc, const std::string& name) {
  bandit::v1::GetInstanceRequest req;
  req.set_name(name);
  bandit::v1::Instance out;
  EXPECT_TRUE(svc.GetInstance(req, &out).ok());
  return out;
}

inline bandit::v1::InstanceStats Stats(DecisionService& svc, const std::string& name) {
  return InstanceOf(svc, name).stats();
}

// A seeded epsilon-greedy instance over four arms ("0" to "3"), and the means of the Bernoulli
// rewards PlayBernoulli draws for them.
inline constexpr char kFourArmEps[] =
    "policy { epsilon_greedy { epsilon: 0.3 } num_arms: 4 } seed: 77";
inline constexpr double kFourArmMeans[] = {0.2, 0.5, 0.35, 0.8};

// Rounds [0, rounds) on instance `name` (arms "0" to "3"): each decision rewarded 1 with its
// arm's kFourArmMeans probability, else 0, drawn from `env`.
inline void PlayBernoulli(DecisionService& svc, const std::string& name, int rounds, Rng& env) {
  PlayRounds(svc, name, 0, rounds,
             [&](const bandit::v1::Decision& d, int, bandit::v1::UpdateRequest* up) {
               up->set_reward(env.Uniform() < kFourArmMeans[std::stoi(d.arm_id())] ? 1.0 : 0.0);
             });
}

// The instance's whole decision log, in order.
inline std::vector<bandit::v1::LoggedDecision> LoggedDecisions(DecisionService& svc,
                                                               const std::string& name) {
  bandit::v1::ExportDecisionLogRequest req;
  req.set_name(name);
  std::vector<bandit::v1::LoggedDecision> out;
  DecisionService::DecisionLogCursor cursor;
  for (bool done = false; !done;) {
    bandit::v1::DecisionLogChunk chunk;
    const absl::Status s = svc.ReadDecisionLog(req, &cursor, &chunk, &done);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) break;
    for (const auto& d : chunk.decisions()) out.push_back(d);
  }
  return out;
}

}  // namespace bandit::server::testing
