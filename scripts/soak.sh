#!/usr/bin/env bash
# Soak test: builds the exporter (debug, as scripts/test.sh does) and runs scripts/soak.py, which
# scrapes a demo exporter from 8 threads on loopback for 60 s (50 accounts) and checks that every
# scrape succeeds and memory stays flat. Arguments go to soak.py, e.g.
#   scripts/soak.sh --seconds 300        N=200 scripts/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --bin capi_exporter
exec python3 scripts/soak.py --binary target/debug/capi_exporter "$@"
