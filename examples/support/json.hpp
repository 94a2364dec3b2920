// SPDX-License-Identifier: Apache-2.0
// A small JSON writer for the examples' --json output (not part of the library): nested objects
// and arrays of numbers, strings and booleans, written in the order the fields are added, so an
// example can emit exactly the figures its text shows from the same values. Non-finite numbers
// become null.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace inferkit::examples {

/// Builds one JSON document. Keys are given to every member of an object and omitted for array
/// elements; `end()` closes the innermost object or array.
///
///     Json j;
///     j.begin().field("batch", 8).begin("speed").field("ratio", 0.93, "%.3f").end().end();
///     std::puts(j.str().c_str());  // {"batch":8,"speed":{"ratio":0.930}}
class Json {
 public:
  /// Opens an object (as a member `key` of the enclosing object, if given).
  Json& begin(std::string_view key = {}) { return open(key, '{'); }
  /// Opens an array.
  Json& begin_array(std::string_view key = {}) { return open(key, '['); }
  /// Closes the innermost object or array.
  Json& end() {
    text_.push_back(closers_.back());
    closers_.pop_back();
    first_ = false;
    return *this;
  }

  /// A number, printed with `format` (printf, for a double); NaN and infinities become null.
  Json& field(std::string_view key, double value, const char* format = "%.6g") {
    prefix(key);
    if (!std::isfinite(value)) {
      text_ += "null";
    } else {
      char buf[64];
      std::snprintf(buf, sizeof buf, format, value);
      text_ += buf;
    }
    return *this;
  }
  /// An integer.
  template <class Int,
            std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>, int> = 0>
  Json& field(std::string_view key, Int value) {
    prefix(key);
    text_ += std::to_string(value);
    return *this;
  }
  /// A boolean.
  Json& field(std::string_view key, bool value) {
    prefix(key);
    text_ += value ? "true" : "false";
    return *this;
  }
  /// A string (escaped).
  Json& field(std::string_view key, std::string_view value) {
    prefix(key);
    quote(value);
    return *this;
  }
  /// A string literal (not a bool).
  Json& field(std::string_view key, const char* value) {
    return field(key, std::string_view(value));
  }
  /// A string.
  Json& field(std::string_view key, const std::string& value) {
    return field(key, std::string_view(value));
  }

  /// The document so far.
  [[nodiscard]] const std::string& str() const { return text_; }

 private:
  Json& open(std::string_view key, char bracket) {
    prefix(key);
    text_.push_back(bracket);
    closers_.push_back(bracket == '{' ? '}' : ']');
    first_ = true;
    return *this;
  }
  void prefix(std::string_view key) {
    if (!first_) text_.push_back(',');
    first_ = false;
    if (!key.empty()) {
      quote(key);
      text_.push_back(':');
    }
  }
  void quote(std::string_view s) {
    text_.push_back('"');
    for (char c : s) {
      if (c == '"' || c == '\\') {
        text_.push_back('\\');
        text_.push_back(c);
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
        text_ += buf;
      } else {
        text_.push_back(c);
      }
    }
    text_.push_back('"');
  }

  std::string text_;
  std::vector<char> closers_;
  bool first_ = true;
};

}  // namespace inferkit::examples
