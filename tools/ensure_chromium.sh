#!/usr/bin/env bash
# The browser test drives Debian's Chromium. Install it if it is missing and we may.
set -u
if [ -n "${CHROMIUM:-}" ] && [ -x "$CHROMIUM" ]; then exit 0; fi   # a browser named by the caller (CI: Chrome)
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing chromium for the browser test (apt-get)..."
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
    && exit 0
fi
echo "WARNING: /usr/bin/chromium is missing and could not be installed; the browser test will fail." >&2
echo "Install Debian's chromium package (or set CHROMIUM=/path/to/chromium)." >&2
exit 0
