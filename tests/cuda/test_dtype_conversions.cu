// SPDX-License-Identifier: Apache-2.0
// Device tests for the core storage types and the RNG: the same header functions run in a kernel
// over every bit pattern (decode) and over every representable value, every midpoint and 1M
// random floats (encode), and the device results must equal the host's bit for bit. Philox and
// Rng streams must match the host too, so sampling is identical on either side.
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/core/int4.hpp>
#include <inferkit/core/rng.hpp>
#include <limits>
#include <string>
#include <tests/support/float_reference.hpp>
#include <vector>

namespace {

namespace test = inferkit::test;

void cuda_require(cudaError_t status, const char* what) {
  INFO(what << ": " << cudaGetErrorString(status));
  REQUIRE(status == cudaSuccess);
}

/// A device array of `count` elements of T, freed on scope exit.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    cuda_require(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)), "cudaMalloc");
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    cuda_require(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
                 "cudaMemcpy to device");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data_); }

  T* data() const { return data_; }
  std::vector<T> to_host() const {
    std::vector<T> host(count_);
    cuda_require(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost),
                 "cudaMemcpy to host");
    return host;
  }

 private:
  T* data_ = nullptr;
  std::size_t count_;
};

constexpr unsigned kThreads = 256;
unsigned blocks_for(std::size_t count) {
  return static_cast<unsigned>((count + kThreads - 1) / kThreads);
}
void finish_launch() {
  cuda_require(cudaGetLastError(), "kernel launch");
  cuda_require(cudaDeviceSynchronize(), "kernel run");
}

// Kernels are templates (a non-template __global__ in a header would be defined twice at link).
template <class T>
__global__ void decode_all_kernel(std::uint32_t* out_float_bits, std::uint32_t count) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) {
    const float value = inferkit::to_float(T::from_bits(static_cast<decltype(T::bits)>(i)));
    out_float_bits[i] = inferkit::detail::float_to_bits(value);
  }
}

template <class T>
__global__ void encode_kernel(const float* in, std::uint32_t* out_bits, std::uint32_t count) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out_bits[i] = T(in[i]).bits;
}

template <class Generator>
__global__ void philox_kernel(const std::uint32_t* counters_keys, std::uint32_t* out,
                              std::uint32_t count) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) {
    const std::uint32_t* in = counters_keys + 6 * i;
    const typename Generator::Counter block =
        Generator::generate({in[0], in[1], in[2], in[3]}, {in[4], in[5]});
    for (int lane = 0; lane < 4; ++lane) out[4 * i + lane] = block[lane];
  }
}

template <class Stream>
__global__ void rng_stream_kernel(std::uint64_t seed, std::uint32_t draws, std::uint32_t* out,
                                  std::uint32_t streams) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < streams) {
    Stream rng(seed, i);
    for (std::uint32_t d = 0; d < draws; ++d) out[i * draws + d] = rng.next_u32();
  }
}

template <class T>
__global__ void int4_kernel(std::uint32_t* out, std::uint32_t count) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) {
    const auto byte = static_cast<std::uint8_t>(i);
    const auto lo = static_cast<T>(inferkit::sign_extend_int4(inferkit::low_nibble(byte)));
    const auto hi = static_cast<T>(inferkit::sign_extend_int4(inferkit::high_nibble(byte)));
    out[i] = static_cast<std::uint32_t>(static_cast<std::uint8_t>(lo)) |
             (static_cast<std::uint32_t>(static_cast<std::uint8_t>(hi)) << 8) |
             (static_cast<std::uint32_t>(
                  inferkit::pack_nibbles(inferkit::low_nibble(byte), inferkit::high_nibble(byte)))
              << 16);
  }
}

/// Every code decoded on the device equals the host's decode bit for bit.
template <class T>
void check_decode_matches_host(const test::FloatFormatSpec& spec) {
  const std::uint32_t count = spec.code_count();
  DeviceBuffer<std::uint32_t> device(count);
  decode_all_kernel<T><<<blocks_for(count), kThreads>>>(device.data(), count);
  finish_launch();
  const std::vector<std::uint32_t> got = device.to_host();
  test::MismatchLog log;
  for (std::uint32_t code = 0; code < count; ++code) {
    const std::uint32_t expected =
        test::float_bits(inferkit::to_float(T::from_bits(static_cast<decltype(T::bits)>(code))));
    if (got[code] != expected) log.add("device decode", code, got[code], expected);
  }
  CHECK(log.report() == "");
}

/// Representable values, midpoints and their neighbours, specials and random floats, both signs.
std::vector<float> encode_inputs(const test::FloatFormatSpec& spec, int random_count) {
  const test::ReferenceEncoder reference(spec);
  const std::vector<double>& magnitudes = reference.magnitudes();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> inputs = {inf,
                               std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::signaling_NaN(),
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::denorm_min(),
                               static_cast<float>(reference.overflow_threshold())};
  for (std::size_t i = 0; i < magnitudes.size(); ++i) {
    inputs.push_back(static_cast<float>(magnitudes[i]));
    if (i + 1 < magnitudes.size()) {
      const auto mid = static_cast<float>((magnitudes[i] + magnitudes[i + 1]) / 2.0);
      inputs.insert(inputs.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, inf)});
    }
  }
  inferkit::Rng rng(0xC0DA);
  for (int i = 0; i < random_count; ++i) inputs.push_back(std::bit_cast<float>(rng.next_u32()));
  const std::size_t positive = inputs.size();
  for (std::size_t i = 0; i < positive; ++i) inputs.push_back(-inputs[i]);
  return inputs;
}

