#!/usr/bin/env python3
"""Side-by-side load test (serving vs nginx, Python reference, memory, poll CPU, weight per poll,
freshness), on loopback, bounded in time.

It does not build anything: run `cargo build --release --bins` first. It needs, from --bin-dir
(default target/release), `capi_exporter` and `capi_sim`; Debian's `nginx` (nginx-light is
enough) and `wrk` (when either is missing it prints `apt-get install -y nginx-light wrk` and exits
2); and a virtualenv with prometheus_client for the Python reference exporter
(benches/python_exporter/), which it creates at target/loadtest-venv with `python3 -m venv` and
`pip install -r benches/python_exporter/requirements.txt`, and reuses while that file is unchanged.

Every simulated exchange is `capi_sim --coin-ids 1,2 --positions 5` (freshness: coin 2 only),
without activity and without a weight limit; every exporter runs with
`--poll.interval 15s` (2s with --quick) and weight budgets of 1,000,000, so that the budget
planner never stretches the interval (the real interval is read from capi_poll_interval_seconds
all the same). The phases, in order:

A. 1,000 accounts (20 with --quick): the exporter is started and waited for: /-/ready answers
   200 and /metrics shows capi_up 1 for every account. RSS is read (memory).
   Poll CPU and weight per poll: over two poll intervals (one with --quick) with no scrape, the
   exporter's CPU (utime+stime from /proc/PID/stat, to the nanosecond from each thread's
   /proc/PID/task/TID/schedstat when no thread came or went) and the deltas of its own
   capi_api_requests_total{endpoint} (all outcomes) give the CPU per poll cycle and per account,
   and the IP weight per account per poll = (account queries x 1 + bill queries x 2) /
   (accounts x polls), polls = window / interval; and the same per poll counted (polls = account
   queries / (accounts x coins)), free of the window's edges. Accounts fitting the documented 500
   per 10 s per IP at a 15 s interval = 750 / weight per poll counted, with 2 coins and (one
   account query per poll instead of two) 1 coin.
   Then the memory every account keeps for good: once the account that started polling last has
   dropped the first line of its log of recent polls (/debug/polls), every account's log is as
   long as it stays, and RSS is read again.
   Serving vs nginx: one /metrics body is saved with its gzip (level 1, as nginx's default),
   nginx (own prefix and config in a temporary folder, `daemon off`, a master and `worker_processes
   auto`, `sendfile on`, `gzip on; gzip_types *`, a second location with `gzip_static on`) serves
   them, and `wrk -t2 -c8 -d<seconds>s --latency` runs against: nginx plain, ours plain, nginx
   with Accept-Encoding: gzip (dynamic gzip), nginx gzip_static, ours gzip; then with `-t1 -c1`,
   one scrape at a time as a Prometheus server makes them, nginx plain and ours plain (the
   latency of one scrape, reported as nginx's p50 over ours). Every answer type is
   first checked with one request (ours must answer Content-Encoding: gzip when asked). Ours'
   CPU per scrape is taken from the plain run. RSS is read again after the runs.
B. Python reference, on the same simulated exchange, with ours stopped: the fixture
   polls every 15 s (2 s with --quick); once it says `listening`, its background CPU rate is
   measured over one interval with no scrape, then wrk runs at the same settings, plain. Its
   duration is --seconds, or longer when one scrape is slow (8 connections x 5 scrapes, at most
   60 s), so that the requests still in flight when wrk stops (wrk does not count them) bias
   the rate little. CPU per scrape, for both exporters, = CPU from the start of the wrk run until
   the in-flight requests have drained, less the background rate over that time, divided by
   (completed requests + connections): each connection had one request in flight at the end.
C. Polling at 10 and 100 accounts (2 and 5 with --quick), as in A, each with its own exchange
   and exporter; then at A's size with an exchange that changes every account every 5 s
   (positions, funding, transfers: bills on every poll, no answer the same twice), first without
   and then with `--state.file` (saved after every poll: the bytes the exporter writes per cycle,
   from /proc/<pid>/io, are reported beside its CPU). Meanwhile (it costs next to no CPU) a
   1-account exporter (2 coins, 5 positions, same interval) idles; its RSS is read after at least
   3 poll intervals (memory: under 15 MiB).
D. Freshness: 1 account, coin 2, `--poll.interval 1s`. K times (--trials, default
   30; 5 with --quick): POST /sim/liquidation?account=1&coin_id=2&on=true|false (alternately),
   t0 right after the answer, then /metrics is scraped every ~2 ms (deadline 5 s) until
   capi_collateral_is_liquidating{coin_id="2"} shows the new value; latency = end of that scrape
   - t0 (an upper bound). Trials are started a random fraction of an interval apart (seeded), so
   they land at different poll phases. Target: max <= interval + 50 ms.
E. Soak, only with --soak-minutes M > 0: a separate 1,000-account exchange (20 with --quick),
   with activity every 15 s so that bills flow (the bill dedup set and state are exercised),
   and an exporter scraped every 30 s as Prometheus would; RSS sampled every 30 s (before the
   scrape) for M minutes. Flat: last <= the sample after the warm-up (a quarter of the soak, at
   most 5 minutes, while business types appear) x 1.10 + 2 MiB.

The end is one markdown table (group, measurement, ours, reference, ratio, target, result), also
written with every raw figure as JSON to --json FILE. Its group names the measurement: serving
(vs nginx), python (the Python reference), memory, poll cpu, weight (per poll), freshness (render
time is measured by `cargo bench --bench exporter`). A missed target is a result, not a failure:
the exit code is 0 whenever everything ran, 1 when something broke (a process did not start or
died, a scrape or a wrk run failed, a body had no series), 2 when a prerequisite is missing.
Every child is stopped (SIGTERM by PID, then SIGKILL) at exit, also on Ctrl-C and SIGTERM.
Logs and the saved bodies are in a temporary folder, kept with --keep or when something broke.
The default run takes about 8 minutes on 2 cores; --quick (for CI) about 1 minute, plus
--soak-minutes.

    cargo build --release --bins && python3 scripts/loadtest.py --json target/loadtest.json
    python3 scripts/loadtest.py --quick
"""

import argparse
import ctypes
import gzip
import hashlib
import http.client
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "benches" / "python_exporter"
MIB = 1024 * 1024
CONNECTIONS, THREADS = 8, 2
BUDGET = "1000000"
# How often the simulated exchange changes every account in the busy polling measurement.
BUSY_TICK_MS = 5000
IP_BUDGET_PER_10S = 500  # documented
TARGETS = {"serving_ratio": 0.70, "idle_rss_mib": 15, "rss_1000_mib": 96, "poll_cycle_ms": 250,
           "freshness_slack_s": 0.050}


