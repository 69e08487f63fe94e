/*
 * discord.h - Discord interactions: the public key and the signature header,
 * decoded as discord-interactions' verifyKey takes them.
 */
#pragma once

#include <string>
#include <string_view>

namespace wi {

/* The raw Ed25519 key of a configured secret: exactly 64 hex digits (either
 * case) that OpenSSL takes as a key; false otherwise. */
bool DecodeDiscordKey(std::string_view secret, std::string *key);

/* The raw signature of an X-Signature-Ed25519 value: exactly 128 hex digits
 * (either case); false otherwise. */
bool DecodeDiscordSignature(std::string_view text, std::string *sig);

}  // namespace wi
