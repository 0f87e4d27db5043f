#!/usr/bin/env bash
# Builds the project's Dockerfile, unchanged, with podman and runs the image for real, checking
# from the host what a user would: exact demo figures on /metrics, a non-root process, --help, a
# state file on the declared volume that survives `podman stop`/`podman start` and a `kill -9`
# with counts exact, and a stop on SIGTERM within the grace period. Then brings up the compose
# stack (exporter, Prometheus, Alertmanager) with podman-compose and follows a liquidation from
# the simulator to Alertmanager. Prints one OK/FAIL line per check, the image's size, and exits
# non-zero if any check failed.
#
# No registry of images is reachable here, so the two base images the Dockerfile names are made
# locally from Debian's packages and given those names (stand-ins, not the real images):
#   - rust:1-bookworm: Debian bookworm (mmdebstrap, minbase) with gcc, make and libc6-dev, this
#     machine's Rust toolchain (cargo, rustc and the x86_64 standard library, from `rustc --print
#     sysroot`) in /usr/local, and this machine's CA bundle (HTTPS to crates.io may pass through a
#     proxy whose CA only the host's bundle has);
#   - gcr.io/distroless/cc-debian12:nonroot: Debian bookworm minbase with ca-certificates and the
#     user nonroot (65532), as distroless has it; unlike distroless, it has a shell and dpkg.
# The builder stage fetches crates from crates.io as it would with Docker Hub's image.
#
# Installs Debian's podman, buildah, mmdebstrap, runc, netavark and aardvark-dns when missing (as
# root or through sudo), and podman-compose from PyPI, pinned, into target/container-venv.
# Podman's settings come from scripts/container/containers.conf. Stand-in images are kept in
# podman's store and made again only when missing; the image build reuses podman's layer cache.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CONTAINERS_CONF=$ROOT/scripts/container/containers.conf

IMAGE=localhost/capi_exporter:check
COMPOSE_IMAGE=localhost/capi_exporter:dev    # the name deploy/compose/docker-compose.yml gives it
PROMETHEUS_STAND_IN=docker.io/prom/prometheus:v2.55.1
ALERTMANAGER_STAND_IN=docker.io/prom/alertmanager:v0.27.0
RUST_STAND_IN=docker.io/library/rust:1-bookworm
RUNTIME_STAND_IN=gcr.io/distroless/cc-debian12:nonroot
NAME=capi-check-$$
VOLUME=capi-check-state-$$
GRACE=10   # seconds `podman stop` waits before SIGKILL (podman's default)

tmp=$(mktemp -d)
failed=()
# The images take 2 GB: they are removed at the end (with the build's dangling stage images)
# unless KEEP_IMAGES=1, which makes a rerun take seconds instead of minutes.
cleanup() {
    podman rm -f -t 0 "$NAME" "$NAME-kill" >/dev/null 2>&1
    podman volume rm -f "$VOLUME" "$VOLUME-kill" >/dev/null 2>&1
    compose down --volumes >/dev/null 2>&1
    if [ "${KEEP_IMAGES:-}" != 1 ]; then
        podman rmi -f "$IMAGE" "$COMPOSE_IMAGE" "$RUST_STAND_IN" "$RUNTIME_STAND_IN" "$PROMETHEUS_STAND_IN" \
            "$ALERTMANAGER_STAND_IN" >/dev/null 2>&1
        podman image prune -f >/dev/null 2>&1
    fi
    [ -n "${sim_pid:-}" ] && kill "$sim_pid" 2>/dev/null
    [ -n "${reference_pid:-}" ] && kill "$reference_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=run_check.sh
source "$ROOT/scripts/run_check.sh"

# wait_until SECONDS COMMAND...: runs the command every half second until it succeeds.
wait_until() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ $SECONDS -lt $deadline ] || { echo "timed out after waiting for: $*"; return 1; }
        sleep 0.5
    done
}

