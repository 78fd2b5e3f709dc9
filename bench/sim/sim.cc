#include "bench/sim/sim.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace bandit::sim {

bool SimArgs::Has(absl::string_view key) const {
  used_.insert(std::string(key));
  return values_.count(std::string(key)) > 0;
}

std::string SimArgs::String(absl::string_view key, absl::string_view fallback) const {
  used_.insert(std::string(key));
  auto it = values_.find(std::string(key));
  return it == values_.end() ? std::string(fallback) : it->second;
}

absl::StatusOr<int64_t> SimArgs::Int(absl::string_view key, int64_t fallback) const {
  used_.insert(std::string(key));
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return fallback;
  int64_t v;
  if (!absl::SimpleAtoi(it->second, &v))
    return absl::InvalidArgumentError(
        absl::StrCat("--", key, "=", it->second, " is not an integer"));
  return v;
}

absl::StatusOr<double> SimArgs::Double(absl::string_view key, double fallback) const {
  used_.insert(std::string(key));
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return fallback;
  double v;
  if (!absl::SimpleAtod(it->second, &v) || !std::isfinite(v))
    return absl::InvalidArgumentError(
        absl::StrCat("--", key, "=", it->second, " is not a finite number"));
  return v;
}

std::vector<std::string> SimArgs::List(absl::string_view key, absl::string_view fallback) const {
  return absl::StrSplit(String(key, fallback), ',', absl::SkipEmpty());
}

std::vector<std::string> SimArgs::Unused() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : values_)
    if (!used_.count(k)) out.push_back(k);
  return out;
}

std::vector<double> Downsample(const std::vector<double>& curve, int n) {
  std::vector<double> out;
  if (curve.empty()) return out;
  const size_t T = curve.size();
  for (int k = 0; k < n; ++k) {
    size_t idx = static_cast<size_t>(std::llround(static_cast<double>(k + 1) * T / n));
    idx = idx == 0 ? 0 : idx - 1;
    out.push_back(curve[std::min(idx, T - 1)]);
  }
  return out;
}

std::pair<double, double> MeanStd(const std::vector<double>& xs) {
  if (xs.empty()) return {0.0, 0.0};
  double m = 0;
  for (double x : xs) m += x;
  m /= xs.size();
  double v = 0;
  for (double x : xs) v += (x - m) * (x - m);
  return {m, std::sqrt(v / xs.size())};
}

std::pair<std::vector<double>, std::vector<double>> CurveMeanStd(
    const std::vector<std::vector<double>>& curves) {
  std::vector<double> mean, sd;
  if (curves.empty()) return {mean, sd};
  const size_t n = curves[0].size();
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> col;
    for (const auto& c : curves) col.push_back(c[i]);
    auto [m, s] = MeanStd(col);
    mean.push_back(m);
    sd.push_back(s);
  }
  return {mean, sd};
}

}  // namespace bandit::sim
