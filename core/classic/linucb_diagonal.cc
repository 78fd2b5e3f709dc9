#include "core/classic/linucb_diagonal.h"

#include <algorithm>
#include <cmath>

#include "core/classic/ucb_choice.h"
#include "core/state_io.h"
#include "core/validate.h"

namespace bandit {

LinUcbDiagonal::LinUcbDiagonal(int dim, double lambda, double alpha)
    : alpha_(alpha),
      a_(Vector::Constant(dim, lambda)),
      b_(Vector::Zero(dim)),
      scorer_(dim, 0.0, 1.0 / lambda) {}

absl::StatusOr<Decision> LinUcbDiagonal::Select(const SelectContext& ctx) {
  const bool sparse = !ctx.sparse_candidates.empty();
  const int n = static_cast<int>(sparse ? ctx.sparse_candidates.size() : ctx.candidates.size());
  if (n == 0)
    return absl::InvalidArgumentError("candidates is empty, expected at least one feature vector");
  const int d = dimension();
  if (!sparse)
    for (int i = 0; i < n; ++i)
      if (ctx.candidates[i].size() != d || !IsInputVector(ctx.candidates[i]))
        return CheckVector(absl::StrCat("candidates[", i, "]"), ctx.candidates[i], d);
  UcbChoice choice(n, ctx.want_scores);
  // What Update and Restore hand the scorer, for a coordinate single precision cannot hold.
  const auto figures = [this](uint32_t j) {
    return DiagonalScorer::Figures{b_[j] / a_[j], 1.0 / a_[j]};
  };
  for (int i = 0; i < n; ++i) {
    // mean = x'theta, var = ||x||^2 in diag(A)^{-1}
    double mean = 0, var = 0, norm2 = 0;
    if (sparse) {
      // Checked as scored: Select changes no state, so an error part-way leaves nothing behind.
      if (!scorer_.Score(ctx.sparse_candidates[i], figures, &mean, &var, &norm2))
        return CheckSparse(absl::StrCat("candidates[", i, "]"), ctx.sparse_candidates[i], d);
    } else {
      Coalescer::FromDense(ctx.candidates[i], &terms_);
      scorer_.Score(terms_, figures, &mean, &var);
    }
    choice.Offer(i, mean, alpha_ * std::sqrt(var));
  }
  return std::move(choice).Take();
}

absl::Status LinUcbDiagonal::Update(const Observation& obs) {
  if (obs.sparse_features) {
    if (auto s = CheckSparse("features", *obs.sparse_features, dimension()); !s.ok()) return s;
  } else if (auto s = CheckVector("features", obs.features, dimension()); !s.ok()) {
    return s;
  }
  if (auto s = CheckFinite("reward", obs.reward); !s.ok()) return s;
  if (obs.sparse_features)
    scorer_.Coalesce(*obs.sparse_features, &terms_);
  else
    Coalescer::FromDense(obs.features, &terms_);
  for (size_t k = 0; k < terms_.index.size(); ++k) {
    const uint32_t j = terms_.index[k];
    const double x = terms_.value[k];
    a_[j] += x * x;           // diag(A + x x')
    b_[j] += obs.reward * x;  // Alg. 1 line 13
    scorer_.Set(j, b_[j] / a_[j], 1.0 / a_[j]);
  }
  ++updates_;
  return absl::OkStatus();
}

void LinUcbDiagonal::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  w.Put("a_diagonal", a_);
  w.Put("b", b_);
  w.PutInt("updates", updates_);
}

absl::Status LinUcbDiagonal::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  const int d = dimension();
  Vector a, b;
  int64_t updates;
  if (auto s = r.Get("a_diagonal", &a, d); !s.ok()) return s;
  if (auto s = r.Get("b", &b, d); !s.ok()) return s;
  if (auto s = r.GetInt("updates", &updates); !s.ok()) return s;
  if (!a.allFinite() || !b.allFinite() || !(a.array() > 0).all())
    return absl::InvalidArgumentError(
        "linucb diagonal state has non-finite values or a non-positive a_diagonal, expected "
        "finite values and a_diagonal > 0");
  a_ = std::move(a);
  b_ = std::move(b);
  updates_ = updates;
  for (int j = 0; j < d; ++j) scorer_.Set(j, b_[j] / a_[j], 1.0 / a_[j]);
  return absl::OkStatus();
}

int64_t LinUcbDiagonal::StateBytes() const {
  return (a_.size() + b_.size()) * static_cast<int64_t>(sizeof(double)) + scorer_.bytes() +
         sizeof(updates_);
}

std::vector<std::pair<std::string, double>> LinUcbDiagonal::Summary() const {
  return {{"updates", static_cast<double>(updates_)},
          {"theta_norm", (b_.array() / a_.array()).matrix().norm()}};
}

}  // namespace bandit
