#!/usr/bin/env bash
# API checks of proto/ with buf (https://buf.build), configured by proto/buf.yaml:
#
#   1. `buf lint`: the STANDARD style rules, with the exceptions listed (and explained) in buf.yaml.
#   2. `buf breaking` against the newest release image in proto/release/ (FILE rules: wire, JSON
#      and generated-source compatibility).
#   3. A self-check of step 2: a copy of the API with one field number changed must fail it, so a
#      baseline that no longer covers chgate.proto cannot pass silently.
#
# Usage:
#   tests/api/buf_check.sh                       run the checks (what `make api-check` and CI do)
#   tests/api/buf_check.sh --write-release vX.Y.Z
#                                                write proto/release/vX.Y.Z.binpb from the current
#                                                proto/ (when a release is cut; commit the file)
#
# buf comes from npm (@bufbuild/buf ships the binary) at the version pinned below, installed into
# .local/buf/ of the checkout (gitignored) when missing or at another version. No network and no
# npm is a failure, never a skip.
#
# Environment:
#   CHGATE_BUF_DIR   where buf is installed (default: <checkout>/.local/buf)
set -euo pipefail

BUF_VERSION=1.75.0

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROTO=$ROOT/proto
RELEASES=$PROTO/release
BUF_DIR=${CHGATE_BUF_DIR:-$ROOT/.local/buf}
BUF=$BUF_DIR/node_modules/.bin/buf
# buf's own cache stays inside the install folder, not in the user's home.
export BUF_CACHE_DIR=$BUF_DIR/cache

say() { echo "buf_check: $*"; }
die() {
  echo "buf_check: error: $*" >&2
  exit 1
}

install_buf() {
  local have=""
  if [[ -x $BUF ]]; then
    have=$("$BUF" --version 2>/dev/null || true)
  fi
  if [[ $have == "$BUF_VERSION" ]]; then
    return
  fi
  command -v npm >/dev/null 2>&1 || die "npm not found (deploy/install-deps.sh installs it)"
  say "installing @bufbuild/buf@$BUF_VERSION into $BUF_DIR${have:+ (found $have)}"
  mkdir -p "$BUF_DIR"
  npm install --prefix "$BUF_DIR" --no-audit --no-fund --loglevel=error \
    "@bufbuild/buf@$BUF_VERSION" || die "npm install @bufbuild/buf@$BUF_VERSION failed"
  have=$("$BUF" --version 2>/dev/null || true)
  [[ $have == "$BUF_VERSION" ]] || die "installed buf reports version '$have', expected $BUF_VERSION"
}

# The newest release image (version order), e.g. proto/release/v0.1.0.binpb.
latest_release() {
  local latest
  latest=$(find "$RELEASES" -maxdepth 1 -name 'v*.binpb' -printf '%f\n' 2>/dev/null | sort -V |
    tail -n 1)
  [[ -n $latest ]] || die "no release image (v*.binpb) in proto/release/"
  echo "$RELEASES/$latest"
}

write_release() {
  local version=$1
  [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "release version must look like v1.2.3, not '$version'"
  local out=$RELEASES/$version.binpb
  [[ ! -e $out ]] || die "$out exists already; a release image is never rewritten"
  mkdir -p "$RELEASES"
  # Without source info (comments, positions): breaking checks do not use it, and the image
  # stays small and changes only when the API does.
  (cd "$PROTO" && "$BUF" build --exclude-source-info -o "$out")
  say "wrote ${out#"$ROOT"/} ($(stat -c %s "$out") bytes); commit it"
}

check() {
  local against failed=0
  against=$(latest_release)
  say "buf $("$BUF" --version)"

  say "buf lint (proto/buf.yaml)"
  if (cd "$PROTO" && "$BUF" lint); then
    say "lint: ok"
  else
    say "lint: FAILED"
    failed=1
  fi

  say "buf breaking against ${against#"$ROOT"/}"
  if (cd "$PROTO" && "$BUF" breaking --against "$against"); then
    say "breaking: ok"
  else
    say "breaking: FAILED (an incompatible change since the last release; see proto/README.md)"
    failed=1
  fi

  # The breaking check must see chgate.proto: renumber InsertRequest.table in a copy and expect
  # a FIELD_SAME_NUMBER-style failure.
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  cp -r "$PROTO/buf.yaml" "$PROTO/chgate" "$PROTO/grpc" "$tmp/"
  sed -i '/^message InsertRequest {/,/^}/ s/^  string table = 1;/  string table = 99;/' \
    "$tmp/chgate/v1/chgate.proto"
  if cmp -s "$PROTO/chgate/v1/chgate.proto" "$tmp/chgate/v1/chgate.proto"; then
    say "self-check: FAILED (could not find 'string table = 1;' in InsertRequest to change)"
    failed=1
  elif (cd "$tmp" && "$BUF" breaking --against "$against" >"$tmp/out" 2>&1); then
    say "self-check: FAILED (a changed field number passed buf breaking)"
    failed=1
  elif grep -q 'InsertRequest' "$tmp/out"; then
    say "self-check: ok (a changed field number is reported: $(head -n 1 "$tmp/out"))"
  else
    say "self-check: FAILED (buf breaking failed, but not on the changed field):"
    cat "$tmp/out"
    failed=1
  fi

  if ((failed)); then
    say "FAILED"
    return 1
  fi
  say "all API checks passed"
}

case ${1:-} in
  "")
    install_buf
    check
    ;;
  --write-release)
    [[ $# -eq 2 ]] || die "usage: $0 --write-release vX.Y.Z"
    install_buf
    write_release "$2"
    ;;
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    ;;
  *)
    die "unknown argument '$1' (see --help)"
    ;;
esac