class Broken(Exception):
    """Something that should have worked did not: the run cannot give figures."""


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", default="target/release", help="where capi_exporter and capi_sim are")
    parser.add_argument("--quick", action="store_true", help="small sizes and short runs, for CI")
    parser.add_argument("--seconds", type=int, default=None, help="wrk duration (default 10, 2 with --quick)")
    parser.add_argument("--trials", type=int, default=None, help="freshness trials (default 30, 5 with --quick)")
    parser.add_argument("--soak-minutes", type=float, default=0.0, help="memory soak length (0: skip)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, bodies)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the freshness trials' spacing")
    parser.add_argument("--accounts", type=int,
                        help="accounts of phase A and B (default 1000, 20 with --quick); the serving comparison "
                             "with nginx is also judged at 200")
    parser.add_argument("--phases", default="ABCD",
                        help="the phases to run, by letter (default ABCD; B needs A; E runs with --soak-minutes)")
    args = parser.parse_args()
    args.phases = args.phases.upper()
    if "B" in args.phases and "A" not in args.phases:
        parser.error("phase B runs on phase A's exchange: add A to --phases")
    args.accounts = args.accounts or (20 if args.quick else 1000)
    args.poll_sizes = [2, 5] if args.quick else [10, 100]  # plus args.accounts, from phase A
    args.interval = 2.0 if args.quick else 15.0
    args.windows = 1 if args.quick else 2
    args.seconds = max(1, args.seconds or (2 if args.quick else 10))
    args.trials = args.trials or (5 if args.quick else 30)
    return args


def log(message):
    print(f"loadtest: {message}", flush=True)


def missing(message):
    """A prerequisite is missing: one line, exit code 2."""
    print(message, file=sys.stderr, flush=True)
    raise SystemExit(2)


# ---------------------------------------------------------------------------------------------
# Processes


def _die_with_parent():
    """In the child: receive SIGTERM when this script dies, even by SIGKILL (Linux)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Child:
    def __init__(self, name, command, logs):
        self.name = name
        self.out, self.err = logs / f"{name}.out", logs / f"{name}.err"
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.process = subprocess.Popen([str(c) for c in command], stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=err, preexec_fn=_die_with_parent)
        self.pid = self.process.pid

    def alive(self):
        return self.process.poll() is None

    def tail(self, lines=15):
        text = ""
        for path in (self.out, self.err):
            try:
                content = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            if content:
                text += f"--- {path} (last lines) ---\n" + "\n".join(content) + "\n"
        return text

    def wait_for_line(self, pattern, deadline, stream="out"):
        """The first match of `pattern` in the child's stdout (or stderr); Broken if it exits or
        the deadline passes first."""
        path = self.out if stream == "out" else self.err
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            match = re.search(pattern, path.read_text(errors="replace"))
            if match:
                return match
            if not self.alive():
                raise Broken(f"{self.name} exited with code {self.process.returncode} before printing "
                             f"{pattern!r}\n{self.tail()}")
            time.sleep(0.05)
        raise Broken(f"{self.name} did not print {pattern!r} within {deadline:.0f} s\n{self.tail()}")

    def stop(self, timeout=10):
        if self.alive():
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.process.wait()


class Children:
    """Every process started, so that all are stopped at the end whatever happens."""

    def __init__(self, logs):
        self.logs = logs
        self.started = []

    def start(self, name, command):
        child = Child(name, command, self.logs)
        self.started.append(child)
        return child

    def stop_all(self):
        for child in reversed(self.started):
            child.stop()


def cpu_sample(pid):
    """A process's CPU time, twice: utime+stime from /proc/<pid>/stat (in clock ticks, 10 ms,
    dead threads included), and each live thread's nanoseconds on CPU from
    /proc/<pid>/task/<tid>/schedstat (None where the kernel has no schedstat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError as error:
        raise Broken(f"process {pid} is gone: {error}") from error
    fields = stat[stat.rindex(")") + 2:].split()  # fields[0] is field 3 (state)
    ticks = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime (14) + stime (15)
    try:
        threads = {tid: int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
                   for tid in os.listdir(f"/proc/{pid}/task")}
    except (OSError, ValueError, IndexError):
        threads = None
    return ticks, threads


def cpu_used(before, after):
    """CPU seconds between two samples: to the nanosecond when the same threads lived at both and
    the tick count agrees (no thread came and went between); otherwise the ticks'."""
    ticks = after[0] - before[0]
    if before[1] is not None and after[1] is not None and set(before[1]) == set(after[1]):
        precise = sum(after[1][tid] - before[1][tid] for tid in after[1]) / 1e9
        if abs(precise - ticks) <= 2.5 / os.sysconf("SC_CLK_TCK") + 0.02 * ticks:
            return precise
    return ticks


def bytes_written(pid):
    """Bytes the process has written (to files, sockets and pipes alike: /proc/<pid>/io's wchar)."""
    try:
        io = Path(f"/proc/{pid}/io").read_text()
    except OSError as error:
        raise Broken(f"process {pid}: cannot read its /proc io: {error}") from error
    return int(re.search(r"^wchar: (\d+)$", io, re.M).group(1))


def proc_status(pid, name):
    """A field of /proc/<pid>/status as an int (kB fields in bytes)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key == name:
                parts = value.split()
                return int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    except OSError as error:
        raise Broken(f"process {pid} is gone: {error}") from error
    raise Broken(f"no {name} in /proc/{pid}/status")


def rss(pid):
    return proc_status(pid, "VmRSS")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# HTTP and the exposition


def http_get(address, path, headers=None, timeout=60, method="GET"):
    """(status, headers, raw body) of one request to host:port."""
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def scrape(address, path="/metrics"):
    """The plain body of a 200 answer; Broken otherwise."""
    try:
        status, _, body = http_get(address, path)
    except OSError as error:
        raise Broken(f"scrape of http://{address}{path} failed: {type(error).__name__}: {error}") from error
    if status != 200:
        raise Broken(f"scrape of http://{address}{path} answered HTTP {status}: {body[:200]!r}")
    return body


def series_count(body):
    return sum(1 for line in body.split(b"\n") if line and not line.startswith(b"#"))


LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(body, *names):
    """{name: [(labels, value)]} for the series of the named metrics."""
    found = {name: [] for name in names}
    prefixes = tuple(n + c for n in names for c in "{ ")
    for line in body.decode("utf-8", "replace").splitlines():
        if not line.startswith(prefixes):
            continue
        name, brace, rest = line.partition("{")
        if brace:
            labels_text, _, value_text = rest.rpartition("}")
        else:
            name, _, value_text = line.partition(" ")
            labels_text = ""
        try:
            value = float(value_text.split()[0])
        except (ValueError, IndexError):
            continue
        if name in found:
            found[name].append((dict(LABEL.findall(labels_text)), value))
    return found


def requests_by_endpoint(found):
    totals = {}
    for labels, value in found["capi_api_requests_total"]:
        totals[labels.get("endpoint", "?")] = totals.get(labels.get("endpoint", "?"), 0) + value
    return totals


# ---------------------------------------------------------------------------------------------
# The simulated exchange and the exporters


class Tools:
    def __init__(self, args):
        bin_dir = Path(args.bin_dir)
        bin_dir = bin_dir if bin_dir.is_absolute() else ROOT / bin_dir
        self.exporter, self.sim = bin_dir / "capi_exporter", bin_dir / "capi_sim"
        for binary in (self.exporter, self.sim):
            if not os.access(binary, os.X_OK):
                missing(f"loadtest: no {binary.name} in {bin_dir}: run `cargo build --release --bins` first "
                        f"(or pass --bin-dir)")
        self.nginx = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
        self.wrk = shutil.which("wrk")
        if not self.nginx or not self.wrk:
            missing("apt-get install -y nginx-light wrk")
        self.python = self.venv()

    @staticmethod
    def venv():
        """target/loadtest-venv with the fixture's requirements, (re)installed when they change."""
        venv = ROOT / "target" / "loadtest-venv"
        python = venv / "bin" / "python"
        requirements = (FIXTURE / "requirements.txt").read_bytes()
        marker = venv / "requirements.sha256"
        digest = hashlib.sha256(requirements).hexdigest()
        if python.exists() and marker.exists() and marker.read_text() == digest:
            return python
        log(f"preparing {venv} (python3 -m venv, pip install -r {FIXTURE / 'requirements.txt'})")
        for command in ([sys.executable, "-m", "venv", str(venv)],
                        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r",
                         str(FIXTURE / "requirements.txt")]):
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().replace("\n", " ")[-300:]
                missing(f"loadtest: `{' '.join(command)}` failed: {tail}")
        marker.write_text(digest)
        return python


