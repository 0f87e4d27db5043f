#!/usr/bin/env python3
"""Soak test of the exporter's serving side: scrape load on loopback, with memory watched.

Starts the exporter in demo mode (``--demo --demo.accounts N --poll.interval 1s``) on a free
loopback port, waits until it serves, then for ``--warmup`` plus ``--seconds`` runs ``--threads``
scrapers, each
scraping ``/metrics`` in a loop on its own keep-alive connection, asking for OpenMetrics as
Prometheus does (every other request with
``Accept-Encoding: gzip``; every request has a timeout), while the exporter's RSS is read from
``/proc/<pid>/status`` every second. Then it stops the exporter with SIGTERM (by its PID).

Checks (each is one pass or fail in the closing line ``soak: N passed, M failed``):
  1. the exporter served (``/-/healthy`` answered 200 within ``--start-timeout``);
  2. every scrape succeeded: HTTP 200 and a body (gunzipped if the answer says gzip) ending in
     ``# EOF\\n``; no error, no timeout; at least one scrape was made;
  3. memory stays flat: over the measured period (the ``--seconds`` after ``--warmup``), the
     median RSS of its last quarter is at most the median RSS of its second quarter times 1.10
     plus 2 MiB (its first quarter is left out too). The demo's accounts create new series for
     about a minute (business types appearing), which the warm-up lets settle;
  4. the exporter was still running at the end of the load;
  5. it stopped on SIGTERM with exit code 0 within ``--stop-timeout``.

The simulated exchange enforces a weight budget per IP: with many accounts the exporter may be
rate-limited or stretch its interval. That is the exporter's business, not a soak failure: the
soak checks the serving side and memory (the rate-limited requests are reported as a figure).

Python 3 standard library only. Traffic goes only to 127.0.0.1; every loop is bounded in time
and in count. Run from anywhere:

    python3 scripts/soak.py                        # 60 s, 50 accounts, 8 threads
    N=200 python3 scripts/soak.py --seconds 300 --binary target/release/capi_exporter
"""

import argparse
import gzip
import http.client
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1024 * 1024

OPENMETRICS = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=os.path.join(ROOT, "target", "debug", "capi_exporter"))
    parser.add_argument("--accounts", type=int, default=int(os.environ.get("N", "50")),
                        help="simulated accounts (default: $N or 50)")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the measured scrape load")
    parser.add_argument("--warmup", type=float, default=30.0,
                        help="scrape load before the measured period, left out of the memory check")
    parser.add_argument("--threads", type=int, default=8, help="concurrent scrapers")
    parser.add_argument("--timeout", type=float, default=10.0, help="timeout of one request, seconds")
    parser.add_argument("--max-requests", type=int, default=1_000_000, help="bound on the scrapes made")
    parser.add_argument("--start-timeout", type=float, default=30.0)
    parser.add_argument("--stop-timeout", type=float, default=15.0)
    parser.add_argument("--path", default="/metrics")
    parser.add_argument("--extra-arg", action="append", default=[],
                        help="one more exporter argument (repeatable)")
    return parser.parse_args()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_bytes(pid):
    """VmRSS and VmHWM of a process, in bytes (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return None, None
    kib = lambda name: int(fields[name].split()[0]) * 1024 if name in fields else None
    return kib("VmRSS"), kib("VmHWM")


def cpu_seconds(pid):
    """User plus system CPU time of a process from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "; fields[0] is field 3
    ticks = int(fields[11]) + int(fields[12])  # utime (14) + stime (15)
    return ticks / os.sysconf("SC_CLK_TCK")


def get(port, path, timeout, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


class Results:
    def __init__(self):
        self.lock = threading.Lock()
        self.latencies = []
        self.failures = []  # (thread, description)
        self.gzip_answers = 0
        self.gzip_requested = 0
        self.bytes = 0
        self.last_body = b""
        self.first_series = None
        self.requests = 0


def scraper(index, port, args, deadline, results, budget):
    conn = None
    n = 0
    while time.monotonic() < deadline:
        with results.lock:
            if results.requests >= budget:
                return
            results.requests += 1
        want_gzip = (index + n) % 2 == 0
        n += 1
        # OpenMetrics, as Prometheus asks for it: its '# EOF' shows that a body is whole.
        headers = {"Accept": OPENMETRICS}
        if want_gzip:
            headers["Accept-Encoding"] = "gzip"
        start = time.monotonic()
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=args.timeout)
            conn.request("GET", args.path, headers=headers)
            response = conn.getresponse()
            raw = response.read()
            elapsed = time.monotonic() - start
            encoding = response.getheader("Content-Encoding", "")
            body = gzip.decompress(raw) if encoding == "gzip" else raw
            problem = None
            if response.status != 200:
                problem = f"HTTP {response.status}: {body[:200]!r}"
            elif not body.endswith(b"# EOF\n"):
                problem = f"body of {len(body)} bytes does not end in '# EOF\\n': ...{body[-80:]!r}"
            if response.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except Exception as e:  # noqa: BLE001 - any failure of a request is a finding
            elapsed = time.monotonic() - start
            problem = f"{type(e).__name__}: {e}"
            encoding, body, raw = "", b"", b""
            if conn is not None:
                conn.close()
                conn = None
        with results.lock:
            if problem:
                results.failures.append((index, problem))
            else:
                results.latencies.append(elapsed)
                results.bytes += len(raw)
                results.gzip_requested += want_gzip
                results.gzip_answers += encoding == "gzip"
                results.last_body = body
                if results.first_series is None:
                    results.first_series = series_count(body)
    if conn is not None:
        conn.close()


