/*
 * verify.h - the verification step shared by verify_signature() and
 * apply_event(), and the configuration checks behind register_source().
 */
#pragma once

#include "pg/webhook_idem.h"

/* The scheme called name; raises 22023 (listing the schemes) if none. */
const wi::Scheme *SchemeByName(const char *name);

/* Checks secrets for scheme and copies them into cxt as views; returns how
 * many. Raises 22023 for none (when the scheme needs them), NULL or empty
 * elements and secrets the scheme cannot use. */
int			CollectSecrets(const wi::Scheme *scheme, ArrayType *secrets,
						   std::string_view **out, MemoryContext cxt);

/* Parses a scheme's options object (only the generic schemes take any). */
void		ParseSchemeOptions(const wi::Scheme *scheme, Jsonb *options,
							   wi::HmacOptions *out, MemoryContext cxt);

/* Runs the scheme on one delivery. */
wi::Verdict VerifyDelivery(const wi::Scheme *scheme, const std::string_view *secrets,
						   int n_secrets, const wi::HmacOptions *options,
						   const char *body, size_t body_len, const WiHeaders *headers,
						   text *url, int64 now_usec, int64 tolerance_usec);

/* An interval in microseconds, months and days at their nominal length. */
int64		IntervalToMicros(const Interval *iv);

/* Raises 22023 unless path is a search_path a handler may be given: it
 * parses as PostgreSQL parses search_path, and names no temporary schema
 * (pg_temp, pg_temp_N, pg_toast_temp_N, in any spelling), since the
 * extension appends pg_temp last itself. ("$user" cannot: role names
 * starting with pg_ are reserved.) */
void		CheckHandlerSearchPath(const char *path);
