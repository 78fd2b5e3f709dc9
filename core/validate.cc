#include "core/validate.h"

namespace bandit {

absl::Status CheckVector(absl::string_view field, const Eigen::VectorXd& v, int64_t dim) {
  if (v.size() != dim)
    return absl::InvalidArgumentError(
        absl::StrCat(field, " has ", v.size(), " values, expected ", dim));
  for (int64_t i = 0; i < v.size(); ++i)
    if (!IsInputNumber(v[i]))
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "] is ", v[i], ", ", kInputNumberExpected));
  return absl::OkStatus();
}

absl::Status CheckFinite(absl::string_view field, double value) {
  if (!IsInputNumber(value))
    return absl::InvalidArgumentError(absl::StrCat(field, " is ", value, ", ", kInputNumberExpected));
  return absl::OkStatus();
}

absl::Status CheckRange(absl::string_view field, double value, double lo, double hi) {
  if (!std::isfinite(value) || value < lo || value > hi)
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", value, ", expected a number in [", lo, ", ", hi, "]"));
  return absl::OkStatus();
}

absl::Status CheckPositive(absl::string_view field, double value) {
  if (!std::isfinite(value) || value <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", value, ", expected a finite number > 0"));
  return absl::OkStatus();
}

}  // namespace bandit