def series_count(body):
    return sum(1 for line in body.split(b"\n") if line and not line.startswith(b"#"))


def sampler(pid, stop, samples, begin):
    while not stop.wait(1.0 - ((time.monotonic() - begin) % 1.0)):
        rss, _ = rss_bytes(pid)
        if rss is None:
            return
        samples.append((time.monotonic() - begin, rss))


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def mib(value):
    return f"{value / MIB:.1f} MiB" if value is not None else "?"


def main():
    args = parse_args()
    checks = []  # (name, ok, detail)

    def check(name, ok, detail):
        checks.append((name, ok, detail))
        print(f"soak: {'ok    ' if ok else 'FAILED'} {name}: {detail}", flush=True)

    if not os.access(args.binary, os.X_OK):
        print(f"soak: no exporter binary at {args.binary}; build it with `cargo build` or pass --binary",
              file=sys.stderr)
        print("soak: 0 passed, 1 failed")
        return 1
    port = free_port()
    command = [args.binary, "--demo", "--demo.accounts", str(args.accounts), "--poll.interval", "1s",
               "--web.listen-address", f"127.0.0.1:{port}", *args.extra_arg]
    log = tempfile.NamedTemporaryFile(prefix="capi-soak-", suffix=".log", delete=False)
    print(f"soak: starting {' '.join(command)} (log: {log.name})", flush=True)
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    pid = process.pid
    try:
        return run(args, port, process, log.name, check, checks)
    finally:
        if process.poll() is None:  # only on an unexpected error: never leave it running
            os.kill(pid, signal.SIGKILL)
            process.wait()


