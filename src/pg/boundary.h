/*
 * boundary.h - crossing from PostgreSQL into the core and back.
 *
 * src/pg calls only the noexcept functions of core/api.h. A failed call
 * leaves a wi::Status (plain data); ReportCoreFailure raises it as a
 * PostgreSQL error under the core's SQLSTATE, after the C++ call has fully
 * returned, so the longjmp never crosses a C++ frame.
 */
#pragma once

#include "pg/postgres_includes.h"

#include "core/api.h"

#include <optional>
#include <string_view>
#include <type_traits>

/*
 * The core's types that src/pg keeps on its stack across calls that may
 * raise (CheckCore itself, palloc, SPI): a longjmp skips their destructors,
 * so they must have none. A member with one (a std::string in a request,
 * say) fails here, at compile time, not as a leak under an error.
 */
static_assert(std::is_trivially_destructible_v<wi::Status>);
static_assert(std::is_trivially_destructible_v<wi::VerifyRequest>);
static_assert(std::is_trivially_destructible_v<wi::HandshakeReply>);
static_assert(std::is_trivially_destructible_v<std::optional<std::string_view>>);

/* Raises st (which must not be ok) as an ERROR with its SQLSTATE. */
[[noreturn]] void ReportCoreFailure(const wi::Status &st);

/* Raises st as an ERROR unless it is ok. */
static inline void
CheckCore(bool ok, const wi::Status &st)
{
	if (!ok)
		ReportCoreFailure(st);
}
