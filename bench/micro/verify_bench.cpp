/*
 * verify_bench.cpp - Google Benchmark of signature verification: every scheme
 * verifying a valid delivery with a 1 KiB body through wi::api::Verify, next
 * to raw OpenSSL HMAC of the same 1 KiB (one EVP_MAC context, keyed, fed and
 * finalised per iteration: the least any verifier must do). At the end a
 * table gives each scheme's time as a multiple of its baseline; the target is
 * at most 1.5x.
 *
 *   make bench-micro                     (builds build/verify_bench, runs it)
 *   build/verify_bench --benchmark_repetitions=5
 */
#include <benchmark/benchmark.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/api.h"
#include "core/crypto.h"
#include "core/scheme.h"

namespace {

constexpr size_t kBodySize = 1024;
constexpr int64_t kNow = 1700000000;
const std::string kSecret = "bench-secret-0123456789abcdef";
const std::string kStandardKey = "0123456789abcdef0123456789abcdef";

/* A JSON body of exactly kBodySize bytes. */
std::string JsonBody() {
  std::string body =
      "{\"id\":\"evt_bench\",\"event_id\":\"evt_bench\",\"type\":\"bench\","
      "\"pad\":\"";
  body.append(kBodySize - body.size() - 2, 'x');
  body += "\"}";
  return body;
}

/* A Twilio-like form body of exactly kBodySize bytes (30-odd parameters). */
std::string FormBody() {
  std::string body =
      "AccountSid=AC0123456789abcdef0123456789abcdef&ApiVersion=2010-04-01&"
      "Body=Hello+from+the+benchmark%21&From=%2B15550001111&To=%2B15550002222&"
      "MessageSid=SM0123456789abcdef0123456789abcdef&NumMedia=0&NumSegments=1&"
      "SmsMessageSid=SM0123456789abcdef0123456789abcdef&SmsSid="
      "SM0123456789abcdef"
      "0123456789abcdef&SmsStatus=received&FromCity=SAN+FRANCISCO&FromState=CA&"
      "FromZip=94105&FromCountry=US&ToCity=&ToState=NY&ToZip=&ToCountry=US";
  for (int i = 0; body.size() < kBodySize - 16; ++i)
    body += "&Extra" + std::to_string(i) + "=value+" + std::to_string(i);
  body += "&Pad=";
  body.append(kBodySize - body.size(), 'p');
  return body;
}

std::string Mac(wi::Algorithm alg, const std::string &key,
                std::initializer_list<std::string_view> parts) {
  unsigned char mac[wi::kMaxDigestSize];
  size_t n = wi::Hmac(alg, key, parts, mac);
  return std::string(reinterpret_cast<char *>(mac), n);
}

/* One prepared, validly signed delivery. */
struct Case {
  std::string scheme;
  wi::Algorithm baseline;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<std::string> url;
  std::vector<std::string> secrets = {kSecret};
};

std::vector<Case> MakeCases() {
  const std::string json = JsonBody();
  const std::string ts = std::to_string(kNow);
  std::vector<Case> cases;

  cases.push_back(
      {"stripe",
       wi::Algorithm::kSha256,
       json,
       {{"Stripe-Signature", "t=" + ts + ",v1=" +
                                 wi::HexEncode(Mac(wi::Algorithm::kSha256,
                                                   kSecret, {ts, ".", json}))}},
       std::nullopt});
  cases.push_back({"github",
                   wi::Algorithm::kSha256,
                   json,
                   {{"X-Hub-Signature-256",
                     "sha256=" + wi::HexEncode(Mac(wi::Algorithm::kSha256,
                                                   kSecret, {json}))},
                    {"X-GitHub-Delivery", "d1"}},
                   std::nullopt});
  Case standard{
      "standard",
      wi::Algorithm::kSha256,
      json,
      {{"webhook-id", "msg_bench"},
       {"webhook-timestamp", ts},
       {"webhook-signature",
        "v1," + wi::Base64Encode(Mac(wi::Algorithm::kSha256, kStandardKey,
                                     {"msg_bench.", ts, ".", json}))}},
      std::nullopt};
  standard.secrets = {"whsec_" + wi::Base64Encode(kStandardKey)};
  cases.push_back(standard);
  cases.push_back({"slack",
                   wi::Algorithm::kSha256,
                   json,
                   {{"X-Slack-Request-Timestamp", ts},
                    {"X-Slack-Signature",
                     "v0=" + wi::HexEncode(Mac(wi::Algorithm::kSha256, kSecret,
                                               {"v0:", ts, ":", json}))}},
                   std::nullopt});
  cases.push_back(
      {"shopify",
       wi::Algorithm::kSha256,
       json,
       {{"X-Shopify-Hmac-Sha256",
         wi::Base64Encode(Mac(wi::Algorithm::kSha256, kSecret, {json}))}},
       std::nullopt});
  cases.push_back(
      {"paddle",
       wi::Algorithm::kSha256,
       json,
       {{"Paddle-Signature", "ts=" + ts + ";h1=" +
                                 wi::HexEncode(Mac(wi::Algorithm::kSha256,
                                                   kSecret, {ts, ":", json}))}},
       std::nullopt});
  const std::string square_url = "https://example.com/square/webhooks";
  cases.push_back({"square",
                   wi::Algorithm::kSha256,
                   json,
                   {{"X-Square-HmacSha256-Signature",
                     wi::Base64Encode(Mac(wi::Algorithm::kSha256, kSecret,
                                          {square_url, json}))}},
                   square_url});
  cases.push_back(
      {"hmac",
       wi::Algorithm::kSha256,
       json,
       {{"X-Webhook-Signature",
         wi::HexEncode(Mac(wi::Algorithm::kSha256, kSecret, {json}))}},
       std::nullopt});
  return cases;
}

/* The Twilio cases: signatures are made by the scheme's own rules, so the
 * signed string is found by asking a reference built here. */
std::string TwilioFormSignature(const std::string &url,
                                const std::string &form) {
  /* Sorted name+value pairs; FormBody() has unique names and ASCII only. */
  std::vector<std::pair<std::string, std::string>> pairs;
  size_t pos = 0;
  while (pos < form.size()) {
    size_t amp = form.find('&', pos);
    if (amp == std::string::npos) amp = form.size();
    std::string piece = form.substr(pos, amp - pos);
    size_t eq = piece.find('=');
    std::string value = piece.substr(eq + 1), decoded;
    for (size_t i = 0; i < value.size(); ++i) {
      if (value[i] == '+') {
        decoded += ' ';
      } else if (value[i] == '%') {
        decoded +=
            static_cast<char>(std::stoi(value.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        decoded += value[i];
      }
    }
    pairs.emplace_back(piece.substr(0, eq), decoded);
    pos = amp + 1;
  }
  std::sort(pairs.begin(), pairs.end());
  std::string data = url;
  for (const auto &p : pairs) data += p.first + p.second;
  return wi::Base64Encode(Mac(wi::Algorithm::kSha1, kSecret, {data}));
}

std::vector<Case> MakeTwilioCases() {
  const std::string form = FormBody();
  const std::string json = JsonBody();
  const std::string url = "https://example.com/twilio/sms?tenant=42";
  std::vector<Case> cases;
  cases.push_back({"twilio",
                   wi::Algorithm::kSha1,
                   form,
                   {{"X-Twilio-Signature", TwilioFormSignature(url, form)}},
                   url});
  unsigned char digest[wi::kSha256Size];
  wi::Sha256(json, digest);
  std::string json_url =
      url + "&bodySHA256=" +
      wi::HexEncode(std::string_view(reinterpret_cast<char *>(digest), 32));
  Case tj{"twilio",
          wi::Algorithm::kSha256,
          json,
          {{"X-Twilio-Signature",
            wi::Base64Encode(Mac(wi::Algorithm::kSha1, kSecret, {json_url}))}},
          json_url};
  cases.push_back(tj);
  return cases;
}

/* Verifies one case per iteration through the api, as src/pg calls it. */
void BM_Verify(benchmark::State &state, Case c) {
  const wi::Scheme *scheme = wi::FindScheme(c.scheme);
  std::vector<wi::Header> headers;
  for (const auto &h : c.headers) headers.push_back({h.first, h.second});
  std::vector<std::string_view> secrets(c.secrets.begin(), c.secrets.end());
  wi::VerifyRequest req;
  req.body = c.body;
  req.headers = headers.data();
  req.n_headers = headers.size();
  if (c.url) req.url = std::string_view(*c.url);
  req.now_usec = kNow * 1000000;
  req.tolerance_usec = 300LL * 1000000;
  req.secrets = secrets.data();
  req.n_secrets = secrets.size();
  wi::Verdict verdict = wi::Verdict::kSignatureMismatch;
  wi::Status st;
  if (scheme == nullptr || !wi::api::Verify(scheme, req, &verdict, &st) ||
      verdict != wi::Verdict::kValid) {
    state.SkipWithError("the prepared delivery does not verify");
    return;
  }
  for (auto _ : state) {
    wi::api::Verify(scheme, req, &verdict, &st);
    benchmark::DoNotOptimize(verdict);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(c.body.size()));
}

/* Raw OpenSSL HMAC of the 1 KiB body: the baseline. */
void BM_RawHmac(benchmark::State &state, const char *digest) {
  const std::string body = JsonBody();
  EVP_MAC *mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
                                       const_cast<char *>(digest), 0),
      OSSL_PARAM_construct_end()};
  EVP_MAC_CTX_set_params(ctx, params);
  unsigned char out[EVP_MAX_MD_SIZE];
  size_t len = 0;
  for (auto _ : state) {
    EVP_MAC_init(ctx, reinterpret_cast<const unsigned char *>(kSecret.data()),
                 kSecret.size(), nullptr);
    EVP_MAC_update(ctx, reinterpret_cast<const unsigned char *>(body.data()),
                   body.size());
    EVP_MAC_final(ctx, out, &len, sizeof(out));
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(body.size()));
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
}

/* The least a hand-written Twilio JSON check can do with OpenSSL: SHA-256
 * of the body and HMAC-SHA1 of the URL (which carries the body's hash). */
void BM_RawTwilioJsonFloor(benchmark::State &state) {
  const std::string body = JsonBody();
  const std::string url =
      "https://example.com/twilio/sms?tenant=42&bodySHA256="
      "0000000000000000000000000000000000000000000000000000000000000000";
  EVP_MAC *mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
                                       const_cast<char *>("SHA1"), 0),
      OSSL_PARAM_construct_end()};
  EVP_MAC_CTX_set_params(ctx, params);
  EVP_MD *md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  EVP_MD_CTX *md_ctx = EVP_MD_CTX_new();
  unsigned char out[EVP_MAX_MD_SIZE];
  size_t len = 0;
  unsigned int md_len = 0;
  for (auto _ : state) {
    EVP_DigestInit_ex(md_ctx, md, nullptr);
    EVP_DigestUpdate(md_ctx, body.data(), body.size());
    EVP_DigestFinal_ex(md_ctx, out, &md_len);
    benchmark::DoNotOptimize(out);
    EVP_MAC_init(ctx, reinterpret_cast<const unsigned char *>(kSecret.data()),
                 kSecret.size(), nullptr);
    EVP_MAC_update(ctx, reinterpret_cast<const unsigned char *>(url.data()),
                   url.size());
    EVP_MAC_final(ctx, out, &len, sizeof(out));
    benchmark::DoNotOptimize(out);
  }
  EVP_MD_CTX_free(md_ctx);
  EVP_MD_free(md);
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
}

