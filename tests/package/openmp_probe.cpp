// SPDX-License-Identifier: Apache-2.0
// Says whether the installed package compiled this consumer with OpenMP (INFERKIT_OPENMP).
#include <cstdio>
#include <inferkit/core/config.hpp>

int main() { std::printf("openmp: %s\n", INFERKIT_HAS_OPENMP ? "on" : "off"); }
