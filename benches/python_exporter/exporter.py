#!/usr/bin/env python3
"""BENCHMARK FIXTURE, NOT PART OF THE PRODUCT: never deploy this file.

The minimal exporter a user would otherwise write in Python with `prometheus_client`, used by
`scripts/loadtest.py` as its Python reference (requests per second, CPU per scrape
and memory, compared with capi_exporter serving the same accounts).

It reads a credentials file (`[{"name", "api_key", "secret", "passphrase", "coin_ids"}, ...]`, as
`capi_sim --out DIR` writes to DIR/credentials.json), and every `--interval` seconds queries the
account endpoint (`GET /capi/v2/account/account?coinId=N`) of every account and coin in turn,
signed as the exchange documents it: ACCESS-SIGN = Base64(HMAC-SHA256(secret, timestamp + "GET" +
path + "?" + query)). Each numeric field of the account, collateral and position records becomes
one labeled Gauge named as capi_exporter names it (millisecond times as `_timestamp_seconds`); the
per-contract fee and leverage settings become `capi_account_fee_setting_<field>` and
`capi_account_leverage_setting_<field>{contract_id}`; plus `capi_up`. All live in
prometheus_client's default registry, served by `start_http_server(port, addr="127.0.0.1")`.
Series of records gone from every answer (a closed position) are removed after each full poll
(none after a poll in which a query failed).
Bills are not queried or counted. Standard library plus prometheus_client only.

It prints `listening on http://127.0.0.1:PORT` once its first full poll is done (`--port 0`
picks a free port), and logs each failed query to stderr in one line.

    exporter.py --credentials DIR/credentials.json --base-url http://127.0.0.1:PORT --port 9999
"""

import argparse
import base64
import hashlib
import hmac
import json
import sys
import time
import urllib.request

from prometheus_client import Gauge, start_http_server

PATH = "/capi/v2/account/account"
ACCOUNT_FIELDS = ["is_system_account", "create_order_rate_limit_per_minute", "create_order_delay_milliseconds",
                  "created_time", "updated_time"]
COLLATERAL_FIELDS = [
    "amount", "pending_deposit_amount", "pending_withdraw_amount", "pending_transfer_in_amount",
    "pending_transfer_out_amount", "is_liquidating", "legacy_amount", "cum_deposit_amount", "cum_withdraw_amount",
    "cum_transfer_in_amount", "cum_transfer_out_amount", "cum_margin_move_in_amount", "cum_margin_move_out_amount",
    "cum_position_open_long_amount", "cum_position_open_short_amount", "cum_position_close_long_amount",
    "cum_position_close_short_amount", "cum_position_fill_fee_amount", "cum_position_liquidate_fee_amount",
    "cum_position_funding_amount", "cum_order_fill_fee_income_amount", "cum_order_liquidate_fee_income_amount",
    "created_time", "updated_time"]
POSITION_FIELDS = [
    "leverage", "size", "open_value", "open_fee", "funding_fee", "isolated_margin", "is_auto_append_isolated_margin",
    "cum_open_size", "cum_open_value", "cum_open_fee", "cum_close_size", "cum_close_value", "cum_close_fee",
    "cum_funding_fee", "cum_liquidate_fee", "created_match_sequence_id", "updated_match_sequence_id",
    "created_time", "updated_time"]
FEE_FIELDS = ["is_set_fee_rate", "taker_fee_rate", "maker_fee_rate", "is_set_fee_discount", "fee_discount",
              "is_set_taker_maker_fee_discount", "taker_fee_discount", "maker_fee_discount"]
LEVERAGE_FIELDS = ["isolated_long_leverage", "isolated_short_leverage", "cross_leverage", "shared_leverage"]
COLLATERAL_LABELS = ["account", "coin_id", "margin_mode", "cross_contract_id", "isolated_position_id"]
POSITION_LABELS = ["account", "coin_id", "contract_id", "side", "margin_mode", "position_id"]


def metric_name(prefix, field):
    if field.endswith("_time"):
        return f"{prefix}_{field[:-len('_time')]}_timestamp_seconds"
    if field.endswith("_milliseconds"):
        return f"{prefix}_{field[:-len('_milliseconds')]}_seconds"
    return f"{prefix}_{field}"


def number(field, value):
    """A field's value as a float: booleans 0/1, decimals from their text, milliseconds in seconds."""
    if isinstance(value, bool):
        return float(value)
    value = float(value)
    return value / 1000 if field.endswith(("_time", "_milliseconds")) else value


def gauges(prefix, fields, labels):
    return {f: Gauge(metric_name(prefix, f), f"{f} of the {prefix} record", labels) for f in fields}


