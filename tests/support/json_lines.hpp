// SPDX-License-Identifier: Apache-2.0
// Test helper: a tiny JSON reader for golden files written one object per line (JSON Lines), such
// as tests/data/smollm2_tokens.jsonl. It reads objects, arrays, strings (every escape, surrogate
// pairs included), integers, booleans and null, which is all the golden files use; anything else
// fails the test with the line and column.
#pragma once

#include <cstdint>
#include <fstream>
#include <inferkit/model/detail/utf8.hpp>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace inferkit::test {

/// A parsed JSON value.
struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = Kind::kNull;
  bool boolean = false;
  double number = 0.0;
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;

  /// The member `key` of an object; throws std::runtime_error when absent.
  [[nodiscard]] const JsonValue& at(const std::string& key) const {
    const auto it = object.find(key);
    if (kind != Kind::kObject || it == object.end()) throw std::runtime_error("no key " + key);
    return it->second;
  }
};

/// Parses one JSON text; throws std::runtime_error with the column on malformed input.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  JsonValue parse() {
    JsonValue v = value();
    skip_space();
    if (pos_ != text_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("json: " + what + " at column " + std::to_string(pos_ + 1));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\n'))
      ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  JsonValue value() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    JsonValue v;
    const char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      v.kind = JsonValue::Kind::kObject;
      if (eat('}')) return v;
      do {
        skip_space();
        if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a key");
        std::string key = string();
        expect(':');
        v.object.emplace(std::move(key), value());
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++pos_;
      v.kind = JsonValue::Kind::kArray;
      if (eat(']')) return v;
      do v.array.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = JsonValue::Kind::kString;
      v.string = string();
    } else if (literal("true")) {
      v.kind = JsonValue::Kind::kBool;
      v.boolean = true;
    } else if (literal("false")) {
      v.kind = JsonValue::Kind::kBool;
    } else if (literal("null")) {
      v.kind = JsonValue::Kind::kNull;
    } else {
      const std::size_t start = pos_;
      while (pos_ < text_.size() &&
             (std::string_view("+-.eE0123456789").find(text_[pos_]) != std::string_view::npos))
        ++pos_;
      if (start == pos_) fail("unexpected character");
      v.kind = JsonValue::Kind::kNumber;
      v.number = std::stod(std::string(text_.substr(start, pos_ - start)));
    }
    return v;
  }
  std::uint32_t hex4() {
    if (pos_ + 4 > text_.size()) fail("short \\u escape");
    const std::uint32_t v =
        static_cast<std::uint32_t>(std::stoul(std::string(text_.substr(pos_, 4)), nullptr, 16));
    pos_ += 4;
    return v;
  }
  std::string string() {
    ++pos_;  // the opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && text_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            const std::uint32_t low = hex4();
            if (low < 0xDC00 || low >= 0xE000) fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xD800 && cp < 0xE000) {
            fail("unpaired surrogate");
          }
          detail::utf8_append(out, cp);
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

/// Every line of a JSON Lines file, parsed; empty lines are skipped. Throws std::runtime_error
/// naming the file and line on a malformed line or an unreadable file.
inline std::vector<JsonValue> read_json_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<JsonValue> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out.push_back(JsonParser(line).parse());
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(path + ":" + std::to_string(n) + ": " + e.what());
    }
  }
  return out;
}

}  // namespace inferkit::test
