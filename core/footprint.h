// What each served policy declares its learned state (Policy::StateBytes) will take, computed
// from its config alone, before anything is built: the server admits an instance against its
// memory budget with these figures, so a config that would not fit is refused with nothing
// allocated. One function per policy, registered beside its factory (core/registry.cc); the
// conformance suite (tests/core/conformance) holds every registered example to its figure.
//
// The figure is
//   - for a policy whose state is constant in the rounds: its StateBytes() at every round;
//   - for one that grows to a bound (a window, a support budget, a restart period): the bound;
//   - for one that keeps growing with the rounds (StateGrowth::kGrows): its StateBytes() when
//     built; the server then charges the state as it grows (docs/memory.md).
// Formulas count 8-byte doubles, as StateBytes() does; docs/memory.md lists them.
#pragma once

#include <cstdint>

#include "bandit/v1/policy.pb.h"

namespace bandit::footprint {

using bandit::v1::PolicyConfig;

// Bytes of a config's arm set as ArmSet::Bytes counts them: ids' characters and features.
int64_t ArmSetBytes(const PolicyConfig& c);
// Number of arms a config declares (arms or num_arms).
int64_t ArmCount(const PolicyConfig& c);

int64_t EpsilonGreedy(const PolicyConfig& c);
int64_t Ucb1(const PolicyConfig& c);
int64_t Thompson(const PolicyConfig& c);
int64_t LinUcb(const PolicyConfig& c);
int64_t GlbOmd(const PolicyConfig& c);
int64_t DomdGlb(const PolicyConfig& c);
int64_t GlmUcb(const PolicyConfig& c);
int64_t GlmEpsilonGreedy(const PolicyConfig& c);
int64_t Gloc(const PolicyConfig& c);
int64_t Ecolog(const PolicyConfig& c);
int64_t RestartGlb(const PolicyConfig& c);
int64_t Oks(const PolicyConfig& c);
int64_t Mixture(const PolicyConfig& c);
int64_t Bkb(const PolicyConfig& c);
int64_t GpUcb(const PolicyConfig& c);

}  // namespace bandit::footprint