/// The device's float -> T equals the host's bit for bit on `encode_inputs`.
template <class T>
void check_encode_matches_host(const test::FloatFormatSpec& spec) {
  const std::vector<float> inputs = encode_inputs(spec, 1 << 20);
  const auto count = static_cast<std::uint32_t>(inputs.size());
  const DeviceBuffer<float> device_in(inputs);
  DeviceBuffer<std::uint32_t> device_out(count);
  encode_kernel<T><<<blocks_for(count), kThreads>>>(device_in.data(), device_out.data(), count);
  finish_launch();
  const std::vector<std::uint32_t> got = device_out.to_host();
  test::MismatchLog log;
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint32_t expected = T(inputs[i]).bits;
    if (got[i] != expected) log.add("device encode", test::float_bits(inputs[i]), got[i], expected);
  }
  CHECK(log.report() == "");
}

}  // namespace

TEST_CASE("float16: device conversions equal the host bit for bit", "[cuda][float16]") {
  check_decode_matches_host<inferkit::float16>(test::kFloat16Spec);
  check_encode_matches_host<inferkit::float16>(test::kFloat16Spec);
}

TEST_CASE("bfloat16: device conversions equal the host bit for bit", "[cuda][bfloat16]") {
  check_decode_matches_host<inferkit::bfloat16>(test::kBFloat16Spec);
  check_encode_matches_host<inferkit::bfloat16>(test::kBFloat16Spec);
}

TEST_CASE("float8_e4m3: device conversions equal the host bit for bit", "[cuda][float8]") {
  check_decode_matches_host<inferkit::float8_e4m3>(test::kFloat8E4M3Spec);
  check_encode_matches_host<inferkit::float8_e4m3>(test::kFloat8E4M3Spec);
}

TEST_CASE("float8_e5m2: device conversions equal the host bit for bit", "[cuda][float8]") {
  check_decode_matches_host<inferkit::float8_e5m2>(test::kFloat8E5M2Spec);
  check_encode_matches_host<inferkit::float8_e5m2>(test::kFloat8E5M2Spec);
}

TEST_CASE("int4: device unpacking and sign extension equal the host", "[cuda][int4]") {
  constexpr std::uint32_t kBytes = 256;
  DeviceBuffer<std::uint32_t> device(kBytes);
  int4_kernel<std::int8_t><<<1, kBytes>>>(device.data(), kBytes);
  finish_launch();
  const std::vector<std::uint32_t> got = device.to_host();
  for (std::uint32_t i = 0; i < kBytes; ++i) {
    const auto byte = static_cast<std::uint8_t>(i);
    const auto lo =
        static_cast<std::uint8_t>(inferkit::sign_extend_int4(inferkit::low_nibble(byte)));
    const auto hi =
        static_cast<std::uint8_t>(inferkit::sign_extend_int4(inferkit::high_nibble(byte)));
    const std::uint32_t expected = lo | (std::uint32_t{hi} << 8) | (i << 16);
    REQUIRE(got[i] == expected);
  }
}

TEST_CASE("Philox4x32: device blocks equal the host and the known-answer vector", "[cuda][rng]") {
  using inferkit::Philox4x32;
  constexpr std::uint32_t kCount = 4096;
  std::vector<std::uint32_t> counters_keys(6 * kCount, 0u);  // item 0: all-zero KAT input
  inferkit::Rng rng(0x9A11);
  for (std::size_t i = 6; i < counters_keys.size(); ++i) counters_keys[i] = rng.next_u32();
  const DeviceBuffer<std::uint32_t> device_in(counters_keys);
  DeviceBuffer<std::uint32_t> device_out(4 * kCount);
  philox_kernel<Philox4x32>
      <<<blocks_for(kCount), kThreads>>>(device_in.data(), device_out.data(), kCount);
  finish_launch();
  const std::vector<std::uint32_t> got = device_out.to_host();

  // Random123 known-answer vector: counter 0, key 0.
  CHECK(got[0] == 0x6627e8d5u);
  CHECK(got[1] == 0xe169c58du);
  CHECK(got[2] == 0xbc57ac4cu);
  CHECK(got[3] == 0x9b00dbd8u);
  long mismatches = 0;
  for (std::uint32_t i = 0; i < kCount; ++i) {
    const std::uint32_t* in = &counters_keys[6 * i];
    const Philox4x32::Counter host =
        Philox4x32::generate({in[0], in[1], in[2], in[3]}, {in[4], in[5]});
    for (int lane = 0; lane < 4; ++lane) {
      mismatches +=
          got[4 * i + static_cast<std::uint32_t>(lane)] == host[static_cast<std::size_t>(lane)] ? 0
                                                                                                : 1;
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("Rng: device streams equal the host streams", "[cuda][rng]") {
  constexpr std::uint32_t kStreams = 1024;
  constexpr std::uint32_t kDraws = 9;  // crosses two Philox block refills
  constexpr std::uint64_t kSeed = 0x5EED'0000'0000'0042ull;
  DeviceBuffer<std::uint32_t> device(kStreams * kDraws);
  rng_stream_kernel<inferkit::Rng>
      <<<blocks_for(kStreams), kThreads>>>(kSeed, kDraws, device.data(), kStreams);
  finish_launch();
  const std::vector<std::uint32_t> got = device.to_host();
  long mismatches = 0;
  for (std::uint32_t stream = 0; stream < kStreams; ++stream) {
    inferkit::Rng host(kSeed, stream);
    for (std::uint32_t d = 0; d < kDraws; ++d) {
      mismatches += got[stream * kDraws + d] == host.next_u32() ? 0 : 1;
    }
  }
  CHECK(mismatches == 0);
}