class Sim:
    def __init__(self, tools, children, work, tag, accounts, coin_ids="1,2", activity_tick=None):
        self.dir = work / f"sim-{tag}"
        self.dir.mkdir()
        command = [tools.sim, "--accounts", accounts, "--coin-ids", coin_ids, "--positions", 5,
                   "--listen", "127.0.0.1:0", "--out", self.dir, "--seed", 1]
        if activity_tick:
            command += ["--activity-tick-ms", str(activity_tick)]
        self.child = children.start(f"sim-{tag}", command)
        match = self.child.wait_for_line(r"capi_sim listening on (http://127\.0\.0\.1:\d+) accounts=(\d+)", 120)
        self.url, self.accounts = match.group(1), int(match.group(2))
        self.coin_ids = coin_ids
        if self.accounts != accounts:
            raise Broken(f"capi_sim says accounts={self.accounts}, asked for {accounts}")
        for name in ("accounts.yml", "credentials.json"):
            if not (self.dir / name).is_file():
                raise Broken(f"capi_sim did not write {self.dir / name}")

    def control(self, query):
        status, _, body = http_get(self.url.removeprefix("http://"), f"/sim/liquidation?{query}", method="POST",
                                   timeout=10)
        if status != 200:
            raise Broken(f"POST /sim/liquidation?{query} answered HTTP {status}: {body[:200]!r}")


class Exporter:
    def __init__(self, tools, children, sim, tag, interval, extra=()):
        command = [tools.exporter, "--config.file", sim.dir / "accounts.yml", "--api.base-url", sim.url,
                   "--api.coin-ids", sim.coin_ids, "--poll.interval", f"{interval:g}s",
                   "--api.ip-weight-budget", BUDGET, "--api.uid-weight-budget", BUDGET,
                   "--web.listen-address", "127.0.0.1:0", "--log.level", "info", *extra]
        self.child = children.start(f"exporter-{tag}", command)
        self.pid, self.accounts, self.coins = self.child.pid, sim.accounts, len(sim.coin_ids.split(","))
        self.interval = interval
        self.address = self.child.wait_for_line(r'serving metrics.*?\baddress="?([\d.]+:\d+)', 60, "err").group(1)
        self.ready_at = None

    def wait_ready(self, deadline):
        """/-/ready 200 and capi_up 1 for every account; returns the last body."""
        end, last = time.monotonic() + deadline, "no answer"
        while time.monotonic() < end:
            if not self.child.alive():
                raise Broken(f"{self.child.name} exited with code {self.child.process.returncode}\n{self.child.tail()}")
            try:
                status, _, _ = http_get(self.address, "/-/ready", timeout=10)
            except OSError as error:
                status, last = None, f"{type(error).__name__}: {error}"
            if status == 200:
                body = scrape(self.address)
                up = samples(body, "capi_up")["capi_up"]
                ups = sum(1 for _, value in up if value == 1)
                if ups == self.accounts:
                    self.ready_at = time.monotonic()
                    return body
                last = f"capi_up 1 for {ups} of {self.accounts} accounts"
            elif status is not None:
                last = f"/-/ready answered {status}"
            time.sleep(0.5 if status != 200 else 2.0)
        raise Broken(f"{self.child.name} not ready within {deadline:.0f} s ({last})\n{self.child.tail()}")

    def wait_logs_full(self, account, deadline):
        """Until `account` (the last to start polling) has dropped the first line of its log of
        recent polls: then every account's log is as long as it stays. Returns the seconds waited."""
        path = "/debug/polls?account=" + urllib.parse.quote(account)
        start = time.monotonic()
        first = None
        while time.monotonic() < start + deadline:
            lines = scrape(self.address, path).decode("utf-8", "replace").splitlines()[2:]
            first = first or (lines[0] if lines else None)
            if lines and lines[0] != first:
                return time.monotonic() - start
            time.sleep(2.0)
        raise Broken(f"the log of recent polls of {account} did not fill within {deadline:.0f} s")


def ready_deadline(interval, accounts):
    return 3 * interval + 60 + accounts * 0.05


# ---------------------------------------------------------------------------------------------
# Measurements


