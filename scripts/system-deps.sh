#!/usr/bin/env bash
# Debian packages the test suite needs and PyPI cannot provide: Chromium for the admin's
# browser tests (never a downloaded browser) and docker-compose to validate the compose
# file. Installs only what is missing; needs root or sudo.
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  run=()
elif command -v sudo >/dev/null 2>&1; then
  run=(sudo)
else
  echo "copytrack: the tests need the Debian packages: ${missing[*]}" >&2
  echo "install them as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing Debian packages: ${missing[*]}" >&2
"${run[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${run[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
