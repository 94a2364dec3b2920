// SPDX-License-Identifier: Apache-2.0
// MappedFile: a read-only POSIX memory map of a whole file, RAII and move-only, under
// `GgufFile::open`. Model weights are then paged in by the kernel on first touch and shared with
// every other process that maps the same file, instead of being copied into the heap.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/error.hpp>
#include <span>
#include <string>
#include <utility>

namespace inferkit::detail {

class MappedFile {
 public:
  MappedFile() noexcept = default;

  /// Maps `path` read-only. Throws `Error{kInvalidArgument}` naming the path and the system's
  /// reason when it cannot be opened, is not a regular file, or cannot be mapped. An empty file
  /// maps to an empty span.
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, "cannot be opened");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      errno = err;
      fail(path, "cannot be inspected (fstat)");
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw_error(ErrorCode::kInvalidArgument, concat({"file '", path, "' is not a regular file"}));
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        errno = err;
        size_ = 0;
        fail(path, "cannot be memory-mapped");
      }
      data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);  // the mapping keeps the file alive
  }

  MappedFile(MappedFile&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  MappedFile& operator=(MappedFile&& other) noexcept {
    if (this != &other) {
      unmap();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() { unmap(); }

  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

 private:
  [[noreturn]] static void fail(const std::string& path, std::string_view what) {
    const int err = errno;
    throw_error(ErrorCode::kInvalidArgument,
                concat({"file '", path, "' ", what, ": ", std::strerror(err)}));
  }
  void unmap() noexcept {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
  }

  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace inferkit::detail