# --- tools and stand-in base images ------------------------------------------------------------
setup_tools() {
    local missing=()
    for tool in podman buildah mmdebstrap runc netavark; do
        command -v $tool >/dev/null 2>&1 || [ -x /usr/lib/podman/$tool ] || missing+=($tool)
    done
    [ -x /usr/lib/podman/aardvark-dns ] || missing+=(aardvark-dns)
    # netavark sets up each container network's firewall rules with iptables; without it every
    # build step with a network fails with "netavark: No such file or directory".
    command -v iptables >/dev/null 2>&1 || [ -x /usr/sbin/iptables ] || missing+=(iptables)
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# The compose stack's Python tool, pinned, in a virtualenv reused while it holds this version.
COMPOSE_VENV=target/container-venv
PODMAN_COMPOSE=podman-compose==1.6.0
setup_compose() {
    [ "$(cat "$COMPOSE_VENV/.version" 2>/dev/null)" = "$PODMAN_COMPOSE" ] && return 0
    rm -rf "$COMPOSE_VENV" && python3 -m venv "$COMPOSE_VENV" &&
        "$COMPOSE_VENV/bin/pip" install -q --disable-pip-version-check "$PODMAN_COMPOSE" &&
        echo "$PODMAN_COMPOSE" >"$COMPOSE_VENV/.version"
}

# stand_in NAME PACKAGES ENTRYPOINT [HOOK...]: a bookworm minbase root file system with these
# packages, imported under NAME (with this entrypoint, if any) unless podman has it already.
stand_in() {
    local name=$1 packages=$2 entrypoint=$3 change=()
    shift 3
    podman image exists "$name" && return 0
    [ -n "$entrypoint" ] && change=(--change "ENTRYPOINT [\"$entrypoint\"]")
    mmdebstrap --quiet --variant=minbase --include="$packages" "$@" bookworm "$tmp/rootfs.tar" &&
        podman import "${change[@]}" "$tmp/rootfs.tar" "$name" >/dev/null &&
        rm -f "$tmp/rootfs.tar"
}

rust_stand_in() {
    local sysroot toolchain=$tmp/toolchain
    sysroot=$(rustc --print sysroot) || return 1
    mkdir -p "$toolchain/bin" "$toolchain/lib/rustlib" &&
        cp "$sysroot/bin/cargo" "$sysroot/bin/rustc" "$toolchain/bin/" &&
        cp -a "$sysroot"/lib/*.so* "$toolchain/lib/" &&
        cp -a "$sysroot/lib/rustlib/x86_64-unknown-linux-gnu" "$toolchain/lib/rustlib/" || return 1
    stand_in "$RUST_STAND_IN" ca-certificates,gcc,libc6-dev,make "" \
        --customize-hook="sync-in $toolchain /usr/local" \
        --customize-hook="upload /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt"
}

runtime_stand_in() {
    stand_in "$RUNTIME_STAND_IN" ca-certificates "" \
        --customize-hook='chroot "$1" useradd --uid 65532 --user-group --home-dir /home/nonroot --create-home nonroot'
}

run_check "tools installed (podman, buildah, mmdebstrap, runc, netavark, aardvark-dns, iptables)" setup_tools
run_check "$PODMAN_COMPOSE in $COMPOSE_VENV" setup_compose
run_check "stand-in for $RUST_STAND_IN (Debian bookworm and this machine's Rust toolchain)" rust_stand_in
run_check "stand-in for $RUNTIME_STAND_IN (Debian bookworm minbase, user 65532)" runtime_stand_in

build() {
    local started=$SECONDS
    podman build --pull=never --tag "$IMAGE" --file Dockerfile . &&
        echo "built in $((SECONDS - started)) s"
}
run_check "podman build of the Dockerfile, unchanged" build
grep '^built in' "$tmp/log" 2>/dev/null
if ! podman image exists "$IMAGE"; then
    echo "container checks: the image could not be built"
    exit 1
fi
binary_layer=$(podman history --format '{{.Size}} {{.CreatedBy}}' "$IMAGE" | awk '/COPY file:/ { print $1, $2; exit }')
echo "image size: $(podman image inspect --format '{{.Size}}' "$IMAGE" | awk '{ printf "%.1f MB", $1 / 1e6 }')" \
    "(the binary's layer: $binary_layer; the rest is the runtime stand-in, Debian minbase, which is larger than distroless)"

# --- the image, run -----------------------------------------------------------------------------
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
url=http://127.0.0.1:$port
metrics() { curl -sf --max-time 5 "$url/metrics"; }
# The sum of every capi_bills_total series of the page on stdin.
bills_total() { awk '/^capi_bills_total\{/ { sum += $2 } END { print sum + 0 }'; }
# counted_at_least PORT N: whether the exporter on PORT has counted at least N bills.
counted_at_least() { [ "$(curl -sf --max-time 5 "http://127.0.0.1:$1/metrics" | bills_total)" -ge "$2" ]; }
ready() { curl -sf --max-time 2 "$url/-/ready" >/dev/null; }
exited() { [ "$(podman inspect --format '{{.State.Status}}' "$1")" = exited ]; }

help_works() { podman run --rm "$IMAGE" --help | grep -- '--web.listen-address'; }
run_check "--help prints the flags" help_works

start_demo() {
    podman run -d --name "$NAME" -p "127.0.0.1:$port:10127" -v "$VOLUME:/var/lib/capi_exporter" "$IMAGE" \
        --demo --poll.interval 1s --state.file /var/lib/capi_exporter/state.json &&
        wait_until 60 ready
}
run_check "runs --demo with --state.file on the declared volume, and is ready" start_demo

exact_figures() {
    local page
    page=$(metrics) || return 1
    for line in 'capi_up{account="demo-1"} 1' 'capi_up{account="demo-2"} 1' \
        'capi_account_fee_rate{account="demo-1",contract_id="10000001",role="taker"} 0.0006' \
        'capi_account_fee_rate{account="demo-2",contract_id="10000002",role="maker"} 0.0002' \
        'capi_account_leverage_setting{account="demo-2",contract_id="10000001",kind="cross"} 20'; do
        grep -qxF "$line" <<<"$page" || { echo "missing: $line"; return 1; }
    done
    # No .git in the build context: the revision is unknown, as the Dockerfile says.
    grep -q '^capi_exporter_build_info{version="0.1.0",revision="unknown",' <<<"$page" || { echo "build info"; return 1; }
}
run_check "/metrics serves the demo's exact figures" exact_figures

non_root() {
    podman top "$NAME" user huser
    [ "$(podman top "$NAME" huser | tail -n +2 | sort -u)" = 65532 ]
}
run_check "the process runs as user 65532 (nonroot), not root" non_root

# Stops within the grace period, exit code 0 (not killed); starts again on the same volume with
# the counters where they were.
survives_stop_and_start() {
    local before started took after
    wait_until 90 counted_at_least "$port" 2 || return 1
    before=$(metrics | bills_total)
    started=$(date +%s%N)
    podman stop -t "$GRACE" "$NAME" >/dev/null || return 1
    took=$((($(date +%s%N) - started) / 1000000))
    echo "stopped in $took ms with exit code $(podman inspect --format '{{.State.ExitCode}}' "$NAME")"
    [ "$(podman inspect --format '{{.State.ExitCode}}' "$NAME")" = 0 ] && [ "$took" -lt $((GRACE * 1000)) ] || return 1
    podman start "$NAME" >/dev/null && wait_until 60 ready || return 1
    after=$(metrics | bills_total)
    echo "bills counted: $before before the stop, $after after the start"
    [ "${after%.*}" -ge "${before%.*}" ] || return 1
    podman logs "$NAME" 2>&1 | grep 'resuming bill counting from the state file'
}
run_check "SIGTERM stops it within the grace period; the state file survives stop and start" survives_stop_and_start
grep -E '^(stopped in|bills counted)' "$tmp/log" 2>/dev/null
podman rm -f -t 0 "$NAME" >/dev/null 2>&1

# --- kill -9 while bills flow ---------------------------------------------------------------------
# The exchange runs on the host (capi_sim, making up bills every 100 ms), so that it outlives the
# exporter's container. The container is killed while bills flow and started again on the same
# volume; once the flow stops, its counts must equal those of an exporter that never stopped.
sim_dir=$tmp/sim
reference_port=$(free_port)
kill_port=$(free_port)
counts() { curl -sf --max-time 5 "http://127.0.0.1:$1/metrics" | grep '^capi_bills_total{' | sort; }

start_flow() {
    cargo build --quiet --locked --package capi_sim --package capi_exporter || return 1
    local sim_port
    sim_port=$(free_port)
    target/debug/capi_sim --accounts 2 --positions 1 --listen "127.0.0.1:$sim_port" --out "$sim_dir" \
        --activity-tick-ms 100 >"$tmp/sim.log" 2>&1 &
    sim_pid=$!
    wait_until 30 grep -q 'listening' "$tmp/sim.log" || return 1
    # Test keys in a throwaway folder, readable by the container's user.
    chmod 755 "$tmp" && chmod -R a+rX "$sim_dir" || return 1
    local exporter=(--config.file "$sim_dir/accounts.yml" --api.base-url "http://127.0.0.1:$sim_port"
        --poll.interval 500ms --bills.backfill 1h)
    target/debug/capi_exporter "${exporter[@]}" --web.listen-address "127.0.0.1:$reference_port" \
        --state.file "$tmp/reference-state.json" >"$tmp/reference.log" 2>&1 &
    reference_pid=$!
    podman run -d --name "$NAME-kill" --network host -v "$sim_dir:$sim_dir:ro" \
        -v "$VOLUME-kill:/var/lib/capi_exporter" "$IMAGE" "${exporter[@]}" \
        --web.listen-address "127.0.0.1:$kill_port" --state.file /var/lib/capi_exporter/state.json >/dev/null
}

kill_while_bills_flow() {
    start_flow || return 1
    # Bills counted and saved before the kill, and more made while it is down.
    wait_until 60 counted_at_least "$kill_port" 20 || return 1
    podman kill --signal KILL "$NAME-kill" >/dev/null && wait_until 30 exited "$NAME-kill" || return 1
    echo "killed with exit code $(podman inspect --format '{{.State.ExitCode}}' "$NAME-kill")"
    local seen
    seen=$(counts "$reference_port" | awk '{ n += $2 } END { print n }')
    wait_until 30 counted_at_least "$reference_port" $((seen + 10)) || return 1
    podman start "$NAME-kill" >/dev/null || return 1
    wait_until 60 bash -c "curl -sf http://127.0.0.1:$kill_port/-/ready >/dev/null" || return 1
    kill -USR1 "$sim_pid" || return 1
    # Every bill is visible at once: the counts settle within a few polls; then they must agree.
    wait_until 60 bash -c "[ \"\$(curl -sf http://127.0.0.1:$kill_port/metrics | grep '^capi_bills_total{' | sort)\" = \
        \"\$(curl -sf http://127.0.0.1:$reference_port/metrics | grep '^capi_bills_total{' | sort)\" ]" || {
        diff <(counts "$kill_port") <(counts "$reference_port")
        return 1
    }
    echo "bills counted by both: $(counts "$kill_port" | awk '{ n += $2 } END { print n }')"
}
run_check "kill -9 of the container while bills flow: restarted on its volume, counts exact" kill_while_bills_flow
grep -E '^(killed|bills counted by both)' "$tmp/log" 2>/dev/null

# --- the compose stack -------------------------------------------------------------------------
# deploy/compose/docker-compose.yml, brought up with podman-compose: the exporter (the image built
# above, under the name the file gives it), Prometheus and Alertmanager, with stand-ins from
# Debian's packages for their images (Debian's versions, 2.42 and 0.25, not the ones the file
# names). Grafana is left out: no image of it can be had here; tests/it/dashboard_lint.rs and
# scripts/check-deploy.sh check its files.
# Without a pod: a shell joins the exporter container's network below, which a pod forbids.
compose() { "$COMPOSE_VENV/bin/podman-compose" --in-pod false --project-name capi-check -f deploy/compose/docker-compose.yml "$@"; }
query() { curl -sf --max-time 5 "http://127.0.0.1:9090/api/v1/$1"; }

compose_up() {
    stand_in "$PROMETHEUS_STAND_IN" prometheus /usr/bin/prometheus --customize-hook='mkdir -p "$1/prometheus"' &&
        stand_in "$ALERTMANAGER_STAND_IN" prometheus-alertmanager /usr/bin/prometheus-alertmanager \
            --customize-hook='mkdir -p "$1/alertmanager"' &&
        podman tag "$IMAGE" "$COMPOSE_IMAGE" &&
        compose up -d exporter prometheus alertmanager
}
run_check "compose up: exporter, Prometheus and Alertmanager (stand-ins)" compose_up

scrapes_over_the_network() {
    wait_until 120 bash -c "curl -sf 'http://127.0.0.1:9090/api/v1/query?query=up%7Bjob%3D%22capi%22%7D%3D%3D1' | grep -q exporter:10127" || return 1
    query 'query?query=capi_up' | python3 -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r); sys.exit(len(r) != 2)'
}
run_check "Prometheus scrapes the exporter over the compose network (target exporter:10127 up)" scrapes_over_the_network

rules_loaded() {
    query rules | python3 -c '
import json, sys
groups = {g["name"]: g for g in json.load(sys.stdin)["data"]["groups"]}
assert {"capi-recording", "capi-alerts"} <= set(groups), sorted(groups)
bad = [r["name"] for g in groups.values() for r in g["rules"] if r.get("health") == "err"]
assert not bad, bad
print(sum(len(g["rules"]) for g in groups.values()), "rules loaded")'
}
run_check "Prometheus loads the shipped rules" rules_loaded
grep 'rules loaded' "$tmp/log" 2>/dev/null

# The liquidation is started on the exporter's own simulated exchange, which listens on loopback
# inside the exporter's container: a shell joins that container's network to ask for it.
liquidation_reaches_alertmanager() {
    local exporter sim
    exporter=$(podman ps --filter label=com.docker.compose.service=exporter --format '{{.Names}}' | head -1)
    sim=$(podman logs "$exporter" 2>&1 | sed -n 's|.*exchange=http://127.0.0.1:\([0-9]*\).*|\1|p' | head -1)
    [ -n "$sim" ] || { echo "no simulated exchange address in the exporter's log"; return 1; }
    local started=$SECONDS
    podman run --rm --network "container:$exporter" "$RUNTIME_STAND_IN" bash -c "exec 3<>/dev/tcp/127.0.0.1/$sim &&
        printf 'POST /sim/liquidation?account=1&coin_id=2&on=true HTTP/1.0\r\n\r\n' >&3 && head -1 <&3" || return 1
    wait_until 180 bash -c "curl -sf 'http://127.0.0.1:9093/api/v2/alerts' | grep -q CapiAccountLiquidating" &&
        echo "liquidation to Alertmanager in about $((SECONDS - started)) s (poll 5 s, rule evaluation 15 s)"
}
run_check "a liquidation started in the simulator reaches Alertmanager as CapiAccountLiquidating" liquidation_reaches_alertmanager
grep '^liquidation to Alertmanager' "$tmp/log" 2>/dev/null
compose down --volumes >/dev/null 2>&1

if [ ${#failed[@]} -gt 0 ]; then
    echo "container checks: ${#failed[@]} failed: ${failed[*]}"
    exit 1
fi
echo "container checks: all passed"
