// SPDX-License-Identifier: Apache-2.0
// Tests for core/cpu_isa.hpp: the CPU probe is self-consistent, INFERKIT_CPU_ISA's values are
// parsed exactly (known names, "auto", empty, unknown, too long, wrong case), an unsupported or
// unknown request is refused with the right code, and the process's choice agrees with the probe.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <inferkit/core/cpu_isa.hpp>
#include <string>
#include <string_view>

namespace {

using inferkit::cpu_isa_supported;
using inferkit::CpuIsa;
using inferkit::ErrorCode;
using inferkit::detail::choose_cpu_isa;
using inferkit::detail::CpuIsaChoice;

constexpr CpuIsa kAll[] = {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kNeon};

}  // namespace

TEST_CASE("cpu_isa: names are distinct and lowercase", "[core][cpu_isa]") {
  CHECK(to_string(CpuIsa::kBaseline) == "baseline");
  CHECK(to_string(CpuIsa::kAvx2) == "avx2");
  CHECK(to_string(CpuIsa::kAvx512) == "avx512");
  CHECK(to_string(CpuIsa::kNeon) == "neon");
}

TEST_CASE("cpu_isa: the probe is consistent with the build and the CPU", "[core][cpu_isa]") {
  const inferkit::detail::CpuFeatures f = inferkit::detail::probe_cpu_features();
  CHECK((!f.avx512 || f.avx2));  // the AVX-512 path also uses AVX2, FMA and F16C
  CHECK(cpu_isa_supported(CpuIsa::kBaseline));
  CHECK(cpu_isa_supported(CpuIsa::kAvx2) == (INFERKIT_CPU_DISPATCH && f.avx2));
  CHECK(cpu_isa_supported(CpuIsa::kAvx512) == (INFERKIT_CPU_DISPATCH && f.avx512));
  CHECK(cpu_isa_supported(CpuIsa::kNeon) == (INFERKIT_HAS_NEON != 0));
#if INFERKIT_CPU_DISPATCH && (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
  CHECK(f.avx2);  // a TU compiled for AVX2 runs on a CPU that has it
#endif
#if INFERKIT_CPU_DISPATCH && INFERKIT_HAS_AVX512
  CHECK(f.avx512);
#endif
}

TEST_CASE("cpu_isa: no request, empty or auto picks the best supported path", "[core][cpu_isa]") {
  CpuIsa best = CpuIsa::kBaseline;
  for (CpuIsa isa : {CpuIsa::kNeon, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (cpu_isa_supported(isa)) best = isa;
  }
  for (const char* request : {static_cast<const char*>(nullptr), "", "auto"}) {
    INFO((request == nullptr ? "(unset)" : request));
    const CpuIsaChoice c = choose_cpu_isa(request);
    CHECK(c.ok);
    CHECK(c.isa == best);
    CHECK(c.best == best);
    CHECK(c.requested[0] == '\0');
  }
}

TEST_CASE("cpu_isa: a known name is taken exactly when this build and CPU run it",
          "[core][cpu_isa]") {
  for (CpuIsa isa : kAll) {
    const std::string name(to_string(isa));
    INFO(name);
    const CpuIsaChoice c = choose_cpu_isa(name.c_str());
    CHECK(c.isa == isa);
    CHECK(c.ok == cpu_isa_supported(isa));
    if (!c.ok) {
      CHECK(c.error == ErrorCode::kUnsupported);
      CHECK(std::string_view(c.requested) == name);
    }
  }
  CHECK(choose_cpu_isa("baseline").ok);  // every build and CPU has it
}

TEST_CASE("cpu_isa: unknown, mistyped or padded names are invalid arguments", "[core][cpu_isa]") {
  for (const char* bad : {"sse2", "AVX2", "Avx512", "avx512 ", " avx2", "avx", "native", "0"}) {
    INFO(bad);
    const CpuIsaChoice c = choose_cpu_isa(bad);
    CHECK_FALSE(c.ok);
    CHECK(c.error == ErrorCode::kInvalidArgument);
    CHECK(std::string_view(c.requested) == bad);
    CHECK(c.best == choose_cpu_isa(nullptr).best);  // what kernels that cannot throw fall back to
  }
}

TEST_CASE("cpu_isa: a value longer than the kept prefix is cut, not overrun", "[core][cpu_isa]") {
  const std::string value(200, 'x');
  const CpuIsaChoice c = choose_cpu_isa(value.c_str());
  CHECK_FALSE(c.ok);
  CHECK(c.error == ErrorCode::kInvalidArgument);
  CHECK(std::strlen(c.requested) == sizeof(c.requested) - 1);
  CHECK(std::string_view(c.requested) == value.substr(0, sizeof(c.requested) - 1));
}

TEST_CASE("cpu_isa: the process's path is the environment's choice", "[core][cpu_isa]") {
  const CpuIsaChoice expected = choose_cpu_isa(std::getenv("INFERKIT_CPU_ISA"));
  if (expected.ok) {
    CHECK(inferkit::cpu_isa() == expected.isa);
    CHECK(inferkit::detail::kernel_isa() == expected.isa);
    CHECK(cpu_isa_supported(inferkit::cpu_isa()));
  } else {
    CHECK_THROWS_AS(inferkit::cpu_isa(), inferkit::Error);
    CHECK(inferkit::detail::kernel_isa() == expected.best);
  }
}
