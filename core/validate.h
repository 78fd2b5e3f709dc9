// Small validation helpers shared by policies (messages name the field and what was expected).
#pragma once

#include <cmath>
#include <optional>
#include "absl/strings/string_view.h"

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace bandit {

inline bool AllFinite(const Eigen::Ref<const Eigen::MatrixXd>& m) { return m.allFinite(); }

// The largest magnitude of an input number (a feature value, a reward). Squares of such numbers
// summed over any realistic number of rounds stay far inside a double's range (about 1.8e308),
// so no policy's or estimator's running sums can overflow into a state that its own snapshot
// would refuse to restore. (Named features are floats, at most 3.4e38, as Vowpal Wabbit's.)
inline constexpr double kMaxInputMagnitude = 1e100;
// What an input number was expected to be, for error messages.
inline constexpr char kInputNumberExpected[] = "expected a finite number of magnitude at most 1e+100";
// A finite number of magnitude at most kMaxInputMagnitude (false for NaN).
inline bool IsInputNumber(double v) { return std::abs(v) <= kMaxInputMagnitude; }
// Every entry an input number, in one vectorised pass; a Ref so that a vector mapped over a
// request's values is checked without a copy.
inline bool IsInputVector(const Eigen::Ref<const Eigen::VectorXd>& v) {
  return (v.array().abs() <= kMaxInputMagnitude).all();
}

// `field` must have exactly `dim` entries, each an input number (IsInputNumber).
absl::Status CheckVector(absl::string_view field, const Eigen::VectorXd& v, int64_t dim);
// An input number (IsInputNumber): a feature value or a reward.
absl::Status CheckFinite(absl::string_view field, double value);
// A scalar in [lo, hi] (inclusive), finite.
absl::Status CheckRange(absl::string_view field, double value, double lo, double hi);
// A finite scalar > 0.
absl::Status CheckPositive(absl::string_view field, double value);
// Optional proto field with a default, validated with `check`.
template <typename T, typename Check>
absl::Status OptionalParam(absl::string_view field, bool has, T value, T fallback, T* out,
                           Check check) {
  *out = has ? value : fallback;
  return check(field, *out);
}

}  // namespace bandit
