#!/usr/bin/env bash
# The image's base: the Debian packages debian.lock pins, fetched with apt-get download, checked
# against the lock's SHA-256, extracted with dpkg-deb -x into <out>/<arch>/, with a dpkg status
# stanza per package in var/lib/dpkg/status.d/ (for vulnerability scanners).
#
#   fetch-debs.sh <lock> <cache dir> <out dir>            fetch, check, extract
#   fetch-debs.sh --update <lock> <cache dir>              repin every package to the version
#                                                          apt offers now, and rewrite the lock
#
# The set of packages is the lock's: libc6 and libgcc-s1 (ldd of kube-scheduler: libc, libm,
# libpthread, libdl, librt, libutil and libgcc_s) and what they depend on (gcc-12-base), per
# architecture. arm64 needs `dpkg --add-architecture arm64 && apt-get update` (make image-deps).
set -euo pipefail
umask 022 # the directories made here go into the layer with their modes

update=false
if [ "${1:-}" = --update ]; then update=true; shift; fi
lock=$1 cache=$2 out=${3:-}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

entries() { grep -v -e '^#' -e '^[[:space:]]*$' "$lock"; }

# download <pkg> <arch> <version>: the .deb's path in the cache, fetched if absent.
download() {
  local deb="$cache/${1}_${3//:/%3a}_${2}.deb"
  if [ ! -f "$deb" ]; then
    (cd "$cache" && apt-get download -q -o APT::Sandbox::User=root "$1:$2=$3" >&2) || {
      echo "fetch-debs.sh: apt cannot fetch $1:$2=$3 (a superseded version leaves the mirror;" \
        "snapshot.debian.org keeps it, or repin with make image-debs-update)" >&2; return 1; }
  fi
  echo "$deb"
}

if $update; then
  tmp=$(mktemp)
  sed -n '/^#/p' "$lock" > "$tmp"
  entries | while read -r pkg arch _ _; do
    ver=$(apt-cache policy "$pkg:$arch" | sed -n 's/^ *Candidate: //p')
    [ -n "$ver" ] && [ "$ver" != "(none)" ] || { echo "fetch-debs.sh: apt has no $pkg:$arch" >&2; exit 1; }
    deb=$(download "$pkg" "$arch" "$ver")
    echo "$pkg $arch $ver $(sha256sum "$deb" | cut -d' ' -f1)"
  done >> "$tmp"
  mv "$tmp" "$lock"
  echo "fetch-debs.sh: $lock repinned" >&2
  exit 0
fi

[ -n "$out" ] || { echo "usage: fetch-debs.sh <lock> <cache dir> <out dir>" >&2; exit 2; }
rm -rf "$out"
entries | while read -r pkg arch ver sum; do
  deb=$(download "$pkg" "$arch" "$ver")
  got=$(sha256sum "$deb" | cut -d' ' -f1)
  if [ "$got" != "$sum" ]; then
    echo "fetch-debs.sh: $deb has SHA-256 $got; $lock pins $sum" >&2
    exit 1
  fi
  mkdir -p "$out/$arch/var/lib/dpkg/status.d"
  dpkg-deb -x "$deb" "$out/$arch"
  { dpkg-deb -f "$deb"; echo "Status: install ok installed"; } > "$out/$arch/var/lib/dpkg/status.d/$pkg"
done
