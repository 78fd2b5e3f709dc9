// The candidate with the largest upper confidence bound mean + width (Li et al. 2010, Alg. 1
// line 9; ties go to the lowest index) and what a LinUCB decision reports about it. LinUCB's
// full and diagonal forms compute a candidate's mean and width differently, and choose and
// report alike through this.
#pragma once

#include <algorithm>
#include <limits>
#include <utility>

#include "core/policy.h"

namespace bandit {

class UcbChoice {
 public:
  UcbChoice(int candidates, bool want_scores) : want_scores_(want_scores) {
    if (want_scores_) {
      dec_.scores.resize(candidates);
      dec_.score_kind = bandit::v1::UPPER_CONFIDENCE_BOUND;
    }
  }

  void Offer(int i, double mean, double width) {
    const double ucb = mean + width;
    if (want_scores_) dec_.scores[i] = ucb;
    max_mean_ = std::max(max_mean_, mean);
    if (best_ < 0 || ucb > best_ucb_) {  // strict: ties go to the lowest index
      best_ = i;
      best_ucb_ = ucb;
      best_mean_ = mean;
      best_width_ = width;
    }
  }

  // The decision for the best candidate offered (deterministic: propensity 1).
  Decision Take() && {
    dec_.arm = best_;
    dec_.propensity = 1.0;
    dec_.estimated_gap = max_mean_ - best_mean_;
    dec_.diagnostics = {{"ucb", best_ucb_}, {"mean", best_mean_}, {"width", best_width_}};
    return std::move(dec_);
  }

 private:
  bool want_scores_;
  Decision dec_;
  int best_ = -1;
  double best_ucb_ = 0, best_mean_ = 0, best_width_ = 0;
  double max_mean_ = -std::numeric_limits<double>::infinity();
};

}  // namespace bandit
