#!/usr/bin/env python3
"""End-to-end test with the real servers.

Starts the exporter in demo mode, a real Prometheus (Debian's `prometheus`) scraping it with the
shipped rules, and a real Alertmanager (Debian's `prometheus-alertmanager`) whose webhook receiver
is this script. Then checks, against live data:

1. every rule of deploy/prometheus/rules.yml is loaded and evaluates without error; every recording
   rule returns data; every alert expression parses and every metric it names has data;
2. every PromQL expression of every dashboard panel and template variable parses and returns data;
3. a liquidation started on the simulated exchange reaches the webhook as CapiAccountLiquidating,
   and how long that took from the moment the liquidation started; then its resolution;
4. the ledger broken on purpose at the start, both ways the simulated exchange can: a deposit on
   demo-1 that the bill query never lists, and demo-2's withdrawal total moved with no bill; each
   reaches the webhook as CapiLedgerMismatch, naming its account, field and amount;
5. no other alert fired on the demo's normal activity during the run;
6. account figures and bill counters join on the coin's name and on its id;
7. a reload (SIGHUP) of a broken web configuration is refused: Prometheus sees
   capi_config_last_reload_successful 0 while the accounts stay polled (CapiConfigReloadFailed
   waits 5 minutes of it: the promtool tests cover its timing); a reload of a fixed one
   (POST /-/reload) applies it and Prometheus sees 1 again.

Only loopback is used. Every wait has a deadline. Exit code 0 when everything passed.
Usage: scripts/e2e.py [--binary target/debug/capi_exporter]
"""

import argparse
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
DASHBOARDS = ROOT / "dashboards"
DATA_DEADLINE = 180  # seconds for data to flow (rates need a few samples)
ALERT_DEADLINE = 60  # seconds for the liquidation to reach the webhook

# Dashboard placeholders and what they become in a direct query.
GRAFANA_INTERVALS = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "1h"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, check, deadline):
    """Calls check() until it returns something truthy; fails with `what` at the deadline."""
    end = time.monotonic() + deadline
    last_error = None
    while time.monotonic() < end:
        try:
            result = check()
            if result:
                return result
        except (urllib.error.URLError, ConnectionError, json.JSONDecodeError) as error:
            last_error = error
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}" + (f" (last error: {last_error})" if last_error else ""))


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


