// SPDX-License-Identifier: Apache-2.0
// isa_tu.inc compiled with -mavx2 -mfma -mf16c -mbmi -mbmi2 (CMakeLists.txt).
#define ISA_TU_FUNCTION run_avx2_tu
#include "isa_tu.inc"
