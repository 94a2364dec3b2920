// SPDX-License-Identifier: Apache-2.0
// The isa_abi test (CMakeLists.txt): two TUs of one program, compiled with different -m flags,
// each call paged_decode. Checks that (1) the TUs' ISA-named namespaces differ, (2) each TU's
// dispatch selects a kernel whose symbol is in its own namespace (dladdr names it), so neither
// runs the other's copy (before the namespaces, the linker kept one copy of every inline kernel
// function for both TUs), (3) both outputs match a double-precision reference. Prints
// "isa_abi: ok, path <cpu_isa>" on success; run also with INFERKIT_CPU_ISA=baseline.
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <inferkit/core/cpu_isa.hpp>
#include <inferkit/core/float16.hpp>
#include <string>
#include <vector>

#include "isa_tu.hpp"

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what.c_str());
    ++failures;
  }
}

/// The mangled name of the function at `p` (empty if dladdr does not know it).
std::string symbol_of(const void* p) {
  Dl_info info{};
  if (dladdr(p, &info) == 0 || info.dli_sname == nullptr) return {};
  return info.dli_sname;
}

/// The reference output of isa_tu.hpp's problem, in double (same data formulas as isa_tu.inc).
std::vector<double> reference() {
  constexpr int kHeads = 8, kKvHeads = 2, kDim = 128, kBlock = 16;
  const int indptr[] = {0, 3, 8};
  const int pages[] = {5, 0, 7, 2, 6, 1, 3, 4};
  const int len[] = {37, 70};
  const auto kv = [](std::size_t i, bool is_v) {
    return static_cast<double>(inferkit::to_float(
        inferkit::float16(is_v ? static_cast<float>((i * 53) % 97) / 97.0f - 0.5f
                               : static_cast<float>((i * 37) % 101) / 101.0f - 0.5f)));
  };
  std::vector<double> out(std::size_t{2} * kHeads * kDim);
  for (int s = 0; s < 2; ++s) {
    for (int h = 0; h < kHeads; ++h) {
      const std::size_t row = (std::size_t(s) * kHeads + h) * kDim;
      std::vector<double> logits(static_cast<std::size_t>(len[s]));
      double m = -INFINITY;
      const auto at = [&](int t) {
        const int block = pages[indptr[s] + t / kBlock];
        return ((std::size_t(block) * kKvHeads + h / 4) * kBlock + t % kBlock) * kDim;
      };
      for (int t = 0; t < len[s]; ++t) {
        double dot = 0.0;
        for (int d = 0; d < kDim; ++d) {
          const double qd = static_cast<float>(((row + d) * 29) % 89) / 89.0f - 0.5f;
          dot += qd * kv(at(t) + d, false);
        }
        logits[std::size_t(t)] = dot / std::sqrt(double(kDim));
        m = std::max(m, logits[std::size_t(t)]);
      }
      double sum = 0.0;
      for (int t = 0; t < len[s]; ++t) sum += std::exp(logits[std::size_t(t)] - m);
      for (int t = 0; t < len[s]; ++t) {
        const double p = std::exp(logits[std::size_t(t)] - m) / sum;
        for (int d = 0; d < kDim; ++d) out[row + d] += p * kv(at(t) + d, true);
      }
    }
  }
  return out;
}

void check_tu(const char* name, const TuReport& r, const std::vector<double>& want) {
  const std::string kernel = symbol_of(r.kernel);
  std::printf("%s: namespace %s, kernel %s\n", name, r.abi.c_str(), kernel.c_str());
  check(kernel.find(r.abi) != std::string::npos,
        std::string(name) + ": its paged_decode runs a kernel outside its namespace " + r.abi);
  double worst = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(r.out[i] - want[i]));
  std::printf("%s: max |out - reference| = %.3g\n", name, worst);
  check(worst <= 1e-5, std::string(name) + ": output differs from the reference");
}

}  // namespace

int main() {
  const inferkit::CpuIsa isa = inferkit::cpu_isa();
  const std::vector<double> want = reference();
  const TuReport plain = run_plain_tu();
  check(!plain.has_avx2, "tu_plain.cpp was compiled with AVX2 enabled: the test needs it plain");
  check_tu("tu_plain", plain, want);
  if (inferkit::cpu_isa_supported(inferkit::CpuIsa::kAvx2)) {  // tu_avx2's own code needs AVX2
    const TuReport avx2 = run_avx2_tu();
    check(avx2.has_avx2, "tu_avx2.cpp was not compiled with AVX2");
    check(avx2.abi != plain.abi, "both TUs have the ISA namespace " + plain.abi);
    check(avx2.avx2_kernel != plain.avx2_kernel,
          "the TUs share one copy of the avx2 kernel: the linker merged them");
    check_tu("tu_avx2", avx2, want);
  } else {
    std::printf("tu_avx2: not run (this CPU has no AVX2)\n");
  }
  if (failures != 0) return 1;
  std::printf("isa_abi: ok, path %s\n", std::string(inferkit::to_string(isa)).c_str());
  return 0;
}
