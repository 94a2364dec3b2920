// SPDX-License-Identifier: Apache-2.0
// Hardware: the three numbers of an accelerator that a roofline needs (peak dense FLOP/s, memory
// bandwidth, memory size), presets for A100-40GB, A100-80GB, H100-SXM and H200, user-defined
// devices, an ideal tensor-parallel group, and the GB/GiB conversions every capacity figure goes
// through. The roofline cost model and the KV memory planner (perf/) read it.
// Threads: a value type and pure functions (the presets are a function-local static, initialized
// once thread-safely); safe from any number of threads.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace inferkit {

/// Bytes in one GB: 10^9. Vendors' "80GB" can mean GiB (see the hardware presets).
inline constexpr std::int64_t kBytesPerGB = 1'000'000'000;
/// Bytes in one GiB: 2^30 = 1,073,741,824 (about 7.4% more than a GB).
inline constexpr std::int64_t kBytesPerGiB = std::int64_t{1} << 30;

/// GB (10^9 bytes) to bytes, rounded to the nearest byte.
inline std::int64_t gb_to_bytes(double gb) {
  return std::llround(gb * static_cast<double>(kBytesPerGB));
}
/// GiB (2^30 bytes) to bytes, rounded to the nearest byte.
inline std::int64_t gib_to_bytes(double gib) {
  return std::llround(gib * static_cast<double>(kBytesPerGiB));
}
/// Bytes to GB (10^9 bytes).
constexpr double bytes_to_gb(double bytes) noexcept {
  return bytes / static_cast<double>(kBytesPerGB);
}
/// Bytes to GiB (2^30 bytes).
constexpr double bytes_to_gib(double bytes) noexcept {
  return bytes / static_cast<double>(kBytesPerGiB);
}

/// One accelerator, or an ideal group of them acting as one (`tensor_parallel`).
struct Hardware {
  std::string name;               ///< preset name ("a100-80gb") or a user label
  double peak_flops = 0.0;        ///< dense FLOP/s at the compute dtype (bf16/fp16 tensor)
  double memory_bandwidth = 0.0;  ///< bytes/s from device memory (HBM)
  std::int64_t memory_bytes = 0;  ///< device memory, bytes
  int num_devices = 1;            ///< devices this entry stands for (tensor_parallel)

  /// The ridge point in FLOPs per byte: `peak_flops / memory_bandwidth`. Work with a lower
  /// arithmetic intensity is memory-bound, higher is compute-bound (A100-80GB: ~153).
  [[nodiscard]] double ridge_point() const noexcept { return peak_flops / memory_bandwidth; }
};

/// Throws `Error{kInvalidArgument}` naming the field unless peak_flops, memory_bandwidth,
/// memory_bytes and num_devices are all > 0 (and finite).
inline void validate(const Hardware& hw) {
  check_arg(std::isfinite(hw.peak_flops) && hw.peak_flops > 0.0, ErrorCode::kInvalidArgument,
            "peak_flops", hw.peak_flops, "must be >", 0);
  check_arg(std::isfinite(hw.memory_bandwidth) && hw.memory_bandwidth > 0.0,
            ErrorCode::kInvalidArgument, "memory_bandwidth", hw.memory_bandwidth, "must be >", 0);
  check_arg(hw.memory_bytes > 0, ErrorCode::kInvalidArgument, "memory_bytes", hw.memory_bytes,
            "must be >", 0);
  check_arg(hw.num_devices > 0, ErrorCode::kInvalidArgument, "num_devices", hw.num_devices,
            "must be >", 0);
}

/// A user-defined device from the units spec sheets use: dense TFLOP/s, TB/s (10^12 bytes/s)
/// and GB (10^9 bytes). Throws as `validate`.
inline Hardware make_hardware(std::string name, double peak_tflops, double bandwidth_tb_per_s,
                              double memory_gb) {
  Hardware hw{std::move(name), peak_tflops * 1e12, bandwidth_tb_per_s * 1e12,
              gb_to_bytes(memory_gb), 1};
  validate(hw);
  return hw;
}