def run(args, port, process, log_name, check, checks):
    pid = process.pid
    # 1. It serves.
    started = time.monotonic()
    serving = False
    while time.monotonic() - started < args.start_timeout and process.poll() is None:
        try:
            if get(port, "/-/healthy", 2.0)[0] == 200:
                serving = True
                break
        except OSError:
            pass
        time.sleep(0.1)
    check("serves", serving, f"/-/healthy answered 200 after {time.monotonic() - started:.1f} s" if serving
          else f"no 200 from /-/healthy within {args.start_timeout} s (exit code {process.poll()})")
    if not serving:
        return finish(args, process, log_name, check, checks)

    # The load, with memory sampled every second.
    cpu_before = cpu_seconds(pid)
    rss_start, _ = rss_bytes(pid)
    results = Results()
    samples = []
    stop = threading.Event()
    begin = time.monotonic()
    measured = begin + args.warmup  # the measured period starts here
    deadline = measured + args.seconds
    watcher = threading.Thread(target=sampler, args=(pid, stop, samples, begin), daemon=True)
    watcher.start()
    threads = [threading.Thread(target=scraper, args=(i, port, args, deadline, results, args.max_requests),
                                daemon=True) for i in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.warmup + args.seconds + args.timeout + 30)
    duration = time.monotonic() - begin
    stop.set()
    watcher.join(5)
    alive = process.poll() is None
    cpu_after = cpu_seconds(pid)
    rss_end, rss_hwm = rss_bytes(pid)
    ready = None
    try:
        ready = get(port, "/-/ready", 5.0)[0]
    except OSError:
        pass
    exporter_view = scrape_summary(port)

    # 2. Every scrape succeeded.
    done = len(results.latencies)
    if results.failures:
        shown = "; ".join(f"thread {t}: {p}" for t, p in results.failures[:5])
        check("scrapes", False, f"{len(results.failures)} of {done + len(results.failures)} failed: {shown}")
    else:
        check("scrapes", done > 0, f"all {done} answered 200 with a body ending in '# EOF'")

    # 3. Memory stays flat.
    def quarter(q):
        start = args.warmup + q * args.seconds / 4
        return [rss for t, rss in samples if start <= t < start + args.seconds / 4]

    second, last = quarter(1), quarter(3)
    if second and last:
        base, end = statistics.median(second), statistics.median(last)
        limit = base * 1.10 + 2 * MIB
        check("memory", end <= limit,
              f"median RSS of the last quarter {mib(end)} vs second quarter {mib(base)} "
              f"(limit {mib(limit)} = x1.10 + 2 MiB; {len(second)} and {len(last)} samples)")
    else:
        check("memory", False, f"too few RSS samples ({len(samples)}) to compare quarters")

    # 4. Still running.
    check("alive", alive, "the exporter ran through the load" if alive
          else f"the exporter exited with {process.returncode} during the load")

    # Figures.
    rss_values = [rss for _, rss in samples]
    at = lambda t: min(samples, key=lambda s: abs(s[0] - t))[1] if samples else None
    mid = at(args.warmup + args.seconds / 2)
    cpu = (cpu_after - cpu_before) if cpu_after is not None and cpu_before is not None else None
    print(f"soak: duration {duration:.1f} s of load ({args.warmup:.0f} s warm-up + {args.seconds:.0f} s measured), "
          f"{args.accounts} accounts, {args.threads} scraper threads, poll interval 1s", flush=True)
    print(f"soak: series per scrape {series_count(results.last_body)} at the end ({results.first_series} at the "
          f"first scrape); body {len(results.last_body) / 1024:.0f} KiB uncompressed; /-/ready {ready}", flush=True)
    print(f"soak: scrapes {done} ({results.gzip_answers} gzip-encoded of {results.gzip_requested} asking "
          f"for gzip), {done / duration:.1f} scrapes/s, {results.bytes / duration / MIB:.2f} MiB/s on the wire",
          flush=True)
    if results.latencies:
        print(f"soak: scrape latency p50 {percentile(results.latencies, 0.50) * 1000:.1f} ms, "
              f"p99 {percentile(results.latencies, 0.99) * 1000:.1f} ms, "
              f"max {max(results.latencies) * 1000:.1f} ms", flush=True)
    print(f"soak: RSS start {mib(rss_start)} (before the warm-up), {mib(at(args.warmup))} after it, mid {mib(mid)}, "
          f"end {mib(rss_end)}, "
          f"max {mib(max(rss_values) if rss_values else None)} (sampled; kernel peak VmHWM {mib(rss_hwm)})",
          flush=True)
    every = max(1, int((args.warmup + args.seconds) // 18))
    timeline = " ".join(f"{rss / MIB:.1f}" for t, rss in samples if int(t) % every == 0)
    print(f"soak: RSS every {every} s (MiB): {timeline}", flush=True)
    if cpu is not None:
        print(f"soak: exporter CPU {cpu:.1f} s user+system during the load ({cpu / duration * 100:.0f}% of one "
              f"core), {cpu_after:.1f} s since start", flush=True)
    if exporter_view:
        print(f"soak: exporter's own view: {exporter_view}", flush=True)
    return finish(args, process, log_name, check, checks)


def scrape_summary(port):
    """The exporter's API request outcomes (rate limiting is its business, reported not checked)."""
    try:
        status, body = get(port, "/metrics", 10.0)
    except OSError:
        return ""
    if status != 200:
        return ""
    totals = {}
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith("capi_api_requests_total{") and 'outcome="' in line:
            outcome = line.split('outcome="', 1)[1].split('"', 1)[0]
            totals[outcome] = totals.get(outcome, 0) + float(line.rsplit(" ", 1)[1])
        if line.startswith("capi_up{"):
            totals["accounts up"] = totals.get("accounts up", 0) + float(line.rsplit(" ", 1)[1])
    return ", ".join(f"{k} {v:.0f}" for k, v in sorted(totals.items()) if v)


def finish(args, process, log_name, check, checks):
    # 5. Stops on SIGTERM, by PID.
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            code = process.wait(args.stop_timeout)
            check("stop", code == 0, f"exited with code {code} on SIGTERM")
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            check("stop", False, f"still running {args.stop_timeout} s after SIGTERM; killed")
    passed = sum(ok for _, ok, _ in checks)
    failed = len(checks) - passed
    if failed:
        with open(log_name, errors="replace") as f:
            tail = f.readlines()[-20:]
        print(f"soak: the exporter's log ends ({log_name}):\n" + "".join(tail), file=sys.stderr)
    else:
        os.unlink(log_name)
    print(f"soak: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
