#!/usr/bin/env bash
# What the suite runs beyond Python, from Debian's packages: headless Chromium for the browser
# tests (Playwright's own browser download does not work offline) and nginx, the HA suite's
# reverse proxy. Install what is missing; fail loudly when that is impossible.
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's ${missing[*]} for the test suite"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  exit 0
fi
echo "the test suite needs Debian's ${missing[*]} (sudo apt-get install ${missing[*]})" >&2
exit 1
