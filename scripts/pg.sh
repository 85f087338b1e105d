#!/usr/bin/env bash
# Local PostgreSQL for Sluicegate: the Debian cluster, installed from Debian when missing.
#
#   pg.sh up      install if needed, start the newest Debian cluster, create role + database
#   pg.sh down    stop the cluster
#   pg.sh reset   drop and recreate the sluicegate database (other databases are untouched)
#   pg.sh status  exit 0 when the server accepts connections
#
# The role and database are both `sluicegate` with password `sluicegate`, reachable at
# 127.0.0.1:5432, the default SLUICEGATE_PG_DSN. `up` on a running cluster only makes sure
# the role and database exist.
set -euo pipefail

log() { echo "postgres: $*" >&2; }

as_postgres() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    sudo -n -u postgres -- "$@"
  fi
}

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi
}

version() { ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1; }

install() {
  if [ -z "$(version)" ] || [ ! -x "/usr/lib/postgresql/$(version)/bin/postgres" ]; then
    log "installing PostgreSQL from Debian"
    as_root apt-get update -qq
    # policy-rc.d-free installs start the cluster themselves; we start it below either way.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
}

cluster_up() {
  local v
  v=$(version)
  if ! pg_lsclusters -h | awk -v v="$v" '$1 == v && $2 == "main"' | grep -q .; then
    as_root pg_createcluster "$v" main >/dev/null
  fi
  if ! pg_lsclusters -h | awk -v v="$v" '$1 == v && $2 == "main" && $4 == "online"' | grep -q .; then
    as_root pg_ctlcluster "$v" main start
  fi
  for _ in $(seq 1 60); do
    pg_isready -q -h 127.0.0.1 -p 5432 && return
    sleep 0.5
  done
  log "not accepting connections after 30 s; see /var/log/postgresql/"
  exit 1
}

ensure_database() {
  as_postgres psql -q -v ON_ERROR_STOP=1 -d postgres <<'SQL'
SELECT 'CREATE ROLE sluicegate LOGIN CREATEDB PASSWORD ''sluicegate'''
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sluicegate') \gexec
SELECT 'CREATE DATABASE sluicegate OWNER sluicegate'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'sluicegate') \gexec
SQL
}

case "${1:-}" in
  up)
    install
    cluster_up
    ensure_database
    log "up on 127.0.0.1:5432 (PostgreSQL $(version), database sluicegate)"
    ;;
  down)
    v=$(version)
    [ -n "$v" ] && as_root pg_ctlcluster "$v" main stop 2>/dev/null || true
    log "stopped"
    ;;
  reset)
    cluster_up
    as_postgres psql -q -d postgres -c "DROP DATABASE IF EXISTS sluicegate WITH (FORCE)"
    ensure_database
    log "database sluicegate recreated"
    ;;
  status) pg_isready -q -h 127.0.0.1 -p 5432 ;;
  *) echo "usage: $0 up|down|reset|status" >&2; exit 2 ;;
esac
