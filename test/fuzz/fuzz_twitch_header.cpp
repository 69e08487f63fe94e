/*
 * fuzz_twitch_header.cpp - libFuzzer target for Twitch EventSub's headers:
 * the input is "<timestamp>\n<message type>\n<signature>\n<challenge>".
 * The RFC 3339 parser reads only whole date-times (then a request signed
 * over that timestamp verifies exactly when it is at most 10 minutes old);
 * the fuzzed signature and type never make the call fail; the handshake
 * answers only webhook_callback_verification, with the challenge.
 */
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/api.h"
#include "core/scheme.h"
#include "core/schemes/twitch.h"
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
  std::string_view ts = Next(&in), type = Next(&in), sig = Next(&in),
                   challenge = Next(&in);
  const wi::Scheme *s = wi::FindScheme("twitch");

  int64_t usec = 0;
  bool parsed = wi::ParseRfc3339(ts, &usec);
  if (parsed) {
    /* Whole date-times only: at least "YYYY-MM-DDTHH:MM:SSZ". */
    FUZZ_CHECK(ts.size() >= 20);
    FUZZ_CHECK(ts[4] == '-' && ts[7] == '-' && ts[13] == ':' && ts[16] == ':');
    /* Years 0000-9999, offsets within a day. */
    FUZZ_CHECK(usec >= -62167219200LL * 1000000 - 86400LL * 1000000);
    FUZZ_CHECK(usec <= 253402300800LL * 1000000 + 86400LL * 1000000);
  }

  const std::string body = "{\"subscription\":{}}";
  std::string_view t = wi::TrimSpaces(ts);
  std::string good = "sha256=" + fuzz::HexHmac(wi::Algorithm::kSha256, "tw-fuzz",
                                               {"msg-1", t, body});
  std::string_view secrets[] = {"tw-fuzz"};
  std::optional<std::string_view> fields[] = {challenge};
  wi::VerifyRequest req;
  req.body = body;
  req.now_usec = 1700000000 * fuzz::kUsec;
  req.secrets = secrets;
  req.n_secrets = 1;
  req.fields = fields;
  req.n_fields = 1;
  wi::Verdict v;

  wi::Header fuzzed[] = {{"Twitch-Eventsub-Message-Id", "msg-1"},
                         {"Twitch-Eventsub-Message-Timestamp", ts},
                         {"Twitch-Eventsub-Message-Signature", sig},
                         {"Twitch-Eventsub-Message-Type", type}};
  req.headers = fuzzed;
  req.n_headers = 4;
  fuzz::Verify(s, req, &v);

  wi::Header genuine[] = {{"Twitch-Eventsub-Message-Id", "msg-1"},
                          {"Twitch-Eventsub-Message-Timestamp", ts},
                          {"Twitch-Eventsub-Message-Signature", good},
                          {"Twitch-Eventsub-Message-Type", type}};
  req.headers = genuine;
  fuzz::Verify(s, req, &v);
  int64_t tu = 0;
  bool ok_ts = !t.empty() && wi::ParseRfc3339(t, &tu);
  bool fresh = ok_ts && static_cast<__int128>(req.now_usec) - tu <= wi::kTwitchMaxAgeUsec;
  FUZZ_CHECK((v == wi::Verdict::kValid) == fresh);

  wi::HandshakeReply out;
  bool answered = false;
  wi::Status st;
  FUZZ_CHECK(wi::api::Handshake(s, req, true, &out, &answered, &st));
  FUZZ_CHECK(answered == (wi::TrimSpaces(type) == "webhook_callback_verification"));
  if (answered) {
    FUZZ_CHECK(!out.json && out.n_members == 1);
    FUZZ_CHECK(out.members[0].value == challenge);
  }
  return 0;
}
