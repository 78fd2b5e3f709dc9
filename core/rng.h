// The one random engine of an instance. Its full state is serializable so that a restored
// instance draws exactly the numbers the original would have drawn. The distributions are
// written out here (not std::*_distribution) because the standard ones keep hidden state
// (e.g. normal_distribution caches a second variate) and differ between library versions.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/status.h"

namespace bandit {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0x5eed) : engine_(seed) {}

  uint64_t NextU64() { return engine_(); }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform in (0, 1): never returns 0 (for logs).
  double UniformOpen() { return (static_cast<double>(engine_() >> 11) + 0.5) * 0x1.0p-53; }
  // Uniform integer in [0, n), n > 0 (Lemire's unbiased method).
  uint64_t UniformInt(uint64_t n);
  // Standard normal (Box-Muller, both variates drawn fresh each call: no hidden cache).
  double Normal();
  double Normal(double mean, double stddev) { return mean + stddev * Normal(); }
  // Gamma(shape, 1), shape > 0 (Marsaglia-Tsang).
  double Gamma(double shape);
  // Beta(a, b), a, b > 0.
  double Beta(double a, double b);
  bool Bernoulli(double p) { return Uniform() < p; }
  // Index drawn from a probability vector (entries >= 0, sum ~ 1); last index absorbs rounding.
  template <typename Vec>
  int Categorical(const Vec& probs) {
    double u = Uniform(), acc = 0.0;
    const int n = static_cast<int>(probs.size());
    for (int i = 0; i < n; ++i) {
      acc += probs[i];
      if (u < acc) return i;
    }
    for (int i = n - 1; i >= 0; --i)
      if (probs[i] > 0) return i;
    return n - 1;
  }

  std::string Save() const;
  absl::Status Restore(const std::string& state);

 private:
  std::mt19937_64 engine_;
};

}  // namespace bandit
