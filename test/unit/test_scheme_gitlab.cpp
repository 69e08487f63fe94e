/*
 * test_scheme_gitlab.cpp - the "gitlab" scheme (plain-token mode), through
 * wi::api::Verify. GitLab's docs ("Webhooks", validate payloads by using a
 * secret token): the token is sent as is in X-Gitlab-Token.
 */
#include <gtest/gtest.h>

#include <string>

#include "sender_test_util.h"

namespace {

using wi::Verdict;
using wi_test::SenderDelivery;

const char kToken[] = "glwt-0123456789";

SenderDelivery Push(const std::string &token = kToken) {
  return SenderDelivery{"{\"object_kind\":\"push\"}",
                        {{"X-Gitlab-Event", "Push Hook"},
                         {"X-Gitlab-Token", token},
                         {"X-Gitlab-Event-UUID",
                          "13792a34-cac6-4fda-95a8-c58e00a3954e"}},
                        {kToken}};
}

Verdict Verify(const SenderDelivery &d) {
  return wi_test::SenderVerdict("gitlab", d);
}

}  // namespace

TEST(SchemeGitlab, TokenMatches) {
  EXPECT_EQ(Verify(Push()), Verdict::kValid);
  // The body is not signed: any body with the token is GitLab's.
  SenderDelivery d = Push();
  d.body = "anything";
  EXPECT_EQ(Verify(d), Verdict::kValid);
}

TEST(SchemeGitlab, WrongTokenPrefixOrCase) {
  for (const std::string &t : {std::string("glwt-012345678"), std::string("glwt-01234567890"),
                               std::string("GLWT-0123456789"), std::string("x")}) {
    EXPECT_EQ(Verify(Push(t)), Verdict::kSignatureMismatch) << t;
  }
}

TEST(SchemeGitlab, AnySecretMayMatch) {
  SenderDelivery d = Push();
  d.secrets = {"old-token"};
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d.secrets = {"old-token", kToken};
  EXPECT_EQ(Verify(d), Verdict::kValid);
}

TEST(SchemeGitlab, MissingOrEmptyToken) {
  SenderDelivery d = Push();
  d.RemoveHeader("X-Gitlab-Token");
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  EXPECT_EQ(Verify(Push("")), Verdict::kMissingSignature);
  EXPECT_EQ(Verify(Push("   ")), Verdict::kMissingSignature);
  // Header names are case-insensitive; surrounding spaces are not the token's.
  d = Push(std::string(" ") + kToken + " ");
  d.headers[1].first = "x-gitlab-token";
  EXPECT_EQ(Verify(d), Verdict::kValid);
  // A signed-mode header is not a token.
  d = Push();
  d.RemoveHeader("X-Gitlab-Token");
  d.Header("X-Gitlab-Webhook-Signature", kToken);
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
}

TEST(SchemeGitlab, SchemeShape) {
  const wi::Scheme *s = wi::FindScheme("gitlab");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->needs_secrets);
  EXPECT_STREQ(s->event_id.primary, "header:X-Gitlab-Event-UUID");
}
