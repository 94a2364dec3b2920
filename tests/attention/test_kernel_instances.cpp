// SPDX-License-Identifier: Apache-2.0
// kernel_instances.hpp: the paths its macros declare and instantiate are exactly the paths
// paged_attention_kernel() dispatches to in this build. A path the macros missed would be compiled
// again in every TU that declares its KV type extern; a path they add that nothing dispatches to
// would be compiled for nothing. (That the declaration keeps a TU from compiling its own copy is
// checked on the object files: attention.kernel_instances_extern in tests/CMakeLists.txt.)
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/attention/cpu/kernel_instances.hpp>
#include <inferkit/core/cpu_isa.hpp>
#include <inferkit/core/float16.hpp>
#include <string>
#include <tests/support/attention_kernels.hpp>
#include <vector>

namespace {

using namespace inferkit;

template <class KV>
using Kernel = void (*)(const detail::PagedAttentionProblem<KV>&);

#define INFERKIT_TEST_LIST_PATH(path, KV) \
  &detail::dispatch_paged_attention<detail::path::IsaKernels, KV>,

template <class KV>
void check_paths_match_dispatch() {
  const std::vector<Kernel<KV>> declared = {
      INFERKIT_CPU_ATTENTION_FOR_EACH_PATH(INFERKIT_TEST_LIST_PATH, KV)};
  std::vector<Kernel<KV>> dispatched;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kNeon}) {
    const Kernel<KV> k = detail::paged_attention_kernel<KV>(isa);
    INFO("path " << std::string(to_string(isa)));
    CHECK(std::find(declared.begin(), declared.end(), k) != declared.end());
    if (std::find(dispatched.begin(), dispatched.end(), k) == dispatched.end()) {
      dispatched.push_back(k);
    }
  }
  CHECK(dispatched.size() == declared.size());
}

TEST_CASE("kernel_instances: the declared paths are the dispatched paths, for every KV type") {
  check_paths_match_dispatch<float>();
  check_paths_match_dispatch<float16>();
  check_paths_match_dispatch<bfloat16>();
  check_paths_match_dispatch<float8_e4m3>();
  check_paths_match_dispatch<float8_e5m2>();
  check_paths_match_dispatch<std::int8_t>();
}

}  // namespace
