/*
 * fuzz_twilio_url.cpp - libFuzzer target for the WHATWG URL parser and the
 * URL variants Twilio signatures are checked against: the first variant is
 * a fixed point of parse-and-serialise, every variant parses, and the
 * query-parameter and parameter-string helpers never fail.
 */
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/form.h"
#include "core/schemes/twilio.h"
#include "core/url.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view input = fuzz::Input(data, size);

  wi::WebUrl url;
  bool parsed = wi::ParseWebUrl(input, &url);
  std::vector<std::string> candidates = wi::TwilioUrlCandidates(input);
  FUZZ_CHECK(parsed == !candidates.empty());
  if (parsed) {
    FUZZ_CHECK(url.scheme == "http" || url.scheme == "https");
    FUZZ_CHECK(!url.host.empty() && !url.path.empty() && url.path[0] == '/');
    FUZZ_CHECK(url.port != wi::DefaultPort(url));
    std::string href = wi::SerializeWebUrl(url);
    /* The URL as received comes first, then up to four normalised forms. */
    FUZZ_CHECK(candidates.size() <= 5);
    FUZZ_CHECK(candidates[0] == input);
    if (url.port.empty())
      FUZZ_CHECK(candidates[0] == href || (candidates.size() > 1 && candidates[1] == href));
    /* Serialising is a fixed point of parsing. */
    wi::WebUrl again;
    FUZZ_CHECK(wi::ParseWebUrl(href, &again));
    FUZZ_CHECK(wi::SerializeWebUrl(again) == href);
    for (const std::string &c : candidates) {
      wi::WebUrl each;
      FUZZ_CHECK(wi::ParseWebUrl(c, &each));
    }
    if (url.query) (void)wi::QueryParam(*url.query, "bodySHA256");
  }

  wi::Form form;
  if (wi::ParseForm(input, &form)) {
    std::string params = wi::TwilioParamString(form.fields);
    /* Sorting and dropping repeats never adds bytes. */
    size_t total = 0;
    for (const wi::FormField &f : form.fields)
      total += f.name.size() + f.value.size();
    FUZZ_CHECK(params.size() <= total);
  }
  return 0;
}
