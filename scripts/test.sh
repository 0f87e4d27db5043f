#!/usr/bin/env bash
# Runs every test. Installs Debian's prometheus package first when promtool is missing, because
# one test checks the exposition with the real promtool.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null 2>&1; then
    echo "promtool not found: installing Debian's prometheus package" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

cargo test --all-targets --locked
