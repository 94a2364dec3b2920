// SPDX-License-Identifier: Apache-2.0
// Test access to BlockAllocator's reference counts: the kv and prefix tests check what happens
// at a block's refcount limit (2^31 - 1 owners), which 2^31 real retains would take seconds to
// reach (half a minute under ASan). The peer moves a refcount there directly, as that many
// retain or free calls on an in-use block would.
#pragma once

#include <cstdint>
#include <inferkit/kv/block_allocator.hpp>

namespace inferkit::detail {

struct BlockAllocatorPeer {
  // Adds `owners` (may be negative) references to block `b`, which must be in use before and
  // after: the refcount is the only thing that changes.
  static void add_owners(BlockAllocator& a, BlockId b, std::int64_t owners) {
    const std::int64_t refs = std::int64_t{a.ref_count(b)} + owners;
    INFERKIT_CHECK(
        a.state(b) == BlockState::kInUse && refs >= 1 && refs <= BlockAllocator::kMaxRefCount,
        ErrorCode::kInvalidArgument, "add_owners: refcount out of [1, kMaxRefCount]");
    a.ref_count_[static_cast<std::size_t>(b)] = static_cast<std::int32_t>(refs);
  }
};

}  // namespace inferkit::detail
