#include "core/ope/sparse_direct_model.h"

namespace bandit::ope {

Vector SparseDirectModel::Predict(std::span<const SparseVector> actions) {
  Vector q(static_cast<Eigen::Index>(actions.size()));
  const double intercept = intercept_.b / (lambda_ + intercept_.a);
  for (size_t i = 0; i < actions.size(); ++i) {
    // Repeated indices add up first, as in the vector's dense form.
    coalescer_.Coalesce(actions[i], &terms_);
    double sum = intercept;
    for (size_t k = 0; k < terms_.index.size(); ++k) {
      auto it = coord_.find(terms_.index[k]);
      if (it != coord_.end()) sum += terms_.value[k] * it->second.b / (lambda_ + it->second.a);
    }
    q[static_cast<Eigen::Index>(i)] = sum;
  }
  return q;
}

void SparseDirectModel::Learn(const SparseVector& x, double reward) {
  coalescer_.Coalesce(x, &terms_);
  for (size_t k = 0; k < terms_.index.size(); ++k) {
    const double z = terms_.value[k];
    if (z == 0) continue;
    Coord& c = coord_[terms_.index[k]];
    c.a += z * z;
    c.b += reward * z;
  }
  intercept_.a += 1;
  intercept_.b += reward;
}

}  // namespace bandit::ope
