#!/usr/bin/env bash
# scripts/docker-down.sh — stop the engine scripts/docker-up.sh started.
# Removes every container and network sagachaos labelled first (the run
# store and the images stay: a later docker-up reuses them).
set -uo pipefail

exec_root=${SAGACHAOS_DOCKER_EXEC_ROOT:-/run/sagachaos-docker}
sock=${SAGACHAOS_DOCKER_SOCK:-$exec_root/docker.sock}
pidf=$exec_root/docker.pid

export DOCKER_HOST="unix://$sock"
if docker version >/dev/null 2>&1; then
  ids=$(docker ps -aq --filter label=sagachaos.run)
  [ -n "$ids" ] && docker rm -f -v $ids >/dev/null
  nets=$(docker network ls -q --filter label=sagachaos.run)
  [ -n "$nets" ] && docker network rm $nets >/dev/null
fi
if [ -f "$pidf" ]; then
  pid=$(cat "$pidf")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    # A killed dockerd may stay a zombie under a PID 1 that does not reap.
    st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo gone)
    [ "$st" = gone ] || [ "$st" = Z ] && break
    sleep 0.1
  done
  st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo gone)
  if [ "$st" != gone ] && [ "$st" != Z ]; then
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidf"
  echo "docker-down: engine $pid stopped" >&2
else
  echo "docker-down: no engine pid file at $pidf" >&2
fi
