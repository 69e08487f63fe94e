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

/* Raises st (which must not be ok) as an ERROR with its SQLSTATE. */
[[noreturn]] void ReportCoreFailure(const wi::Status &st);

/* Raises st as an ERROR unless it is ok. */
static inline void
CheckCore(bool ok, const wi::Status &st)
{
	if (!ok)
		ReportCoreFailure(st);
}
