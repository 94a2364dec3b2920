// SPDX-License-Identifier: Apache-2.0
// Counter-based random numbers: Philox-4x32-10 (Salmon et al., SC'11, "Parallel random numbers:
// as easy as 1, 2, 3"). Output is a pure function of (key, counter), so a sampler can give every
// (sequence, step, position) its own counter and get the same tokens on any thread count or device.
// Threads: Philox4x32 and the uniform conversions are pure; an Rng advances on every draw, so one
// thread at a time per Rng (give each thread or sequence its own stream).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/config.hpp>

namespace inferkit {

/// Philox-4x32 with 10 rounds: maps a 128-bit counter and a 64-bit key to 128 random bits.
struct Philox4x32 {
  using Counter = std::array<std::uint32_t, 4>;  ///< the 128-bit counter, 4 words
  using Key = std::array<std::uint32_t, 2>;      ///< the 64-bit key, 2 words

  static constexpr std::uint32_t kMul0 = 0xD2511F53u;   ///< round multiplier of words 0, 1
  static constexpr std::uint32_t kMul1 = 0xCD9E8D57u;   ///< round multiplier of words 2, 3
  static constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;  ///< key bump per round: golden ratio
  static constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;  ///< key bump per round: sqrt(3) - 1
  static constexpr int kRounds = 10;                    ///< rounds of the S-P network

  /// The block function: 10 rounds of the Philox S-P network.
  INFERKIT_HOST_DEVICE static constexpr Counter generate(Counter ctr, Key key) noexcept {
    for (int round = 0; round < kRounds; ++round) {
      if (round > 0) {
        key[0] += kWeyl0;
        key[1] += kWeyl1;
      }
      const std::uint64_t p0 = std::uint64_t{kMul0} * ctr[0];
      const std::uint64_t p1 = std::uint64_t{kMul1} * ctr[2];
      const auto hi0 = static_cast<std::uint32_t>(p0 >> 32);
      const auto lo0 = static_cast<std::uint32_t>(p0);
      const auto hi1 = static_cast<std::uint32_t>(p1 >> 32);
      const auto lo1 = static_cast<std::uint32_t>(p1);
      ctr = Counter{hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    }
    return ctr;
  }
};

/// Converts 32 random bits to a float uniform in [0, 1) with 24 bits of resolution.
INFERKIT_HOST_DEVICE constexpr float uniform_float(std::uint32_t bits) noexcept {
  return static_cast<float>(bits >> 8) * 0x1.0p-24f;
}

/// Converts 64 random bits to a double uniform in [0, 1) with 53 bits of resolution.
INFERKIT_HOST_DEVICE constexpr double uniform_double(std::uint32_t hi, std::uint32_t lo) noexcept {
  const std::uint64_t bits = (std::uint64_t{hi} << 32) | lo;
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

/// A Philox stream: key = seed, counter = (stream, position). `Rng(seed, stream)` streams are
/// independent for different streams (e.g. one per sequence); `at(i)` jumps to any position.
class Rng {
 public:
  /// The stream `stream` of the generator keyed by `seed`, at position 0.
  INFERKIT_HOST_DEVICE constexpr explicit Rng(std::uint64_t seed, std::uint64_t stream = 0) noexcept
      : key_{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)},
        stream_(stream) {}

  /// The next 32 random bits.
  INFERKIT_HOST_DEVICE constexpr std::uint32_t next_u32() noexcept {
    if (lane_ == 4) {
      refill();
    }
    return block_[lane_++];
  }

  /// A float uniform in [0, 1).
  INFERKIT_HOST_DEVICE constexpr float uniform() noexcept { return uniform_float(next_u32()); }

  /// A double uniform in [0, 1).
  INFERKIT_HOST_DEVICE constexpr double uniform_double() noexcept {
    const std::uint32_t hi = next_u32();
    return ::inferkit::uniform_double(hi, next_u32());
  }

  /// An integer uniform in [0, n) for n >= 1 (Lemire's multiply-shift; bias below 2^-32 * n).
  INFERKIT_HOST_DEVICE constexpr std::uint32_t below(std::uint32_t n) noexcept {
    return static_cast<std::uint32_t>((std::uint64_t{next_u32()} * n) >> 32);
  }

  /// Repositions the stream at block `block_index` (4 outputs per block).
  INFERKIT_HOST_DEVICE constexpr void seek(std::uint64_t block_index) noexcept {
    position_ = block_index;
    lane_ = 4;
  }

 private:
  INFERKIT_HOST_DEVICE constexpr void refill() noexcept {
    const Philox4x32::Counter ctr{
        static_cast<std::uint32_t>(position_), static_cast<std::uint32_t>(position_ >> 32),
        static_cast<std::uint32_t>(stream_), static_cast<std::uint32_t>(stream_ >> 32)};
    block_ = Philox4x32::generate(ctr, key_);
    ++position_;
    lane_ = 0;
  }

  Philox4x32::Key key_;
  std::uint64_t stream_;
  std::uint64_t position_ = 0;
  Philox4x32::Counter block_{};
  std::size_t lane_ = 4;
};

}  // namespace inferkit
