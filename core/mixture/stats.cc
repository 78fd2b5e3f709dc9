#include "core/mixture/stats.h"

#include "absl/strings/str_cat.h"
#include "core/arms.h"

namespace bandit::mixture {

MixtureStats::MixtureStats(int m, int64_t D, bool second_moment) : D_(D), second_(second_moment) {
  n_ = Eigen::VectorXd::Zero(m);
  mean_ = Eigen::MatrixXd::Zero(D, m);
  if (second_) S_.assign(m, Eigen::MatrixXd::Zero(D, D));
  fid_sum_ = Eigen::VectorXd::Zero(m);
  fid_n_ = Eigen::VectorXd::Zero(m);
}

Eigen::VectorXd MixtureStats::FidelityMeans() const {
  Eigen::VectorXd theta = Eigen::VectorXd::Zero(arms());
  for (int i = 0; i < arms(); ++i)
    if (fid_n_[i] > 0) theta[i] = fid_sum_[i] / fid_n_[i];
  return theta;
}

void MixtureStats::Add(int i, const Eigen::VectorXd& phi, std::optional<double> fidelity) {
  n_[i] += 1.0;
  const double w = 1.0 / n_[i];
  mean_.col(i) += w * (phi - mean_.col(i));
  if (second_) {
    // S_i <- (1 - w) S_i + w phi phi'  (running mean of outer products).
    S_[i] *= (1.0 - w);
    S_[i].selfadjointView<Eigen::Lower>().rankUpdate(phi, w);
    S_[i].triangularView<Eigen::StrictlyUpper>() = S_[i].transpose();
  }
  if (fidelity) {
    fid_sum_[i] += *fidelity;
    fid_n_[i] += 1.0;
  }
}

void MixtureStats::AddArm() {
  const int m = arms();
  n_.conservativeResize(m + 1);
  n_[m] = 0;
  mean_.conservativeResize(D_, m + 1);
  mean_.col(m).setZero();
  if (second_) S_.push_back(Eigen::MatrixXd::Zero(D_, D_));
  fid_sum_.conservativeResize(m + 1);
  fid_sum_[m] = 0;
  fid_n_.conservativeResize(m + 1);
  fid_n_[m] = 0;
}

void MixtureStats::RemoveArm(int slot) {
  EraseSlot(n_, slot);
  EraseColumn(mean_, slot);
  if (second_) S_.erase(S_.begin() + slot);
  EraseSlot(fid_sum_, slot);
  EraseSlot(fid_n_, slot);
}

void MixtureStats::Save(StateWriter& w) const {
  w.Put("stat_n", n_);
  w.Put("stat_mean", mean_);
  if (second_) {
    Eigen::MatrixXd all(D_, D_ * arms());
    for (int i = 0; i < arms(); ++i) all.middleCols(i * D_, D_) = S_[i];
    w.Put("stat_second", all);
  }
  w.Put("stat_fid_sum", fid_sum_);
  w.Put("stat_fid_n", fid_n_);
}

absl::Status MixtureStats::Restore(const StateReader& r, int m) {
  MixtureStats s(0, D_, second_);
  if (auto st = r.Get("stat_n", &s.n_, m); !st.ok()) return st;
  if (auto st = r.Get("stat_mean", &s.mean_, D_, m); !st.ok()) return st;
  if (second_) {
    Eigen::MatrixXd all;
    if (auto st = r.Get("stat_second", &all, D_, D_ * m); !st.ok()) return st;
    s.S_.clear();
    for (int i = 0; i < m; ++i) s.S_.push_back(all.middleCols(i * D_, D_));
  }
  if (auto st = r.Get("stat_fid_sum", &s.fid_sum_, m); !st.ok()) return st;
  if (auto st = r.Get("stat_fid_n", &s.fid_n_, m); !st.ok()) return st;
  if ((s.n_.array() < 0).any() || (s.fid_n_.array() < 0).any())
    return absl::InvalidArgumentError("state stat_n / stat_fid_n has negative counts");
  *this = std::move(s);
  return absl::OkStatus();
}

int64_t MixtureStats::Bytes() const {
  int64_t doubles = n_.size() + mean_.size() + fid_sum_.size() + fid_n_.size();
  for (const auto& s : S_) doubles += s.size();
  return doubles * static_cast<int64_t>(sizeof(double));
}

}  // namespace bandit::mixture
