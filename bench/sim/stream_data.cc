#include "bench/sim/stream_data.h"

#include <cmath>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace bandit::sim {

absl::StatusOr<Dataset> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open --data=", path));
  std::string line;
  if (!std::getline(in, line)) return absl::InvalidArgumentError(absl::StrCat(path, " is empty"));
  const int cols =
      static_cast<int>(std::vector<absl::string_view>(absl::StrSplit(line, ',')).size());
  if (cols < 2)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": header has ", cols, " columns, expected y + features"));
  Dataset d;
  d.dim = cols - 1;
  int64_t row = 1;
  while (std::getline(in, line)) {
    ++row;
    if (line.empty() || line == "\r") continue;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    if (static_cast<int>(f.size()) != cols)
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", row, " has ", f.size(), " fields, expected ", cols));
    Eigen::VectorXd x(d.dim);
    double y;
    if (!absl::SimpleAtod(f[0], &y) || !std::isfinite(y))
      return absl::InvalidArgumentError(absl::StrCat(path, ":", row, ": y is not a finite number"));
    for (int j = 0; j < d.dim; ++j)
      if (!absl::SimpleAtod(f[j + 1], &x[j]) || !std::isfinite(x[j]))
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", row, ": column ", j + 2, " is not a finite number"));
    d.y.push_back(y);
    d.x.push_back(std::move(x));
  }
  if (d.y.empty()) return absl::InvalidArgumentError(absl::StrCat(path, " has no data rows"));
  return d;
}

absl::StatusOr<bandit::v1::OksLoss> ParseLoss(const std::string& s) {
  if (s == "logistic") return bandit::v1::OKS_LOGISTIC;
  if (s == "square") return bandit::v1::OKS_SQUARE;
  if (s == "absolute") return bandit::v1::OKS_ABSOLUTE;
  if (s == "hinge") return bandit::v1::OKS_HINGE;
  if (s == "squared_hinge") return bandit::v1::OKS_SQUARED_HINGE;
  return absl::InvalidArgumentError(absl::StrCat(
      "--loss=", s, " is unknown, expected logistic, square, absolute, hinge or squared_hinge"));
}

}  // namespace bandit::sim
