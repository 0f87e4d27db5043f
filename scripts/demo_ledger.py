#!/usr/bin/env python3
"""Runs the demo for a while and reads its ledger check: every capi_ledger_difference series must
be 0 at every scrape once the demo's trading has begun.

Starts `capi_exporter --demo` as a user would (default poll interval and overlap), scrapes it every
15 s, and prints, at the end: how many scrapes, bills and ledger series it saw, and every nonzero
difference with its series and when. Exit code 0 when no difference was ever other than 0.
Usage: scripts/demo_ledger.py [--binary target/release/capi_exporter] [--seconds 3600]
"""

import argparse
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = re.compile(r"^(capi_ledger_difference|capi_bills_total)\{([^}]*)\} (\S+)$")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    differences, bills = {}, 0.0
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if not match:
            continue
        name, labels, value = match.groups()
        if name == "capi_bills_total":
            bills += float(value)
        else:
            differences[labels] = float(value)
    return differences, bills


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=str(ROOT / "target" / "release" / "capi_exporter"))
    parser.add_argument("--seconds", type=float, default=3600)
    args = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    exporter = subprocess.Popen([args.binary, "--demo", "--web.listen-address", f"127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    scrapes, series, nonzero, bills = 0, set(), [], 0.0
    try:
        while time.monotonic() - started < args.seconds:
            time.sleep(15)
            try:
                differences, bills = scrape(url)
            except OSError as error:
                print(f"scrape failed: {error}", file=sys.stderr)
                continue
            scrapes += 1
            series.update(differences)
            elapsed = time.monotonic() - started
            nonzero += [(round(elapsed), labels, value) for labels, value in differences.items() if value != 0]
    finally:
        exporter.terminate()
        _, log = exporter.communicate(timeout=30)
    warnings = [line for line in log.splitlines() if "capi_ledger_difference" in line]
    print(f"{args.seconds:.0f} s of demo: {scrapes} scrapes, {bills:.0f} bills counted, {len(series)} ledger series")
    print(f"nonzero differences: {len(nonzero)}; ledger warnings in the log: {len(warnings)}")
    for elapsed, labels, value in nonzero[:20]:
        print(f"  at {elapsed} s: {{{labels}}} {value}")
    for line in warnings[:20]:
        print(f"  log: {line}")
    ok = scrapes > 0 and series and not nonzero and not warnings
    print(f"demo ledger: {1 if ok else 0} passed, {0 if ok else 1} failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
