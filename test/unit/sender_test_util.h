/*
 * sender_test_util.h - what the 0.2.0 sender schemes' unit tests add to
 * core_test_util.h: a delivery with a method, body values (the fields
 * src/pg would extract for the scheme's body_fields or item_fields) and a
 * verify token, run through wi::api::Verify, Handshake and VerifyItem.
 */
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core_test_util.h"

namespace wi_test {

/* A delivery as src/pg hands it to a 0.2.0 scheme. */
struct SenderDelivery : Delivery {
  using Delivery::Delivery;
  std::string method = "POST";
  std::vector<std::optional<std::string>> fields; /* body_fields' values */
  std::string verify_token;
};

/* The result of one call: the verdict (or handshake), or the failed status. */
struct SenderResult {
  bool ok = false;
  wi::Verdict verdict = wi::Verdict::kValid;
  bool answered = false;
  /* The reply as the call left it: whether JSON, its members (copied:
   * the reply's own views may point into its scratch or the request). */
  bool reply_json = false;
  std::vector<std::pair<std::string, std::string>> members;
  std::vector<bool> raw;
  std::string status; /* SQLSTATE and message when !ok */
  /* The SHA-256 of what the signature covered, when the scheme gave it
   * (VerifyRequest::signed_sha256); empty otherwise. */
  std::string signed_sha256;

  /* The reply's members as "key=value;..." (text replies: the text). */
  std::string ReplyText() const {
    if (!reply_json) return members.empty() ? "" : members[0].second;
    std::string s;
    for (size_t i = 0; i < members.size(); ++i) {
      if (i) s += ";";
      s += members[i].first + "=" + members[i].second;
    }
    return s;
  }
};

/* Which call to make. */
enum class Call { kVerify, kHandshakeVerified, kHandshakeUnsigned, kVerifyItem };

/* Runs one call of the scheme called name on d. */
inline SenderResult RunCall(const char *name, const SenderDelivery &d, Call call) {
  SenderResult r;
  const wi::Scheme *scheme = wi::FindScheme(name);
  if (scheme == nullptr) {
    r.status = "no such scheme";
    return r;
  }
  std::vector<wi::Header> headers;
  for (const auto &h : d.headers) headers.push_back({h.first, h.second});
  std::vector<std::string_view> secrets(d.secrets.begin(), d.secrets.end());
  std::vector<std::optional<std::string_view>> fields;
  for (const auto &f : d.fields)
    fields.push_back(f ? std::optional<std::string_view>(*f) : std::nullopt);
  wi::VerifyRequest req;
  req.body = d.body;
  req.headers = headers.data();
  req.n_headers = headers.size();
  if (d.url) req.url = *d.url;
  req.now_usec = d.now_sec * kUsecPerSec + d.now_extra_usec;
  req.tolerance_usec = d.tolerance_sec * kUsecPerSec;
  req.secrets = secrets.data();
  req.n_secrets = secrets.size();
  req.hmac = d.hmac;
  req.method = d.method;
  req.fields = fields.data();
  req.n_fields = fields.size();
  req.verify_token = d.verify_token;
  req.body_is_form = d.body_is_form;
  unsigned char signed_sha256[wi::kSha256Size] = {};
  bool signed_set = false;
  req.signed_sha256 = signed_sha256;
  req.signed_sha256_set = &signed_set;
  wi::Status st;
  switch (call) {
    case Call::kVerify:
      r.ok = wi::api::Verify(scheme, req, &r.verdict, &st);
      break;
    case Call::kHandshakeVerified:
    case Call::kHandshakeUnsigned: {
      wi::HandshakeReply reply;
      r.ok = wi::api::Handshake(scheme, req, call == Call::kHandshakeVerified,
                                &reply, &r.answered, &st);
      if (r.ok && r.answered) {
        EXPECT_GE(reply.n_members, 1u);
        EXPECT_LE(reply.n_members, 2u);
        r.reply_json = reply.json;
        for (size_t i = 0; i < reply.n_members && i < 2; ++i) {
          r.members.emplace_back(std::string(reply.members[i].key),
                                 std::string(reply.members[i].value));
          r.raw.push_back(reply.members[i].raw);
        }
      }
      /* The reply's views must point into the request or the scratch. */
      for (size_t i = 0; r.ok && r.answered && i < reply.n_members; ++i) {
        std::string_view v = reply.members[i].value;
        auto inside = [&](std::string_view whole) {
          return v.data() >= whole.data() &&
                 v.data() + v.size() <= whole.data() + whole.size();
        };
        bool ok = v.empty() || inside(d.body) ||
                  inside(std::string_view(reply.scratch,
                                          sizeof(reply.scratch))) ||
                  (d.url && inside(*d.url));
        for (const auto &f : d.fields) ok = ok || (f && inside(*f));
        for (const auto &h : d.headers) ok = ok || inside(h.second);
        EXPECT_TRUE(ok) << "reply member " << i << " points outside the request";
      }
      break;
    }
    case Call::kVerifyItem:
      r.ok = wi::api::VerifyItem(scheme, req, &r.verdict, &st);
      break;
  }
  if (!r.ok) r.status = std::string(st.sqlstate) + ":" + st.message;
  if (signed_set)
    r.signed_sha256.assign(reinterpret_cast<char *>(signed_sha256),
                           sizeof(signed_sha256));
  return r;
}

/* The verdict of verify(); a failed call is a test failure. */
inline wi::Verdict SenderVerdict(const char *name, const SenderDelivery &d) {
  SenderResult r = RunCall(name, d, Call::kVerify);
  EXPECT_TRUE(r.ok) << r.status;
  return r.verdict;
}

/* The verdict of verify_item(); a failed call is a test failure. */
inline wi::Verdict ItemVerdict(const char *name, const SenderDelivery &d) {
  SenderResult r = RunCall(name, d, Call::kVerifyItem);
  EXPECT_TRUE(r.ok) << r.status;
  return r.verdict;
}

/* The handshake after verification as src/pg runs it: verify() first, and
 * handshake() only when it says valid; a failed call is a test failure. */
inline SenderResult VerifiedHandshake(const char *name,
                                      const SenderDelivery &d) {
  SenderResult v = RunCall(name, d, Call::kVerify);
  EXPECT_TRUE(v.ok) << v.status;
  if (!v.ok || v.verdict != wi::Verdict::kValid) return v;
  SenderResult r = RunCall(name, d, Call::kHandshakeVerified);
  EXPECT_TRUE(r.ok) << r.status;
  r.verdict = v.verdict;
  return r;
}

}  // namespace wi_test
