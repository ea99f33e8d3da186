#!/usr/bin/env bash
# Proves, without a Docker engine, that the runtime stage of the Dockerfile is enough to run chgate:
#
#   1. reads the runtime stage's `apt-get install` list from the Dockerfile (the one source),
#   2. builds a minimal Debian bookworm root filesystem holding only those packages
#      (debootstrap --variant=minbase), and adds the image's user the same way (UID/GID 10001),
#   3. copies the stripped chgate (and chgate-cli, when built) and the health-check script where
#      the image puts them,
#   4. checks that no shared library is missing (ldd inside the root filesystem),
#   5. runs chgate there as 10001:10001 (chroot --userspec) against the local ClickHouse and
#      checks: health answers, the image's health check passes, an insert commits, SIGTERM drains
#      a held batch and exits 0; with chgate-cli: its health, insert and query commands work there
#      (tests/ops/rootfs_check.py).
#
# Needs root (debootstrap, chroot, mounts), network access to the Debian archive for step 2, and the
# local ClickHouse (deploy/clickhouse/clickhousectl.sh start). The root filesystem is kept in
# .local/rootfs/ and rebuilt only when the package list changes (--fresh rebuilds it anyway).
#
#   tests/ops/runtime_rootfs.sh [--fresh] [--chgate build/server/chgate]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CHGATE=$ROOT/build/server/chgate
FRESH=false
MIRROR=${CHGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
while (($# > 0)); do
  case $1 in
    --fresh) FRESH=true ;;
    --chgate) CHGATE=$2; shift ;;
    --chgate=*) CHGATE=${1#--chgate=} ;;
    *) echo "usage: $0 [--fresh] [--chgate PATH]" >&2; exit 2 ;;
  esac
  shift
done

log() { printf 'runtime-rootfs: %s\n' "$*"; }
die() { printf 'runtime-rootfs: FAIL: %s\n' "$*" >&2; exit 1; }

((EUID == 0)) || die "needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || die "debootstrap missing (deploy/install-ops-deps.sh --rootfs)"
[[ -x $CHGATE ]] || die "chgate binary $CHGATE missing (make build)"

# 1. The runtime stage's package list: the `apt-get install` of the stage named "runtime".
mapfile -t PACKAGES < <(awk '
  /^FROM / { in_runtime = ($0 ~ / AS runtime$/); grab = 0 }
  in_runtime && !done && /apt-get install/ { grab = 1; done = 1; sub(/.*apt-get install/, "") }
  grab {
    line = $0; sub(/\\$/, "", line)
    n = split(line, words, /[ \t]+/)
    for (i = 1; i <= n; i++) {
      if (words[i] == "&&") { grab = 0; break }
      if (words[i] ~ /^[a-z0-9][a-z0-9+.-]+$/) print words[i]
    }
  }' "$ROOT/Dockerfile")
((${#PACKAGES[@]} > 0)) || die "no runtime package list found in the Dockerfile"
log "runtime packages (from the Dockerfile): ${PACKAGES[*]}"

# 2. The root filesystem.
include=$(IFS=,; echo "${PACKAGES[*]}")
key=$(printf '%s' "bookworm minbase $include" | sha256sum | cut -c1-12)
RFS=$ROOT/.local/rootfs/bookworm-$key
if $FRESH && [[ -d $RFS ]]; then
  rm -rf --one-file-system "$RFS"
fi
if [[ -f $RFS/.chgate-complete ]]; then
  log "reusing $RFS (package list unchanged; --fresh rebuilds)"
else
  rm -rf --one-file-system "$RFS"
  mkdir -p "$(dirname "$RFS")"
  t0=$SECONDS
  log "debootstrap --variant=minbase --include=$include bookworm"
  if ! debootstrap --variant=minbase --include="$include" bookworm "$RFS" "$MIRROR" \
      >"$RFS.debootstrap.log" 2>&1; then
    tail -n 30 "$RFS.debootstrap.log" >&2
    die "debootstrap failed (log: $RFS.debootstrap.log)"
  fi
  log "debootstrap took $((SECONDS - t0)) s"
  # The image's user, created the way the Dockerfile creates it.
  chroot "$RFS" groupadd --gid 10001 chgate
  chroot "$RFS" useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin chgate
  touch "$RFS/.chgate-complete"
fi
log "root filesystem: $(du -sh --one-file-system "$RFS" | cut -f1), $(chroot "$RFS" dpkg-query -W | wc -l) packages"

# 3. The binary, stripped as the image's build stage does, and the health-check script.
install -D -m 0755 "$CHGATE" "$RFS/usr/local/bin/chgate"
strip "$RFS/usr/local/bin/chgate"
install -D -m 0755 "$ROOT/deploy/docker/healthcheck.sh" "$RFS/usr/local/bin/chgate-healthcheck"
log "stripped binary: $(stat -c %s "$RFS/usr/local/bin/chgate") bytes"

# chgate-cli too, when it is built (the image ships it; the compose steps of docs/operations.md use it).
CLI=${CHGATE_CLI:-$(dirname "$CHGATE")/../client/chgate-cli}
binaries=(chgate)
if [[ -x $CLI ]]; then
  install -D -m 0755 "$CLI" "$RFS/usr/local/bin/chgate-cli"
  strip "$RFS/usr/local/bin/chgate-cli"
  binaries+=(chgate-cli)
else
  rm -f "$RFS/usr/local/bin/chgate-cli"
  log "chgate-cli not built ($(realpath -m --relative-to="$ROOT" "$CLI")): only chgate is checked"
fi

# 4. Every shared library resolves inside the root filesystem.
for b in "${binaries[@]}"; do
  ldd_out=$(chroot "$RFS" /usr/bin/ldd "/usr/local/bin/$b")
  if grep -q 'not found' <<<"$ldd_out"; then
    grep 'not found' <<<"$ldd_out" >&2
    die "shared libraries of $b missing in the runtime root filesystem"
  fi
  log "ldd $b: $(grep -c '=>' <<<"$ldd_out") libraries, none missing"
done

# 5. Run it. /proc and /dev as a container runtime provides them; unmounted on exit.
mounted=()
cleanup() {
  local m
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    m=${mounted[i]}
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}
trap cleanup EXIT
for m in proc dev; do
  mountpoint -q "$RFS/$m" && continue
  mkdir -p "$RFS/$m"
  if [[ $m == proc ]]; then mount -t proc proc "$RFS/proc"; else mount --bind /dev "$RFS/dev"; fi
  mounted+=("$RFS/$m")
done

/usr/bin/python3 "$ROOT/tests/ops/rootfs_check.py" --rootfs "$RFS"
log "PASS"
