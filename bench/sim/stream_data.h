// Labelled CSV streams and loss names shared by the online-kernel-selection runners
// (stream_sim.cc: Tables 2-4 / 5-7 at fixed D; budget_sim.cc: the equal-time protocol).
#pragma once

#include <string>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/statusor.h"
#include "bandit/v1/oks.pb.h"

namespace bandit::sim {

struct Dataset {
  std::vector<double> y;
  std::vector<Eigen::VectorXd> x;
  int dim = 0;
};

// Header row, then y followed by the features, all finite numbers.
absl::StatusOr<Dataset> ReadCsv(const std::string& path);
// logistic | square | absolute | hinge | squared_hinge.
absl::StatusOr<bandit::v1::OksLoss> ParseLoss(const std::string& s);

}  // namespace bandit::sim
