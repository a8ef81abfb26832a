#!/usr/bin/env bash
# Installs what attnprof needs to build, test and report on Debian 12 (run as root, or with sudo present).
# Idempotent: packages already installed are skipped quickly.
set -euo pipefail
PKGS=(cmake g++ clang libomp-dev libclang-rt-14-dev pkg-config
      libopenblas-openmp-dev libdnnl-dev libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
      libgtest-dev libgmock-dev libbenchmark-dev strace)
# npm comes with NodeSource's nodejs, which conflicts with Debian's npm package: ask for npm only when absent.
if [[ "${ATTNPROF_WITH_BROWSER:-1}" == 1 ]]; then PKGS+=(chromium nodejs); command -v npm >/dev/null || PKGS+=(npm); fi
missing=()
for p in "${PKGS[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: Debian packages present"

# ---- begin: HTML report assets (docs/report.md; maintained with src/report/html.cpp) ----
# The chart library that report.html inlines (web/) and playwright-core for the browser test (tests/browser/),
# at the exact versions of their package-lock.json files. Skipped when already installed from the same lock.
root=$(cd "$(dirname "$0")/.." && pwd)
if command -v npm >/dev/null; then
  for dir in web tests/browser; do
    if [[ $dir == tests/browser && "${ATTNPROF_WITH_BROWSER:-1}" != 1 ]]; then continue; fi
    stamp=$root/$dir/node_modules/.package-lock.json
    if [[ ! -f $stamp || $root/$dir/package-lock.json -nt $stamp ]]; then
      echo "setup: npm ci in $dir"
      (cd "$root/$dir" && npm ci --no-audit --no-fund --loglevel=error)
    fi
  done
  echo "setup: npm packages present (web/ for attnprof report, tests/browser/ for its browser test)"
else
  echo "setup: npm not found: attnprof report needs web/node_modules (apt-get install npm && npm ci --prefix web)"
fi
# ---- end: HTML report assets ----
