// SPDX-License-Identifier: Apache-2.0
// Tests for sim/trace_csv.hpp: well-formed traces (header, comments, blank lines, CRLF, optional
// prefix group, unsorted arrivals), every malformed field reported with its line and column,
// limits, and a file round trip. The parser is also fuzzed (tests/fuzz/fuzz_trace_csv.cpp).
#include <catch2/catch.hpp>
#include <cstdio>
#include <inferkit/sim/trace_csv.hpp>
#include <string>
#include <tests/support/error_code.hpp>

using namespace inferkit;
using inferkit::test::code_of;

TEST_CASE("parse_trace_csv: header, comments, CRLF, optional group, sorted by arrival",
          "[sim][trace_csv]") {
  const std::string text =
      "arrival_s,prompt_tokens,output_tokens,prefix_group\r\n"
      "# a comment\n"
      "\n"
      "0.5, 100, 20, 3\r\n"
      "0.25,7,1\n"
      "  1e1 ,64,64,\n"
      "0.5,9,9,0";
  TraceOptions options;
  options.prefix_tokens = 32;
  const std::vector<SimRequestSpec> t = parse_trace_csv(text, options);
  REQUIRE(t.size() == 4);
  CHECK(t[0].arrival_s == 0.25);
  CHECK(t[0].prompt_tokens == 7);
  CHECK(t[0].prefix_group == -1);
  CHECK(t[1].arrival_s == 0.5);
  CHECK(t[1].prompt_tokens == 100);  // ties keep file order
  CHECK(t[1].prefix_group == 3);
  CHECK(t[1].prefix_tokens == 32);
  CHECK(t[2].prompt_tokens == 9);
  CHECK(t[2].prefix_group == 0);
  CHECK(t[3].arrival_s == 10.0);
  CHECK(t[3].prefix_group == -1);
  CHECK(parse_trace_csv("").empty());
  CHECK(parse_trace_csv("arrival_s,prompt_tokens,output_tokens\n").empty());
}

TEST_CASE("parse_trace_csv: malformed input names the line, column and value", "[sim][trace_csv]") {
  const auto error = [](const std::string& text) {
    std::string message;
    CHECK(code_of([&] { (void)parse_trace_csv(text); }, &message) == ErrorCode::kInvalidArgument);
    return message;
  };
  CHECK_THAT(error("0,10,5\n1,abc,5\n"), Catch::Contains("line 2: prompt_tokens = 'abc'"));
  CHECK_THAT(error("0,0,5\n"), Catch::Contains("prompt_tokens = '0'"));
  CHECK_THAT(error("0,10,-5\n"), Catch::Contains("output_tokens = '-5'"));
  CHECK_THAT(error("0,10,5.5\n"), Catch::Contains("output_tokens = '5.5'"));
  CHECK_THAT(error("0,10\n"), Catch::Contains("3 or 4 columns"));
  CHECK_THAT(error("0,1,1,1,1\n"), Catch::Contains("3 or 4 columns"));
  CHECK_THAT(error("0,1,1,1,1,1,1\n"), Catch::Contains("more than 4 columns"));
  CHECK_THAT(error("-1,10,5\n"), Catch::Contains("arrival_s = '-1'"));
  CHECK_THAT(error("nan,10,5\n0,1,x\n"), Catch::Contains("line 2"));  // 'nan' is a header
  CHECK_THAT(error("0,1,1\nnan,10,5\n"), Catch::Contains("arrival_s = 'nan'"));
  CHECK_THAT(error("inf,10,5\n0,1,1\ninf,1,1"), Catch::Contains("line 3"));
  CHECK_THAT(error("0,99999999999999999999,5\n"), Catch::Contains("prompt_tokens"));
  CHECK_THAT(error("0,10,5,-2\n"), Catch::Contains("prefix_group = '-2'"));
  CHECK_THAT(error("0,10,5,x\n"), Catch::Contains("prefix_group = 'x'"));
  const std::string long_field(100, '7');
  CHECK_THAT(error("0," + long_field + ",1\n"), Catch::Contains("..."));
  TraceOptions few;
  few.max_requests = 2;
  std::string message;
  CHECK(code_of([&] { (void)parse_trace_csv("0,1,1\n0,1,1\n0,1,1\n", few); }, &message) ==
        ErrorCode::kInvalidArgument);
  CHECK_THAT(message, Catch::Contains("line 3"));
}

TEST_CASE("read_trace_csv: reads a file; a missing file is an Error", "[sim][trace_csv]") {
  const std::string path = "inferkit_test_trace.csv";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  std::fputs("arrival_s,prompt_tokens,output_tokens\n0,12,3\n1.5,40,8\n", f);
  std::fclose(f);
  const auto t = read_trace_csv(path);
  std::remove(path.c_str());
  REQUIRE(t.size() == 2);
  CHECK(t[1].output_tokens == 8);
  CHECK(code_of([] { (void)read_trace_csv("/nonexistent/trace.csv"); }) ==
        ErrorCode::kInvalidArgument);
}
