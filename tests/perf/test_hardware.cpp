// SPDX-License-Identifier: Apache-2.0
// Tests for perf/hardware.hpp: datasheet presets, ridge points, user-defined devices, ideal
// tensor-parallel groups, GB vs GiB conversions, and bad arguments naming the field.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/perf/hardware.hpp>
#include <string>

using inferkit::Error;
using inferkit::ErrorCode;
using inferkit::Hardware;

TEST_CASE("hardware_preset: carries the datasheet numbers", "[perf][hardware]") {
  const Hardware a100 = inferkit::hardware_preset("a100-80gb");
  CHECK(a100.peak_flops == 312e12);
  CHECK(a100.memory_bandwidth == 2.039e12);
  CHECK(a100.memory_bytes == 85'899'345'920);  // 80 GiB: what the part holds
  CHECK(a100.memory_bytes == inferkit::gib_to_bytes(80));
  const Hardware h100 = inferkit::hardware_preset("h100-sxm");
  CHECK(h100.peak_flops == 989e12);
  CHECK(h100.memory_bandwidth == 3.35e12);
  CHECK(h100.memory_bytes == 85'899'345'920);
  const Hardware h200 = inferkit::hardware_preset("h200");
  CHECK(h200.peak_flops == 989e12);
  CHECK(h200.memory_bandwidth == 4.8e12);
  CHECK(h200.memory_bytes == 141'000'000'000);  // the datasheet's 141GB, decimal
  for (std::string_view name : inferkit::hardware_preset_names()) {
    const Hardware hw = inferkit::hardware_preset(name);
    CHECK(hw.name == name);
    CHECK(hw.num_devices == 1);
    CHECK_NOTHROW(inferkit::validate(hw));
  }
}

TEST_CASE("Hardware: ridge point is peak FLOP/s over bandwidth", "[perf][hardware]") {
  // A100-80GB: 312e12 / 2.039e12 = 153.02 FLOPs per byte. The often-quoted "156" divides by a
  // rounded 2 TB/s (312 / 2 = 156); the same formula on those numbers gives exactly that.
  CHECK(inferkit::hardware_preset("a100-80gb").ridge_point() == Approx(153.02).epsilon(1e-4));
  CHECK(inferkit::make_hardware("rounded-a100", 312, 2.0, 80).ridge_point() == Approx(156.0));
  CHECK(inferkit::hardware_preset("h100-sxm").ridge_point() == Approx(295.22).epsilon(1e-4));
  CHECK(inferkit::hardware_preset("h200").ridge_point() == Approx(206.04).epsilon(1e-4));
}

TEST_CASE("make_hardware: builds a user device from TFLOP/s and TB/s and GB", "[perf][hardware]") {
  const Hardware l40s = inferkit::make_hardware("my-l40s", 362.05, 0.864, 48);
  CHECK(l40s.name == "my-l40s");
  CHECK(l40s.peak_flops == Approx(362.05e12));
  CHECK(l40s.memory_bandwidth == Approx(0.864e12));
  CHECK(l40s.memory_bytes == 48'000'000'000);
  CHECK_THROWS_WITH(inferkit::make_hardware("x", 0, 1, 1),
                    Catch::Contains("peak_flops") && Catch::Contains("must be > 0"));
  CHECK_THROWS_WITH(inferkit::make_hardware("x", 1, -1, 1), Catch::Contains("memory_bandwidth"));
  CHECK_THROWS_WITH(inferkit::make_hardware("x", 1, 1, 0), Catch::Contains("memory_bytes"));
  Hardware bad = l40s;
  bad.num_devices = 0;
  CHECK_THROWS_WITH(inferkit::validate(bad), Catch::Contains("num_devices = 0"));
  try {
    (void)inferkit::make_hardware("x", 1, 1, -80);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("tensor_parallel: adds up FLOP/s and bandwidth and memory", "[perf][hardware]") {
  const Hardware a100 = inferkit::hardware_preset("a100-80gb");
  const Hardware four = inferkit::tensor_parallel(a100, 4);
  CHECK(four.name == "4xa100-80gb");
  CHECK(four.num_devices == 4);
  CHECK(four.peak_flops == 4 * a100.peak_flops);
  CHECK(four.memory_bandwidth == 4 * a100.memory_bandwidth);
  CHECK(four.memory_bytes == 4 * inferkit::gib_to_bytes(80));
  CHECK(four.ridge_point() == Approx(a100.ridge_point()));  // the ridge does not move
  CHECK(inferkit::tensor_parallel(four, 2).num_devices == 8);
  CHECK_THROWS_WITH(inferkit::tensor_parallel(a100, 0), Catch::Contains("num_devices = 0"));
}

TEST_CASE("hardware_preset: an unknown name throws listing the known presets", "[perf][hardware]") {
  try {
    (void)inferkit::hardware_preset("b200");
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    const std::string what = e.what();
    CHECK(what.find("'b200'") != std::string::npos);
    CHECK(what.find("a100-40gb, a100-80gb, h100-sxm, h200") != std::string::npos);
  }
  CHECK_FALSE(inferkit::try_hardware_preset("A100").has_value());
}

TEST_CASE("gb_to_bytes: GB is 10^9 bytes and GiB is 2^30 bytes", "[perf][hardware]") {
  CHECK(inferkit::gb_to_bytes(80) == 80'000'000'000);
  CHECK(inferkit::gib_to_bytes(40) == 42'949'672'960);
  CHECK(inferkit::gib_to_bytes(1) == 1'073'741'824);
  CHECK(inferkit::gb_to_bytes(0.5) == 500'000'000);
  // A vendor's "80GB" is 74.5 GiB.
  CHECK(inferkit::bytes_to_gib(80e9) == Approx(74.506).epsilon(1e-4));
  CHECK(inferkit::bytes_to_gb(42'949'672'960.0) == Approx(42.94967296));
  // Round trips.
  for (double gb : {0.001, 1.0, 80.0, 141.0, 1234.5}) {
    CHECK(inferkit::bytes_to_gb(static_cast<double>(inferkit::gb_to_bytes(gb))) == Approx(gb));
    CHECK(inferkit::bytes_to_gib(static_cast<double>(inferkit::gib_to_bytes(gb))) == Approx(gb));
  }
}
