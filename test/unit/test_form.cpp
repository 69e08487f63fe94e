/*
 * test_form.cpp - the form-body parser, directly and through the boundary
 * API wi::api::DecodeForm.
 */
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/api.h"
#include "core/form.h"
#include "core_test_util.h"

namespace {

using wi_test::Pairs;

/* The fields of body as name/value pairs, in order. */
Pairs Parse(const std::string &body, bool *ok) {
  wi::Form form;
  *ok = wi::ParseForm(body, &form);
  Pairs out;
  for (const auto &f : form.fields) out.emplace_back(f.name, f.value);
  return out;
}

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

// The boundary API hands the decoded fields over as offsets into the
// caller's buffer, in body order, repeats included.
TEST(FormDecodeApi, SpansInBodyOrder) {
  const std::string body = "CallSid=CA1&Body=Hi+there&MediaUrl=a&MediaUrl=b%21";
  ASSERT_EQ(wi::api::MaxFormFields(body), 4u);
  std::vector<char> buf(body.size());
  std::vector<wi::api::FormSpan> spans(wi::api::MaxFormFields(body));
  size_t n = 0;
  bool well_formed = false;
  wi::Status st;
  ASSERT_TRUE(wi::api::DecodeForm(body, buf.data(), spans.data(), &n, &well_formed, &st));
  EXPECT_TRUE(well_formed);
  ASSERT_EQ(n, 4u);
  auto field = [&](size_t i) {
    return std::make_pair(std::string(buf.data() + spans[i].name_offset, spans[i].name_length),
                          std::string(buf.data() + spans[i].value_offset, spans[i].value_length));
  };
  EXPECT_EQ(field(0), std::make_pair(std::string("CallSid"), std::string("CA1")));
  EXPECT_EQ(field(1), std::make_pair(std::string("Body"), std::string("Hi there")));
  EXPECT_EQ(field(2), std::make_pair(std::string("MediaUrl"), std::string("a")));
  EXPECT_EQ(field(3), std::make_pair(std::string("MediaUrl"), std::string("b!")));
}

// Empty bodies have no fields; a malformed escape is reported, not raised.
TEST(FormDecodeApi, EmptyAndMalformed) {
  char buf[8];
  wi::api::FormSpan spans[4];
  size_t n = 99;
  bool well_formed = false;
  wi::Status st;
  ASSERT_TRUE(wi::api::DecodeForm("", buf, spans, &n, &well_formed, &st));
  EXPECT_TRUE(well_formed);
  EXPECT_EQ(n, 0u);
  ASSERT_TRUE(wi::api::DecodeForm("a=%q", buf, spans, &n, &well_formed, &st));
  EXPECT_FALSE(well_formed);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(wi::api::MaxFormFields("&&&"), 4u);
}
