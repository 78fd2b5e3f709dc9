// Per-candidate scores a policy computes in PrepareSelect (under the instance's shared lock, so
// that concurrent Selects of one instance score in parallel) and its Select takes when they are
// still current: made by the same policy, on the model as it is now (the policy counts its
// changes), for the very candidates of this Select. Otherwise Select scores afresh, so a
// decision is the same with or without them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/policy.h"

namespace bandit {

template <typename Score>
class PreparedScores final : public PreparedSelect {
 public:
  PreparedScores(const Policy* owner, uint64_t model_version, const SelectContext& ctx)
      : owner_(owner),
        model_version_(model_version),
        candidates_(CandidatesOf(ctx)),
        count_(CountOf(ctx)) {}

  std::vector<Score>& scores() { return scores_; }

  // The scores `ctx.prepared` holds for this Select, or null when there are none or they are
  // stale.
  static const std::vector<Score>* Current(const Policy* owner, uint64_t model_version,
                                           const SelectContext& ctx) {
    const auto* p = dynamic_cast<const PreparedScores*>(ctx.prepared);
    if (p == nullptr || p->owner_ != owner || p->model_version_ != model_version ||
        p->candidates_ != CandidatesOf(ctx) || p->count_ != CountOf(ctx))
      return nullptr;
    return &p->scores_;
  }

 private:
  static const void* CandidatesOf(const SelectContext& ctx) {
    return ctx.sparse_candidates.empty() ? static_cast<const void*>(ctx.candidates.data())
                                         : static_cast<const void*>(ctx.sparse_candidates.data());
  }
  static size_t CountOf(const SelectContext& ctx) {
    return ctx.sparse_candidates.empty() ? ctx.candidates.size() : ctx.sparse_candidates.size();
  }

  const Policy* owner_;
  uint64_t model_version_;
  const void* candidates_;
  size_t count_;
  std::vector<Score> scores_;
};

}  // namespace bandit
