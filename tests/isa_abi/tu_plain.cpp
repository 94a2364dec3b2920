// SPDX-License-Identifier: Apache-2.0
// isa_tu.inc compiled as a distribution compiles: no -m flag.
#define ISA_TU_FUNCTION run_plain_tu
#include "isa_tu.inc"
