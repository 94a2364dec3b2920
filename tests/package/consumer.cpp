// SPDX-License-Identifier: Apache-2.0
// A consumer of the installed package, and the README's quickstart verbatim (kept in sync).
#include <cstdio>
#include <inferkit/inferkit.hpp>

int main() {
  const inferkit::ModelShape model = inferkit::model_preset("llama-3-70b");
  const double kv_bytes = inferkit::kv_bytes_per_token(model, {inferkit::DType::kBFloat16});
  inferkit::BlockAllocator pool(/*num_blocks=*/1024, /*block_size=*/16);
  const auto blocks = pool.allocate(4);  // a vector of ids, empty when the pool runs out (no error)
  std::printf("KV per token: %.0f bytes; %zu blocks allocated, %d free\n", kv_bytes, blocks.size(),
              pool.num_free_blocks());
}
