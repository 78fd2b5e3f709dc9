// A hashed sparse vector as the dense vector of length 2^bits the policies decide over
// (repeated indices add up, as in VW's dot product).
#pragma once

#include <cstdint>

#include <Eigen/Dense>

#include "core/features/feature_space.h"

namespace bandit::features {

inline Eigen::VectorXd ToDense(const SparseFeatures& f, int64_t dimension) {
  Eigen::VectorXd v = Eigen::VectorXd::Zero(dimension);
  for (size_t i = 0; i < f.index.size(); ++i) v[f.index[i]] += f.value[i];
  return v;
}

}  // namespace bandit::features
