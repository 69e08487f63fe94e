/*
 * fuzz_meta_query.cpp - libFuzzer target for Meta's subscription check:
 * the input's first line is the source's verify token, the rest the
 * request URL. ParseMetaSubscription never fails on any URL; the check is
 * answered only when hub.mode is subscribe and hub.verify_token equals the
 * token, with hub.challenge (as parsed) as the text reply.
 */
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/api.h"
#include "core/scheme.h"
#include "core/schemes/meta.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view in = fuzz::Input(data, size);
  size_t nl = in.find('\n');
  std::string_view token = in.substr(0, nl);
  std::string_view url = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  const wi::Scheme *s = wi::FindScheme("meta");

  wi::MetaSubscription sub;
  bool parsed = wi::ParseMetaSubscription(url, &sub);
  if (parsed) FUZZ_CHECK(url.find('?') != std::string_view::npos);

  std::string_view secrets[] = {"meta-app-secret"};
  wi::VerifyRequest req;
  req.method = "GET";
  req.url = url;
  req.verify_token = token;
  req.secrets = secrets;
  req.n_secrets = 1;
  wi::HandshakeReply out;
  bool answered = false;
  wi::Status st;
  FUZZ_CHECK(wi::api::Handshake(s, req, false, &out, &answered, &st));
  if (answered) {
    FUZZ_CHECK(parsed && !token.empty());
    FUZZ_CHECK(sub.mode && *sub.mode == "subscribe");
    FUZZ_CHECK(sub.verify_token && *sub.verify_token == token);
    FUZZ_CHECK(sub.challenge && !sub.challenge->empty());
    FUZZ_CHECK(!out.json && out.n_members == 1 && out.members[0].value == *sub.challenge);
  } else if (parsed && !token.empty() && sub.mode && *sub.mode == "subscribe" &&
             sub.verify_token && *sub.verify_token == token && sub.challenge &&
             !sub.challenge->empty()) {
    FUZZ_CHECK(sub.challenge->size() >= sizeof(out.scratch));
  }
  /* Not a GET: never answered. */
  req.method = "POST";
  FUZZ_CHECK(wi::api::Handshake(s, req, false, &out, &answered, &st));
  FUZZ_CHECK(!answered);
  /* A GET without a signature goes on to verification and is refused. */
  wi::Verdict v;
  fuzz::Verify(s, req, &v);
  FUZZ_CHECK(v == wi::Verdict::kMissingSignature);
  return 0;
}
