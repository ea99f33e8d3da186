# Shared by deploy/install-deps.sh and deploy/install-ops-deps.sh (sourced, not run): find which
# Debian packages are missing and install them with service starts denied.

# Sets the array `missing` to those of the given packages that are not installed.
find_missing() {
  missing=()
  local pkg status
  for pkg in "$@"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    [[ $status == installed ]] || missing+=("$pkg")
  done
}

# Sets the array `SUDO` to (sudo) when not root; exits with the command to run as root when
# there is no sudo. $1 names the calling script in messages; the rest are the packages.
need_root() {
  local tag=$1
  shift
  SUDO=()
  ((EUID == 0)) && return 0
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
    return 0
  fi
  echo "$tag: error: not root and no sudo; as root run:" >&2
  echo "  apt-get update && apt-get install -y --no-install-recommends $*" >&2
  exit 1
}

# apt-get update, then installs the given packages while service starts are denied
# (invoke-rc.d and deb-systemd-invoke obey policy-rc.d). Only a policy file this function
# created is removed again; an existing one is left as it is. Needs need_root first.
# $1 names the calling script in the policy file.
apt_install_without_services() {
  local tag=$1
  shift
  local policy=/usr/sbin/policy-rc.d created=false
  if [[ ! -e $policy ]]; then
    # Removed again even if the install is interrupted.
    trap '"${SUDO[@]}" rm -f /usr/sbin/policy-rc.d' EXIT
    printf '#!/bin/sh\n# Temporary, from chgate %s: deny service starts.\nexit 101\n' "$tag" |
      "${SUDO[@]}" tee "$policy" >/dev/null
    "${SUDO[@]}" chmod 755 "$policy"
    created=true
  fi
  local apt=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
  local rc=0
  { "${apt[@]}" update && "${apt[@]}" install -y --no-install-recommends "$@"; } || rc=$?
  if $created; then
    "${SUDO[@]}" rm -f "$policy"
    trap - EXIT
  fi
  return "$rc"
}
