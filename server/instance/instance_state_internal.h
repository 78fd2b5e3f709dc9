// Helpers shared by the files that implement InstanceState (instance_state*.cc) and the
// translation of its calls (calls.cc); not part of the server's
// interface.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/validate.h"
#include "server/instance/instance_state.h"

namespace bandit::server {
namespace instance_state_internal {

using bandit::v1::InstanceConfig;

// Copies `values` into `out` after checking its size and that each is an input number
// (core/validate.h); `field()` names the field in the error and is only called on error (no
// string is built per candidate on the hot path). Reuses `out`'s storage when the size matches.
template <typename Repeated, typename FieldName>
absl::Status CopyChecked(const Repeated& values, int64_t max_size, Vector* out, FieldName field) {
  // RepeatedField's size is an int, a Span's a size_t: compared as int64_t.
  const int64_t size = static_cast<int64_t>(values.size());
  if (size > max_size)
    return absl::InvalidArgumentError(
        absl::StrCat(field(), " has ", size, " values, expected at most ", max_size));
  // One vectorised pass; the offending index is searched for on error only.
  const Eigen::Map<const Vector> mapped(values.data(), values.size());
  if (!IsInputVector(mapped)) {
    for (int64_t i = 0; i < size; ++i)
      if (!IsInputNumber(values[i]))
        return absl::InvalidArgumentError(
            absl::StrCat(field(), "[", i, "] is ", values[i], ", ", kInputNumberExpected));
  }
  *out = mapped;
  return absl::OkStatus();
}

template <typename Repeated>
absl::StatusOr<Vector> ToVector(absl::string_view field, const Repeated& values, int64_t max_size) {
  Vector v;
  if (auto s = CopyChecked(values, max_size, &v, [field] { return field; }); !s.ok()) return s;
  return v;
}

// What the decision log keeps of decision `d` (instance_state.cc).
void LogDistribution(const Decision& d, int num_actions, DecisionLog::Context* e);
// a + b, stopping at the top instead of overflowing (instance_state.cc).
int64_t SaturatingAdd(int64_t a, int64_t b);

}  // namespace instance_state_internal

// Only those files include this header.
using namespace instance_state_internal;  // NOLINT(google-build-using-namespace)

}  // namespace bandit::server