ACCOUNT = gauges("capi_account", ACCOUNT_FIELDS, ["account"])
FEE = gauges("capi_account_fee_setting", FEE_FIELDS, ["account", "contract_id"])
LEVERAGE = gauges("capi_account_leverage_setting", LEVERAGE_FIELDS, ["account", "contract_id"])
COLLATERAL = gauges("capi_collateral", COLLATERAL_FIELDS, COLLATERAL_LABELS)
POSITION = gauges("capi_position", POSITION_FIELDS, POSITION_LABELS)
FAMILIES = {"account": ACCOUNT, "fee": FEE, "leverage": LEVERAGE, "collateral": COLLATERAL, "position": POSITION}
UP = Gauge("capi_up", "Whether every query of the account's last poll succeeded", ["account"])


def sign(secret, timestamp, method, path, query="", body=""):
    prehash = timestamp + method.upper() + path + (f"?{query}" if query else "") + body
    digest = hmac.new(secret.encode(), prehash.encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def query_account(base_url, account, coin_id, timeout=10):
    query = f"coinId={coin_id}"
    timestamp = str(int(time.time() * 1000))
    headers = {"ACCESS-KEY": account["api_key"], "ACCESS-PASSPHRASE": account["passphrase"],
               "ACCESS-TIMESTAMP": timestamp, "ACCESS-SIGN": sign(account["secret"], timestamp, "GET", PATH, query),
               "locale": "en-US", "Content-Type": "application/json"}
    request = urllib.request.Request(f"{base_url}{PATH}?{query}", headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)


def set_fields(metrics, record, fields, labels, touched):
    for field in fields:
        if record.get(field) is not None:
            metrics[field].labels(*labels).set(number(field, record[field]))
            touched.add((field, tuple(labels)))


def poll(base_url, accounts, touched):
    """One full poll, in turn; `touched[kind]` collects (field, labels) of every series set.
    Returns the number of failed queries."""
    failed = 0
    for account in accounts:
        name, up = account["name"], 1
        for coin_id in sorted(account["coin_ids"]):
            try:
                publish(name, query_account(base_url, account, coin_id), touched)
            except Exception as error:  # noqa: BLE001 - any failure is logged and shown as capi_up 0
                print(f"poll error account={name} coin_id={coin_id}: {type(error).__name__}: {error}",
                      file=sys.stderr, flush=True)
                up, failed = 0, failed + 1
        UP.labels(name).set(up)
    return failed


def sweep(previous, touched, failed):
    """Removes the series of records gone since the previous poll; keeps all after a failure.
    Returns what the next poll compares with."""
    if failed:
        return {kind: touched[kind] | previous.get(kind, set()) for kind in touched}
    for kind, seen in previous.items():
        for field, labels in seen - touched[kind]:
            FAMILIES[kind][field].remove(*labels)
    return touched


def publish(name, answer, touched):
    if answer.get("account"):
        record = answer["account"]
        set_fields(ACCOUNT, record, ACCOUNT_FIELDS, [name], touched["account"])
        for contract_id, setting in (record.get("contract_id_to_fee_setting") or {}).items():
            set_fields(FEE, setting, FEE_FIELDS, [name, contract_id], touched["fee"])
        for contract_id, setting in (record.get("contract_id_to_leverage_setting") or {}).items():
            set_fields(LEVERAGE, setting, LEVERAGE_FIELDS, [name, contract_id], touched["leverage"])
    for c in answer.get("collateral") or []:
        labels = [name] + [str(c.get(k, "")) for k in COLLATERAL_LABELS[1:]]
        set_fields(COLLATERAL, c, COLLATERAL_FIELDS, labels, touched["collateral"])
    for p in answer.get("position") or []:
        labels = [name] + [str(p.get(k, "")) for k in ("coin_id", "contract_id", "side", "margin_mode", "id")]
        set_fields(POSITION, p, POSITION_FIELDS, labels, touched["position"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--credentials", required=True, help="JSON file of accounts and their keys")
    parser.add_argument("--base-url", required=True, help="base URL of the exchange API")
    parser.add_argument("--port", type=int, default=9999, help="port to serve /metrics on (0: a free one)")
    parser.add_argument("--interval", type=float, default=15.0, help="seconds between the starts of two polls")
    args = parser.parse_args()
    with open(args.credentials) as f:
        accounts = json.load(f)
    base_url = args.base_url.rstrip("/")
    previous, server = {}, None
    while True:
        started = time.monotonic()
        touched = {kind: set() for kind in FAMILIES}
        previous = sweep(previous, touched, poll(base_url, accounts, touched))
        if server is None:
            server, _ = start_http_server(args.port, addr="127.0.0.1")
            print(f"listening on http://127.0.0.1:{server.server_port}", flush=True)
        time.sleep(max(0.0, started + args.interval - time.monotonic()))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
