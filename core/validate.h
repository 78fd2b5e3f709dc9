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

// `field` must have exactly `dim` finite entries.
absl::Status CheckVector(absl::string_view field, const Eigen::VectorXd& v, int64_t dim);
// A finite scalar.
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