def measure_polling(exporter, windows):
    """CPU and request weight over `windows` poll intervals with no scrape (poll CPU, weight per poll)."""
    before = samples(scrape(exporter.address), "capi_poll_interval_seconds", "capi_api_requests_total")
    intervals = [value for _, value in before["capi_poll_interval_seconds"]]
    if not intervals:
        raise Broken(f"{exporter.child.name}: no capi_poll_interval_seconds on /metrics")
    interval = max(intervals)
    cpu0, written0, t0 = cpu_sample(exporter.pid), bytes_written(exporter.pid), time.monotonic()
    time.sleep(windows * interval)
    cpu1, written1, t1 = cpu_sample(exporter.pid), bytes_written(exporter.pid), time.monotonic()
    cpu = cpu_used(cpu0, cpu1)
    after = samples(scrape(exporter.address), "capi_api_requests_total")
    r0, r1 = requests_by_endpoint(before), requests_by_endpoint(after)
    account_q = r1.get("account", 0) - r0.get("account", 0)
    bill_q = r1.get("bills", 0) - r0.get("bills", 0)
    if account_q <= 0:
        raise Broken(f"{exporter.child.name}: capi_api_requests_total{{endpoint=\"account\"}} did not grow over "
                     f"{windows} poll interval(s): {r0} -> {r1}")
    window = t1 - t0
    polls = window / interval
    n, coins = exporter.accounts, exporter.coins
    cpu_cycle = cpu / polls
    account_part, bill_part = account_q / (n * polls), 2 * bill_q / (n * polls)
    weight = account_part + bill_part
    # The same per poll counted (one account query per coin makes a poll): free of the window's
    # edges, where one account more or less may fall in. The accounts per IP come from it.
    counted = account_q / (n * coins)
    bills_per_poll = bill_q / (n * counted)
    weight_counted, weight_1coin = coins + 2 * bills_per_poll, 1 + 2 * bills_per_poll
    per_15s = IP_BUDGET_PER_10S * 15 / 10
    return {
        "accounts": n, "coins": coins, "interval_s": interval, "interval_stretched": interval > exporter.interval + 1e-3,
        "window_s": window, "polls": polls, "cycles_seen": account_q / (n * coins),
        "cpu_s": cpu, "cpu_ms_per_cycle": cpu_cycle * 1000, "cpu_us_per_account": cpu_cycle / n * 1e6,
        "bytes_written_per_cycle": (written1 - written0) / polls,
        "account_queries": account_q, "bill_queries": bill_q,
        "weight_per_account_per_poll": weight, "weight_per_poll_counted": weight_counted, "weight_minimum": coins + 2,
        "bill_queries_per_poll": bills_per_poll,
        "accounts_per_ip": per_15s / weight_counted, "accounts_per_ip_1coin": per_15s / weight_1coin,
        "background_cpu_per_s": cpu / window,
    }


WRK_LATENCY = re.compile(r"^\s*(50|99)%\s+([\d.]+)(us|ms|s|m)\s*$", re.M)
UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def parse_wrk(text):
    """Requests, duration, rate, p50/p99 (s), non-2xx and socket errors from wrk's report."""
    done = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", text)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if not done or not rate:
        raise Broken(f"cannot read wrk's report:\n{text}")
    result = {"requests": int(done.group(1)), "duration_s": float(done.group(2)) * UNITS[done.group(3)],
              "rps": float(rate.group(1)), "non_2xx": 0, "socket_errors": 0}
    for percent, value, unit in WRK_LATENCY.findall(text):
        result[f"p{percent}_s"] = float(value) * UNITS[unit]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if non2xx:
        result["non_2xx"] = int(non2xx.group(1))
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if errors:
        result["socket_errors"] = sum(int(g) for g in errors.groups())
        result["socket_errors_detail"] = errors.group(0)
    return result


def run_wrk(tools, url, seconds, gzip_wanted, connections=CONNECTIONS):
    command = [tools.wrk, f"-t{min(THREADS, connections)}", f"-c{connections}", f"-d{seconds}s", "--latency",
               "--timeout", "60s"]
    if gzip_wanted:
        command += ["-H", "Accept-Encoding: gzip"]
    command.append(url)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120)
    except subprocess.TimeoutExpired as error:
        raise Broken(f"wrk against {url} did not finish") from error
    if done.returncode != 0:
        raise Broken(f"wrk against {url} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    result = parse_wrk(done.stdout)
    if result["requests"] == 0 or result["non_2xx"]:
        raise Broken(f"wrk against {url}: {result['requests']} requests, {result['non_2xx']} not 2xx:\n{done.stdout}")
    result["report"] = done.stdout
    return result


def wrk_with_cpu(tools, url, seconds, gzip_wanted, pid, background_per_s):
    """wrk, plus the server's CPU per scrape: from the start until in-flight requests drained,
    less the background rate, over (completed + connections) requests."""
    threads_before = proc_status(pid, "Threads")
    cpu0, t0 = cpu_sample(pid), time.monotonic()
    result = run_wrk(tools, url, seconds, gzip_wanted)
    end = time.monotonic() + 120
    while proc_status(pid, "Threads") > threads_before and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.5)
    cpu1, t1 = cpu_sample(pid), time.monotonic()
    gross = cpu_used(cpu0, cpu1)
    scrapes = result["requests"] + CONNECTIONS
    result.update(cpu_s=gross, cpu_ms_per_scrape_gross=gross / scrapes * 1000, drained_s=t1 - t0,
                  rps_drained=scrapes / (t1 - t0),
                  cpu_ms_per_scrape=max(0.0, gross - background_per_s * (t1 - t0)) / scrapes * 1000,
                  rss_after=rss(pid))
    return result


def check_answer(address, path, gzip_wanted, expect_gzip, what):
    """One request: 200, Content-Encoding as expected, a body that (un)compresses to series."""
    headers = {"Accept-Encoding": "gzip"} if gzip_wanted else {}
    try:
        status, response_headers, raw = http_get(address, path, headers)
    except OSError as error:
        raise Broken(f"{what}: request failed: {error}") from error
    encoding = response_headers.get("content-encoding", "")
    if status != 200 or (encoding == "gzip") != expect_gzip:
        raise Broken(f"{what}: HTTP {status}, Content-Encoding {encoding!r} (expected "
                     f"{'gzip' if expect_gzip else 'none'})")
    body = gzip.decompress(raw) if encoding == "gzip" else raw
    if series_count(body) == 0:
        raise Broken(f"{what}: no series in the body")
    return {"content_encoding": encoding or "identity", "bytes_on_wire": len(raw)}


NGINX_CONF = """worker_processes auto;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
{user}
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    default_type text/plain;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    gzip on;
    gzip_types *;
    gzip_comp_level 1;
    gzip_min_length 0;
    server {{
        listen 127.0.0.1:{port};
        root {static};
        location /precompressed/ {{
            alias {static}/;
            gzip off;
            gzip_static on;
        }}
    }}
}}
"""


def start_nginx(tools, children, work, static):
    """nginx serving `static`: /metrics.txt (plain, or gzipped on the fly) and
    /precompressed/metrics.txt (metrics.txt.gz as it is, to clients that accept gzip)."""
    folder = work / "nginx"
    folder.mkdir()
    port = free_port()
    # As root, the workers would switch to nobody, who cannot read this folder: keep our user.
    user = ""
    if os.geteuid() == 0:
        import grp
        import pwd
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};"
    (folder / "nginx.conf").write_text(NGINX_CONF.format(dir=folder, port=port, static=static, user=user))
    child = children.start("nginx", [tools.nginx, "-p", folder, "-c", folder / "nginx.conf", "-e",
                                     folder / "error.log"])
    address = f"127.0.0.1:{port}"
    end = time.monotonic() + 20
    while time.monotonic() < end:
        if not child.alive():
            raise Broken(f"nginx exited with code {child.process.returncode}\n{child.tail()}"
                         + (folder / "error.log").read_text(errors="replace")[-800:])
        try:
            if http_get(address, "/metrics.txt", timeout=5)[0] == 200:
                return child, address
        except OSError:
            pass
        time.sleep(0.1)
    raise Broken(f"nginx did not serve on {address} within 20 s\n{child.tail()}")


