#include "core/ope/sparse_direct_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

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

namespace bandit::ope {

int64_t SparseDirectModel::BytesFor(int64_t coordinates) {
  // absl::flat_hash_map: one slot (key and sums) and one control byte per capacity entry, at a
  // load of at most 7/8.
  constexpr int64_t kSlot = sizeof(std::pair<const uint32_t, Coord>) + 1;
  return coordinates * kSlot * 8 / 7;
}

int64_t SparseDirectModel::StateBytes() const {
  return static_cast<int64_t>(sizeof(*this)) +
         static_cast<int64_t>(coord_.capacity()) *
             static_cast<int64_t>(sizeof(std::pair<const uint32_t, Coord>) + 1) +
         coalescer_.bytes();
}

int64_t SparseDirectModel::MaxStateBytes(int64_t dimension) {
  // A map's capacity doubles: up to twice what its entries need.
  return static_cast<int64_t>(sizeof(SparseDirectModel)) + 2 * BytesFor(dimension) +
         (dimension + 63) / 64 * static_cast<int64_t>(sizeof(uint64_t));
}

void SparseDirectModel::Save(bandit::v1::DirectModelState* out) const {
  out->Clear();
  out->set_lambda(lambda_);
  auto* d = out->mutable_diagonal();
  d->set_dimension(dimension_);
  std::vector<uint32_t> order;
  order.reserve(coord_.size());
  for (const auto& [index, c] : coord_) order.push_back(index);
  std::sort(order.begin(), order.end());
  d->mutable_index()->Reserve(static_cast<int>(order.size()));
  d->mutable_a()->Reserve(static_cast<int>(order.size()));
  d->mutable_b()->Reserve(static_cast<int>(order.size()));
  for (uint32_t index : order) {
    const Coord& c = coord_.at(index);
    d->add_index(index);
    d->add_a(c.a);
    d->add_b(c.b);
  }
  d->set_intercept_a(intercept_.a);
  d->set_intercept_b(intercept_.b);
  out->set_rewards(static_cast<int64_t>(intercept_.a));
  out->set_reward_sum(intercept_.b);
}

absl::Status SparseDirectModel::Restore(const bandit::v1::DirectModelState& in) {
  if (!in.has_diagonal())
    return absl::InvalidArgumentError(
        "direct model has no diagonal state, expected the diagonal ridge of sparse candidates");
  const auto& d = in.diagonal();
  if (d.dimension() != dimension_)
    return absl::InvalidArgumentError(absl::StrCat("direct model's dimension is ", d.dimension(),
                                                   ", expected ", dimension_));
  if (!std::isfinite(in.lambda()) || in.lambda() <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("direct model's lambda is ", in.lambda(), ", expected a positive number"));
  if (d.a_size() != d.index_size() || d.b_size() != d.index_size())
    return absl::InvalidArgumentError(
        absl::StrCat("direct model has ", d.index_size(), " indices, ", d.a_size(), " a and ",
                     d.b_size(), " b, expected as many of each"));
  if (!std::isfinite(d.intercept_a()) || d.intercept_a() < 0 || !std::isfinite(d.intercept_b()))
    return absl::InvalidArgumentError(
        "direct model's intercept sums are not finite (or a negative count)");
  absl::flat_hash_map<uint32_t, Coord> coord;
  coord.reserve(static_cast<size_t>(d.index_size()));
  for (int k = 0; k < d.index_size(); ++k) {
    const uint32_t index = d.index(k);
    if (index >= dimension_ || (k > 0 && index <= d.index(k - 1)))
      return absl::InvalidArgumentError(absl::StrCat(
          "direct model's index ", k, " is ", index,
          ", expected indices in increasing order below the dimension ", dimension_));
    if (!std::isfinite(d.a(k)) || d.a(k) < 0 || !std::isfinite(d.b(k)))
      return absl::InvalidArgumentError(absl::StrCat(
          "direct model's coordinate ", index, " has a = ", d.a(k), ", b = ", d.b(k),
          ", expected finite sums (a >= 0)"));
    coord.emplace(index, Coord{d.a(k), d.b(k)});
  }
  lambda_ = in.lambda();
  coord_ = std::move(coord);
  intercept_ = Coord{d.intercept_a(), d.intercept_b()};
  return absl::OkStatus();
}

}  // namespace bandit::ope