/* Console output plus, at the end, each scheme's time over its baseline. */
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run> &runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run &run : runs) {
      if (run.error_occurred) continue;
      bool median =
          run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.run_type == Run::RT_Aggregate && !median) continue;
      std::string name = run.run_name.str();
      if (median || !medians_.count(name))
        times_[name] = run.GetAdjustedCPUTime();
      if (median) medians_[name] = true;
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf(
        "\nVerify CPU time / raw OpenSSL HMAC of the same 1 KiB (target <= "
        "1.50x)\n");
    for (const auto &[name, t] : times_) {
      if (name.rfind("Verify/", 0) != 0) continue;
      std::string base = name.find("/sha1") != std::string::npos
                             ? "RawHmac/sha1"
                             : "RawHmac/sha256";
      Print(name, t, base, true);
      if (name == "Verify/twilio_json")
        Print(name, t, "RawFloor/twilio_json", false);
    }
  }

  /* One line: name's time over base's. */
  void Print(const std::string &name, double t, const std::string &base,
             bool target) const {
    auto it = times_.find(base);
    if (it == times_.end() || it->second <= 0) return;
    double ratio = t / it->second;
    std::printf("  %-28s %6.2fx  vs %s%s\n", name.c_str(), ratio, base.c_str(),
                target && ratio > 1.5 ? "   OVER TARGET" : "");
  }

 private:
  std::map<std::string, double> times_;
  std::map<std::string, bool> medians_;
};

}  // namespace

int main(int argc, char **argv) {
  benchmark::RegisterBenchmark("RawHmac/sha256", BM_RawHmac, "SHA256");
  benchmark::RegisterBenchmark("RawHmac/sha1", BM_RawHmac, "SHA1");
  benchmark::RegisterBenchmark("RawFloor/twilio_json", BM_RawTwilioJsonFloor);
  for (Case &c : MakeCases()) {
    std::string name = "Verify/" + c.scheme;
    benchmark::RegisterBenchmark(name.c_str(), BM_Verify, c);
  }
  std::vector<Case> twilio = MakeTwilioCases();
  benchmark::RegisterBenchmark("Verify/twilio_form/sha1", BM_Verify, twilio[0]);
  benchmark::RegisterBenchmark("Verify/twilio_json", BM_Verify, twilio[1]);

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
