#!/bin/bash
# citus.sh - makes Citus available to the scale-out suite (test/t/050_citus.pl).
#
#   1. A Citus already installed into this PostgreSQL (citus.so and
#      citus.control in pg_config's directories) is used as it is. Users get
#      it from Citus's own packages (Debian 12's archive has none):
#        curl https://install.citusdata.com/community/deb.sh | sudo bash
#        sudo apt-get install postgresql-15-citus-13.2
#   2. Else, when CITUS_SRC names a Citus source tarball (a path relative to
#      the repository is resolved against it; .ci/run passes
#      ../shared/vendor/citus-13.2.2.tar.gz when it exists), it is built once
#      per machine (nice -n 19, make -j2) in $CITUS_BUILD_DIR and installed
#      under the install lock (/tmp/webhook_idem.lock; set
#      WEBHOOK_IDEM_LOCK_HELD=1 when the caller already holds it). Later runs
#      find the installed Citus (case 1) and build nothing.
#      The one fix the build needs stays outside the repository's files:
#      PostgreSQL 15.20 declares have_createdb_privilege() in
#      commands/dbcommands.h, which clashes with Citus 13.2's static inline of
#      that name in src/include/pg_version_compat.h; the build copy renames
#      Citus's copy, so Citus calls PostgreSQL's own.
#   3. Otherwise it says what is missing and exits 0: the suite skips itself
#      with the same message. --require makes that an error (exit 1).
#
# Citus 13.2 is the last release that supports PostgreSQL 15; the build needs
# Debian's liblz4-dev, libzstd-dev and libkrb5-dev (scripts/setup.sh installs
# them) and is configured --without-libcurl (no usage statistics).
#
#   scripts/citus.sh [--require]      make Citus available, or say why not
#   scripts/citus.sh --status         print the installed Citus version, or exit 1
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
pg_config=${PG_CONFIG:-pg_config}
pkglibdir=$("$pg_config" --pkglibdir)
sharedir=$("$pg_config" --sharedir)
pg_major=$("$pg_config" --version | sed -n 's/^PostgreSQL \([0-9]*\).*/\1/p')
build_root=${CITUS_BUILD_DIR:-/var/tmp/webhook_idem-citus}
lock=/tmp/webhook_idem.lock
mode=${1:-}

# Prints the version of the installed Citus (its control file's default_version).
installed_version() {
	local control=$sharedir/extension/citus.control
	[ -e "$pkglibdir/citus.so" ] && [ -e "$control" ] || return 1
	sed -n "s/^default_version = '\(.*\)'/\1/p" "$control"
}

# Says why the Citus suite cannot run, and stops (an error under --require).
missing() {
	echo "citus.sh: Citus is not available: $*" >&2
	echo "citus.sh: the Citus suite (test/t/050_citus.pl) will be SKIPPED." >&2
	echo "citus.sh: install postgresql-$pg_major-citus-13.2 from Citus's packages, or pass CITUS_SRC=<citus-13.2.x.tar.gz>" >&2
	[ "$mode" = "--require" ] && exit 1
	exit 0
}

if [ "$mode" = "--status" ]; then
	installed_version && exit 0
	exit 1
fi

if v=$(installed_version); then
	echo "citus.sh: Citus $v is installed in $pkglibdir: using it"
	exit 0
fi

[ -n "${CITUS_SRC:-}" ] || missing "no Citus installed in $pkglibdir and CITUS_SRC is not set"
src=$CITUS_SRC
case "$src" in /*) ;; *) src=$repo/$src ;; esac
[ -f "$src" ] || missing "CITUS_SRC=$CITUS_SRC: no such file ($src)"
for pkg in liblz4-dev libzstd-dev libkrb5-dev; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
		missing "the build needs $pkg (scripts/setup.sh installs it)"
done
if [ "$(id -u)" -ne 0 ] && [ ! -w "$pkglibdir" ]; then
	missing "building from $src needs root to install into $pkglibdir"
fi

# Build once: the tree of a finished build is kept (stamped with the
# tarball's digest) and only installed again when the installed copy is gone.
sum=$(sha256sum "$src" | cut -c1-16)
build=$build_root/$sum
mkdir -p "$build_root"
if [ ! -e "$build/.built" ]; then
	echo "citus.sh: building Citus from $src in $build (once per machine)"
	start=$(date +%s)
	rm -rf "$build"
	mkdir -p "$build"
	tar -xzf "$src" -C "$build" --strip-components=1
	compat=$build/src/include/pg_version_compat.h
	grep -q '^have_createdb_privilege(void)' "$compat" &&
		sed -i 's/^have_createdb_privilege(void)/citus_compat_have_createdb_privilege(void)/' "$compat"
	(
		cd "$build"
		nice -n 19 ./configure --without-libcurl PG_CONFIG="$(command -v "$pg_config")" >configure.log 2>&1 ||
			{ tail -20 configure.log >&2; exit 1; }
		nice -n 19 make -j2 with_llvm=no >make.log 2>&1 || { tail -40 make.log >&2; exit 1; }
	)
	touch "$build/.built"
	echo "citus.sh: built in $(($(date +%s) - start)) s"
fi
echo "citus.sh: installing Citus into $pkglibdir"
if [ -n "${WEBHOOK_IDEM_LOCK_HELD:-}" ]; then
	make -C "$build" with_llvm=no install >"$build/install.log" 2>&1
else
	exec 9>>"$lock"
	if ! flock -n 9; then
		echo "citus.sh: waiting for the install lock $lock (set WEBHOOK_IDEM_LOCK_HELD=1 if this command runs under it)"
		flock -w 1800 9 || { echo "citus.sh: could not take $lock" >&2; exit 1; }
	fi
	make -C "$build" with_llvm=no install >"$build/install.log" 2>&1
	flock -u 9
fi
v=$(installed_version) || { tail -20 "$build/install.log" >&2; echo "citus.sh: make install did not install Citus" >&2; exit 1; }
echo "citus.sh: Citus $v installed"
