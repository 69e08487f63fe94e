/*
 * gitlab.cpp - GitLab's plain-token mode: the webhook's secret token is sent
 * as is in "X-Gitlab-Token" (GitLab docs, "Webhooks: validate payloads by
 * using a secret token"); it is compared with each configured secret in
 * time independent of the contents and of the lengths (the SHA-256 digests
 * of both are compared in constant time). There is no signature over the
 * body and no timestamp. GitLab's signed mode ("X-Gitlab-Webhook-Signature"
 * for a webhook with a signing token) is Standard Webhooks: use scheme
 * "standard" for it.
 *
 * Event id: the X-Gitlab-Event-UUID header (GitLab keeps it across retries
 * of one delivery).
 */
#include <string>

#include "core/scheme.h"
#include "core/schemes/senders.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

namespace {

Verdict VerifyGitlab(const VerifyRequest &req) {
  std::optional<std::string_view> token =
      FindSignatureHeader(req, "X-Gitlab-Token");
  if (!token) return Verdict::kMissingSignature;
  bool found = false;
  for (size_t i = 0; i < req.n_secrets; ++i)
    if (TokenEqual(req.secrets[i], *token)) found = true;
  return found ? Verdict::kValid : Verdict::kSignatureMismatch;
}

}  // namespace

extern const Scheme kGitlabScheme = {
    "gitlab", true, {"header:X-Gitlab-Event-UUID", nullptr}, VerifyGitlab,
    nullptr,
};

}  // namespace wi
