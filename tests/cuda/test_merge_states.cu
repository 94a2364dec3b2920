// SPDX-License-Identifier: Apache-2.0
// Device tests of attention/cuda/merge_states.cuh: merge_states(cuda) equals merge_states(cpu)
// (the same merge_row) on random states with empty (-inf, NaN-valued) ones and all-empty rows.
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/attention/cuda/merge_states.cuh>
#include <inferkit/core/cuda/device_buffer.cuh>
#include <inferkit/core/rng.hpp>
#include <limits>
#include <tests/cuda/cuda_test_support.cuh>
#include <vector>

TEST_CASE("merge_states(cuda): equals the CPU merge, empty states ignored",
          "[cuda][merge_states]") {
  using namespace inferkit;
  Rng rng(8);
  const std::int32_t states = 5;
  const std::int32_t rows = 37;
  const std::int32_t dim = 128;
  auto v = test::random_floats(rng, static_cast<std::size_t>(states * rows * dim), -1.0f, 1.0f);
  auto lse = test::random_floats(rng, static_cast<std::size_t>(states * rows), -5.0f, 5.0f);
  for (std::int32_t r = 0; r < rows; r += 3) {  // state 1 of every third row is empty
    lse[static_cast<std::size_t>(rows + r)] = -std::numeric_limits<float>::infinity();
    v[static_cast<std::size_t>((rows + r) * dim)] = std::numeric_limits<float>::quiet_NaN();
  }
  for (std::int32_t i = 0; i < states; ++i) {  // row 4 is empty everywhere
    lse[static_cast<std::size_t>(i * rows + 4)] = -std::numeric_limits<float>::infinity();
  }
  // The CPU merge, by the same detail::merge_row.
  std::vector<float> want(static_cast<std::size_t>(rows * dim));
  std::vector<float> want_lse(static_cast<std::size_t>(rows));
  for (std::int32_t r = 0; r < rows; ++r) {
    detail::merge_row(states, v.data() + r * dim, std::int64_t{rows} * dim, lse.data() + r, rows,
                      dim, want.data() + r * dim, want_lse.data() + r);
  }
  const DeviceBuffer<float> dv(v);
  const DeviceBuffer<float> dlse(lse);
  DeviceBuffer<float> dout(want.size());
  DeviceBuffer<float> dout_lse(want_lse.size());
  merge_states(cuda{}, {dv.data(), dv.size()}, {dlse.data(), dlse.size()}, states, dim,
               {dout.data(), dout.size()}, {dout_lse.data(), dout_lse.size()});
  test::finish_device();
  const std::vector<float> got = dout.download();
  const std::vector<float> got_lse = dout_lse.download();
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(std::abs(got[i] - want[i]) <= 1e-6f);
  for (std::size_t i = 0; i < got_lse.size(); ++i) {
    if (std::isinf(want_lse[i])) {
      CHECK(got_lse[i] == want_lse[i]);
    } else {
      CHECK(std::abs(got_lse[i] - want_lse[i]) <= 1e-6f);
    }
  }
  CHECK_THROWS_AS(merge_states(cuda{}, {dv.data(), dv.size() - 1}, {dlse.data(), dlse.size()},
                               states, dim, {dout.data(), dout.size()}),
                  Error);
}
