#include "core/glb/glb_omd_diagonal.h"

#include <cmath>
#include <algorithm>
#include <limits>

#include "core/glb/projection.h"
#include "core/state_io.h"

namespace bandit::glb {

GlbOmdDiagonal::GlbOmdDiagonal(const GlbParams& p)
    : p_(p),
      theta_(Vector::Zero(p.d)),           // theta_1 in Theta
      h_(Vector::Constant(p.d, p.lambda)),  // H_1 = lambda I
      scorer_(p.d, 0.0, 1.0 / p.lambda),
      in_support_(p.d, 0),
      support_pos_(p.d, 0) {
  support_.reserve(p.d);
}

double GlbOmdDiagonal::Beta() const {
  return p_.radius_multiplier * GlbOmdBeta(p_, p_.lambda, t_ + 1);
}

absl::Status GlbOmdDiagonal::Terms(absl::FunctionRef<std::string()> field,
                                   const SparseVector* sparse, const Vector* dense,
                                   CoalescedTerms* out) {
  if (sparse) {
    if (!SparseIsValid(*sparse, p_.d)) return CheckSparse(field(), *sparse, p_.d);
    scorer_.Coalesce(*sparse, out);
  } else {
    if (dense->size() != p_.d || !IsInputVector(*dense)) return CheckVector(field(), *dense, p_.d);
    Coalescer::FromDense(*dense, out);
  }
  double n2 = 0;
  for (double v : out->value) n2 += v * v;
  return CheckNorm(field, n2, p_.max_feature_norm);
}

absl::StatusOr<Decision> GlbOmdDiagonal::Select(const SelectContext& ctx) {
  const bool sparse = !ctx.sparse_candidates.empty();
  const int n = static_cast<int>(sparse ? ctx.sparse_candidates.size() : ctx.candidates.size());
  if (n == 0)
    return absl::InvalidArgumentError("candidates is empty, expected at least one feature vector");
  const double beta = Beta();
  Vector ucb(n), logit(n);
  int arm = -1;
  // What Update and Restore hand the scorer, for a coordinate single precision cannot hold.
  const auto figures = [this](uint32_t j) {
    return DiagonalScorer::Figures{theta_[j], 1.0 / h_[j]};
  };
  for (int i = 0; i < n; ++i) {
    // Checked as scored: Select changes no state, so an error part-way leaves nothing behind.
    const auto field = [i] { return absl::StrCat("candidates[", i, "]"); };
    double z = 0, w2 = 0;  // x'theta_t, ||x||^2 in diag(H_t)^{-1}
    if (sparse) {
      double n2 = 0;
      if (!scorer_.Score(ctx.sparse_candidates[i], figures, &z, &w2, &n2))
        return CheckSparse(field(), ctx.sparse_candidates[i], p_.d);
      if (auto s = CheckNorm(field, n2, p_.max_feature_norm); !s.ok()) return s;
    } else {
      if (auto s = Terms(field, nullptr, &ctx.candidates[i], &terms_); !s.ok()) return s;
      scorer_.Score(terms_, figures, &z, &w2);
    }
    logit[i] = z;
    ucb[i] = z + beta * std::sqrt(w2);            // eq. (6)
    if (arm < 0 || ucb[i] > ucb[arm]) arm = i;  // ties to the lowest index
  }
  return UcbDecision(p_.link, arm, ucb, logit, beta, ctx.want_scores);
}

absl::Status GlbOmdDiagonal::Update(const Observation& obs) {
  if (auto s = Terms([] { return std::string("features"); }, obs.sparse_features ? &*obs.sparse_features : nullptr,
                     obs.sparse_features ? nullptr : &obs.features, &terms_);
      !s.ok())
    return s;
  if (auto s = p_.link.CheckReward("reward", obs.reward); !s.ok()) return s;
  const auto& idx = terms_.index;
  const auto& val = terms_.value;
  const size_t m = idx.size();
  const double eta = p_.eta();
  double z = 0;
  for (size_t k = 0; k < m; ++k) z += val[k] * theta_[idx[k]];
  const double grad = p_.link.LossGrad(z, obs.reward);  // grad l_t(theta_t) = grad * x
  const double c = eta * p_.link.LossHess(z);           // eta * mu'(x'theta_t) / g
  // (28a) with H~_t = diag(h + c x^2): zeta differs from theta only where x is nonzero.
  std::vector<double> zeta(m);
  double norm2 = norm2_;
  for (size_t k = 0; k < m; ++k) {
    const uint32_t j = idx[k];
    const double ht = h_[j] + c * val[k] * val[k];
    zeta[k] = theta_[j] - eta * grad * val[k] / ht;
    norm2 += zeta[k] * zeta[k] - theta_[j] * theta_[j];
  }
  for (size_t k = 0; k < m; ++k)
    if (!in_support_[idx[k]]) {
      in_support_[idx[k]] = 1;
      support_.push_back(idx[k]);
    }
  if (std::sqrt(std::max(norm2, 0.0)) > p_.S) {
    // (28b) in diag(h~): every nonzero coordinate shrinks; theta is 0 outside the support (the
    // coordinates ever touched) and stays 0 there, so the projection runs over the support.
    const Eigen::Index n = static_cast<Eigen::Index>(support_.size());
    Vector ht(n), z(n);
    for (Eigen::Index q = 0; q < n; ++q) {
      ht[q] = h_[support_[q]];
      z[q] = theta_[support_[q]];
    }
    // This round's coordinates take H~'s diagonal and zeta, found through support_pos_.
    for (Eigen::Index q = 0; q < n; ++q) support_pos_[support_[q]] = q;
    for (size_t k = 0; k < m; ++k) {
      const Eigen::Index q = support_pos_[idx[k]];
      ht[q] += c * val[k] * val[k];
      z[q] = zeta[k];
    }
    const Vector projected = ProjectOntoBallDiagonal(ht, z, p_.S).theta;
    double n2 = 0;
    for (Eigen::Index q = 0; q < n; ++q) {
      theta_[support_[q]] = projected[q];
      scorer_.Set(support_[q], projected[q], 1.0 / h_[support_[q]]);
      n2 += projected[q] * projected[q];
    }
    norm2_ = n2;
  } else {
    for (size_t k = 0; k < m; ++k) theta_[idx[k]] = zeta[k];
    norm2_ = norm2;
  }
  // Line 5: H_{t+1} = H_t + grad^2 l_t(theta_{t+1}), its diagonal.
  double z2 = 0;
  for (size_t k = 0; k < m; ++k) z2 += val[k] * theta_[idx[k]];
  const double c2 = p_.link.LossHess(z2);
  for (size_t k = 0; k < m; ++k) {
    h_[idx[k]] += c2 * val[k] * val[k];
    scorer_.Set(idx[k], theta_[idx[k]], 1.0 / h_[idx[k]]);
  }
  ++t_;
  return absl::OkStatus();
}

void GlbOmdDiagonal::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  w.Put("theta", theta_);
  w.Put("h_diagonal", h_);
  w.PutInt("t", t_);
  // The order the projection sums in: saved, so a restored policy projects to the same bits.
  Vector support(static_cast<Eigen::Index>(support_.size()));
  for (size_t q = 0; q < support_.size(); ++q) support[q] = support_[q];
  w.Put("support", support);
  w.PutScalar("theta_norm2", norm2_);  // kept incrementally: saved so resume is exact
}

