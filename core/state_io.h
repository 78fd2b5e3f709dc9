// Helpers to write and read a policy's state into the generic PolicyState message.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "bandit/v1/state.pb.h"
#include "core/rng.h"

namespace bandit {

class StateWriter {
 public:
  StateWriter(bandit::v1::PolicyState* out, absl::string_view policy, uint32_t version);
  void Put(absl::string_view name, const Eigen::MatrixXd& m);
  void Put(absl::string_view name, const Eigen::VectorXd& v);
  void PutScalar(absl::string_view name, double value);
  void PutInt(absl::string_view name, int64_t value);
  void PutRng(const Rng& rng);
  void PutArmIds(const std::vector<std::string>& ids);

 private:
  bandit::v1::PolicyState* out_;
};

// Reads back what StateWriter wrote. Every getter checks presence and, where given, shape, and
// returns INVALID_ARGUMENT naming the field otherwise.
class StateReader {
 public:
  StateReader(const bandit::v1::PolicyState& in) : in_(in) {}
  // Checks the policy name and that the version is one this code knows.
  absl::Status Expect(absl::string_view policy, uint32_t version) const;
  // rows/cols < 0 mean "any".
  absl::Status Get(absl::string_view name, Eigen::MatrixXd* m, int64_t rows = -1,
                   int64_t cols = -1) const;
  absl::Status Get(absl::string_view name, Eigen::VectorXd* v, int64_t size = -1) const;
  absl::Status GetScalar(absl::string_view name, double* value) const;
  absl::Status GetInt(absl::string_view name, int64_t* value) const;
  absl::Status GetRng(Rng* rng) const;
  std::vector<std::string> ArmIds() const;

 private:
  const bandit::v1::PolicyState& in_;
};

}  // namespace bandit