class Prometheus:
    def __init__(self, url):
        self.url = url

    def query(self, expr):
        """The result vector of an instant query; raises on a parse or evaluation error."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            body = get_json(url)
        except urllib.error.HTTPError as error:
            body = json.load(error)
        if body.get("status") != "success":
            raise QueryError(f"{body.get('errorType')}: {body.get('error')}")
        return body["data"]["result"]

    def label_values(self, label, match):
        url = f"{self.url}/api/v1/label/{label}/values?" + urllib.parse.urlencode({"match[]": match})
        return get_json(url)["data"]


class QueryError(Exception):
    pass


class Webhook(BaseHTTPRequestHandler):
    """Alertmanager's receiver: records every notification with the time it arrived."""

    received = []
    lock = threading.Lock()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with Webhook.lock:
            Webhook.received.append((time.time(), body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def start(name, command, logs):
    log = open(logs / f"{name}.log", "w")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def alertmanager_binary():
    for name in ("prometheus-alertmanager", "alertmanager"):
        if shutil.which(name):
            return name
    raise SystemExit("Alertmanager not found: install Debian's prometheus-alertmanager package")


def write_configs(work, ports):
    (work / "prometheus.yml").write_text(
        f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["{RULES}"]
alerting:
  alertmanagers:
    - static_configs: [{{targets: ["127.0.0.1:{ports['alertmanager']}"]}}]
scrape_configs:
  - job_name: capi
    static_configs: [{{targets: ["127.0.0.1:{ports['exporter']}"]}}]
"""
    )
    (work / "alertmanager.yml").write_text(
        f"""route:
  receiver: test
  group_by: [alertname, account]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: test
    webhook_configs:
      - url: http://127.0.0.1:{ports['webhook']}/
        send_resolved: true
"""
    )


def metric_names(expr):
    """The metric and recording rule names an expression selects."""
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    return set(re.findall(r"\b(capi_[a-z0-9_]+|up|[a-z_]+:[a-z0-9_:]+)\b", without_strings))


def check_rules(prom, report):
    """Prometheus itself read deploy/prometheus/rules.yml (it refuses to start on a bad rule);
    its API lists every rule with its type and expression."""
    loaded = wait_for("every rule to be evaluated", lambda: loaded_rules(prom), DATA_DEADLINE)
    assert len(loaded) >= 20, f"only {len(loaded)} rules loaded"
    for name, rule in loaded.items():
        kind, expr = rule["type"], rule["query"]
        wait_for(f"rule {name} to evaluate without error", lambda n=name: loaded_rules(prom)[n]["health"] == "ok", 30)
        prom.query(expr)  # parses and evaluates on its own too
        if kind == "recording":
            wait_for(f"recording rule {name} to return data", lambda e=expr: prom.query(e), DATA_DEADLINE)
        for metric in metric_names(expr):
            wait_for(f"data for {metric} (used by {name})", lambda m=metric: prom.query(f"count({m})"), DATA_DEADLINE)
        report.append(f"rule {kind:9} {name}: ok")


def loaded_rules(prom):
    groups = get_json(f"{prom.url}/api/v1/rules")["data"]["groups"]
    by_name = {rule["name"]: rule for group in groups for rule in group["rules"]}
    evaluated = all(not rule.get("lastEvaluation", "0001").startswith("0001") for rule in by_name.values())
    return by_name if by_name and evaluated else None


def substitute(expr, variables):
    for placeholder, value in GRAFANA_INTERVALS.items():
        expr = expr.replace(placeholder, value)
    for name in variables:
        expr = re.sub(r"\$\{" + name + r"(:\w+)?\}|\$" + name + r"\b", ".+", expr)
    assert "$" not in expr, f"unknown placeholder left in {expr!r}"
    return expr


def panels(dashboard):
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def check_dashboards(prom, report):
    files = sorted(DASHBOARDS.glob("*.json"))
    assert files, f"no dashboards in {DASHBOARDS}"
    for path in files:
        dashboard = json.loads(path.read_text())
        variables = [v["name"] for v in dashboard.get("templating", {}).get("list", [])]
        for variable in dashboard.get("templating", {}).get("list", []):
            query = variable.get("query")
            query = query.get("query") if isinstance(query, dict) else query
            match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", (query or "").strip())
            if variable.get("type") == "query" and match:
                selector, label = match.groups()
                selector = substitute(selector, variables)
                wait_for(f"values of variable {variable['name']}", lambda s=selector, l=label: prom.label_values(l, s), DATA_DEADLINE)
                report.append(f"{path.name} variable {variable['name']}: ok")
        for panel in panels(dashboard):
            for target in panel.get("targets", []):
                if not target.get("expr"):
                    continue
                expr = substitute(target["expr"], variables)
                prom.query(expr)
                wait_for(f"panel {panel.get('title')!r} query {expr!r} to return data", lambda e=expr: prom.query(e), DATA_DEADLINE)
                report.append(f"{path.name} panel {panel.get('title')!r} {target.get('refId', '')}: ok")


def check_liquidation_alert(prom, sim_url, report):
    account = "demo-1"
    coin_id = wait_for("demo-1's collateral", lambda: prom.query(f'capi_collateral_is_liquidating{{account="{account}"}}'), DATA_DEADLINE)[0]["metric"]["coin_id"]
    firing = f'ALERTS{{alertname="CapiAccountLiquidating",account="{account}"}}'
    # Start from a quiet account.
    wait_for(f"{account} not liquidating", lambda: not prom.query(firing) and prom.query(f'capi_collateral_is_liquidating{{account="{account}"}} == 0'), ALERT_DEADLINE)

    def control(on):
        query = urllib.parse.urlencode({"account": 1, "coin_id": coin_id, "on": "true" if on else "false"})
        urllib.request.urlopen(urllib.request.Request(f"{sim_url}/sim/liquidation?{query}", method="POST"), timeout=10).read()

    started = time.time()
    control(True)

    def delivered(status):
        with Webhook.lock:
            for arrived, body in Webhook.received:
                for alert in body.get("alerts", []):
                    labels = alert["labels"]
                    if arrived >= started and alert["status"] == status and labels.get("alertname") == "CapiAccountLiquidating" and labels.get("account") == account:
                        return arrived, alert
        return None

    arrived, alert = wait_for("the liquidation alert at the webhook", lambda: delivered("firing"), ALERT_DEADLINE)
    latency = arrived - started
    assert alert["labels"]["severity"] == "critical", alert
    assert account in alert["annotations"]["summary"], alert
    report.append(f"liquidation -> alert delivered to the webhook in {latency:.2f} s")
    ended = time.time()
    control(False)
    resolved_at, _ = wait_for("the resolved notification", lambda: delivered("resolved"), ALERT_DEADLINE * 6)
    report.append(f"end of liquidation -> resolved notification in {resolved_at - ended:.2f} s")
    return latency


# The two ways the simulated exchange breaks the ledger: (route, query, account, field, amount).
LEDGER_BREAKS = [
    ("hidden-bill", {"account": 1, "coin_id": 2, "business_type": "deposit", "amount": "5"}, "demo-1", "cum_deposit_amount", "5"),
    ("running-total", {"account": 2, "coin_id": 2, "field": "cum_withdraw_amount", "by": "1.5"}, "demo-2", "cum_withdraw_amount", "1.5"),
]


def break_the_ledger(prom, sim_url):
    """Once both demo accounts' ledger checks have begun, breaks each on purpose; returns when."""
    for account in ("demo-1", "demo-2"):
        wait_for(f"{account}'s ledger check to begin", lambda a=account: prom.query(f'capi_ledger_difference{{account="{a}"}}'), DATA_DEADLINE)
    for route, query, _, _, _ in LEDGER_BREAKS:
        request = urllib.request.Request(f"{sim_url}/sim/{route}?{urllib.parse.urlencode(query)}", method="POST")
        urllib.request.urlopen(request, timeout=10).read()
    return time.time()


def check_ledger_alerts(prom, broken_at, report):
    """Each break shows as the ledger difference of its account and field, and nothing else
    differs; once they have lasted, each reaches the webhook as CapiLedgerMismatch."""
    expected = {(account, field): amount for _, _, account, field, amount in LEDGER_BREAKS}
    for (account, field), amount in expected.items():
        series = f'capi_ledger_difference{{account="{account}",coin="USDT",field="{field}"}}'
        wait_for(f"{account}'s {field} difference", lambda s=series, a=amount: prom.query(f"{s} == {a}"), DATA_DEADLINE)
    differing = {(r["metric"]["account"], r["metric"]["field"]) for r in prom.query("capi_ledger_difference != 0")}
    assert differing == set(expected), f"ledger differences: {differing}"

    def delivered():
        with Webhook.lock:
            firing = {}
            for arrived, body in Webhook.received:
                for alert in body.get("alerts", []):
                    labels = alert["labels"]
                    if alert["status"] == "firing" and labels.get("alertname") == "CapiLedgerMismatch":
                        firing.setdefault((labels["account"], labels["field"]), (arrived, alert))
        return firing if set(firing) == set(expected) else None

    firing = wait_for("CapiLedgerMismatch for both breaks at the webhook", delivered, ALERT_DEADLINE * 6)
    for key, (arrived, alert) in firing.items():
        assert f"differ by {expected[key]} USDT" in alert["annotations"]["description"], alert
        report.append(f"{key[0]} {key[1]} broken -> difference {expected[key]} -> CapiLedgerMismatch at the webhook {arrived - broken_at:.0f} s later")


def check_coin_join(prom, report):
    """Account figures and bill counters join on the coin without label_replace: both carry the
    coin's name and id."""
    for on in ("coin", "coin_id"):
        joined = f"sum by (account, {on}) (capi_collateral_amount) * on (account, {on}) group_left () max by (account, {on}) (capi_bill_balance)"
        rows = wait_for(f"collateral and bill balance to join on {on}", lambda q=joined: prom.query(q), DATA_DEADLINE)
        assert all(row["metric"].get(on) for row in rows), rows
    report.append("collateral and bill balances join on coin and on coin_id")


def check_reload(prom, exporter, work, url, report):
    """A broken web config is refused by SIGHUP while polling goes on; a fixed one is applied by
    POST /-/reload, from the very next response."""
    web = work / "web.yml"
    web.write_text("tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n")
    exporter.send_signal(signal.SIGHUP)
    wait_for("the refused reload in Prometheus", lambda: prom.query("capi_config_last_reload_successful == 0"), DATA_DEADLINE)
    polled = prom.query('count(capi_up == 1)')
    assert polled and polled[0]["value"][1] == "2", f"both demo accounts still polled: {polled}"
    before = float(prom.query("capi_config_last_reload_success_timestamp_seconds")[0]["value"][1])
    web.write_text("http_server_config:\n  headers:\n    X-Frame-Options: sameorigin\n")
    with urllib.request.urlopen(urllib.request.Request(f"{url}/-/reload", method="POST"), timeout=30) as answer:
        assert answer.status == 200, answer.status
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        assert answer.headers.get("X-Frame-Options") == "sameorigin", dict(answer.headers)
    wait_for("the successful reload in Prometheus", lambda: prom.query(f"capi_config_last_reload_successful == 1 and capi_config_last_reload_success_timestamp_seconds > {before}"), DATA_DEADLINE)
    report.append("SIGHUP with a broken web config: refused and seen by Prometheus, polling went on; POST /-/reload applied the fixed one")


def check_quiet(prom, report):
    """No alert but the liquidation and the ledger mismatches made on purpose fired during the run:
    the demo's normal activity is a day on which no shipped alert fires."""
    fired = prom.query('max_over_time(ALERTS{alertstate="firing", alertname!="CapiAccountLiquidating"}[1h])')
    on_purpose = {("CapiLedgerMismatch", account, field) for _, _, account, field, _ in LEDGER_BREAKS}
    others = [o["metric"] for o in fired if (o["metric"]["alertname"], o["metric"].get("account"), o["metric"].get("field")) not in on_purpose]
    assert not others, f"alerts fired on the demo's normal activity: {others}"
    report.append("no other alert fired on the demo's normal activity")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=str(ROOT / "target" / "debug" / "capi_exporter"))
    args = parser.parse_args()
    ports = {name: free_port() for name in ("exporter", "prometheus", "alertmanager", "webhook")}
    work = Path(tempfile.mkdtemp(prefix="capi-e2e-"))
    logs = work / "logs"
    logs.mkdir()
    write_configs(work, ports)
    webhook = ThreadingHTTPServer(("127.0.0.1", ports["webhook"]), Webhook)
    threading.Thread(target=webhook.serve_forever, daemon=True).start()
    processes = []
    report = []
    try:
        (work / "web.yml").write_text("http_server_config:\n  headers:\n    X-Frame-Options: deny\n")
        exporter_url = f"http://127.0.0.1:{ports['exporter']}"
        exporter = start("exporter", [args.binary, "--demo", "--poll.interval", "1s", "--web.listen-address", f"127.0.0.1:{ports['exporter']}", "--web.config.file", str(work / "web.yml"), "--web.enable-lifecycle"], logs)
        processes.append(exporter)
        sim_url = wait_for("the demo exchange's address", lambda: re.search(r"exchange=(http://\S+)", (logs / "exporter.log").read_text()), 30).group(1)
        processes.append(start("prometheus", ["prometheus", f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'tsdb'}", f"--web.listen-address=127.0.0.1:{ports['prometheus']}"], logs))
        processes.append(start("alertmanager", [alertmanager_binary(), f"--config.file={work / 'alertmanager.yml'}", f"--storage.path={work / 'am'}", f"--web.listen-address=127.0.0.1:{ports['alertmanager']}", "--cluster.listen-address="], logs))
        prom = Prometheus(f"http://127.0.0.1:{ports['prometheus']}")
        wait_for("Prometheus to be ready", lambda: urllib.request.urlopen(f"{prom.url}/-/ready", timeout=5).status == 200, 60)
        wait_for("Alertmanager to be ready", lambda: urllib.request.urlopen(f"http://127.0.0.1:{ports['alertmanager']}/-/ready", timeout=5).status == 200, 60)
        wait_for("the exporter's target to be up", lambda: prom.query('up{job="capi"} == 1'), 60)
        broken_at = break_the_ledger(prom, sim_url)
        check_rules(prom, report)
        check_dashboards(prom, report)
        check_coin_join(prom, report)
        latency = check_liquidation_alert(prom, sim_url, report)
        check_reload(prom, exporter, work, exporter_url, report)
        check_ledger_alerts(prom, broken_at, report)
        check_quiet(prom, report)
    except (AssertionError, QueryError) as error:
        print("\n".join(report))
        print(f"E2E FAILED: {error}\nlogs in {logs}", file=sys.stderr)
        for log in sorted(logs.iterdir()):
            print(f"--- {log.name} (last lines) ---\n" + "\n".join(log.read_text().splitlines()[-15:]), file=sys.stderr)
        return 1
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        webhook.shutdown()
    print("\n".join(report))
    print(f"liquidation alert latency: {latency:.2f} s")
    passed = len(report)
    print(f"e2e: {passed} passed, 0 failed")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
