/*
 * test_form.cpp - the form-body parser and its JSON form, directly and
 * through wi::api::FormBodyToJson.
 */
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/api.h"
#include "core/form.h"

namespace {

std::vector<std::pair<std::string, std::string>> Parse(const std::string &body,
                                                       bool *ok) {
  wi::Form form;
  *ok = wi::ParseForm(body, &form);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto &f : form.fields) out.emplace_back(f.name, f.value);
  return out;
}

using Pairs = std::vector<std::pair<std::string, std::string>>;

}  // namespace

TEST(FormParser, PairsInBodyOrderWithRepeats) {
  bool ok;
  EXPECT_EQ(Parse("a=1&b=2&b=3", &ok),
            (Pairs{{"a", "1"}, {"b", "2"}, {"b", "3"}}));
  EXPECT_TRUE(ok);
}

TEST(FormParser, PercentAndPlusDecoding) {
  bool ok;
  EXPECT_EQ(
      Parse("Body=It%27s+amazing%21&From=%2B14158675309&%C3%A9=%e2%82%ac", &ok),
      (Pairs{{"Body", "It's amazing!"},
             {"From", "+14158675309"},
             {"\xC3\xA9", "\xE2\x82\xAC"}}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(Parse("a=x%3Dy%26z&b=%2B+%20", &ok),
            (Pairs{{"a", "x=y&z"}, {"b", "+  "}}));
  EXPECT_TRUE(ok);
}

TEST(FormParser, EmptyPiecesNamesAndValues) {
  bool ok;
  EXPECT_EQ(Parse("", &ok), Pairs{});
  EXPECT_TRUE(ok);
  EXPECT_EQ(Parse("&&a&b=&=c&=&", &ok),
            (Pairs{{"a", ""}, {"b", ""}, {"", "c"}, {"", ""}}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(Parse("a==b", &ok), (Pairs{{"a", "=b"}}));
  EXPECT_TRUE(ok);
}

TEST(FormParser, MalformedEscapesRefused) {
  for (const char *bad :
       {"a=%", "a=%2", "a=%zz", "%g0=1", "a=1&b=%2x", "a=%%41"}) {
    bool ok = true;
    EXPECT_TRUE(Parse(bad, &ok).empty()) << bad;
    EXPECT_FALSE(ok) << bad;
  }
}

// Undecoded components view the body, decoded ones the form's storage;
// both stay valid however many fields there are.
TEST(FormParser, ViewsStayValid) {
  std::string body;
  for (int i = 0; i < 200; ++i)
    body += "n" + std::to_string(i) + "=v%20" + std::to_string(i) + "&";
  wi::Form form;
  ASSERT_TRUE(wi::ParseForm(body, &form));
  ASSERT_EQ(form.fields.size(), 200u);
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(form.fields[i].name, "n" + std::to_string(i));
    EXPECT_EQ(form.fields[i].value, "v " + std::to_string(i));
  }
  EXPECT_GE(form.fields[0].name.data(), body.data());
  EXPECT_LT(form.fields[0].name.data(), body.data() + body.size());
}

TEST(FormParser, BytesPassThroughUnchecked) {
  bool ok;
  EXPECT_EQ(Parse("a=%FF%00b", &ok), (Pairs{{"a", std::string("\xFF\0b", 3)}}));
  EXPECT_TRUE(ok);
}

TEST(FormJson, RepeatedNamesBecomeArrays) {
  wi::Form form;
  ASSERT_TRUE(wi::ParseForm("a=1&b=2&b=3&c=&a2=x", &form));
  EXPECT_EQ(wi::FormToJson(form.fields),
            "{\"a\":\"1\",\"b\":[\"2\",\"3\"],\"c\":\"\",\"a2\":\"x\"}");
  ASSERT_TRUE(wi::ParseForm("b=1&a=2&b=3", &form));
  EXPECT_EQ(wi::FormToJson(form.fields), "{\"b\":[\"1\",\"3\"],\"a\":\"2\"}");
  ASSERT_TRUE(wi::ParseForm("", &form));
  EXPECT_EQ(wi::FormToJson(form.fields), "{}");
}

TEST(FormJson, EscapesJsonSpecials) {
  wi::Form form;
  ASSERT_TRUE(
      wi::ParseForm("q=%22%5C%2F%0A%0D%09%08%0C%01%1F%7F%C3%A9", &form));
  EXPECT_EQ(wi::FormToJson(form.fields),
            "{\"q\":\"\\\"\\\\/\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\xC3\xA9\"}");
}

TEST(FormJson, ApiTwoCallPattern) {
  const std::string body = "CallSid=CA1&Body=Hi+there&MediaUrl=a&MediaUrl=b";
  const std::string expected =
      "{\"CallSid\":\"CA1\",\"Body\":\"Hi there\",\"MediaUrl\":[\"a\",\"b\"]}";
  size_t len = 0;
  bool well_formed = false;
  wi::Status st;
  ASSERT_TRUE(
      wi::api::FormBodyToJson(body, nullptr, 0, &len, &well_formed, &st));
  EXPECT_TRUE(well_formed);
  ASSERT_EQ(len, expected.size());
  std::vector<char> buf(len + 1, 'x');
  ASSERT_TRUE(wi::api::FormBodyToJson(body, buf.data(), buf.size(), &len,
                                      &well_formed, &st));
  EXPECT_EQ(std::string(buf.data()), expected);
  // A short buffer gets a prefix and the full length.
  char small[8];
  ASSERT_TRUE(wi::api::FormBodyToJson(body, small, sizeof(small), &len,
                                      &well_formed, &st));
  EXPECT_EQ(std::string(small, sizeof(small)), expected.substr(0, 8));
  EXPECT_EQ(len, expected.size());
  // Malformed: reported, not an error.
  ASSERT_TRUE(wi::api::FormBodyToJson("a=%q", buf.data(), buf.size(), &len,
                                      &well_formed, &st));
  EXPECT_FALSE(well_formed);
  EXPECT_EQ(len, 0u);
}
