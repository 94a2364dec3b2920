// SPDX-License-Identifier: Apache-2.0
// Test helper: random probability rows (softmax of scaled uniforms) for the sampling and
// verifier tests, drawn from inferkit::Rng so every test sees the same rows for a seed.
#pragma once

#include <cmath>
#include <cstddef>
#include <inferkit/core/rng.hpp>
#include <numeric>
#include <vector>

namespace inferkit::test {

/// A probability row over `vocab` tokens; larger `sharpness` concentrates the mass.
inline std::vector<float> random_row(std::size_t vocab, Rng& rng, float sharpness = 3.0f) {
  std::vector<float> row(vocab);
  for (float& x : row) x = std::exp(sharpness * rng.uniform());
  const auto sum = static_cast<float>(std::accumulate(row.begin(), row.end(), 0.0));
  for (float& x : row) x /= sum;
  return row;
}

}  // namespace inferkit::test
