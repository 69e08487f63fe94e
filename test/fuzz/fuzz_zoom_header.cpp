/*
 * fuzz_zoom_header.cpp - libFuzzer target for Zoom's headers and its
 * url_validation handshake: the input is
 * "<timestamp>\n<signature>\n<event>\n<plainToken>". The fuzzed signature
 * never makes the call fail; one genuinely signed over the fuzzed
 * timestamp always verifies (Zoom checks no window); the handshake answers
 * exactly endpoint.url_validation, with the token and its HMAC.
 */
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/api.h"
#include "core/scheme.h"
#include "core/schemes/zoom.h"
#include "fuzz_util.h"

namespace {

std::string_view Next(std::string_view *in) {
  size_t nl = in->find('\n');
  std::string_view part = in->substr(0, nl);
  *in = nl == std::string_view::npos ? std::string_view() : in->substr(nl + 1);
  return part;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view in = fuzz::Input(data, size);
  std::string_view ts = Next(&in), sig = Next(&in), event = Next(&in),
                   token = Next(&in);
  const wi::Scheme *s = wi::FindScheme("zoom");
  const std::string body = "{\"event\":\"x\"}";
  std::string_view secrets[] = {"other", "zm-fuzz"};
  std::optional<std::string_view> fields[] = {event, token};
  wi::VerifyRequest req;
  req.body = body;
  req.secrets = secrets;
  req.n_secrets = 2;
  req.fields = fields;
  req.n_fields = 2;
  wi::Verdict v;

  wi::Header fuzzed[] = {{"x-zm-request-timestamp", ts}, {"x-zm-signature", sig}};
  req.headers = fuzzed;
  req.n_headers = 2;
  fuzz::Verify(s, req, &v);

  std::string_view t = wi::TrimSpaces(ts);
  std::string good = "v0=" + fuzz::HexHmac(wi::Algorithm::kSha256, "zm-fuzz",
                                           {"v0:", t, ":", body});
  wi::Header genuine[] = {{"x-zm-request-timestamp", ts}, {"x-zm-signature", good}};
  req.headers = genuine;
  fuzz::Verify(s, req, &v);
  FUZZ_CHECK((v == wi::Verdict::kValid) == !t.empty());
  if (v != wi::Verdict::kValid) return 0;

  wi::HandshakeReply out;
  bool answered = false;
  wi::Status st;
  FUZZ_CHECK(wi::api::Handshake(s, req, true, &out, &answered, &st));
  FUZZ_CHECK(answered == (event == "endpoint.url_validation"));
  if (answered) {
    FUZZ_CHECK(out.json && out.n_members == 2);
    FUZZ_CHECK(out.members[0].value == token);
    FUZZ_CHECK(out.members[1].value ==
               fuzz::HexHmac(wi::Algorithm::kSha256, "zm-fuzz", {token}));
  }
  return 0;
}
