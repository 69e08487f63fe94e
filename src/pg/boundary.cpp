/*
 * boundary.cpp - turning a core Status into a PostgreSQL error.
 */
#include "pg/boundary.h"

void
ReportCoreFailure(const wi::Status &st)
{
	const char *s = st.sqlstate;
	int			code = ERRCODE_INTERNAL_ERROR;

	if (strlen(s) == 5)
		code = MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]);
	ereport(ERROR, (errcode(code), errmsg("%s", st.message)));
	pg_unreachable();
}
