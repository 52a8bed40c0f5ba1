#!/usr/bin/env bash
# scripts/docker-up.sh — a private Docker engine for the testcontainers path.
#
# Installs Debian's docker.io if dockerd is absent, then starts dockerd with
# settings that work on a machine without overlayfs-in-overlayfs or iptables
# (vfs storage, no iptables rules), with its own data root, exec root and
# socket so it never meets a system Docker. Idempotent: an engine already
# answering on the socket is reused. Prints the DOCKER_HOST line to use:
#
#   eval "$(scripts/docker-up.sh)"     # exports DOCKER_HOST
#
# Stop it again with scripts/docker-down.sh. Logs go to $SAGACHAOS_DOCKER_ROOT/dockerd.log.
set -euo pipefail

# The data root on /dev/shm when it is a tmpfs with room: vfs storage copies
# an image's whole layer for every container, and a copy into memory is
# several times faster than onto this machine's disk (the harness puts its
# PostgreSQL data dirs there for the same reason). Nothing in it needs to
# survive a reboot: scripts/pg-image.sh rebuilds the image in seconds.
default_root=/var/lib/sagachaos-docker
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ "$(df -Pk /dev/shm | awk 'NR==2 {print $4}')" -gt 4000000 ]; then
  default_root=/dev/shm/sagachaos-docker
fi
root=${SAGACHAOS_DOCKER_ROOT:-$default_root}
exec_root=${SAGACHAOS_DOCKER_EXEC_ROOT:-/run/sagachaos-docker}
sock=${SAGACHAOS_DOCKER_SOCK:-$exec_root/docker.sock}
log=$root/dockerd.log

say() { echo "docker-up: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
  say "dockerd needs root here (rootless Docker is not set up by this script); run as root or point DOCKER_HOST at your own engine"
  exit 2
fi

if ! command -v dockerd >/dev/null 2>&1; then
  say "installing docker.io (Debian's package)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # policy-rc.d keeps the package's service from starting: we run our own engine.
  apt-get install -y -qq --no-install-recommends docker.io >/dev/null
fi

# The Debian client (20.10) speaks to the Debian engine; a newer client on
# PATH negotiates down, so either works.
docker_cli=$(command -v docker)

mkdir -p "$root" "$exec_root"
if DOCKER_HOST="unix://$sock" "$docker_cli" version >/dev/null 2>&1; then
  say "engine already up on $sock"
  echo "export DOCKER_HOST=unix://$sock"
  exit 0
fi

# A stale pid file from a killed engine would make dockerd refuse to start.
rm -f "$exec_root/docker.pid" "$sock"
t0=$(date +%s.%N)
# setsid: the engine outlives this script and is not in the caller's
# process group (a Ctrl-C of a test run must not take it down).
setsid dockerd \
  --storage-driver=vfs --iptables=false --ip6tables=false \
  --data-root "$root/data" --exec-root "$exec_root" \
  --pidfile "$exec_root/docker.pid" \
  -H "unix://$sock" >"$log" 2>&1 </dev/null &
for _ in $(seq 1 300); do
  if DOCKER_HOST="unix://$sock" "$docker_cli" version >/dev/null 2>&1; then
    t1=$(date +%s.%N)
    say "engine up on $sock in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s (pid $(cat "$exec_root/docker.pid" 2>/dev/null), log $log)"
    echo "export DOCKER_HOST=unix://$sock"
    exit 0
  fi
  if ! kill -0 $! 2>/dev/null; then
    say "dockerd exited during start; last lines of $log:"
    tail -20 "$log" >&2
    exit 2
  fi
  sleep 0.1
done
say "dockerd not answering on $sock after 30 s; last lines of $log:"
tail -20 "$log" >&2
exit 2
