// Per-arm sufficient statistics of the mixture objectives (Algorithm 1, line 12): count n_i,
// mean feature mu_i = (1/n_i) sum phi(x), uncentred second moment S_i = (1/n_i) sum phi phi'
// (eq. 6-7 for FD, Appendix A.2 / D.2 for Vendi and RKE), and the running mean of the fidelity
// scores (Section 5.3). Size m * (1 + D + D^2 + 2) doubles: constant in t.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "core/state_io.h"

namespace bandit::mixture {

class MixtureStats {
 public:
  MixtureStats() = default;
  // m arms, features of dimension D; `second_moment` = keep S_i (FD, Vendi, RKE; KD needs only
  // the means).
  MixtureStats(int m, int64_t D, bool second_moment);

  int arms() const { return static_cast<int>(n_.size()); }
  int64_t dim() const { return D_; }
  bool has_second_moment() const { return second_; }
  const Eigen::VectorXd& counts() const { return n_; }
  double total() const { return n_.sum(); }
  // Column i = mu_i.
  const Eigen::MatrixXd& means() const { return mean_; }
  // S_i (D x D); only when has_second_moment().
  const Eigen::MatrixXd& second(int i) const { return S_[i]; }
  // theta_i = mean fidelity of arm i's samples that carried one (0 when none did).
  Eigen::VectorXd FidelityMeans() const;
  const Eigen::VectorXd& fidelity_counts() const { return fid_n_; }

  // Adds one sample's feature vector phi (length D) to arm i: running means (rank-1 update).
  void Add(int i, const Eigen::VectorXd& phi, std::optional<double> fidelity);
  void AddArm();
  void RemoveArm(int slot);

  void Save(StateWriter& w) const;
  // Restores into *this only on success; m and D must match the given shape.
  absl::Status Restore(const StateReader& r, int m);
  int64_t Bytes() const;

 private:
  int64_t D_ = 0;
  bool second_ = false;
  Eigen::VectorXd n_;
  Eigen::MatrixXd mean_;            // D x m
  std::vector<Eigen::MatrixXd> S_;  // m of D x D
  Eigen::VectorXd fid_sum_, fid_n_;
};

}  // namespace bandit::mixture
