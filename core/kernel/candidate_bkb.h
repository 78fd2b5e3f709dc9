// BKB on per-request candidates (Calandriello et al. 2019, Fig. 1; Section 3: "embed the changing
// arm sets as they are provided, and store and re-embed previously selected arms").
//
// State. The distinct pulled points x_i (d numbers each) with their pull counts n_i and reward
// sums s_i (Section 3.2's counters; with fresh continuous candidates every pull is its own point),
// one dictionary flag per point, and the DTC statistics of the current embedding:
//   z(x) = W k_S(x)  (NystromEmbedding, Section 3.1),  G = sum_i n_i z_i z_i^T,  b = sum_i s_i z_i,
//   V = G + lambda I,  w = V^{-1} b,
//   mu~_t(x) = z(x)^T w,  sigma~_t^2(x) = (k(x,x) - z^T G V^{-1} z) / lambda        (eq. 4)
//   sum_s sigma~_t^2(x_s) = (sum_s k(x_s,x_s) - tr(G V^{-1} G)) / lambda            (beta~_t)
// What grows: the point list, (d + 2) numbers per distinct pulled point, because the resampling
// of Fig. 1 draws S_{t+1} from all past pulls and re-embeds them. Everything else is O(m^2 + m d)
// (m = |S_t|, r <= m embedding rank).
//
// Resampling. Every `resample_every` updates (1 = Fig. 1 exactly, the default) S_{t+1} is drawn
// from scratch: each pull is kept with probability p~ = min(1, q_bar sigma~_t^2(x_s)); a point
// pulled n_i times enters iff one of its n_i draws succeeds, i.e. with probability
// 1 - (1 - p~_i)^{n_i} (one uniform per point, as in the fixed-arm form). The embedding is then
// rebuilt from all points ("rebuild"): O(P (m d + m r + r^2) + m^3) with P distinct points, and V
// is factored afresh, O(r^3). In between, only the new pull gets its draw; if it enters S the
// embedding is rebuilt the same way, otherwise the pull is a rank-one change of the r x r system:
//   G += z z^T,  b += y z,  L L^T = V + z z^T (Cholesky rank-one update, O(r^2)),
//   tr(V^{-1}) -= |V^{-1} z|^2 / (1 + z^T V^{-1} z)                     (Sherman-Morrison)
// so an update that keeps S costs O(m d + m r + r^2) and never reads the past pulls.
// sum_s sigma~_t^2(x_s) (in beta~_t) uses tr(G V^{-1} G) = tr(G) - lambda r + lambda^2 tr(V^{-1})
// (G = V - lambda I), so it follows the rank-one updates too.
//
// What grows with t: the point list (P <= t points, (d + 2) numbers and an index each), read in
// full by every redraw and by every rebuild. With resample_every = 1 that is every update, so
// the cost per round grows linearly in t; with resample_every = k a redraw costs the same but
// happens once per k updates, and between redraws only the new pull's own draw can trigger a
// rebuild (it enters S with probability q_bar sigma~_t^2(x_t), which falls as the posterior
// concentrates). The r x r system (G, b, L, tr(V^{-1})) and the m x d dictionary do not grow
// with t beyond m and r.
//
// Points are visited in lexicographic order of their feature vectors (so S, and therefore the
// decisions, do not depend on the order in which points arrived); with candidates equal to a
// fixed arm set listed in that order, the decisions are those of the fixed-arm form.
#pragma once

#include <memory>
#include <vector>

#include "core/kernel/bkb.h"
#include "core/kernel/candidate_kernel_ucb.h"

namespace bandit {

class CandidateBkb final : public CandidateKernelUcb {
 public:
  static constexpr int64_t kDefaultMaxPoints = 100000;
  static constexpr int64_t kMaxMaxPoints = 10000000;

  // config.bkb() has `dimension` set; `params` (epsilon included) and q_bar already read.
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      const KernelUcbParams& params, double q_bar,
                                                      uint64_t seed);
  absl::string_view name() const override { return "bkb"; }
  void Posterior(const Eigen::Ref<const Matrix>& X, Vector* mean, Vector* var) const override;
  double SumPulledVariance() const override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;

  double q_bar() const { return q_bar_; }
  int resample_every() const { return resample_every_; }
  int points() const { return n_; }
  int dictionary_size() const { return static_cast<int>(embedding_.Xs.cols()); }
  int rank() const { return embedding_.rank(); }
  // The r x r system: G = sum_i n_i z_i z_i^T and the lower Cholesky factor of V = G + lambda I
  // (rank-one updated between redraws, factored afresh at each rebuild).
  const Matrix& gram() const { return G_; }
  const Matrix& cholesky_factor() const { return L_; }
  // Embedding rebuilds (passes over every pulled point: redraws, and dictionary growth between
  // redraws) since this object was made or restored. Not part of the state; for benchmarks.
  int64_t rebuilds() const { return rebuilds_; }
  // Distinct pulled points (d x P), in arrival order, and their counts / sums.
  Eigen::Ref<const Matrix> point_features() const { return X_.leftCols(n_); }
  Eigen::Ref<const Vector> point_counts() const { return counts_.head(n_); }
  Eigen::Ref<const Vector> point_sums() const { return sums_.head(n_); }
  // Indices of the dictionary points (into point_features), in lexicographic order.
  std::vector<int> DictionaryPoints() const;

 protected:
  absl::Status Observe(const Vector& x, double y) override;
  void ExtraSummary(std::vector<std::pair<std::string, double>>* out) const override;
  void ExtraDiagnostics(Decision* d) const override;

 private:
  CandidateBkb(int dim, KernelUcbParams params, double q_bar, int resample_every,
               int64_t max_points, uint64_t seed);

  // Position in order_ where x is or would be inserted, and whether it is there.
  std::pair<int, bool> Locate(const Vector& x) const;
  // Embedding of the flagged points, then G, b from every point (canonical order).
  void Rebuild();
  // V = G + lambda I, its Cholesky factor, tr(V^{-1}), w = V^{-1} b and sum_var_.
  void Refactor();
  // w = V^{-1} b and sum_var_ from the current L_, G_, b_ and trace_inv_.
  void Resolve();

  double q_bar_;
  int resample_every_;
  int64_t max_points_;

  int n_ = 0;                  // distinct pulled points P
  Matrix X_;                   // d x capacity
  Vector counts_, sums_;       // n_i, s_i (capacity)
  std::vector<int> order_;     // point indices in lexicographic order of their features
  std::vector<char> in_dict_;  // per point: in S_t
  double sum_kdiag_ = 0;       // sum_s k(x_s, x_s) over all pulls
  int since_resample_ = 0;     // updates since the last full redraw

  NystromEmbedding embedding_;
  Matrix G_;              // sum_i n_i z_i z_i^T (r x r)
  Vector b_;              // sum_i s_i z_i
  Matrix L_;              // lower Cholesky factor of V = G + lambda I (r x r, upper triangle zero)
  double trace_inv_ = 0;  // tr(V^{-1})
  Vector w_;
  double sum_var_ = 0;  // sum_s sigma~_t^2(x_s), recomputed by Resolve
  int64_t rebuilds_ = 0;
};

}  // namespace bandit
