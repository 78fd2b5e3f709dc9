// The named-feature workload the vw server tests serve on instance "v", and the hashed vectors a
// twin learner is fed for it.
#pragma once

#include <vector>

#include "absl/strings/str_cat.h"
#include "bandit/v1/service.pb.h"
#include "core/features/feature_space.h"
#include "core/policy.h"

namespace bandit::server::testing {

// Round `round`: a user's country and age, 4 actions of a genre and a price, scores returned.
inline bandit::v1::SelectRequest VwRound(int round) {
  bandit::v1::SelectRequest req;
  req.set_instance("v");
  req.set_return_scores(true);
  req.set_context(absl::StrCat(R"({"User":{"country":")", round % 3 == 0 ? "US" : "DE",
                               R"(","age":)", 20 + round % 7, "}}"));
  for (int a = 0; a < 4; ++a) {
    auto* action = req.add_actions();
    action->set_id(absl::StrCat("item-", a));
    action->set_features(absl::StrCat(R"({"Action":{"genre":"g)", a, R"(","price":)", a + 1, "}}"));
  }
  return req;
}

// A single Select's hashed vectors (context merged into each action), as a twin learner is
// fed them.
inline std::vector<SparseVector> VwVectors(const features::FeatureSpace& space,
                                           const bandit::v1::SelectRequest& req) {
  features::InputLimits limits;
  features::ParsedFeatures shared, action;
  EXPECT_TRUE(space.Parse(req.context(), "context", limits, false, &shared).ok());
  std::vector<SparseVector> xs(req.actions_size());
  for (int a = 0; a < req.actions_size(); ++a) {
    action.Clear();
    EXPECT_TRUE(space.Parse(req.actions(a).features(), "a", limits, false, &action).ok());
    space.Featurize(action, &shared, &xs[a].index, &xs[a].value);
  }
  return xs;
}

}  // namespace bandit::server::testing
