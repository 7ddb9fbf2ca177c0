#!/usr/bin/env bash
# What the suite runs on Node: the OpenID Connect provider the single sign-on tests start
# (tests/oidc: panva's oidc-provider, the exact version package-lock.json pins), installed with
# `npm ci` from the npm registry when missing or when the lock file changed. Node 20.19+ and npm
# come with the machine (Debian's nodejs otherwise); fail loudly when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's nodejs and npm for the single sign-on tests"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "the test suite needs Node.js 20.19+ and npm (sudo apt-get install nodejs npm)" >&2
    exit 1
  fi
fi
stamp=tests/oidc/node_modules/.meridian-lock-$(cksum < tests/oidc/package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ]; then
  npm ci --prefix tests/oidc --no-audit --no-fund --loglevel=error
  touch "$stamp"
fi
