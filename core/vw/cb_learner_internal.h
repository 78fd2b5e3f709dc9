// What CbLearner's three files share, and nothing else includes: cb_learner.cc (construction,
// prediction, the explorers and --cover's round), cb_learner_learn.cc (the learns and Update)
// and cb_learner_state.cc (the state saved, restored and read from a model file).
#pragma once

#include <cfloat>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/common/sparse.h"
#include "core/policy.h"

namespace bandit::vw::cb_internal {

// The largest feature value VW holds (a float).
inline constexpr double kMaxFloatValue = FLT_MAX;

// A candidate's terms as VW takes them: indices below `dim`, every value a finite float;
// INVALID_ARGUMENT naming `field` otherwise.
absl::Status CheckActionVector(absl::string_view field, const SparseVector& x, int64_t dim);
// Whether CheckActionVector passes, in one branch-free pass (what a Select pays per term); the
// message is built only when it fails.
bool ActionVectorValid(const SparseVector& x, int64_t dim);
// A dense candidate's non-zero coordinates as terms.
void DenseToTerms(const Vector& v, SparseVector* out);

}  // namespace bandit::vw::cb_internal
