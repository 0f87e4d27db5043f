#!/usr/bin/env bash
# Runs every test: the Rust unit, property and integration tests, the Prometheus rule unit tests,
# the deployment file checks (Kubernetes schemas, systemd, compose, Dockerfile),
# and the end-to-end test against real Prometheus and Alertmanager servers. Installs Debian's
# prometheus and prometheus-alertmanager packages first when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || command -v alertmanager >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cargo test --all-targets --locked
promtool check rules deploy/prometheus/rules.yml
promtool test rules deploy/prometheus/rules.test.yml
promtool check config deploy/prometheus/prometheus.yml
amtool check-config deploy/alertmanager/alertmanager.yml
python3 scripts/e2e.py --binary target/debug/capi_exporter
bash scripts/check-deploy.sh
