#!/usr/bin/env bash
# Runs every test: the container image built and run with podman (scripts/check-container.sh),
# the Rust unit, property and integration tests, the Prometheus rule unit tests,
# the end-to-end test against real Prometheus and Alertmanager servers, the deployment file checks
# (Kubernetes schemas, systemd, compose, Dockerfile), bounded fuzzing of every parser
# (FUZZ_SECONDS per target, 10 by default), a bounded soak under scrape load (SOAK_SECONDS,
# 30 by default) and the load test's quick mode (side by side with nginx and a Python exporter,
# small sizes: it proves the load test runs; docs/performance.md's figures are from its full mode).
# Installs Debian's prometheus, prometheus-alertmanager, nginx-light, wrk and chromium (the status
# page's browser test) packages first when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Runs one step and says how long it took, so that a slow run shows where its time went.
timed() {
    local started=$SECONDS
    "$@"
    echo "test.sh: $((SECONDS - started)) s for: $*" >&2
}

# First, while the build directory is small: the container checks' images take 2 GB of disk,
# removed at their end.
timed bash scripts/check-container.sh

missing=()
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || command -v alertmanager >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

timed cargo test --all-targets --locked
timed promtool check rules deploy/prometheus/rules.yml
timed promtool test rules deploy/prometheus/rules.test.yml
timed promtool check config deploy/prometheus/prometheus.yml
timed amtool check-config deploy/alertmanager/alertmanager.yml
# The fuzz targets' build takes both cores for about 4 minutes; the end-to-end test and the
# deployment checks mostly wait (on Prometheus's evaluations, on tools), so it runs beside them,
# at the lowest priority so that they keep the processor whenever they need it.
nice -n 19 bash scripts/fuzz.sh --build-only >target/fuzz-build.log 2>&1 &
fuzz_build=$!
trap 'kill "$fuzz_build" 2>/dev/null || true' EXIT
timed python3 scripts/e2e.py --binary target/debug/capi_exporter
timed bash scripts/check-deploy.sh
waiting=$SECONDS
if ! wait "$fuzz_build"; then
    echo "test.sh: the fuzz targets' build failed; the end of its log (target/fuzz-build.log):" >&2
    tail -n 40 target/fuzz-build.log >&2
    exit 1
fi
trap - EXIT
echo "test.sh: $((SECONDS - waiting)) s waiting for the fuzz targets' build ($(grep -o 'build took .*' target/fuzz-build.log))" >&2
FUZZ_SECONDS=${FUZZ_SECONDS:-10} timed bash scripts/fuzz.sh
timed python3 scripts/soak.py --binary target/debug/capi_exporter --seconds "${SOAK_SECONDS:-30}"
timed python3 scripts/loadtest.py --quick --bin-dir target/debug
