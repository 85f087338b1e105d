#!/usr/bin/env bash
# Local single-node Apache Kafka (KRaft broker+controller) without Docker.
#
#   kafka.sh up      fetch the broker classpath from Maven Central (cached), format, start
#   kafka.sh down    stop the broker
#   kafka.sh reset   stop and wipe the broker's data (the classpath cache stays)
#   kafka.sh status  exit 0 when the broker answers on its port
#
# State lives under $SLUICEGATE_VAR (default: <repo>/var/kafka). `up` on a running broker
# does nothing. The port comes from SLUICEGATE_KAFKA (default 127.0.0.1:9092); the
# controller listens on port+1.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
var=${SLUICEGATE_VAR:-$repo/var}/kafka
libs=$var/libs
data=$var/data
logs=$var/logs
pidfile=$var/kafka.pid
bootstrap=${SLUICEGATE_KAFKA:-127.0.0.1:9092}
host=${bootstrap%%,*}
host=${host%:*}
port=${bootstrap##*:}
controller_port=$((port + 1))
heap=${SLUICEGATE_KAFKA_HEAP:-640m}

log() { echo "kafka: $*" >&2; }

port_open() { (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; }

running() {
  [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

ensure_tools() {
  local missing=()
  command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null || missing+=(maven)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} from Debian"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

fetch() {
  # The cache is keyed by the pom's content: editing the pom (a version bump) refetches.
  local stamp
  stamp=$(sha256sum "$here/pom.xml" | cut -c1-16)
  if [ -f "$libs/.stamp" ] && [ "$(cat "$libs/.stamp")" = "$stamp" ]; then
    return
  fi
  ensure_tools
  log "resolving the broker classpath from Maven Central"
  rm -rf "$libs.tmp"
  mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$libs.tmp" -DincludeScope=runtime >"$var/mvn.log" 2>&1 || {
    log "maven failed; see $var/mvn.log"
    tail -20 "$var/mvn.log" >&2
    exit 1
  }
  rm -rf "$libs" && mv "$libs.tmp" "$libs"
  echo "$stamp" >"$libs/.stamp"
}

java_args() {
  echo -Xms256m "-Xmx$heap" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true "-Dlog4j2.configurationFile=$here/log4j2.properties" \
    "-Dkafka.logs.dir=$logs"
}

java_cmd() {
  # shellcheck disable=SC2046 # the arguments hold no spaces (paths under the repo do not)
  java $(java_args) -cp "$libs/*" "$@"
}

configure() {
  mkdir -p "$data" "$logs"
  sed -e "s#@DATA@#$data#g; s#@PORT@#$port#g; s#@CONTROLLER_PORT@#$controller_port#g" \
    "$here/server.properties.in" >"$var/server.properties"
  if [ ! -f "$data/logs/meta.properties" ]; then
    local cluster_id
    cluster_id=$(java_cmd kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
    java_cmd kafka.tools.StorageTool format -t "$cluster_id" -c "$var/server.properties" \
      >"$logs/format.log" 2>&1 || { cat "$logs/format.log" >&2; exit 1; }
    log "formatted a new KRaft cluster $cluster_id"
  fi
}

up() {
  mkdir -p "$var"
  if running && port_open; then
    log "already up on $host:$port (pid $(cat "$pidfile"))"
    return
  fi
  if port_open; then
    log "something else already listens on $host:$port; using it as the broker"
    return
  fi
  fetch
  configure
  : >"$logs/server.log"
  # setsid: the broker outlives the shell (and make) that started it.
  # shellcheck disable=SC2046
  setsid nohup java $(java_args) -cp "$libs/*" kafka.Kafka "$var/server.properties" \
    >"$logs/console.log" 2>&1 </dev/null &
  echo $! >"$pidfile"
  for _ in $(seq 1 120); do
    if grep -q "Kafka Server started" "$logs/server.log" 2>/dev/null && port_open; then
      log "up on $host:$port (pid $(cat "$pidfile"), heap $heap)"
      return
    fi
    if ! running; then
      log "the broker exited during start; last lines of $logs:"
      tail -n 20 "$logs/console.log" "$logs/server.log" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
  log "not up after 60 s; see $logs/server.log"
  exit 1
}

down() {
  if running; then
    local pid
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -9 "$pid" 2>/dev/null || true
    log "stopped"
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  reset) down; rm -rf "$data" "$logs"; log "data wiped" ;;
  status) port_open ;;
  *) echo "usage: $0 up|down|reset|status" >&2; exit 2 ;;
esac
