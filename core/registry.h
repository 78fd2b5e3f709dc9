// Maps a PolicyConfig to the policy that runs it. Adding a policy = one line in registry.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "bandit/v1/policy.pb.h"
#include "core/policy.h"

namespace bandit {

using PolicyFactory = absl::StatusOr<std::unique_ptr<Policy>> (*)(
    const bandit::v1::PolicyConfig& config, uint64_t seed);
// The bytes a policy's learned state (StateBytes) takes, from its config alone, before it is
// built (core/footprint.h says what the figure bounds for each kind of growth).
using PolicyFootprint = int64_t (*)(const bandit::v1::PolicyConfig& config);

// How a policy's state (StateBytes) evolves with the rounds, as its paper promises.
enum class StateGrowth {
  kConstant,  // the same after every round (the server's promise for a served policy)
  kBounded,  // grows to a budget (support vectors, a window, a restart period), then stays within it
  kGrows,    // keeps every past round (the MLE baselines) or every distinct point pulled
};

// A small valid config for one form of a policy: what the conformance suite
// (tests/core/conformance) builds and drives every registered policy from, so a new policy is
// checked (validate before mutate, exact resume, state growth) without anyone listing it there.
struct PolicyExample {
  absl::string_view config;  // a PolicyConfig in protobuf text format
  StateGrowth growth;
};

struct PolicyRegistration {
  bandit::v1::PolicyConfig::PolicyCase config_case;
  absl::string_view name;
  PolicyFactory make;
  // One example per form the factory builds (e.g. BKB over a fixed arm set and over per-request
  // candidates); at least one for every policy, served or simulation-only.
  std::vector<PolicyExample> examples = {};
  // Required of every served policy (the server admits instances with it; the conformance
  // suite checks each example against it).
  PolicyFootprint footprint = nullptr;
};

const std::vector<PolicyRegistration>& RegisteredPolicies();

// INVALID_ARGUMENT when no policy is set, the policy is unknown, or its parameters are invalid.
absl::StatusOr<std::unique_ptr<Policy>> CreatePolicy(const bandit::v1::PolicyConfig& config,
                                                     uint64_t seed);

// The footprint `config`'s policy declares (PolicyRegistration::footprint); INVALID_ARGUMENT
// as CreatePolicy for a config it would refuse for not naming a served policy.
absl::StatusOr<int64_t> DeclaredStateBytes(const bandit::v1::PolicyConfig& config);

// Applies `next` to the live policy, keeping what it learned: validates `next` once (by building
// a policy from it, so `next` stays creatable for a reset or a recovery), then
// Policy::Reconfigure. On error `live` is unchanged.
absl::Status ReconfigurePolicy(Policy& live, const bandit::v1::PolicyConfig& next, uint64_t seed);

// Makes `config` hold the arm set `ids`, in slot order: one ArmSpec per id (the one `config`
// listed for that id, else a bare id), and every arm count cleared (num_arms, and a family's
// own, e.g. a mixture's), since 0 means "the arm set's". The server keeps an instance's config
// this way, so Reset, snapshots and recovery rebuild the arm set that was live. Which family
// fields count arms is known here, beside the registrations, not by the server.
void SetConfigArms(std::span<const std::string> ids, bandit::v1::PolicyConfig* config);

}  // namespace bandit
