// SPDX-License-Identifier: Apache-2.0
// A consumer of the installed package: includes the umbrella header and uses a few parts.
#include <cstdio>
#include <inferkit/inferkit.hpp>

int main() {
  inferkit::Rng rng(1);
  const auto bits = rng.next_u32();
  std::printf("inferkit consumer ok (%u)\n", bits);
  return 0;
}
