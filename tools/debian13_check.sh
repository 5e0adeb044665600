#!/usr/bin/env bash
# The instructor command (`make nbval`) on another Python: a Debian 13 (trixie) chroot with its own python3 (3.13).
# Usage (root, Linux): bash tools/debian13_check.sh   (or `make debian13-check`). CHROOT=/path overrides the place;
# KEEP_VENV=1 keeps the chroot's .venv from the last run (a re-check without downloading the pinned set again).
# The chroot is built once with debootstrap from the Debian mirror apt already uses and reused after that; the
# course is copied in afresh each time (tracked and untracked-but-not-ignored files, as a clone would bring, plus
# the working tree's edits), so its .venv is built there from nothing. pip's cache stays in the chroot, so only the
# first run downloads the pinned set (torch 2.13.0 from PyPI is the CUDA build, about 3 GB).
set -euo pipefail
cd "$(dirname "$0")/.."
CHROOT=${CHROOT:-/work/chroot-trixie}
SUITE=trixie
say() { echo "debian13-check: $*"; }

[ "$(id -u)" = 0 ] || { echo "debian13-check: needs root (debootstrap, chroot, mounts)"; exit 2; }
case "$(realpath -m "$CHROOT")/" in "$(pwd)"/*) echo "debian13-check: keep CHROOT outside the repository"; exit 2;; esac

mirror() {   # the first Debian archive apt is configured with (deb822 URIs: or a one-line `deb URL suite`)
  local files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
  { grep -hoE '^URIs: *[^ ]+' "${files[@]}" 2>/dev/null | awk '{print $2}'
    grep -hoE '^deb +(\[[^]]*\] +)?[^ ]+' "${files[@]}" 2>/dev/null | awk '{print $NF}'; } \
    | grep -E '/debian/?$' | head -n1
}

started=$SECONDS
if [ ! -e "$CHROOT/.debootstrap-done" ]; then
  command -v debootstrap >/dev/null || { say "installing debootstrap (apt-get)"; apt-get install -y -qq debootstrap >/dev/null; }
  MIRROR=${MIRROR:-$(mirror || true)}   # grep exits 2 for a sources file that is absent (pipefail)
  [ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
  say "debootstrap $SUITE from $MIRROR into $CHROOT"
  rm -rf "$CHROOT"
  debootstrap --variant=minbase --include=python3,python3-venv,make,ca-certificates "$SUITE" "$CHROOT" "$MIRROR" \
    > /tmp/debian13-debootstrap.log 2>&1 || { tail -n 20 /tmp/debian13-debootstrap.log; exit 1; }
  apt_mb=$(du -sm "$CHROOT/var/cache/apt/archives" | cut -f1)
  chroot "$CHROOT" apt-get clean
  touch "$CHROOT/.debootstrap-done"
  say "chroot built in $((SECONDS - started)) s (Debian packages downloaded: ${apt_mb} MB)"
else
  say "reusing the chroot at $CHROOT"
fi

# pip and torchrun need the host's trust store and name resolution (a proxy's CA, localhost for gloo)
cp /etc/ssl/certs/ca-certificates.crt "$CHROOT/etc/ssl/certs/ca-certificates.crt"
cp /etc/resolv.conf /etc/hosts "$CHROOT/etc/"

mounted=()
cleanup() { local i; for ((i=${#mounted[@]}-1; i>=0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done; }
trap cleanup EXIT
for fs in proc sys dev dev/pts dev/shm; do
  mountpoint -q "$CHROOT/$fs" && continue
  mkdir -p "$CHROOT/$fs"
  case $fs in
    proc) mount -t proc proc "$CHROOT/proc" ;;
    sys) mount -t sysfs sys "$CHROOT/sys" ;;
    dev/shm) mount -t tmpfs -o size=2g shm "$CHROOT/dev/shm" ;;   # DataLoader workers share tensors here
    *) mount --bind "/$fs" "$CHROOT/$fs" ;;
  esac
  mounted+=("$CHROOT/$fs")
done

say "copying the course into $CHROOT/root/course"
rm -rf "$CHROOT/root/venv-kept"
[ "${KEEP_VENV:-}" = 1 ] && [ -d "$CHROOT/root/course/.venv" ] && mv "$CHROOT/root/course/.venv" "$CHROOT/root/venv-kept"
rm -rf "$CHROOT/root/course"
mkdir -p "$CHROOT/root/course"
[ -d "$CHROOT/root/venv-kept" ] && mv "$CHROOT/root/venv-kept" "$CHROOT/root/course/.venv"
git ls-files -z --cached --others --exclude-standard \
  | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$CHROOT/root/course"

received() { cat /sys/class/net/*/statistics/rx_bytes 2>/dev/null | awk '{s += $1} END {print int(s / 1e6)}'; }
rx_before=$(received)
say "python3 in the chroot: $(chroot "$CHROOT" python3 --version 2>&1)"
run_started=$SECONDS
# A clean environment, as a new user's shell: only what the course's own commands need.
status=0
chroot "$CHROOT" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 TERM=dumb \
  ${PIP_EXTRA_INDEX_URL:+PIP_EXTRA_INDEX_URL=$PIP_EXTRA_INDEX_URL} \
  bash -c 'cd /root/course && make nbval' || status=$?
say "make nbval in the chroot: exit $status after $((SECONDS - run_started)) s; whole script $((SECONDS - started)) s;" \
  "the host received $(( $(received) - rx_before )) MB meanwhile (all its traffic); .venv holds" \
  "$(du -sm "$CHROOT/root/course/.venv" 2>/dev/null | cut -f1) MB"
exit $status
