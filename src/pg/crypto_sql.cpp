/*
 * crypto_sql.cpp - webhook_idem.hmac() and webhook_idem.timing_safe_equal(),
 * thin SQL faces of the core's OpenSSL wrappers.
 */
#include "pg/boundary.h"
#include "pg/webhook_idem.h"

extern "C" {
PG_FUNCTION_INFO_V1(webhook_idem_hmac);
PG_FUNCTION_INFO_V1(webhook_idem_timing_safe_equal);
}

/* webhook_idem.hmac(data bytea, key bytea, algorithm text) RETURNS bytea */
extern "C" Datum
webhook_idem_hmac(PG_FUNCTION_ARGS)
{
	bytea	   *data = PG_GETARG_BYTEA_PP(0);
	bytea	   *key = PG_GETARG_BYTEA_PP(1);
	text	   *algorithm = PG_GETARG_TEXT_PP(2);
	unsigned char mac[wi::kMaxDigestSize];
	size_t		len = 0;
	wi::Status	st;
	bytea	   *out;

	CheckCore(wi::api::ComputeHmac(std::string_view(VARDATA_ANY(algorithm), VARSIZE_ANY_EXHDR(algorithm)),
								   std::string_view(VARDATA_ANY(data), VARSIZE_ANY_EXHDR(data)),
								   std::string_view(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key)),
								   mac, &len, &st),
			  st);
	out = (bytea *) palloc(VARHDRSZ + len);
	SET_VARSIZE(out, VARHDRSZ + len);
	memcpy(VARDATA(out), mac, len);
	PG_RETURN_BYTEA_P(out);
}

/* webhook_idem.timing_safe_equal(a bytea, b bytea) RETURNS boolean */
extern "C" Datum
webhook_idem_timing_safe_equal(PG_FUNCTION_ARGS)
{
	bytea	   *a = PG_GETARG_BYTEA_PP(0);
	bytea	   *b = PG_GETARG_BYTEA_PP(1);

	PG_RETURN_BOOL(wi::ConstantTimeEqual(std::string_view(VARDATA_ANY(a), VARSIZE_ANY_EXHDR(a)),
										 std::string_view(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b))));
}
