/*
 * fuzz_form.cpp - libFuzzer target for the form-body parser: a body is
 * refused only for a bad percent escape, re-encoding the fields parses back
 * to the same fields, and the boundary API's spans (within the buffer and
 * the span bound it promises) give the same fields.
 */
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/api.h"
#include "core/form.h"
#include "fuzz_util.h"

namespace {

/* Percent-encodes every byte but unreserved ASCII. */
std::string Encode(std::string_view s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
        c == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view body = fuzz::Input(data, size);

  wi::Form form;
  bool ok = wi::ParseForm(body, &form);
  const std::vector<wi::FormField> &fields = form.fields;
  if (!ok) {
    FUZZ_CHECK(fields.empty());
    FUZZ_CHECK(body.find('%') != std::string_view::npos);
  } else {
    std::string again;
    for (const wi::FormField &f : fields) {
      if (!again.empty()) again.push_back('&');
      again += Encode(f.name) + "=" + Encode(f.value);
    }
    wi::Form round_form;
    FUZZ_CHECK(wi::ParseForm(again, &round_form));
    const std::vector<wi::FormField> &round = round_form.fields;
    FUZZ_CHECK(round.size() == fields.size());
    for (size_t i = 0; i < round.size(); ++i) {
      FUZZ_CHECK(round[i].name == fields[i].name);
      FUZZ_CHECK(round[i].value == fields[i].value);
    }
    size_t max = wi::api::MaxFormFields(body);
    std::vector<char> buf(body.size() + 1);
    std::vector<wi::api::FormSpan> spans(max);
    size_t n = 0;
    bool well_formed = false;
    wi::Status st;
    FUZZ_CHECK(wi::api::DecodeForm(body, buf.data(), spans.data(), &n, &well_formed, &st));
    FUZZ_CHECK(well_formed && n == fields.size() && n <= max);
    for (size_t i = 0; i < n; ++i) {
      const wi::api::FormSpan &sp = spans[i];
      FUZZ_CHECK(sp.name_offset + sp.name_length <= body.size());
      FUZZ_CHECK(sp.value_offset + sp.value_length <= body.size());
      FUZZ_CHECK(std::string_view(buf.data() + sp.name_offset, sp.name_length) == fields[i].name);
      FUZZ_CHECK(std::string_view(buf.data() + sp.value_offset, sp.value_length) == fields[i].value);
    }
  }
  return 0;
}
