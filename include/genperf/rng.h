// A small deterministic random number generator (xoshiro256** seeded through splitmix64) with
// its own normal and uniform draws, so that the same seed gives the same numbers on every
// platform and standard library (std::normal_distribution does not promise that).
#pragma once
#include <cmath>
#include <cstdint>

namespace genperf {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed) {
    for (auto& w : s_) {
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      w = z ^ (z >> 31);
    }
    has_spare_ = false;
  }
  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0]; s_[3] ^= s_[1]; s_[1] ^= s_[2]; s_[0] ^= s_[3]; s_[2] ^= t; s_[3] = rotl(s_[3], 45);
    return r;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return double(next() >> 11) * 0x1p-53; }
  // Standard normal (Box-Muller; the second value of each pair is kept for the next call).
  double normal() {
    if (has_spare_) { has_spare_ = false; return spare_; }
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * u2;
    spare_ = r * std::sin(a);
    has_spare_ = true;
    return r * std::cos(a);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace genperf
