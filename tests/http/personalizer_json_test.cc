// How the Personalizer API reads the numbers of a request body (ParseBody): each as the
// correctly rounded double of its text (absl's from_chars is the oracle), integers as the
// integer types RapidJSON gives them, zero written with a fraction or an exponent as ±0.0, and
// malformed numbers refused where RapidJSON refuses them.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/api/http/personalizer_internal.h"

namespace bandit::server::http {
namespace BANDIT_UNITY_ID {

uint64_t Bits(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}

// The value ParseBody reads for `number`, as the member of an object.
rapidjson::Value ReadNumber(const std::string& number, rapidjson::Document* doc) {
  const absl::Status s = ParseBody(absl::StrCat("{\"x\":", number, "}"), 64, doc);
  EXPECT_TRUE(s.ok()) << number << ": " << s;
  if (!s.ok() || !doc->IsObject() || !doc->HasMember("x")) return rapidjson::Value();
  return rapidjson::Value((*doc)["x"], doc->GetAllocator());
}

// The correctly rounded double of `number`'s text, by another library.
double Exact(const std::string& number) {
  double d = 0;
  EXPECT_TRUE(absl::SimpleAtod(number, &d)) << number;
  return d;
}

TEST(PersonalizerJson, ZeroWithAFractionOrAnExponentIsSignedZero) {
  // RapidJSON 1.1.0's full-precision conversion read the first as -2^-640 and the second as
  // +2^-640: a zero significand it normalizes.
  for (const std::string number :
       {"0.000000000000000000000000", "-0.000000000000000000000000", "0.0e-30", "-0.0e-30",
        "0e-400", "0E+5", "0.0", "-0.0", "0.00000000000000000000000000000000000000000000000000"}) {
    rapidjson::Document doc;
    const rapidjson::Value v = ReadNumber(number, &doc);
    ASSERT_TRUE(v.IsDouble()) << number;
    EXPECT_EQ(v.GetDouble(), 0.0) << number;
    EXPECT_EQ(std::signbit(v.GetDouble()), number[0] == '-') << number;
  }
}

TEST(PersonalizerJson, IntegersKeepRapidJsonsIntegerTypes) {
  struct Case {
    std::string text;
    bool is_int, is_uint, is_int64, is_uint64, is_double;
  };
  const std::vector<Case> cases = {
      {"0", true, true, true, true, false},
      {"-0", true, true, true, true, false},  // an integer zero, not -0.0
      {"2147483647", true, true, true, true, false},
      {"2147483648", false, true, true, true, false},
      {"-2147483648", true, false, true, false, false},
      {"-2147483649", false, false, true, false, false},
      {"4294967296", false, false, true, true, false},
      {"9223372036854775808", false, false, false, true, false},
      {"-9223372036854775808", false, false, true, false, false},
      {"18446744073709551615", false, false, false, true, false},
      {"18446744073709551616", false, false, false, false, true},
  };
  for (const Case& c : cases) {
    rapidjson::Document doc;
    const rapidjson::Value v = ReadNumber(c.text, &doc);
    EXPECT_EQ(v.IsInt(), c.is_int) << c.text;
    EXPECT_EQ(v.IsUint(), c.is_uint) << c.text;
    EXPECT_EQ(v.IsInt64(), c.is_int64) << c.text;
    EXPECT_EQ(v.IsUint64(), c.is_uint64) << c.text;
    EXPECT_EQ(v.IsDouble(), c.is_double) << c.text;
    if (c.is_double) {
      EXPECT_EQ(Bits(v.GetDouble()), Bits(Exact(c.text))) << c.text;
    } else if (c.text[0] == '-') {
      int64_t expected = 0;
      ASSERT_TRUE(absl::SimpleAtoi(c.text, &expected));
      EXPECT_EQ(v.GetInt64(), expected) << c.text;
    } else {
      uint64_t expected = 0;
      ASSERT_TRUE(absl::SimpleAtoi(c.text, &expected));
      EXPECT_EQ(v.GetUint64(), expected) << c.text;
    }
  }
}

TEST(PersonalizerJson, DoublesAreTheCorrectlyRoundedValueOfTheirText) {
  std::vector<std::string> numbers = {
      "0.1", "-0.1", "0.30000000000000004", "1.7976931348623157e308", "2.2250738585072011e-308",
      "2.2250738585072014e-308", "4.9e-324", "1e-320", "2.4703282292062328e-324",
      "9007199254740993.0", "3.141592653589793238462643383279502884197169399375105820974944",
      // 1 + 2^-53 exactly (a tie, rounds to even: 1.0), and either side of it.
      "1.00000000000000011102230246251565404236316680908203125",
      "1.00000000000000011102230246251565404236316680908203124",
      "1.00000000000000011102230246251565404236316680908203126",
      "0.000000000000000000000000000000000000000000000000001", "123456789012345678901234567890e-5",
      "-1e-7", "1E+22", "1e23", "8.98846567431158e307"};
  // And a deterministic spread: 1-25 digits (some leading zeros), a point somewhere, exponents
  // from -300 to 280.
  std::mt19937_64 rng(20261203);
  for (int i = 0; i < 3000; ++i) {
    std::string digits;
    const int n = 1 + static_cast<int>(rng() % 25);
    for (int k = 0; k < n; ++k) digits.push_back(static_cast<char>('0' + rng() % 10));
    if (digits.size() > 1 && digits[0] == '0') digits.insert(1, ".");  // 0.xxx, JSON's form
    else if (rng() % 2 && digits.size() > 1) digits.insert(1 + rng() % (digits.size() - 1), ".");
    const int exponent = static_cast<int>(rng() % 581) - 300;
    numbers.push_back(absl::StrCat(rng() % 2 ? "-" : "", digits, "e", exponent));
  }
  for (const std::string& number : numbers) {
    rapidjson::Document doc;
    const rapidjson::Value v = ReadNumber(number, &doc);
    ASSERT_TRUE(v.IsNumber()) << number;
    EXPECT_EQ(Bits(v.GetDouble()), Bits(Exact(number))) << number;
  }
}

TEST(PersonalizerJson, MalformedNumbersAreRefusedWhereRapidJsonRefusesThem) {
  for (const std::string body : {"{\"x\":1e400}", "{\"x\":-}", "{\"x\":01}", "{\"x\":1.}",
                                 "{\"x\":1e}", "{\"x\":.5}", "{\"x\":1.5e+}", "[1,2,3e999]"}) {
    rapidjson::Document own;
    own.Parse<rapidjson::kParseFullPrecisionFlag>(body.data(), body.size());
    ASSERT_TRUE(own.HasParseError()) << body;
    rapidjson::Document doc;
    const absl::Status s = ParseBody(body, 64, &doc);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_EQ(s.message(),
              absl::StrCat("the request body is not valid JSON: ",
                           rapidjson::GetParseError_En(own.GetParseError()), " at byte ",
                           own.GetErrorOffset()))
        << body;
  }
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit::server::http
