#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on loopback for the event-store tests and print its
# SQLAlchemy URL on the last line. Installs Debian's package if the server is missing.
# Usage: url=$(bash .ci/postgres.sh [PORT]) ; exits non-zero when it cannot start.
set -euo pipefail
# A free loopback port unless one is given (a server left from an earlier run may hold one).
port="${1:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  echo "postgres: installing the Debian package" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >&2
  bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi
run_as() {  # the server refuses to run as root
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
dir=$(mktemp -d /tmp/complement-pg.XXXXXX)
[ "$(id -u)" = 0 ] && chown postgres "$dir"
run_as "$bindir/initdb" -D "$dir/data" -U complement --auth=trust -E UTF8 >/dev/null
run_as "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=on" start >/dev/null
echo "postgres: stop it with: $bindir/pg_ctl -D $dir/data stop (as the postgres user if root)" >&2
echo "postgres-data-dir: $dir" >&2
echo "postgresql+psycopg://complement@127.0.0.1:$port/postgres"
