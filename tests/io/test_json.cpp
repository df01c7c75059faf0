#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "genperf/error.h"
#include "genperf/json.h"

using namespace genperf;

namespace {

std::string error_of(std::string_view text) {
  try {
    Json::parse(text, "doc.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A random JSON value of bounded depth, built through the public API.
Json random_value(std::mt19937& rng, int depth) {
  const int kind = int(rng() % (depth > 3 ? 5 : 7));
  switch (kind) {
    case 0:
      return Json(nullptr);
    case 1:
      return Json(bool(rng() & 1));
    case 2: {
      const double choices[] = {0.0,
                                -1.0,
                                3.0,
                                1e-5,
                                0.1,
                                -2.5e300,
                                4e-310,
                                9007199254740993.0,
                                double(int32_t(rng())),
                                std::ldexp(double(rng()), -int(rng() % 60))};
      return Json(choices[rng() % 10]);
    }
    case 3:
    case 4: {
      std::string s;
      const int n = int(rng() % 12);
      for (int i = 0; i < n; ++i) {
        const uint32_t pick = rng() % 6;
        if (pick == 0)
          s += char(rng() % 0x20);  // control characters
        else if (pick == 1)
          s += "\xc3\xa9";  // é
        else if (pick == 2)
          s += "\xf0\x9f\x98\x80";  // U+1F600, a surrogate pair in \u form
        else if (pick == 3)
          s += "\"\\/";
        else
          s += char('a' + rng() % 26);
      }
      return Json(s);
    }
    case 5: {
      Json a = Json::Array{};
      const int n = int(rng() % 4);
      for (int i = 0; i < n; ++i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      Json o = Json::Object{};
      const int n = int(rng() % 4);
      for (int i = 0; i < n; ++i) o[std::string(1, char('a' + i))] = random_value(rng, depth + 1);
      return o;
    }
  }
}

}  // namespace

TEST(Json, ParsesValuesAndKeepsOrder) {
  const Json j =
      Json::parse(R"( {"b": [1, 2.5, -3e-7, true, false, null], "a": "x\n\"y\u00e9\ud83d\ude00", "c": {}} )");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.as_object()[0].first, "b");
  EXPECT_EQ(j.as_object()[1].first, "a");
  const auto& b = j.at("b").as_array();
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(b[0].as_int(), 1);
  EXPECT_EQ(b[1].as_number(), 2.5);
  EXPECT_EQ(b[2].as_number(), -3e-7);
  EXPECT_TRUE(b[3].as_bool());
  EXPECT_FALSE(b[4].as_bool());
  EXPECT_TRUE(b[5].is_null());
  EXPECT_EQ(j.at("a").as_string(), "x\n\"y\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_TRUE(j.at("c").is_object());
  EXPECT_EQ(j.find("zz"), nullptr);
  EXPECT_EQ(Json::parse("\"\\u0000\"").as_string(), std::string(1, '\0'));
  EXPECT_EQ(Json::parse("\"\\/\\b\\f\\r\\t\"").as_string(), "/\b\f\r\t");
  EXPECT_EQ(Json::parse("-0.0e+0").as_number(), 0.0);
  EXPECT_EQ(Json::parse("1E2").as_number(), 100.0);
  EXPECT_EQ(Json::parse("1e-400").as_number(), 0.0);  // underflow is fine, overflow is not
}

TEST(Json, DumpsNumbersStringsAndIndent) {
  EXPECT_EQ(Json(1e15).dump(), "1000000000000000");
  EXPECT_EQ(Json(-7.0).dump(), "-7");
  EXPECT_EQ(Json(0.1).dump(), "0.1");
  EXPECT_EQ(Json(1e-5).dump(), "1e-05");
  EXPECT_EQ(Json(9007199254740992.0 * 4).dump(), "36028797018963968");
  EXPECT_EQ(Json(NAN).dump(), "null");
  EXPECT_EQ(Json(INFINITY).dump(), "null");
  EXPECT_EQ(Json(std::string("a\"\\\x01\n\xc3\xa9")).dump(), "\"a\\\"\\\\\\u0001\\n\xc3\xa9\"");
  EXPECT_EQ(Json(std::string("\xff")).dump(), "\"\\ufffd\"");  // invalid UTF-8 never leaks out
  Json o;
  o["k"] = Json::Array{Json(1), Json(true)};
  o["e"] = Json::Object{};
  EXPECT_EQ(o.dump(), R"({"k":[1,true],"e":{}})");
  EXPECT_EQ(o.dump(2), "{\n  \"k\": [\n    1,\n    true\n  ],\n  \"e\": {}\n}");
  o["k"] = 5;  // replaces
  EXPECT_EQ(o.dump(), R"({"k":5,"e":{}})");
}

TEST(Json, RandomRoundTrip) {
  const unsigned seed = 20240611;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 3000; ++i) {
    const Json v = random_value(rng, 0);
    for (int indent : {-1, 2}) {
      const std::string text = v.dump(indent);
      const Json back = Json::parse(text);
      ASSERT_EQ(back.dump(), v.dump()) << text;
    }
  }
}

TEST(Json, RejectsMalformedInput) {
  const char* bad[] = {
      "",
      " ",
      "[1,]",
      "{\"a\":1,}",
      "[1,,2]",
      "[,1]",
      "01",
      "-01",
      "00",
      "1.",
      ".5",
      "+1",
      "1e",
      "1e+",
      "-",
      "[1 2]",
      "{\"a\" 1}",
      "{a:1}",
      "{\"a\":}",
      "\"abc",
      "\"\x01\"",
      "\"\\x\"",
      "\"\\u12\"",
      "\"\\u12g4\"",
      "\"\\ud800\"",
      "\"\\udc00\"",
      "\"\\ud800\\u0041\"",
      "\"\\ud800x\"",
      "tru",
      "nul",
      "falsey",
      "[",
      "{",
      "1 2",
      "1e999",
      "-1e999",
      "\"\xff\"",
      "\"\xc0\x80\"",
      "\"\xed\xa0\x80\"",
      "\"\xf4\x90\x80\x80\"",
      "\"\xe2\x82\"",
      "NaN",
      "Infinity",
      "[1]]",
      "{} {}",
      "[\"a\"\t,]",
      "'a'",
      "[1,\n]",
  };
  for (const char* text : bad) {
    const std::string e = error_of(text);
    EXPECT_NE(e.find("[json] doc.json: "), std::string::npos) << "accepted: " << text;
    EXPECT_NE(e.find(" at byte "), std::string::npos) << e;
  }
  EXPECT_NE(error_of(std::string("1\0", 2)).find("at byte 1"), std::string::npos);
  EXPECT_NE(error_of("[1,]").find("trailing comma in array at byte 3"), std::string::npos);
  EXPECT_NE(error_of("{\"a\":1,}").find("trailing comma in object at byte 7"), std::string::npos);
  EXPECT_NE(error_of("[01]").find("leading zero"), std::string::npos);
  EXPECT_NE(error_of("\"\\udc00\"").find("lone low surrogate"), std::string::npos);
  EXPECT_NE(error_of("\"a\nb\"").find("control character in string at byte 2"), std::string::npos);
}

TEST(Json, DepthLimit) {
  const std::string ok = std::string(512, '[') + std::string(512, ']');
  EXPECT_NO_THROW(Json::parse(ok));
  const std::string deep = std::string(513, '[') + std::string(513, ']');
  EXPECT_NE(error_of(deep).find("nesting deeper than 512"), std::string::npos);
  // Far deeper input stops at the limit instead of exhausting the stack.
  EXPECT_NE(error_of(std::string(1000000, '[')).find("nesting deeper"), std::string::npos);
  std::string objs;
  for (int i = 0; i < 600; ++i) objs += "{\"a\":";
  EXPECT_NE(error_of(objs).find("nesting deeper"), std::string::npos);
}

TEST(Json, TypedAccessErrors) {
  const Json j = Json::parse(R"({"n": 1.5, "s": "x", "big": 1e30, "neg": -9007199254740992})");
  EXPECT_THROW(j.at("n").as_int(), Error);
  EXPECT_THROW(j.at("big").as_int(), Error);
  EXPECT_EQ(j.at("neg").as_int(), -9007199254740992LL);
  EXPECT_THROW(j.at("s").as_number(), Error);
  EXPECT_THROW(j.at("s").as_array(), Error);
  EXPECT_THROW(j.at("missing"), Error);
  EXPECT_THROW(j.at("n").at("x"), Error);
  try {
    j.at("s").as_bool();
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[json] expected bool, found string");
  }
  Json a;
  a.push_back(1);
  a.push_back("two");
  EXPECT_EQ(a.dump(), R"([1,"two"])");
  EXPECT_THROW(a["k"], Error);
  Json s("x");
  EXPECT_THROW(s.push_back(1), Error);
}

TEST(Json, RandomBytesNeverCrash) {
  const unsigned seed = 77;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  const std::string alphabet = "[]{}\",:0123456789-+.eEtrufalsn \\u\xc3\xa9\x01";
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 24, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    try {
      const Json v = Json::parse(s);
      EXPECT_EQ(Json::parse(v.dump()).dump(), v.dump());
    } catch (const Error&) {
    }
  }
}

TEST(Json, ParseFileNamesTheFile) {
  try {
    Json::parse_file("/nonexistent/genperf/x.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/genperf/x.json"), std::string::npos);
  }
}
