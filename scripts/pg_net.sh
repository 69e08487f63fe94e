#!/bin/bash
# pg_net.sh - makes pg_net (supabase/pg_net, Apache-2.0) available to the
# relay suite (test/t/040_relay.pl), without committing anything of it:
#   1. a pg_net already installed for this PostgreSQL is used as it is;
#   2. else, PG_NET_SRC=<pg_net-x.y.z.tar.gz> given, that release source is
#      built once per machine (Debian's libcurl4-openssl-dev, installed by
#      scripts/setup.sh) and installed with `make install`: later runs find
#      it installed (step 1);
#   3. else the relay suite is skipped, and this says why.
# Never fails the build: exit 0 in every case; prints one "pg_net: ..." line.
#   PG_NET_SRC=/path/to/pg_net-0.20.5.tar.gz bash scripts/pg_net.sh
set -uo pipefail

pg_config=${PG_CONFIG:-pg_config}
libdir=$("$pg_config" --pkglibdir)
sharedir=$("$pg_config" --sharedir)

installed() {
	[ -e "$libdir/pg_net.so" ] && [ -e "$sharedir/extension/pg_net.control" ]
}

if installed; then
	echo "pg_net: installed ($libdir/pg_net.so); the relay suite runs"
	exit 0
fi

src=${PG_NET_SRC:-}
if [ -z "$src" ]; then
	echo "pg_net: not installed and no PG_NET_SRC given; the relay suite (040_relay.pl) will be skipped"
	exit 0
fi
if [ ! -f "$src" ]; then
	echo "pg_net: PG_NET_SRC=$src is not a file; the relay suite (040_relay.pl) will be skipped"
	exit 0
fi
if [ "$(id -u)" -ne 0 ] && [ ! -w "$libdir" ]; then
	echo "pg_net: building $src needs write access to $libdir (run as root); the relay suite will be skipped"
	exit 0
fi
if [ ! -e /usr/include/x86_64-linux-gnu/curl/curl.h ] && [ ! -e /usr/include/curl/curl.h ]; then
	echo "pg_net: libcurl headers missing (apt-get install libcurl4-openssl-dev, or make setup); the relay suite will be skipped"
	exit 0
fi

# Built in a directory of its own, outside the repository, and removed after
# the install: the installed files are what later runs reuse.
work=$(mktemp -d /tmp/webhook_idem_pg_net.XXXXXX)
trap 'rm -rf "$work"' EXIT
log="$work/build.log"
if ! tar -xzf "$src" -C "$work" >"$log" 2>&1; then
	echo "pg_net: cannot unpack $src; the relay suite will be skipped"
	exit 0
fi
dir=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
if (cd "$dir" && make -j2 PG_CONFIG="$pg_config" && make install PG_CONFIG="$pg_config") >>"$log" 2>&1 && installed; then
	echo "pg_net: built and installed from $(basename "$src"); the relay suite runs"
else
	echo "pg_net: building $(basename "$src") failed; the relay suite will be skipped. Last lines of the build:"
	tail -n 20 "$log" | sed 's/^/  /'
fi
exit 0
