#!/bin/bash
# setup.sh - installs from Debian's archive everything webhook_idem needs to
# build, test, demo and benchmark on Debian 12 with PostgreSQL 15. Idempotent:
# packages already present are not touched, and apt-get runs only when
# something is missing. Usage: scripts/setup.sh [bench]
set -euo pipefail

packages=(
  postgresql-15 postgresql-contrib postgresql-server-dev-15 postgresql-15-cron
  libssl-dev libipc-run-perl make g++ clang libclang-rt-14-dev
  libgtest-dev libbenchmark-dev libpq-dev python3-psycopg2 curl openssl nodejs
  postgresql-plperl-15 postgresql-plpython3-15  # handlers in PL/Perl and PL/Python (test handler_languages)
  libcurl4-openssl-dev   # builds pg_net for the relay suite (scripts/pg_net.sh)
  liblz4-dev libzstd-dev libkrb5-dev  # to build Citus for the scale-out suite (scripts/citus.sh)
)
if [[ "${1:-}" == "bench" ]]; then
  packages+=(redis-server libhiredis-dev python3-matplotlib wrk)
fi

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing packages (${missing[*]}); run as root or install them" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all packages present"
