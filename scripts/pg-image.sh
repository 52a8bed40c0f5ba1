#!/usr/bin/env bash
# scripts/pg-image.sh [TAG] — build a PostgreSQL image without a registry.
#
# No image registry is reachable here, so the image is made locally from the
# host's own Debian PostgreSQL package: the server binaries (postgres,
# initdb), the shared libraries ldd lists for them and for the extension
# modules, the share files, a little time-zone data, dash for initdb's
# popen and the entrypoint, and passwd/group entries for a postgres user.
# The root filesystem is tarred into `docker import`: one layer of ~60 MB
# (vfs storage copies whole layers, so small matters), built in seconds,
# where a debootstrap'd Debian with postgresql-15 is ~630 MB and minutes.
# The entrypoint (scripts/pg-image/docker-entrypoint.sh) speaks the official
# image's POSTGRES_* variables, so testcontainers' postgres module drives it
# like postgres:15.
#
# Idempotent: an image with TAG built from the same inputs is kept. Needs
# DOCKER_HOST (scripts/docker-up.sh) and root (to chown the root filesystem).
# Prints the image tag on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:-sagachaos/postgres:15-local}
say() { echo "pg-image: $*" >&2; }

pgver=15
pgbin=/usr/lib/postgresql/$pgver/bin
pglib=/usr/lib/postgresql/$pgver/lib
pgshare=/usr/share/postgresql/$pgver
if [ ! -x "$pgbin/postgres" ]; then
  say "installing postgresql-$pgver (the image is made of the host's package files)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "postgresql-$pgver" >/dev/null
  (command -v service >/dev/null && service postgresql stop) >/dev/null 2>&1 || true
fi

entry=scripts/pg-image/docker-entrypoint.sh
inputs=$( { sha256sum "$0" "$entry"; "$pgbin/postgres" --version; dpkg-query -W -f '${Version}\n' libc6 "postgresql-$pgver" 2>/dev/null || true; } | sha256sum | cut -c1-16)
if have=$(docker image inspect "$tag" --format '{{index .Config.Labels "sagachaos.build"}}' 2>/dev/null) && [ "$have" = "$inputs" ]; then
  say "$tag is up to date (build $inputs)"
  echo "$tag"
  exit 0
fi

t0=$(date +%s.%N)
rootfs=$(mktemp -d /tmp/sagachaos-pgimage-XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
chmod 0755 "$rootfs" # mktemp made it 0700: the image's / must be world-readable
uid=999 gid=999 # the image's own postgres user; the host's uid does not matter

mkdir -p "$rootfs"/{usr/bin,usr/lib,usr/lib64,usr/sbin,etc,tmp,proc,sys,dev,run/postgresql,var/lib/postgresql,usr/local/bin,usr/share/zoneinfo/Etc}
# Debian's merged /usr: /bin, /lib, /lib64 are links into /usr, and ldd
# names libraries by the /lib path.
ln -s usr/bin "$rootfs/bin"
ln -s usr/lib "$rootfs/lib"
ln -s usr/lib64 "$rootfs/lib64"
ln -s usr/sbin "$rootfs/sbin"
ln -s ../run "$rootfs/var/run"
chmod 1777 "$rootfs/tmp"

# put FILE: copy it (links followed) into the same directory of the image,
# resolving the directory as the host does (/lib/x86_64-linux-gnu is
# /usr/lib/x86_64-linux-gnu).
put() {
  local dir
  dir=$(realpath "$(dirname "$1")")
  mkdir -p "$rootfs$dir"
  cp -L "$1" "$rootfs$dir/$(basename "$1")"
}
# deps FILE...: the shared libraries they load; fails if one is missing.
deps() {
  ldd "$@" 2>/dev/null | awk '/not found/ {bad=1} /=>/ && $3 ~ /^\// {print $3} /^\t\// {print $1} END {exit bad}'
}

put "$pgbin/postgres"
put "$pgbin/initdb"
put /usr/bin/dash
ln -s dash "$rootfs/usr/bin/sh"
mods=()
for so in "$pglib"/*.so; do
  case $(basename "$so") in llvmjit.so) continue ;; esac # JIT needs libLLVM (~100 MB)
  if deps "$so" >/dev/null; then mods+=("$so"); fi
done
for so in "${mods[@]}"; do put "$so"; done
for lib in $(deps "$pgbin/postgres" "$pgbin/initdb" /usr/bin/dash "${mods[@]}" | sort -u); do
  put "$lib"
done
mkdir -p "$rootfs/usr/share/postgresql"
cp -a "$pgshare" "$rootfs/usr/share/postgresql/"
# Debian builds with the system's time-zone data; the run uses UTC.
for z in UTC GMT Etc/UTC Etc/GMT; do cp -L "/usr/share/zoneinfo/$z" "$rootfs/usr/share/zoneinfo/$z"; done
install -m 0755 "$entry" "$rootfs/usr/local/bin/docker-entrypoint.sh"
cat >"$rootfs/etc/passwd" <<EOF
root:x:0:0:root:/root:/bin/sh
postgres:x:$uid:$gid:PostgreSQL administrator:/var/lib/postgresql:/bin/sh
EOF
cat >"$rootfs/etc/group" <<EOF
root:x:0:
postgres:x:$gid:
EOF
chown "$uid:$gid" "$rootfs/var/lib/postgresql" "$rootfs/run/postgresql"
chmod 2775 "$rootfs/run/postgresql"

size=$(du -sm "$rootfs" | cut -f1)
tar --numeric-owner -C "$rootfs" -c . | docker import \
  --change "ENV PATH=$pgbin:/usr/bin:/bin" \
  --change 'ENV PGDATA=/var/lib/postgresql/data' \
  --change 'ENV TZ=UTC' \
  --change 'USER postgres' \
  --change 'WORKDIR /var/lib/postgresql' \
  --change 'EXPOSE 5432' \
  --change "LABEL sagachaos.build=$inputs" \
  --change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
  --change 'CMD ["postgres"]' \
  - "$tag" >/dev/null
t1=$(date +%s.%N)
say "built $tag: ${size} MB root filesystem (${#mods[@]} extension modules), $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s"
echo "$tag"