absl::Status GlbOmdDiagonal::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  Vector theta, h;
  int64_t t;
  if (auto s = r.Get("theta", &theta, p_.d); !s.ok()) return s;
  if (auto s = r.Get("h_diagonal", &h, p_.d); !s.ok()) return s;
  if (auto s = r.GetInt("t", &t); !s.ok()) return s;
  Vector support;
  if (auto s = r.Get("support", &support); !s.ok()) return s;
  double norm2;
  if (auto s = r.GetScalar("theta_norm2", &norm2); !s.ok()) return s;
  if (!(norm2 >= 0) || !std::isfinite(norm2))
    return absl::InvalidArgumentError(absl::StrCat(
        "glb_omd diagonal state theta_norm2 is ", norm2, ", expected a finite number >= 0"));
  std::vector<char> seen(p_.d, 0);
  std::vector<uint32_t> order;
  order.reserve(support.size());
  for (Eigen::Index q = 0; q < support.size(); ++q) {
    const double i = support[q];
    if (!(i >= 0 && i < p_.d && i == std::floor(i)) || seen[static_cast<size_t>(i)])
      return absl::InvalidArgumentError(absl::StrCat(
          "glb_omd diagonal state support[", q, "] is ", i,
          ", expected distinct coordinate indices below the dimension ", p_.d));
    seen[static_cast<size_t>(i)] = 1;
    order.push_back(static_cast<uint32_t>(i));
  }
  for (Eigen::Index i = 0; i < theta.size(); ++i)
    if (theta[i] != 0 && !seen[i])
      return absl::InvalidArgumentError(absl::StrCat(
          "glb_omd diagonal state has theta[", i, "] != 0 outside its support, expected the "
          "support to hold every nonzero coordinate"));
  if (!theta.allFinite() || !h.allFinite() || !(h.array() > 0).all() || t < 0)
    return absl::InvalidArgumentError(
        "glb_omd diagonal state has non-finite values, a non-positive h_diagonal or t < 0, "
        "expected finite values, h_diagonal > 0 and t >= 0");
  theta_ = std::move(theta);
  h_ = std::move(h);
  t_ = t;
  norm2_ = norm2;
  for (int j = 0; j < p_.d; ++j) scorer_.Set(j, theta_[j], 1.0 / h_[j]);
  support_ = std::move(order);
  support_.reserve(p_.d);
  in_support_ = std::move(seen);
  return absl::OkStatus();
}

int64_t GlbOmdDiagonal::StateBytes() const {
  // The support is reserved at its bound, d coordinates; its membership flags and the
  // projection's scratch positions are d long too.
  return (theta_.size() + h_.size()) * static_cast<int64_t>(sizeof(double)) + scorer_.bytes() +
         static_cast<int64_t>(support_.capacity()) * static_cast<int64_t>(sizeof(uint32_t)) +
         static_cast<int64_t>(in_support_.size()) +
         static_cast<int64_t>(support_pos_.size()) * static_cast<int64_t>(sizeof(Eigen::Index)) +
         sizeof(t_);
}

std::vector<std::pair<std::string, double>> GlbOmdDiagonal::Summary() const {
  return {{"rounds", static_cast<double>(t_)},
          {"beta", Beta()},
          {"lambda", p_.lambda},
          {"theta_norm", std::sqrt(norm2_)}};
}

}  // namespace bandit::glb
