#include "core/oks/rf_hypotheses.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace bandit::oks {

absl::StatusOr<RfHypotheses> RfHypotheses::Draw(const std::vector<KernelSpec>& kernels, int dim,
                                                int num_features, Rng& rng,
                                                RandomFeatureForm form) {
  RfHypotheses h;
  h.dim_ = dim;
  h.num_features_ = num_features;
  for (const auto& k : kernels) {
    auto rf = RandomFeatures::Draw(k.kind, k.sigma, dim, num_features, rng, form);
    if (!rf.ok()) return rf.status();
    h.w_.push_back(Eigen::VectorXd::Zero(rf->output_dim()));
    h.maps_.push_back(*std::move(rf));
  }
  return h;
}

double RfHypotheses::Eval(int i, const Eigen::VectorXd& x) const {
  return w_[i].dot(maps_[i].Map(x));
}

double RfHypotheses::FeatureNormSq(int i, const Eigen::VectorXd& x) const {
  return maps_[i].Map(x).squaredNorm();
}

void RfHypotheses::Step(int i, const Eigen::VectorXd& x, double step, double bound) {
  if (step == 0.0) return;
  Eigen::VectorXd z;
  maps_[i].MapInto(x, &z);
  Eigen::VectorXd& w = w_[i];
  w.noalias() -= step * z;  // eq. (8), first line
  if (std::isfinite(bound)) {
    // eq. (8), second line: box projection, coordinate-wise clipping to U / sqrt(D).
    const double c = bound / std::sqrt(static_cast<double>(num_features_));
    w = w.cwiseMax(-c).cwiseMin(c);
  }
}

int64_t RfHypotheses::Bytes() const {
  int64_t b = 0;
  for (size_t i = 0; i < maps_.size(); ++i)
    b += maps_[i].Bytes() + static_cast<int64_t>(w_[i].size() * sizeof(double));
  return b;
}

void RfHypotheses::Save(StateWriter& w) const {
  for (size_t i = 0; i < maps_.size(); ++i) {
    maps_[i].Save(w, absl::StrCat("k", i, "_"));
    w.Put(absl::StrCat("k", i, "_w"), w_[i]);
  }
}

absl::Status RfHypotheses::Restore(const StateReader& r) {
  std::vector<RandomFeatures> maps = maps_;
  std::vector<Eigen::VectorXd> ws(maps_.size());
  for (size_t i = 0; i < maps.size(); ++i) {
    if (auto s = maps[i].Restore(r, absl::StrCat("k", i, "_"), dim_, num_features_); !s.ok())
      return s;
    if (auto s = r.Get(absl::StrCat("k", i, "_w"), &ws[i], maps[i].output_dim()); !s.ok()) return s;
    if (!ws[i].allFinite())
      return absl::InvalidArgumentError(
          absl::StrCat("state weights of kernel ", i, " are not finite"));
  }
  maps_ = std::move(maps);
  w_ = std::move(ws);
  return absl::OkStatus();
}

}  // namespace bandit::oks