/// `num_devices` copies of `hw` under ideal tensor parallelism: FLOP/s, bandwidth and memory
/// add up and communication is free, so real groups are slower. Throws
/// `Error{kInvalidArgument}` when num_devices < 1 or `hw` is invalid.
inline Hardware tensor_parallel(const Hardware& hw, int num_devices) {
  validate(hw);
  check_arg(num_devices >= 1, ErrorCode::kInvalidArgument, "num_devices", num_devices,
            "must be >=", 1);
  return Hardware{std::to_string(num_devices) + "x" + hw.name, hw.peak_flops * num_devices,
                  hw.memory_bandwidth * num_devices, hw.memory_bytes * num_devices,
                  hw.num_devices * num_devices};
}

namespace detail {

inline const std::array<Hardware, 4>& hardware_presets() {
  // NVIDIA datasheets: dense (no sparsity) BF16 tensor-core FLOP/s, HBM bandwidth, memory.
  // - A100 Tensor Core GPU datasheet, A100 80GB SXM: "BF16 Tensor Core 312 TFLOPS",
  //   "GPU Memory Bandwidth 2,039GB/s", "GPU Memory 80GB HBM2e".
  // - H100 Tensor Core GPU datasheet, H100 SXM: "BF16 Tensor Core 1,979 teraFLOPS" (with
  //   sparsity: 989 dense), "GPU memory bandwidth 3.35TB/s", "GPU memory 80GB".
  // - H200 Tensor Core GPU datasheet: "BF16 Tensor Core 1,979 TFLOPS" (with sparsity),
  //   "GPU Memory 141GB", "GPU Memory Bandwidth 4.8TB/s".
  // The "80GB" of the A100 and H100 is binary: the parts hold 80 GiB (an A100 80GB reports
  // 81920 MiB), 7.4% more than 80 * 10^9 bytes, so they are 80 * kBytesPerGiB here. The H200's
  // 141GB is taken as NVIDIA quotes it, 141 * 10^9 bytes. Bandwidths and FLOP/s are decimal.
  // - A100 datasheet, A100 40GB: "GPU Memory Bandwidth 1,555GB/s", "GPU Memory 40GB HBM2" (the
  //   vLLM paper's device; binary like the 80GB part).
  static const std::array<Hardware, 4> presets = {{
      {"a100-40gb", 312e12, 1.555e12, 40 * kBytesPerGiB, 1},
      {"a100-80gb", 312e12, 2.039e12, 80 * kBytesPerGiB, 1},
      {"h100-sxm", 989e12, 3.35e12, 80 * kBytesPerGiB, 1},
      {"h200", 989e12, 4.8e12, 141 * kBytesPerGB, 1},
  }};
  return presets;
}

}  // namespace detail

/// The hardware preset names: a100-40gb, a100-80gb, h100-sxm, h200.
inline std::array<std::string_view, 4> hardware_preset_names() {
  std::array<std::string_view, 4> names{};
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = detail::hardware_presets()[i].name;
  return names;
}

/// The preset called `name`, or `std::nullopt`.
inline std::optional<Hardware> try_hardware_preset(std::string_view name) {
  for (const Hardware& hw : detail::hardware_presets()) {
    if (hw.name == name) return hw;
  }
  return std::nullopt;
}

/// The preset called `name`. Throws `Error{kInvalidArgument}` naming the unknown device and
/// listing the known ones.
inline Hardware hardware_preset(std::string_view name) {
  std::optional<Hardware> hw = try_hardware_preset(name);
  if (!hw) {
    std::string known;
    for (std::string_view preset : hardware_preset_names()) {
      known += (known.empty() ? "" : ", ") + std::string(preset);
    }
    detail::throw_error(
        ErrorCode::kInvalidArgument,
        "hardware = '" + std::string(name) + "' is not a known preset (known: " + known + ")");
  }
  return *std::move(hw);
}

}  // namespace inferkit
