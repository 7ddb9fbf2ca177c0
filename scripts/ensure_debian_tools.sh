#!/usr/bin/env bash
# The browser tests drive Debian's headless Chromium (Playwright's own browser download
# does not work offline). Install it when missing; fail loudly when that is impossible.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the browser tests"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  exit 0
fi
echo "chromium is needed by the browser tests: install Debian's 'chromium' package (sudo apt-get install chromium)" >&2
exit 1
