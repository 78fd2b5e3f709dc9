#include "core/rng.h"

#include <cmath>
#include <numbers>
#include <sstream>

namespace bandit {

uint64_t Rng::UniformInt(uint64_t n) {
  // Lemire, "Fast Random Integer Generation in an Interval" (2019).
  unsigned __int128 m = static_cast<unsigned __int128>(engine_()) * n;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = -n % n;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(engine_()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double Rng::Normal() {
  const double u1 = UniformOpen();
  const double u2 = Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::Gamma(double shape) {
  if (shape < 1.0) {
    // Boost to shape + 1 and scale by U^(1/shape) (Marsaglia-Tsang, section 6).
    const double u = UniformOpen();
    return Gamma(shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x, v;
    do {
      x = Normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = UniformOpen();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

double Rng::Beta(double a, double b) {
  const double x = Gamma(a);
  const double y = Gamma(b);
  return x / (x + y);
}

std::string Rng::Save() const {
  std::ostringstream os;
  os << engine_;
  return os.str();
}

absl::Status Rng::Restore(const std::string& state) {
  std::istringstream is(state);
  std::mt19937_64 e;
  is >> e;
  if (is.fail()) return absl::InvalidArgumentError("random engine state is malformed");
  engine_ = e;
  return absl::OkStatus();
}

}  // namespace bandit