def percentile(values, fraction):
    """Nearest rank: the smallest value with at least `fraction` of them at or below it."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


# ---------------------------------------------------------------------------------------------
# The phases


def phase_a(args, tools, children, work, results):
    n = args.accounts
    log(f"A: {n} accounts, 2 coins, 5 positions; exporter at --poll.interval {args.interval:g}s")
    sim = Sim(tools, children, work, "main", n)
    exporter = Exporter(tools, children, sim, "main", args.interval)
    t0 = time.monotonic()
    ready = exporter.wait_ready(ready_deadline(args.interval, n))
    memory = results.setdefault("memory", {})
    memory["rss_ready_1000"] = rss(exporter.pid)
    log(f"A: ready after {time.monotonic() - t0:.1f} s; RSS {memory['rss_ready_1000'] / MIB:.1f} MiB; "
        f"measuring polling over {args.windows} interval(s) with no scrape")
    polling = measure_polling(exporter, args.windows)
    results.setdefault("polling", {})[str(n)] = polling
    log(f"A: {polling['cpu_ms_per_cycle']:.1f} ms CPU per poll cycle, weight {polling['weight_per_account_per_poll']:.2f}")
    last_account = samples(ready, "capi_up")["capi_up"][-1][0]["account"]
    waited = exporter.wait_logs_full(last_account, 30 * args.interval)
    memory["rss_logs_full_1000"] = rss(exporter.pid)
    memory["logs_full_after_s"] = time.monotonic() - exporter.ready_at
    log(f"A: every account's log of recent polls full after {waited:.0f} s more; "
        f"RSS {memory['rss_logs_full_1000'] / MIB:.1f} MiB")

    static = work / "static"
    static.mkdir()
    body = scrape(exporter.address)
    series = series_count(body)
    if series == 0:
        raise Broken("our /metrics has no series")
    (static / "metrics.txt").write_bytes(body)
    compressed = gzip.compress(body, compresslevel=1)
    (static / "metrics.txt.gz").write_bytes(compressed)
    ours_gzip = check_answer(exporter.address, "/metrics", True, True, "ours with Accept-Encoding: gzip")
    check_answer(exporter.address, "/metrics", False, False, "ours plain")
    nginx, nginx_address = start_nginx(tools, children, work, static)
    check_answer(nginx_address, "/metrics.txt", False, False, "nginx plain")
    check_answer(nginx_address, "/metrics.txt", True, True, "nginx dynamic gzip")
    check_answer(nginx_address, "/precompressed/metrics.txt", True, True, "nginx gzip_static")
    serving = results["serving"] = {"accounts": n, "series": series, "bytes": len(body),
                                    "bytes_gzip_level1": len(compressed),
                                    "bytes_ours_gzip": ours_gzip["bytes_on_wire"], "runs": {}}
    log(f"A: /metrics has {series} series, {len(body)} bytes ({len(compressed)} gzipped at level 1; ours sent "
        f"{ours_gzip['bytes_on_wire']} with gzip); nginx on {nginx_address}")
    background = polling["background_cpu_per_s"]
    ours, theirs = f"http://{exporter.address}/metrics", f"http://{nginx_address}/metrics.txt"
    runs = [("nginx_plain", theirs, False, None),
            ("ours_plain", ours, False, exporter.pid),
            ("nginx_gzip", theirs, True, None),
            ("nginx_gzip_static", f"http://{nginx_address}/precompressed/metrics.txt", True, None),
            ("ours_gzip", ours, True, exporter.pid),
            ("nginx_plain_one", theirs, False, None),
            ("ours_plain_one", ours, False, None)]
    for name, url, gzip_wanted, pid in runs:
        if pid:
            result = wrk_with_cpu(tools, url, args.seconds, gzip_wanted, pid, background)
        else:
            result = run_wrk(tools, url, args.seconds, gzip_wanted, 1 if name.endswith("_one") else CONNECTIONS)
        serving["runs"][name] = result
        log(f"A: wrk {name}: {result['rps']:.1f} req/s, p50 {result.get('p50_s', 0) * 1000:.1f} ms, "
            f"p99 {result.get('p99_s', 0) * 1000:.1f} ms" + (f", {result['socket_errors_detail']}"
                                                              if result["socket_errors"] else ""))
    nginx.stop()
    if not exporter.child.alive():
        raise Broken(f"our exporter died during the wrk runs\n{exporter.child.tail()}")
    memory["rss_after_wrk_1000"] = rss(exporter.pid)
    memory["hwm_1000"] = proc_status(exporter.pid, "VmHWM")
    exporter.child.stop()
    return sim


def phase_b(args, tools, children, sim, results):
    n = sim.accounts
    log(f"B: the Python reference exporter on the same {n} accounts, polling every {args.interval:g} s")
    fixture = children.start("python-exporter", [
        tools.python, "-B", FIXTURE / "exporter.py", "--credentials", sim.dir / "credentials.json",
        "--base-url", sim.url, "--port", 0, "--interval", f"{args.interval:g}"])
    t0 = time.monotonic()
    address = fixture.wait_for_line(r"listening on http://(127\.0\.0\.1:\d+)", 120 + n * 0.2).group(1)
    rss_listening = rss(fixture.pid)
    log(f"B: first full poll done after {time.monotonic() - t0:.1f} s; measuring its background CPU over one interval")
    cpu0, t1 = cpu_sample(fixture.pid), time.monotonic()
    time.sleep(args.interval)
    background = cpu_used(cpu0, cpu_sample(fixture.pid)) / (time.monotonic() - t1)
    started = time.monotonic()
    body = scrape(address)
    one_scrape = time.monotonic() - started
    series = series_count(body)
    ups = [value for _, value in samples(body, "capi_up")["capi_up"]]
    if series == 0 or len(ups) != n or not all(ups):
        first = next(iter(fixture.err.read_text(errors="replace").splitlines()), "no error logged")
        raise Broken(f"the Python exporter is not up for all {n} accounts ({sum(ups):.0f} up, {series} series): "
                     f"{first}")
    seconds = max(args.seconds, min(60, math.ceil(CONNECTIONS * 5 * one_scrape)))
    log(f"B: {series} series, {len(body)} bytes, one scrape {one_scrape * 1000:.0f} ms; wrk for {seconds:.0f} s")
    result = wrk_with_cpu(tools, f"http://{address}/metrics", seconds, False, fixture.pid, background)
    if not fixture.alive():
        raise Broken(f"the Python exporter died during the wrk run\n{fixture.tail()}")
    errors = sum(1 for line in fixture.err.read_text(errors="replace").splitlines() if line.startswith("poll error"))
    results["python"] = {"accounts": n, "series": series, "bytes": len(body), "one_scrape_s": one_scrape,
                         "wrk_seconds": seconds, "background_cpu_per_s": background, "rss_listening": rss_listening,
                         "poll_errors": errors, "wrk": result}
    log(f"B: {result['rps']:.2f} req/s, {result['cpu_ms_per_scrape']:.0f} ms CPU per scrape, "
        f"RSS {result['rss_after'] / MIB:.1f} MiB, {errors} poll errors")
    fixture.stop()
    sim.child.stop()


def phase_c(args, tools, children, work, results):
    log("C: a 1-account exporter idles while polling is measured at " + ", ".join(map(str, args.poll_sizes)))
    idle_sim = Sim(tools, children, work, "idle", 1)
    idle = Exporter(tools, children, idle_sim, "idle", args.interval)
    idle.wait_ready(ready_deadline(args.interval, 1))
    for n in args.poll_sizes:
        sim = Sim(tools, children, work, f"poll{n}", n)
        exporter = Exporter(tools, children, sim, f"poll{n}", args.interval)
        exporter.wait_ready(ready_deadline(args.interval, n))
        polling = measure_polling(exporter, args.windows)
        results.setdefault("polling", {})[str(n)] = polling
        log(f"C: {n} accounts: {polling['cpu_ms_per_cycle']:.2f} ms CPU per poll cycle, "
            f"weight {polling['weight_per_account_per_poll']:.2f}")
        exporter.child.stop()
        sim.child.stop()
    # The same cycle when every account changes between polls: bills on every poll, every
    # answer decoded anew; then again with a state file, saved after every poll.
    n = args.accounts
    for key, extra in (("polling_busy", ()), ("polling_busy_state", ("--state.file", work / "busy-state.json"))):
        sim = Sim(tools, children, work, key, n, activity_tick=BUSY_TICK_MS)
        exporter = Exporter(tools, children, sim, key, args.interval, extra)
        exporter.wait_ready(ready_deadline(args.interval, n))
        busy = results[key] = measure_polling(exporter, args.windows)
        if extra:
            busy["state_file_bytes"] = (work / "busy-state.json").stat().st_size
        log(f"C: {n} accounts with activity every {BUSY_TICK_MS // 1000}s{' and a state file' if extra else ''}: "
            f"{busy['cpu_ms_per_cycle']:.2f} ms CPU, {busy['bytes_written_per_cycle'] / 1e6:.1f} MB written per poll cycle")
        exporter.child.stop()
        sim.child.stop()
    rest = idle.ready_at + 3 * args.interval + 1 - time.monotonic()
    if rest > 0:
        time.sleep(rest)
    if not idle.child.alive():
        raise Broken(f"the idle exporter died\n{idle.child.tail()}")
    memory = results.setdefault("memory", {})
    memory["rss_idle_1"] = rss(idle.pid)
    memory["idle_polled_s"] = time.monotonic() - idle.ready_at
    log(f"C: idle 1-account exporter RSS {memory['rss_idle_1'] / MIB:.1f} MiB")
    idle.child.stop()
    idle_sim.child.stop()


def phase_d(args, tools, children, work, results):
    log(f"D: freshness, 1 account, coin 2, --poll.interval 1s, {args.trials} trials")
    sim = Sim(tools, children, work, "fresh", 1, coin_ids="2")
    exporter = Exporter(tools, children, sim, "fresh", 1.0)
    exporter.wait_ready(ready_deadline(1.0, 1))
    interval = max(v for _, v in samples(scrape(exporter.address), "capi_poll_interval_seconds")
                   ["capi_poll_interval_seconds"])
    rng = random.Random(args.seed)

    def liquidating():
        found = samples(scrape(exporter.address), "capi_collateral_is_liquidating")["capi_collateral_is_liquidating"]
        values = [v for labels, v in found if labels.get("coin_id") == "2"]
        return values[0] if values else None

    latencies, missed = [], 0
    for trial in range(args.trials):
        on = trial % 2 == 0
        time.sleep(rng.uniform(0, interval))
        sim.control(f"account=1&coin_id=2&on={'true' if on else 'false'}")
        t0 = time.monotonic()
        seen = None
        while time.monotonic() - t0 < 5.0:
            if liquidating() == float(on):
                seen = time.monotonic() - t0
                break
            time.sleep(0.002)
        if seen is None:
            missed += 1
            log(f"D: trial {trial + 1}: is_liquidating={int(on)} not on /metrics within 5 s")
            end = time.monotonic() + 10  # let it settle before the next trial
            while liquidating() != float(on) and time.monotonic() < end:
                time.sleep(0.1)
        else:
            latencies.append(seen)
    results["freshness"] = {"interval_s": interval, "trials": args.trials, "not_seen_within_5s": missed,
                            "latencies_s": latencies}
    exporter.child.stop()
    sim.child.stop()


def phase_e(args, tools, children, work, results):
    n = args.accounts
    log(f"E: soak for {args.soak_minutes:g} min, {n} accounts with activity every 15 s, RSS every 30 s")
    sim = Sim(tools, children, work, "soak", n, activity_tick=15000)
    exporter = Exporter(tools, children, sim, "soak", args.interval)
    exporter.wait_ready(ready_deadline(args.interval, n))
    start, series = time.monotonic(), []
    end = start + args.soak_minutes * 60
    while True:
        if not exporter.child.alive():
            raise Broken(f"the soak exporter died\n{exporter.child.tail()}")
        series.append((time.monotonic() - start, rss(exporter.pid)))
        body = scrape(exporter.address)
        if time.monotonic() >= end:
            break
        time.sleep(max(0.0, min(30.0 - (time.monotonic() - start) % 30.0, end - time.monotonic())))
    bills = sum(v for _, v in samples(body, "capi_bills_total")["capi_bills_total"])
    # Growth is judged after a warm-up (a quarter of the soak, at most 5 minutes): the first
    # minutes see the business types' series appear and the allocator settle.
    warmup = min(300.0, args.soak_minutes * 60 / 4)
    settled = next((r for t, r in series if t >= warmup), series[-1][1])
    values = [r for _, r in series]
    results["soak"] = {"minutes": args.soak_minutes, "accounts": n, "samples": series, "start": values[0],
                       "warmup_s": warmup, "first": settled, "last": values[-1], "max": max(values),
                       "growth": values[-1] - settled, "bills_counted": bills}
    exporter.child.stop()
    sim.child.stop()


# ---------------------------------------------------------------------------------------------
# The table


def fmt_rate(run):
    latency = ""
    if "p50_s" in run:
        latency = f" (p50 {run['p50_s'] * 1000:.1f} ms, p99 {run.get('p99_s', 0) * 1000:.1f} ms)"
    rate = f"{run['rps']:.1f}" if run["rps"] >= 10 else f"{run['rps']:.2f}"
    return f"{rate} req/s, {run['requests']} in {run['duration_s']:.0f} s{latency}"


def mib(value):
    return f"{value / MIB:.1f} MiB"


def verdict(ok):
    return "met" if ok else "**missed**"


def table(args, results):
    rows = []  # (target, measurement, ours, reference, ratio, target, result)
    serving = results.get("serving")
    runs = serving["runs"] if serving else {}
    if serving:
        n = serving["accounts"]
        rows.append(("serving", f"/metrics of {n} accounts, 2 coins, 5 positions",
                     f"{serving['series']} series, {serving['bytes']} B plain, {serving['bytes_ours_gzip']} B gzip",
                     f"same body, gzip -1: {serving['bytes_gzip_level1']} B", "", "", ""))
        # gzip_static sends bytes compressed once, ahead of time; the exporter compresses each
        # scrape (its page changes with every poll), so that comparison is reported, not a target.
        for label, ours, ref, is_target in (("plain", "ours_plain", "nginx_plain", True),
                                            ("gzip vs nginx dynamic gzip", "ours_gzip", "nginx_gzip", True),
                                            ("gzip vs nginx gzip_static", "ours_gzip", "nginx_gzip_static", False)):
            if ours not in runs or ref not in runs:
                continue
            ratio = runs[ours]["rps"] / runs[ref]["rps"]
            target, result = (f">= {TARGETS['serving_ratio']:.2f}", verdict(ratio >= TARGETS["serving_ratio"])) \
                if is_target else ("report", "reported")
            rows.append(("serving", f"wrk -t{THREADS} -c{CONNECTIONS} -d{args.seconds:g}s, {label}", fmt_rate(runs[ours]),
                         f"nginx: {fmt_rate(runs[ref])}", f"{ratio:.2f}", target, result))
        if "ours_plain_one" in runs and "nginx_plain_one" in runs:
            ours, ref = runs["ours_plain_one"], runs["nginx_plain_one"]
            rows.append(("serving", f"wrk -t1 -c1 -d{args.seconds:g}s, plain: one scrape at a time, as a Prometheus "
                         "server scrapes (ratio: nginx's p50 / ours)", fmt_rate(ours), f"nginx: {fmt_rate(ref)}",
                         f"{ref['p50_s'] / ours['p50_s']:.2f}", "report", "reported"))
    python = results.get("python")
    if "ours_plain" in runs and python:
        ours, ref = runs["ours_plain"], python["wrk"]
        drained = ""
        if ref["requests"] < 10 * CONNECTIONS:  # few requests: those in flight at the end weigh
            drained = f"; {ref['rps_drained']:.2f} req/s counting the {CONNECTIONS} in flight at the end"
        rows.append(("python", f"scrapes/s, plain, {python['accounts']} accounts ({serving['series']} vs "
                          f"{python['series']} series)", fmt_rate(ours), f"Python: {fmt_rate(ref)}{drained}",
                     f"{ours['rps'] / ref['rps']:.1f}x", "report", "reported"))
        rows.append(("python", "CPU per scrape, net of background polling (gross)",
                     f"{ours['cpu_ms_per_scrape']:.1f} ms ({ours['cpu_ms_per_scrape_gross']:.1f})",
                     f"Python: {ref['cpu_ms_per_scrape']:.0f} ms ({ref['cpu_ms_per_scrape_gross']:.0f})",
                     f"{ours['cpu_ms_per_scrape'] / ref['cpu_ms_per_scrape']:.3f}x"
                     if ref["cpu_ms_per_scrape"] else "-", "report", "reported"))
        rows.append(("python", "RSS after the wrk run", mib(ours["rss_after"]), f"Python: {mib(ref['rss_after'])}",
                     f"{ours['rss_after'] / ref['rss_after']:.2f}x", "report", "reported"))
        if "ours_gzip" in runs:
            rows.append(("python", "scrapes/s, ours with gzip", fmt_rate(runs["ours_gzip"]),
                         f"Python plain: {ref['rps']:.2f} req/s",
                         f"{runs['ours_gzip']['rps'] / ref['rps']:.1f}x", "report", "reported"))
    memory = results.get("memory", {})
    if "rss_idle_1" in memory:
        rows.append(("memory", f"RSS idle, 1 account, 2 coins, after {memory['idle_polled_s']:.0f} s of polling",
                     mib(memory["rss_idle_1"]), "", "", f"< {TARGETS['idle_rss_mib']} MiB",
                     verdict(memory["rss_idle_1"] < TARGETS["idle_rss_mib"] * MIB)))
    logs_full = f"every account's log of recent polls full ({memory.get('logs_full_after_s', 0):.0f} s after ready)"
    for key, what in (("rss_ready_1000", "ready"), ("rss_logs_full_1000", logs_full),
                      ("rss_after_wrk_1000", "after the wrk runs")):
        if key in memory:
            # The last row is judged by the peak of the process's whole life (the target is one at peak).
            judged = memory["hwm_1000"] if key == "rss_after_wrk_1000" else memory[key]
            rows.append(("memory", f"RSS, {args.accounts} accounts, {what}", mib(memory[key]),
                         f"peak (VmHWM) {mib(memory['hwm_1000'])}" if key == "rss_after_wrk_1000" else "", "",
                         f"< {TARGETS['rss_1000_mib']} MiB", verdict(judged < TARGETS["rss_1000_mib"] * MIB)))
    soak = results.get("soak")
    if soak:
        flat = soak["last"] <= soak["first"] * 1.10 + 2 * MIB
        rows.append(("memory", f"soak {soak['minutes']:g} min, {soak['accounts']} accounts, {soak['bills_counted']:.0f} "
                          f"bills counted", f"start {mib(soak['start'])}, after {soak['warmup_s']:.0f} s "
                          f"{mib(soak['first'])}, last {mib(soak['last'])}, max {mib(soak['max'])}",
                     f"growth after warm-up {soak['growth'] / MIB:+.1f} MiB", "",
                     "flat (last <= after warm-up x 1.1 + 2 MiB)", verdict(flat)))
    polling = results.get("polling", {})
    sizes = sorted(polling, key=int)
    for size in sizes:
        p = polling[size]
        largest = size == sizes[-1]
        ok = p["cpu_ms_per_cycle"] < TARGETS["poll_cycle_ms"] if largest else True
        rows.append(("poll cpu", f"CPU per poll cycle, {size} accounts (interval {p['interval_s']:g} s, "
                          f"{p['cycles_seen']:.2f} cycles seen)",
                     f"{p['cpu_ms_per_cycle']:.2f} ms, {p['cpu_us_per_account']:.0f} us/account", "", "",
                     f"< {TARGETS['poll_cycle_ms']} ms at {args.accounts}" if largest else "linear",
                     verdict(ok) if largest else ""))
    busy = results.get("polling_busy")
    if busy:
        rows.append(("poll cpu", f"CPU per poll cycle, {busy['accounts']} accounts with activity every {BUSY_TICK_MS // 1000}s "
                          f"(interval {busy['interval_s']:g} s, {busy['cycles_seen']:.2f} cycles seen)",
                     f"{busy['cpu_ms_per_cycle']:.2f} ms, {busy['cpu_us_per_account']:.0f} us/account", "", "",
                     f"< {TARGETS['poll_cycle_ms']} ms at {args.accounts}",
                     verdict(busy["cpu_ms_per_cycle"] < TARGETS["poll_cycle_ms"])))
    saving = results.get("polling_busy_state")
    if saving:
        rows.append(("poll cpu", f"the same with --state.file ({saving['state_file_bytes'] / 1e6:.2f} MB, saved after "
                                 f"every poll)", f"{saving['cpu_ms_per_cycle']:.2f} ms, "
                                 f"{saving['bytes_written_per_cycle'] / 1e6:.1f} MB written per cycle", "", "",
                     "report", "reported"))
    if len(sizes) >= 2:
        mid, top = polling[sizes[-2]], polling[sizes[-1]]
        growth = top["cpu_us_per_account"] / mid["cpu_us_per_account"] if mid["cpu_us_per_account"] else 0
        rows.append(("poll cpu", f"cost per account, {sizes[-1]} vs {sizes[-2]} accounts", f"{growth:.2f}x", "", "",
                     "linear (<= 1.5x)", verdict(growth <= 1.5)))
    if sizes:
        p = polling[sizes[-1]]
        weight, minimum, counted = p["weight_per_account_per_poll"], p["weight_minimum"], p["weight_per_poll_counted"]
        rows.append(("weight", f"IP weight per account per poll, {sizes[-1]} accounts, {p['coins']} coins "
                          f"({p['account_queries']:.0f} account + {p['bill_queries']:.0f} bill queries in "
                          f"{p['polls']:.2f} intervals)", f"{weight:.2f} per interval; {counted:.2f} per poll counted",
                     f"API minimum {minimum} ({p['coins']} account queries x 1 + 1 bill query x 2)", f"{counted / minimum:.2f}",
                     "= minimum", verdict(counted <= minimum * 1.02)))
        rows.append(("weight", "accounts per IP at 500 per 10 s, 15 s interval (750 / weight per poll)",
                     f"{p['coins']} coins: {math.floor(p['accounts_per_ip'] + 1e-6)}; "
                     f"1 coin: {math.floor(p['accounts_per_ip_1coin'] + 1e-6)}",
                     "", "", "report", "reported"))
    fresh = results.get("freshness")
    if fresh:
        lat = fresh["latencies_s"]
        limit = fresh["interval_s"] + TARGETS["freshness_slack_s"]
        if lat:
            spread = " / ".join(f"{percentile(lat, q) * 1000:.0f}" for q in (0.0, 0.5, 0.9, 0.99, 1.0))
            ok = max(lat) <= limit and not fresh["not_seen_within_5s"]
        else:
            spread, ok = "none seen", False
        missed = f", {fresh['not_seen_within_5s']} not seen in 5 s" if fresh["not_seen_within_5s"] else ""
        rows.append(("freshness", f"change -> /metrics, {fresh['trials']} trials, interval {fresh['interval_s']:g} s{missed}",
                     f"min/p50/p90/p99/max {spread} ms", "", "", f"max <= {limit * 1000:.0f} ms", verdict(ok)))
    header = ("group", "measurement", "ours", "reference", "ratio", "target", "result")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    if args.quick and rows:
        lines.append(f"\n--quick: {args.accounts} accounts instead of 1,000, wrk {args.seconds} s, interval "
                     f"{args.interval:g} s; the targets set for 1,000 accounts are checked at these sizes.")
    return "\n".join(lines), rows


def first_line(command):
    try:
        done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return next(iter((done.stdout + done.stderr).strip().splitlines()), "?")


def machine(tools):
    versions = {
        "capi_exporter": first_line([tools.exporter, "--version"]),
        "nginx": first_line([tools.nginx, "-v"]),
        "wrk": first_line([tools.wrk, "-v"]).split(" Copyright")[0],
        "prometheus_client": first_line([tools.python, "-c", "import importlib.metadata as m; "
                                         "print(m.version('prometheus_client'))"]),
    }
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
            "versions": versions, "revision": revision()}


def revision():
    """The commit the binaries were presumably built from, with '-dirty' when files differ from it."""
    head = first_line(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    try:
        status = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        status = ""
    return head + ("-dirty" if status.strip() else "")


def interrupt(signum, frame):
    raise KeyboardInterrupt


def main():
    args = parse_args()
    tools = Tools(args)
    work = Path(tempfile.mkdtemp(prefix="capi-loadtest-"))
    logs = work / "logs"
    logs.mkdir()
    children = Children(logs)
    results = {"machine": machine(tools), "quick": args.quick, "wrk_seconds": args.seconds, "interval_s": args.interval}
    signal.signal(signal.SIGTERM, interrupt)
    log(f"{results['machine']['cpu']}, {results['machine']['cores']} cores; binaries from {tools.exporter.parent} "
        f"(revision {results['machine']['revision']}); work folder {work}")
    log("versions: " + ", ".join(f"{k} {v}" for k, v in results["machine"]["versions"].items()))
    started = time.monotonic()
    broken = None
    try:
        if "A" in args.phases:
            sim = phase_a(args, tools, children, work, results)
        if "B" in args.phases:
            phase_b(args, tools, children, sim, results)
        if "C" in args.phases:
            phase_c(args, tools, children, work, results)
        if "D" in args.phases:
            phase_d(args, tools, children, work, results)
        if args.soak_minutes > 0:
            phase_e(args, tools, children, work, results)
    except Broken as error:
        broken = str(error)
    except KeyboardInterrupt:
        broken = "interrupted"
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave children behind
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        children.stop_all()
    results["elapsed_s"] = time.monotonic() - started
    text, rows = table(args, results)
    results["table"] = [dict(zip(("group", "measurement", "ours", "reference", "ratio", "target", "result"), row))
                        for row in rows]
    results["broken"] = broken
    if rows:
        print(f"\n{text}\n", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str) + "\n")
        log(f"results written to {args.json}")
    if broken:
        print(f"loadtest: error: {broken}", file=sys.stderr)
        print(f"loadtest: logs kept in {work}", file=sys.stderr)
        return 1
    log(f"done in {results['elapsed_s']:.0f} s")
    if args.keep:
        log(f"logs and bodies kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
