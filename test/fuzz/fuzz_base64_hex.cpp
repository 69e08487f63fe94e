/*
 * fuzz_base64_hex.cpp - libFuzzer target for the hex and base64 codecs:
 * decode(encode(x)) == x for any bytes, and decoding arbitrary text never
 * crashes and, when it succeeds, agrees with re-encoding.
 */
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/crypto.h"
#include "fuzz_util.h"

namespace {

bool IsB64Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '+' || c == '/';
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view input = fuzz::Input(data, size);

  /* Round trips of arbitrary bytes. */
  std::string hex = wi::HexEncode(input);
  FUZZ_CHECK(hex.size() == 2 * input.size());
  FUZZ_CHECK(hex.find_first_not_of("0123456789abcdef") == std::string::npos);
  std::string back;
  FUZZ_CHECK(wi::HexDecode(hex, &back));
  FUZZ_CHECK(back == input);

  std::string b64 = wi::Base64Encode(input);
  FUZZ_CHECK(b64.size() == 4 * ((input.size() + 2) / 3));
  FUZZ_CHECK(wi::Base64Decode(b64, &back));
  FUZZ_CHECK(back == input);
  std::string bare = b64.substr(0, b64.find('='));
  FUZZ_CHECK(wi::Base64Decode(bare, &back));
  FUZZ_CHECK(back == input);

  /* Arbitrary text as hex: success means even length, all hex digits, and
   * re-encoding gives the input folded to lower case. */
  std::string out;
  if (wi::HexDecode(input, &out)) {
    FUZZ_CHECK(input.size() % 2 == 0);
    FUZZ_CHECK(out.size() == input.size() / 2);
    std::string lower(input);
    for (char &c : lower)
      if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    FUZZ_CHECK(wi::HexEncode(out) == lower);
  } else {
    FUZZ_CHECK(out.empty());
  }

  /* Arbitrary text as base64: success means only the standard alphabet
   * with at most two trailing '=', and the decoded length follows from the
   * unpadded length; re-encoding keeps every character but the last. */
  if (wi::Base64Decode(input, &out)) {
    size_t data_len = input.size();
    while (data_len > 0 && input[data_len - 1] == '=') --data_len;
    FUZZ_CHECK(input.size() - data_len <= 2);
    for (size_t i = 0; i < data_len; ++i) FUZZ_CHECK(IsB64Char(input[i]));
    FUZZ_CHECK(data_len % 4 != 1);
    FUZZ_CHECK(out.size() == data_len * 3 / 4);
    std::string again = wi::Base64Encode(out);
    /* The last character may differ only in bits the decoder drops. */
    if (data_len > 0)
      FUZZ_CHECK(again.compare(0, data_len - 1, input.substr(0, data_len - 1)) ==
                 0);
  } else {
    FUZZ_CHECK(out.empty());
  }
  return 0;
}
