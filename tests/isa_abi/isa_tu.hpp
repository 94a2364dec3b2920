// SPDX-License-Identifier: Apache-2.0
// What each TU of the isa_abi test reports: the ISA-named namespace its flags give, the kernel
// its paged_decode calls, and the output of one decode step of a fixed problem.
#pragma once

#include <string>
#include <vector>

struct TuReport {
  std::string abi;                    ///< INFERKIT_ISA_ABI in this TU
  bool has_avx2 = false;              ///< the TU itself is compiled with AVX2+FMA+F16C
  const void* kernel = nullptr;       ///< the paged attention entry this TU's dispatch selects
  const void* avx2_kernel = nullptr;  ///< this TU's detail::avx2 entry
  std::vector<float> out;             ///< paged_decode's output
};

/// The problem: 2 sequences of 37 and 70 tokens, 8 query / 2 KV heads, head_dim 128, fp16 KV,
/// pages of 16 in shuffled order; q and KV from a fixed formula.
TuReport run_plain_tu();
TuReport run_avx2_tu();
