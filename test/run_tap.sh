#!/bin/bash
# run_tap.sh - runs the TAP suites in test/t/*.pl with prove, against the
# webhook_idem installed system-wide (make install), on throwaway clusters
# created by PostgreSQL::Test::Cluster.
#
# PostgreSQL refuses to run as root: when started as root, the tests are
# copied to a fresh temporary directory owned by the postgres user and run
# as that user. Exits non-zero if any test fails. The logs of the last run
# are kept in tmp_check/tap_log/.
#
#   bash test/run_tap.sh                 every test in test/t
#   bash test/run_tap.sh 001_crash_in_handler.pl   some of them
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
pg_config=${PG_CONFIG:-pg_config}
bindir=$("$pg_config" --bindir)
pgxsdir=$(dirname "$("$pg_config" --pgxs)")/../..
pgxsdir=$(cd "$pgxsdir" && pwd)
perl_dir=$pgxsdir/src/test/perl
pg_regress=$pgxsdir/src/test/regress/pg_regress
run_as=${TAP_USER:-postgres}

for need in "$perl_dir/PostgreSQL/Test/Cluster.pm" "$bindir/pgbench" "$bindir/initdb"; do
	if [ ! -e "$need" ]; then
		echo "run_tap.sh: $need is missing (postgresql-server-dev / postgresql packages)" >&2
		exit 1
	fi
done
if ! perl -MIPC::Run -e 1 2>/dev/null; then
	echo "run_tap.sh: the Perl module IPC::Run is missing (apt-get install libipc-run-perl)" >&2
	exit 1
fi

tests=()
if [ $# -gt 0 ]; then
	for t in "$@"; do tests+=("t/$(basename "$t")"); done
else
	for t in "$repo"/test/t/*.pl; do tests+=("t/$(basename "$t")"); done
fi

work=$(mktemp -d /tmp/webhook_idem_tap.XXXXXX)
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
# What the tests read from the repository is copied too (a checkout may be
# in a directory the postgres user cannot enter, such as /root).
cp -r "$repo/test/t" "$work/t"
cp -r "$repo/test/perl" "$work/perl"
mkdir -p "$work/examples"
cp -r "$repo/examples/." "$work/examples/"

run=()
if [ "$(id -u)" -eq 0 ]; then
	chown -R "$run_as" "$work"
	run=(runuser -u "$run_as" --)
fi

status=0
(cd "$work" && "${run[@]}" env -i \
	PATH="$bindir:/usr/local/bin:/usr/bin:/bin" \
	PERL5LIB="$perl_dir:$work/perl" \
	PG_REGRESS="$pg_regress" \
	TESTDIR="$work" \
	HOME="$work" \
	WEBHOOK_IDEM_ROOT="$work" \
	LANG=C.UTF-8 \
	PG_TEST_TIMEOUT_DEFAULT="${PG_TEST_TIMEOUT_DEFAULT:-120}" \
	prove -v --timer "${tests[@]}") || status=$?

# Keep the logs of the last run (tmp_check/ is ignored by git).
rm -rf "$repo/tmp_check/tap_log"
if [ -d "$work/tmp_check/log" ]; then
	mkdir -p "$repo/tmp_check"
	cp -r "$work/tmp_check/log" "$repo/tmp_check/tap_log"
fi
if [ "$status" -ne 0 ]; then
	echo "run_tap.sh: TAP tests failed (exit $status); server and test logs are in tmp_check/tap_log/" >&2
fi
exit "$status"
