#!/usr/bin/env bash
# Debian packages that PyPI cannot provide. Installs only what is missing; needs root or
# sudo. Groups:
#   runtime  Pango for WeasyPrint (the admin's PDF reports), CJK fonts for PDFs, Tesseract
#            with its Chinese and English data (campaigns that read images: extractor/ocr.py)
#   test     runtime + Chromium for the admin's browser tests (never a downloaded
#            browser) + docker-compose to validate docker-compose.yml
set -euo pipefail

runtime=(libpango-1.0-0 libpangoft2-1.0-0 fonts-noto-cjk
         tesseract-ocr tesseract-ocr-chi-sim tesseract-ocr-chi-tra tesseract-ocr-eng)
case "${1:-test}" in
  runtime) wanted=("${runtime[@]}") ;;
  test) wanted=("${runtime[@]}" chromium docker-compose) ;;
  *) echo "usage: $0 [runtime|test]" >&2; exit 2 ;;
esac

missing=()
for package in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  run=()
elif command -v sudo >/dev/null 2>&1; then
  run=(sudo)
else
  echo "copytrack: missing Debian packages: ${missing[*]}" >&2
  echo "install them as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing Debian packages: ${missing[*]}" >&2
"${run[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${run[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >/dev/null
