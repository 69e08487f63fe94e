/*
 * test_forward_sign.cpp - the relay's Standard Webhooks signer: its
 * signatures are the reference libraries' (their test vector) and are
 * accepted by the "standard" scheme's verifier; bad secrets are refused.
 */
#include <gtest/gtest.h>

#include <string>

#include "core/forward_sign.h"
#include "core_test_util.h"

namespace {

const char kMsgId[] = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const char kPayload[] = "{\"test\": 2432232314}";
const char kSecret[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const int64_t kSignTime = 1614265330;

TEST(ForwardSign, MatchesTheReferenceVector) {
  char sig[wi::api::kStandardSignatureSize];
  wi::Status st;
  ASSERT_TRUE(wi::api::SignStandardWebhook(kSecret, kMsgId, kSignTime,
                                           kPayload, sig, &st))
      << st.message;
  EXPECT_STREQ(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
}

TEST(ForwardSign, TheStandardSchemeVerifiesIt) {
  char sig[wi::api::kStandardSignatureSize];
  wi::Status st;
  const std::string body = "{\"id\": \"evt_1\", \"n\": [1, 2]}";
  ASSERT_TRUE(
      wi::api::SignStandardWebhook(kSecret, "evt_1", 1700000000, body, sig, &st));
  wi_test::Delivery d{body,
                      {{"webhook-id", "evt_1"},
                       {"webhook-timestamp", "1700000000"},
                       {"webhook-signature", sig}},
                      {kSecret}};
  d.now_sec = 1700000010;
  EXPECT_EQ(wi_test::VerifierFor("standard")(d), wi::Verdict::kValid);
  /* Another id or body does not verify. */
  d.headers[0].second = "evt_2";
  EXPECT_EQ(wi_test::VerifierFor("standard")(d), wi::Verdict::kSignatureMismatch);
}

TEST(ForwardSign, RefusesWhatIsNotAWhsecSecret) {
  char sig[wi::api::kStandardSignatureSize];
  wi::Status st;
  for (const char *bad : {"", "whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                          "whsec_not base64!", "whpk_MfKQ9r8G"}) {
    EXPECT_FALSE(wi::api::CheckForwardSecret(bad, &st)) << bad;
    EXPECT_STREQ(st.sqlstate, "22023");
    EXPECT_FALSE(wi::api::SignStandardWebhook(bad, "a", 1, "{}", sig, &st));
  }
  EXPECT_TRUE(wi::api::CheckForwardSecret(kSecret, &st)) << st.message;
}

}  // namespace
