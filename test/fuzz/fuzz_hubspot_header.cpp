/*
 * fuzz_hubspot_header.cpp - libFuzzer target for HubSpot's v3 headers: the
 * input is "<timestamp>\n<signature>\n<method>\n<url>" (missing parts
 * empty). Any of it must verify without failing; a request genuinely signed
 * over the fuzzed timestamp's number, method and URL verifies exactly when
 * the timestamp is a decimal integer at most 5 minutes old.
 */
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/scheme.h"
#include "core/schemes/hubspot.h"
#include "fuzz_util.h"

namespace {

/* The next '\n'-separated part of *in. */
std::string_view Next(std::string_view *in) {
  size_t nl = in->find('\n');
  std::string_view part = in->substr(0, nl);
  *in = nl == std::string_view::npos ? std::string_view() : in->substr(nl + 1);
  return part;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view in = fuzz::Input(data, size);
  std::string_view ts = Next(&in), sig = Next(&in), method = Next(&in), url = Next(&in);
  const wi::Scheme *s = wi::FindScheme("hubspot");
  const std::string body = "[{\"eventId\":1}]";
  std::string_view secrets[] = {"hs-fuzz-secret"};

  wi::VerifyRequest req;
  req.body = body;
  req.url = url;
  req.method = method;
  req.now_usec = 1700000000000 * int64_t{1000};
  req.secrets = secrets;
  req.n_secrets = 1;
  wi::Verdict v;

  /* The fuzzed headers as sent. */
  wi::Header fuzzed[] = {{"X-HubSpot-Request-Timestamp", ts},
                         {"X-HubSpot-Signature-v3", sig}};
  req.headers = fuzzed;
  req.n_headers = 2;
  fuzz::Verify(s, req, &v);

  /* Genuinely signed over the fuzzed timestamp's number (its text when it
   * is not one). */
  std::string_view t = wi::TrimSpaces(ts);
  int64_t ms;
  bool parses = wi::ParseHubspotTimestamp(t, &ms);
  std::string signed_ts = parses ? std::to_string(ms) : std::string(t);
  std::string good = fuzz::Base64Hmac(wi::Algorithm::kSha256, "hs-fuzz-secret",
                                      {method, url, body, signed_ts});
  wi::Header signed_headers[] = {{"X-HubSpot-Request-Timestamp", ts},
                                 {"X-HubSpot-Signature-v3", good}};
  req.headers = signed_headers;
  fuzz::Verify(s, req, &v);
  bool expect_valid = !t.empty() && !url.empty() && parses &&
                      wi::HubspotTimestampFresh(req, ms);
  FUZZ_CHECK((v == wi::Verdict::kValid) == expect_valid);
  if (!t.empty() && !url.empty() && !parses)
    FUZZ_CHECK(v == wi::Verdict::kMalformedSignature);
  return 0;
}
