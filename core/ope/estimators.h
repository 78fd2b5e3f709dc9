// Off-policy estimators of a target policy's value from a log of (context, logged action,
// logged propensity, reward), accumulated one event at a time so a log of any length runs in
// constant memory, and a direct reward model for the doubly robust estimator.
//
// With w_t = pi(a_t|x_t) / mu(a_t|x_t) (target over logging probability of the logged action,
// optionally clipped at M: w_t = min(w_t, M)) and r_t the reward:
//   IPS   (Horvitz & Thompson 1952):             V = (1/n) sum w_t r_t
//   SNIPS (Swaminathan & Joachims 2015):         V = sum w_t r_t / sum w_t
//   DM    (direct method):                       V = (1/n) sum_t sum_a pi(a|x_t) q(x_t, a)
//   DR    (Dudik, Langford & Li 2011, the doubly robust estimator):
//         V = (1/n) sum_t [ sum_a pi(a|x_t) q(x_t, a) + w_t (r_t - q(x_t, a_t)) ]
// q is learned online from the events before t only (predict, then learn), so each DR term
// has the target's value as its conditional mean whatever q is, and DR stays unbiased when q
// is wrong (with unclipped weights). Intervals: 95 % normal intervals, V +- 1.96 se, with se
// the sample standard deviation of the per-event terms over sqrt(n); for SNIPS the delta
// method, se^2 = sum w_t^2 (r_t - V)^2 / (sum w_t)^2.
// Effective sample size (Kish): (sum w)^2 / sum w^2.
//
// Shared by bandit-ope (tools/ope, progressive evaluation of a log) and the server's shadow
// policies (server/instance/shadows.h, the same evaluation live); both save and restore the running
// sums (bandit/v1/ope.proto) so an evaluation resumes exactly.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "bandit/v1/ope.pb.h"

namespace bandit::ope {

using Vector = Eigen::VectorXd;

struct Interval {
  double value = 0;
  double se = 0;
  double lo = 0;
  double hi = 0;
};

// One logged event as the estimators see it.
struct ScoredEvent {
  int logged_action = -1;
  double logged_propensity = 1;  // mu(a_t|x_t), in (0, 1]
  double reward = 0;
  Vector target;  // pi(.|x_t) over the event's actions
  Vector q;       // the direct model's predictions per action (learned before this event)
};

class Estimators {
 public:
  // max_weight <= 0: no clipping.
  explicit Estimators(double max_weight = 0) : max_weight_(max_weight) {}

  void Add(const ScoredEvent& e);
  // The same event from its terms alone: pi(a_t|x_t), mu(a_t|x_t), r_t,
  // sum_a pi(a|x_t) q(x_t, a) and q(x_t, a_t) (the server's shadows keep only these).
  void AddTerms(double target_logged, double logged_propensity, double reward, double dm,
                double q_logged);

  int64_t events() const { return n_; }
  Interval Ips() const;
  Interval Snips() const;
  Interval DirectMethod() const;
  Interval DoublyRobust() const;
  // The logging policy's own value: the mean logged reward.
  Interval Logged() const;
  double EffectiveSampleSize() const;
  // IPS's sums: sum w r and sum (w r)^2; SNIPS's denominator sum w; the events whose logged
  // action the target gave a probability above 0 (Personalizer's evaluation summaries).
  double ips_numerator() const { return ips_.sum; }
  double ips_sum_of_squares() const { return ips_.sum_sq; }
  double weight_sum() const { return w_; }
  int64_t nonzero() const { return nonzero_; }
  int64_t clipped() const { return clipped_; }
  double largest_weight() const { return largest_weight_; }
  double max_weight() const { return max_weight_; }

  void Save(bandit::v1::OpeEstimatorState* out) const;
  // INVALID_ARGUMENT (nothing changed) for sums that no accumulator could have produced.
  absl::Status Restore(const bandit::v1::OpeEstimatorState& in);

 private:
  struct Moments {
    double sum = 0, sum_sq = 0;
    void Add(double x) { sum += x, sum_sq += x * x; }
    Interval Mean(int64_t n) const;
  };
  double max_weight_;
  int64_t n_ = 0;
  int64_t clipped_ = 0;
  int64_t nonzero_ = 0;
  double largest_weight_ = 0;
  Moments ips_, dm_, dr_, logged_;
  // SNIPS: sum w, sum w r, sum w^2, sum w^2 r, sum w^2 r^2.
  double w_ = 0, wr_ = 0, w2_ = 0, w2r_ = 0, w2r2_ = 0;
};

// The direct model q(x, a) of the doubly robust estimator, learned online by ridge regression
// (regularization lambda, on [features, 1]):
//   candidate vectors: one model over the candidate's features (the actions are the vectors);
//   point input x: one model per action over x;
//   own arm set: per-arm mean shrunk towards the mean of all rewards, (sum r_a + lambda m) /
//   (n_a + lambda) (ridge on a per-arm constant with the global mean as prior).
class DirectModel {
 public:
  explicit DirectModel(double lambda = 1.0) : lambda_(lambda) {}

  // Predictions for each action: `actions` holds one feature row per action (candidates), or
  // is empty with `x` set (point input), or both empty with `arm_ids` set (arm set).
  Vector Predict(std::span<const Vector> actions, const Vector* x,
                 const std::vector<std::string>* arm_ids, int num_actions);
  void Learn(std::span<const Vector> actions, const Vector* x,
             const std::vector<std::string>* arm_ids, int action, double reward);
  // The same for one action's features (candidates: the chosen candidate; input x: x and the
  // action). Learn above is this with the chosen row picked from `actions`.
  void LearnCandidate(const Vector& features, double reward);
  void LearnPoint(const Vector& x, int action, double reward);
  void LearnArm(const std::string& arm_id, double reward);

  double lambda() const { return lambda_; }
  int64_t StateBytes() const;
  void Save(bandit::v1::DirectModelState* out) const;
  // INVALID_ARGUMENT (nothing changed) for a state of inconsistent shapes.
  absl::Status Restore(const bandit::v1::DirectModelState& in);

 private:
  struct Ridge {
    Eigen::MatrixXd a;  // lambda I + sum z z^T
    Vector b;           // sum r z
    // The lower Cholesky factor of a (l l^T = a), kept by a rank-one update per reward (O(d^2))
    // instead of factoring a afresh (O(d^3)) whenever the coefficients are needed. Its last bits
    // depend on the order of the updates, so it is state: saved and restored with a and b, a
    // restored model predicts bit for bit as the uninterrupted one.
    Eigen::MatrixXd l;
    Vector z_scratch;
    void Init(int dim, double lambda);
    double Predict(const Vector& z);
    void Learn(const Vector& z, double r);
    // The coefficients a^{-1} b by two triangular solves with l, when first asked after a change
    // and kept until the next (the server predicts at every Select, and Selects may outnumber
    // rewards).
    const Vector& Coefficients();
    Vector coefficients;
    bool solved = false;
  };
  static Vector WithIntercept(const Vector& v);
  static void SaveRidge(const Ridge& ridge, bandit::v1::DirectModelState::Ridge* out);
  static absl::Status RestoreRidge(const bandit::v1::DirectModelState::Ridge& in, Ridge* ridge);

  double lambda_;
  Ridge shared_;                                                          // candidates
  std::vector<Ridge> per_action_;                                         // point input
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> arms_;  // arm -> (sum, n)
  double reward_sum_ = 0;
  int64_t rewards_ = 0;
};

}  // namespace bandit::ope
