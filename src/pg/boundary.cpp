/*
 * boundary.cpp - turning a core Status into a PostgreSQL error.
 */
#include "pg/boundary.h"

#include "pg/event_row.h"

void
ReportCoreFailure(const wi::Status &st)
{
	const char *s = st.sqlstate;
	int			code = ERRCODE_INTERNAL_ERROR;

	if (strlen(s) == 5)
		code = MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]);
	/* The message may quote input: make it valid in the database encoding
	 * (a handler's caught error is stored in last_error). */
	ereport(ERROR, (errcode(code), errmsg("%s", StorableText(st.message, WI_MAX_ERROR_BYTES))));
	pg_unreachable();
}
