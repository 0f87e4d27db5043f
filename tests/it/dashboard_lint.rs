//! Lints the Grafana dashboards in `dashboards/`, along the lines of Grafana's dashboard-linter.
//!
//! Every `dashboards/*.json` file goes through every rule; the test fails listing every problem
//! found, each as `file: rule: problem`. Each rule is a small function from a dashboard to its
//! problems, and has tests of its own that feed it a bad snippet, so a rule that stopped looking
//! would not pass silently.
//!
//! The PromQL rules read expressions through a small scanner ([`Expr::parse`]): selectors with
//! their matchers and range, and the function each selector sits in. It knows enough PromQL for
//! dashboards (functions, aggregations with `by`/`without`, `on`/`ignoring`/`group_*` lists,
//! strings, ranges, subqueries, comments), not the whole grammar.

use std::path::Path;

use serde_json::{json, Value};

/// The datasource reference every panel and target must use.
const DS_UID: &str = "${datasource}";
/// The variables every dashboard must have (besides `datasource`).
const REQUIRED_VARIABLES: &[&str] = &["job", "instance", "account", "coin"];
/// The matchers every selector of a `capi_` metric must carry: (label, variable).
const REQUIRED_FILTERS: &[(&str, &str)] = &[("job", "job"), ("instance", "instance"), ("account", "account")];
/// The functions a counter series may be given to.
const COUNTER_FUNCTIONS: &[&str] = &["rate", "irate", "increase"];
/// The bill counters of money, which panels show as their running sums, deduplicated by `max`:
/// they are exact decimals, and `increase()` over a panel's overlapping windows extrapolates (one
/// fee of 10 showed as seven bars of 10 and 11.67).
const RUNNING_SUMS: &[&str] = &["capi_bill_amount_total", "capi_bill_fill_fee_total"];
const GRID_COLUMNS: i64 = 24;
const MIN_SCHEMA_VERSION: i64 = 39;
/// How the URL of the dashboard's link to the alerts' runbook ends (its base is the deployer's).
const RUNBOOK_PATH: &str = "docs/runbook.md";
/// The `allValue` of every variable that offers "All": a regex matching every value, the empty one
/// included, rather than Grafana's default, an alternation of the values the variable listed.
const ALL_VALUE: &str = ".*";
/// How a metric's name ends (`_total` aside) when its value is an amount of a coin.
const COIN_AMOUNT_SUFFIXES: &[&str] = &["_amount", "_balance", "_fee", "_value", "_margin", "_difference"];
/// The decimals a panel showing amounts of a coin must show: a satoshi (1e-8 BTC).
const AMOUNT_DECIMALS: i64 = 8;

type Rule = fn(&Value) -> Vec<String>;

const RULES: &[(&str, Rule)] = &[
    ("dashboard-export", dashboard_export),
    ("template-datasource", template_datasource),
    ("template-variables", template_variables),
    ("template-all-value", template_all_value),
    ("panel-datasource", panel_datasource),
    ("panel-description", panel_description),
    ("panel-units", panel_units),
    ("panel-amount-decimals", panel_amount_decimals),
    ("target-filters", target_filters),
    ("target-rate-interval", target_rate_interval),
    ("target-counter-agg", target_counter_agg),
    ("panel-ids", panel_ids),
    ("panel-grid", panel_grid),
    ("stat-no-data", stat_no_data),
    ("alert-list", alert_list),
    ("runbook-link", runbook_link),
];

// ---------------------------------------------------------------------------------------------
// Walking a dashboard

/// Every panel, rows included, with the panels of collapsed rows.
fn all_panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for panel in array(dashboard, "panels") {
        out.push(panel);
        out.extend(array(panel, "panels"));
    }
    out
}

/// Every panel that is not a row.
fn panels(dashboard: &Value) -> Vec<&Value> {
    all_panels(dashboard).into_iter().filter(|panel| !is_row(panel)).collect()
}

/// Every panel that shows the data of queries (an alert list shows none).
fn query_panels(dashboard: &Value) -> Vec<&Value> {
    panels(dashboard).into_iter().filter(|panel| panel["type"] != "alertlist").collect()
}

fn is_row(panel: &Value) -> bool {
    panel["type"] == "row"
}

fn array<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn variables(dashboard: &Value) -> &[Value] {
    dashboard.pointer("/templating/list").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// How a panel is named in a problem.
fn panel_name(panel: &Value) -> String {
    format!(
        "panel {} {:?}",
        panel.get("id").map_or_else(|| "(no id)".to_owned(), Value::to_string),
        text(panel, "title")
    )
}

/// How a target is named in a problem.
fn target_name(panel: &Value, target: &Value) -> String {
    format!("{} target {}", panel_name(panel), text(target, "refId"))
}

/// Every (panel, target, expr) of the dashboard.
fn exprs(dashboard: &Value) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    for panel in panels(dashboard) {
        for target in array(panel, "targets") {
            out.push((target_name(panel, target), text(target, "expr")));
        }
    }
    out
}

/// Whether `text` refers to the variable `name`: `$name`, `${name}`, `${name:format}` or `[[name]]`.
fn references_variable(text: &str, name: &str) -> bool {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices('$').any(|(at, _)| {
        let rest = &text[at + 1..];
        if let Some(braced) = rest.strip_prefix('{') {
            braced.split(['}', ':']).next() == Some(name)
        } else {
            rest.split(|c: char| !is_word(c)).next() == Some(name)
        }
    }) || text.contains(&format!("[[{name}]]"))
        || text.contains(&format!("[[{name}:"))
}

/// Whether a matcher value is exactly the variable `name` (`$name` or `${name}`).
fn is_variable(value: &str, name: &str) -> bool {
    value.strip_prefix('$').is_some_and(|rest| rest == name || rest == format!("{{{name}}}"))
}

/// Whether a datasource reference points at the `datasource` variable.
fn uses_datasource_variable(datasource: &Value) -> bool {
    match datasource {
        Value::String(uid) => uid == DS_UID,
        Value::Object(_) => datasource["uid"] == DS_UID,
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Rules

/// `__requires` names Grafana, Prometheus and every panel plugin used; `uid` and `title` are set.
fn dashboard_export(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let requires = array(dashboard, "__requires");
    let required = |kind: &str, id: &str| requires.iter().any(|r| r["type"] == kind && r["id"] == id);
    let mut wanted = vec![("grafana".to_owned(), "grafana".to_owned()), ("datasource".into(), "prometheus".into())];
    for panel in panels(dashboard) {
        let kind = text(panel, "type").to_owned();
        if !kind.is_empty() && !wanted.iter().any(|(k, id)| k == "panel" && *id == kind) {
            wanted.push(("panel".into(), kind));
        }
    }
    for (kind, id) in wanted {
        if !required(&kind, &id) {
            problems.push(format!("__requires does not list the {kind} {id:?}"));
        }
    }
    for key in ["uid", "title"] {
        if text(dashboard, key).trim().is_empty() {
            problems.push(format!("the dashboard has no {key}"));
        }
    }
    problems
}

/// A `datasource` variable for Prometheus, a Prometheus datasource input, a recent schema.
fn template_datasource(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    match variables(dashboard).iter().find(|v| v["name"] == "datasource") {
        None => problems.push("no variable named datasource".to_owned()),
        Some(variable) => {
            if variable["type"] != "datasource" || variable["query"] != "prometheus" {
                problems.push(format!(
                    "variable datasource is of type {} for {}, not of type \"datasource\" for \"prometheus\"",
                    variable["type"], variable["query"]
                ));
            }
        }
    }
    let inputs = array(dashboard, "__inputs");
    if !inputs.iter().any(|input| input["type"] == "datasource" && input["pluginId"] == "prometheus") {
        problems.push("__inputs has no prometheus datasource input".to_owned());
    }
    match dashboard.get("schemaVersion").and_then(Value::as_i64) {
        Some(version) if version >= MIN_SCHEMA_VERSION => {}
        other => problems.push(format!("schemaVersion is {other:?}, not {MIN_SCHEMA_VERSION} or later")),
    }
    problems
}

/// The required variables exist; every other variable queries `${datasource}`, filters with regex
/// matchers, and is used by at least one panel target.
fn template_variables(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let variables = variables(dashboard);
    for name in REQUIRED_VARIABLES {
        if !variables.iter().any(|v| v["name"] == *name) {
            problems.push(format!("no variable named {name}"));
        }
    }
    let exprs = exprs(dashboard);
    for variable in variables.iter().filter(|v| v["name"] != "datasource") {
        let name = text(variable, "name");
        if name.is_empty() {
            problems.push("a variable has no name".to_owned());
            continue;
        }
        if variable["type"] == "query" && !variable.get("datasource").is_some_and(uses_datasource_variable) {
            problems.push(format!("variable {name} does not query the {DS_UID} datasource"));
        }
        let query = match &variable["query"] {
            Value::String(query) => query.as_str(),
            query => text(query, "query"),
        };
        match Expr::parse(query) {
            Ok(expr) => {
                for matcher in expr.selectors.iter().flat_map(|s| &s.matchers) {
                    if matcher.value.contains('$') && matcher.op != "=~" {
                        problems.push(format!("variable {name} filters with {matcher}: use =~ with variables"));
                    }
                }
            }
            Err(error) => problems.push(format!("variable {name}: cannot read its query {query:?}: {error}")),
        }
        if !exprs.iter().any(|(_, expr)| references_variable(expr, name)) {
            problems.push(format!("variable {name} is used by no panel target"));
        }
    }
    problems
}

/// Every variable that offers "All" sends `.*` for it. Without an `allValue`, Grafana sends an
/// alternation of the values the variable's query listed, and series with any other value (a coin
/// that only bills have, the empty coin, the exporter's catch-all "other") drop out of every panel.
fn template_all_value(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for variable in variables(dashboard).iter().filter(|v| v["includeAll"] == true) {
        if variable["allValue"] != ALL_VALUE {
            problems.push(format!(
                "variable {} offers All with allValue {}, not {ALL_VALUE:?}: All would match only the values it listed",
                text(variable, "name"),
                variable.get("allValue").unwrap_or(&Value::Null)
            ));
        }
    }
    problems
}

/// Whether a metric's value is an amount of a coin (an amount, balance, fee, value, margin or
/// difference of one), shown to the last satoshi rather than rounded.
fn is_coin_amount(name: &str) -> bool {
    let base = name.strip_suffix("_total").unwrap_or(name);
    name.starts_with("capi_") && COIN_AMOUNT_SUFFIXES.iter().any(|suffix| base.ends_with(suffix))
}

/// Every panel that shows an amount of a coin has `fieldConfig.defaults.decimals` of at least 8:
/// with 2, a BTC amount under 0.005 reads 0.00; left out, Grafana keeps about two significant
/// digits (12.3456 BTC reads 12). Overrides (a leverage column with 0) are not looked at.
fn panel_amount_decimals(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for panel in query_panels(dashboard) {
        let amounts: Vec<String> = array(panel, "targets")
            .iter()
            .filter_map(|target| Expr::parse(text(target, "expr")).ok())
            .flat_map(|expr| expr.selectors)
            .map(|selector| selector.name)
            .filter(|name| is_coin_amount(name))
            .collect();
        let Some(metric) = amounts.first() else {
            continue;
        };
        let decimals = panel.pointer("/fieldConfig/defaults/decimals");
        if decimals.and_then(Value::as_i64).is_none_or(|d| d < AMOUNT_DECIMALS) {
            problems.push(format!(
                "{} shows {metric}, an amount of a coin, with fieldConfig.defaults.decimals {}, not {AMOUNT_DECIMALS} or more",
                panel_name(panel),
                decimals.unwrap_or(&Value::Null)
            ));
        }
    }
    problems
}

/// Every panel and target (rows excluded) uses the `${datasource}` variable.
fn panel_datasource(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for panel in query_panels(dashboard) {
        if !panel.get("datasource").is_some_and(uses_datasource_variable) {
            problems.push(format!("{} does not use the {DS_UID} datasource", panel_name(panel)));
        }
        for target in array(panel, "targets") {
            if !target.get("datasource").is_some_and(uses_datasource_variable) {
                problems.push(format!("{} does not use the {DS_UID} datasource", target_name(panel, target)));
            }
        }
    }
    problems
}

/// Every panel (rows excluded) has a title and a description.
fn panel_description(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for panel in panels(dashboard) {
        for key in ["title", "description"] {
            if text(panel, key).trim().is_empty() {
                problems.push(format!("{} has no {key}", panel_name(panel)));
            }
        }
    }
    problems
}

/// Every panel (rows excluded) has a unit.
fn panel_units(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for panel in query_panels(dashboard) {
        let unit = panel.pointer("/fieldConfig/defaults/unit").and_then(Value::as_str).unwrap_or("");
        if unit.trim().is_empty() {
            problems.push(format!("{} has no unit in fieldConfig.defaults.unit", panel_name(panel)));
        }
    }
    problems
}

/// Every target has an expression; every selector of a `capi_` metric filters on the job,
/// instance and account variables; every matcher on a variable is a regex matcher.
fn target_filters(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for (target, expr) in exprs(dashboard) {
        if expr.trim().is_empty() {
            problems.push(format!("{target} has no expr"));
            continue;
        }
        let parsed = match Expr::parse(expr) {
            Ok(parsed) => parsed,
            Err(error) => {
                problems.push(format!("{target}: cannot read {expr:?}: {error}"));
                continue;
            }
        };
        for selector in &parsed.selectors {
            for matcher in &selector.matchers {
                if matcher.value.contains('$') && matcher.op != "=~" {
                    problems.push(format!("{target}: {} filters with {matcher}: use =~ with variables", selector.name));
                }
            }
            if !selector.name.starts_with("capi_") {
                continue;
            }
            for (label, variable) in REQUIRED_FILTERS {
                let filtered = selector
                    .matchers
                    .iter()
                    .any(|m| m.label == *label && m.op == "=~" && is_variable(&m.value, variable));
                if !filtered {
                    problems.push(format!("{target}: {} does not filter on {label}=~\"${variable}\"", selector.name));
                }
            }
        }
    }
    problems
}

/// `rate`/`irate` ranges are `$__rate_interval`; `increase` ranges are that or `$__range`.
fn target_rate_interval(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for (target, expr) in exprs(dashboard) {
        let Ok(parsed) = Expr::parse(expr) else {
            continue; // target-filters reports it
        };
        for call in &parsed.calls {
            let (allowed, wanted): (&[&str], &str) = match call.function.as_str() {
                "rate" | "irate" => (&["$__rate_interval", "${__rate_interval}"], "[$__rate_interval]"),
                "increase" => (
                    &["$__rate_interval", "${__rate_interval}", "$__range", "${__range}"],
                    "[$__rate_interval] or [$__range]",
                ),
                _ => continue,
            };
            if call.ranges.is_empty() {
                problems.push(format!("{target}: {}() has no range", call.function));
            }
            for range in &call.ranges {
                if !allowed.contains(&range.trim()) {
                    problems.push(format!("{target}: {}() over [{range}], not {wanted}", call.function));
                }
            }
        }
    }
    problems
}

/// Whether a metric name is a counter or a histogram's series: only meaningful through `rate`.
fn is_counter(name: &str) -> bool {
    ["_total", "_bucket", "_count", "_sum"].iter().any(|suffix| name.ends_with(suffix))
}

/// Counter series appear only directly inside `rate(`, `irate(` or `increase(`, but for the
/// running sums of money, directly inside `max(`.
fn target_counter_agg(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for (target, expr) in exprs(dashboard) {
        let Ok(parsed) = Expr::parse(expr) else {
            continue; // target-filters reports it
        };
        for selector in parsed.selectors.iter().filter(|s| is_counter(&s.name)) {
            let running_sum =
                RUNNING_SUMS.contains(&selector.name.as_str()) && selector.function.as_deref() == Some("max");
            let inside = running_sum || selector.function.as_deref().is_some_and(|f| COUNTER_FUNCTIONS.contains(&f));
            if !inside {
                let place = selector
                    .function
                    .as_deref()
                    .map_or_else(|| "outside any function".to_owned(), |f| format!("in {f}()"));
                problems.push(format!(
                    "{target}: counter {} is used {place}, not in rate(), irate() or increase()",
                    selector.name
                ));
            }
        }
    }
    problems
}

/// Every panel (rows and panels of collapsed rows included) has an id of its own.
fn panel_ids(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = std::collections::BTreeMap::new();
    for panel in all_panels(dashboard) {
        match panel.get("id").and_then(Value::as_i64) {
            None => problems.push(format!("{} has no integer id", panel_name(panel))),
            Some(id) => {
                if let Some(first) = seen.insert(id, panel_name(panel)) {
                    problems.push(format!("{} has the id of {first}", panel_name(panel)));
                }
            }
        }
    }
    problems
}

/// Every panel lies within the 24 columns, and no two panels of the top level overlap.
/// A stat panel with no figure says so in red: "NO DATA" as its `noValue`, the base threshold
/// red, and a mapping of null and NaN to red; an empty green tile would read as "all is well".
fn stat_no_data(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for panel in panels(dashboard).into_iter().filter(|panel| panel["type"] == "stat") {
        let defaults = panel.pointer("/fieldConfig/defaults").unwrap_or(&Value::Null);
        if text(defaults, "noValue").trim().is_empty() {
            problems.push(format!("{} has no fieldConfig.defaults.noValue", panel_name(panel)));
        }
        if defaults.pointer("/thresholds/steps/0/color").and_then(Value::as_str) != Some("red") {
            problems.push(format!(
                "{}: its base threshold color is not red, so no data does not show red",
                panel_name(panel)
            ));
        }
        let null_is_red = array(defaults, "mappings").iter().any(|mapping| {
            mapping["type"] == "special"
                && text(&mapping["options"], "match").starts_with("null")
                && mapping.pointer("/options/result/color").and_then(Value::as_str) == Some("red")
        });
        if !null_is_red {
            problems.push(format!("{} maps no null value to red", panel_name(panel)));
        }
    }
    problems
}

/// The dashboard lists the alerts that fire: an operator looking at it sees them first.
fn alert_list(dashboard: &Value) -> Vec<String> {
    let listed = panels(dashboard)
        .iter()
        .any(|panel| panel["type"] == "alertlist" && text(&panel["options"], "alertName") == "Capi");
    if listed {
        Vec::new()
    } else {
        vec!["no alertlist panel showing the Capi alerts (options.alertName \"Capi\")".to_owned()]
    }
}

/// The dashboard links to the runbook (`docs/runbook.md`): the operator who opens it from an alert
/// finds what each alert means and what to check one click away.
fn runbook_link(dashboard: &Value) -> Vec<String> {
    let linked = array(dashboard, "links")
        .iter()
        .any(|link| link["type"] == "link" && text(link, "url").ends_with(RUNBOOK_PATH));
    if linked {
        Vec::new()
    } else {
        vec![format!("no dashboard link (links[], type \"link\") whose url ends in {RUNBOOK_PATH}")]
    }
}

fn panel_grid(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let grid = |panel: &Value| -> Option<[i64; 4]> {
        let field = |key: &str| panel.pointer(&format!("/gridPos/{key}")).and_then(Value::as_i64);
        Some([field("x")?, field("y")?, field("w")?, field("h")?])
    };
    for panel in all_panels(dashboard) {
        match grid(panel) {
            None => problems.push(format!("{} has no complete gridPos (x, y, w, h)", panel_name(panel))),
            Some([x, y, w, h]) => {
                if x < 0 || y < 0 || w < 1 || h < 1 || x + w > GRID_COLUMNS {
                    problems.push(format!(
                        "{} has gridPos x={x} y={y} w={w} h={h}: outside the {GRID_COLUMNS} columns",
                        panel_name(panel)
                    ));
                }
            }
        }
    }
    let top: Vec<(&Value, [i64; 4])> =
        array(dashboard, "panels").iter().filter_map(|panel| Some((panel, grid(panel)?))).collect();
    for (i, &(a, [ax, ay, aw, ah])) in top.iter().enumerate() {
        for &(b, [bx, by, bw, bh]) in &top[i + 1..] {
            if ax < bx + bw && bx < ax + aw && ay < by + bh && by < ay + ah {
                problems.push(format!("{} overlaps {}", panel_name(a), panel_name(b)));
            }
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------------
// A small PromQL scanner

/// One label matcher of a selector.
#[derive(Debug, Clone, PartialEq)]
struct Matcher {
    label: String,
    op: String,
    value: String,
}

impl std::fmt::Display for Matcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}{:?}", self.label, self.op, self.value)
    }
}

/// A series selector: its metric name (empty for `{...}` alone), matchers, and the innermost
/// function it is an argument of (`None` at the top level or in plain parentheses only).
#[derive(Debug, Clone, PartialEq)]
struct Selector {
    name: String,
    matchers: Vec<Matcher>,
    function: Option<String>,
}

/// A function or aggregation call, and the ranges (`[...]` text) written directly in its arguments.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    function: String,
    ranges: Vec<String>,
}

#[derive(Debug, Default)]
struct Expr {
    selectors: Vec<Selector>,
    calls: Vec<Call>,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Matchers(Vec<Matcher>),
    Range(String),
    Open,
    Close,
    Other,
}

const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
/// Keywords followed by a parenthesized label list.
const LABEL_LISTS: &[&str] = &["by", "without", "on", "ignoring", "group_left", "group_right"];
const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"];

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// A cursor over an expression's characters.
struct Scanner<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
}

impl Scanner<'_> {
    fn skip_space(&mut self) {
        while let Some(&c) = self.chars.peek() {
            if c.is_whitespace() {
                self.chars.next();
            } else if c == '#' {
                while self.chars.next().is_some_and(|c| c != '\n') {}
            } else {
                break;
            }
        }
    }

    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> String {
        let mut out = String::new();
        while let Some(&c) = self.chars.peek().filter(|&&c| keep(c)) {
            out.push(c);
            self.chars.next();
        }
        out
    }

    /// A quoted string, its opening quote already peeked; returns its content, unescaped.
    fn string(&mut self) -> Result<String, String> {
        let quote = self.chars.next().ok_or("expected a string")?;
        let mut out = String::new();
        loop {
            match self.chars.next() {
                None => return Err(format!("unterminated string {quote}{out}")),
                Some('\\') if quote != '`' => out.push(self.chars.next().ok_or("unterminated string")?),
                Some(c) if c == quote => return Ok(out),
                Some(c) => out.push(c),
            }
        }
    }

    /// The matchers of `{...}`, the brace already consumed.
    fn matchers(&mut self) -> Result<Vec<Matcher>, String> {
        let mut out = Vec::new();
        loop {
            self.skip_space();
            match self.chars.peek() {
                None => return Err("unterminated {".to_owned()),
                Some('}') => {
                    self.chars.next();
                    return Ok(out);
                }
                Some(',') => {
                    self.chars.next();
                }
                Some(&c) => {
                    let label = if c == '"' || c == '\'' { self.string()? } else { self.take_while(is_ident_char) };
                    if label.is_empty() {
                        return Err(format!("unexpected {c:?} in matchers"));
                    }
                    self.skip_space();
                    let op = self.take_while(|c| matches!(c, '=' | '!' | '~'));
                    if op.is_empty() {
                        // A quoted metric name alone: `{"metric.name"}`.
                        out.push(Matcher { label: "__name__".into(), op: "=".into(), value: label });
                        continue;
                    }
                    if !["=", "!=", "=~", "!~"].contains(&op.as_str()) {
                        return Err(format!("unknown matcher operator {op:?}"));
                    }
                    self.skip_space();
                    if !matches!(self.chars.peek(), Some('"' | '\'' | '`')) {
                        return Err(format!("matcher on {label} has no quoted value"));
                    }
                    out.push(Matcher { label, op, value: self.string()? });
                }
            }
        }
    }

    fn tokens(mut self) -> Result<Vec<Token>, String> {
        let mut out = Vec::new();
        loop {
            self.skip_space();
            let Some(&c) = self.chars.peek() else {
                return Ok(out);
            };
            let token = match c {
                '(' => {
                    self.chars.next();
                    Token::Open
                }
                ')' => {
                    self.chars.next();
                    Token::Close
                }
                '{' => {
                    self.chars.next();
                    Token::Matchers(self.matchers()?)
                }
                '[' => {
                    self.chars.next();
                    let range = self.take_while(|c| c != ']');
                    self.chars.next().ok_or("unterminated [")?;
                    Token::Range(range)
                }
                '"' | '\'' | '`' => {
                    self.string()?;
                    Token::Other
                }
                '$' => {
                    self.chars.next();
                    if self.chars.peek() == Some(&'{') {
                        self.take_while(|c| c != '}');
                        self.chars.next();
                    } else {
                        self.take_while(is_ident_char);
                    }
                    Token::Other
                }
                c if is_ident_start(c) => Token::Ident(self.take_while(is_ident_char)),
                c if c.is_ascii_digit() || c == '.' => {
                    self.take_while(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
                    Token::Other
                }
                _ => {
                    self.chars.next();
                    Token::Other
                }
            };
            out.push(token);
        }
    }
}

impl Expr {
    fn parse(expr: &str) -> Result<Self, String> {
        let tokens = Scanner { chars: expr.chars().peekable() }.tokens()?;
        let mut parsed = Expr::default();
        // Open parentheses: the function they belong to (None for plain ones) and their ranges.
        let mut stack: Vec<(Option<String>, Vec<String>)> = Vec::new();
        // An aggregation whose `by (...)`/`without (...)` comes before its arguments.
        let mut pending: Option<String> = None;
        let mut i = 0;
        while i < tokens.len() {
            let next = tokens.get(i + 1);
            match &tokens[i] {
                Token::Ident(word) if LABEL_LISTS.contains(&word.as_str()) => {
                    if next == Some(&Token::Open) {
                        // Skip the label list.
                        i += 1;
                        while i < tokens.len() && tokens[i] != Token::Close {
                            i += 1;
                        }
                        if i == tokens.len() {
                            return Err(format!("unterminated {word}(...) list"));
                        }
                    }
                }
                Token::Ident(word) if next == Some(&Token::Open) => {
                    stack.push((Some(word.clone()), Vec::new()));
                    pending = None;
                    i += 1;
                }
                Token::Ident(word) if AGGREGATIONS.contains(&word.as_str()) => pending = Some(word.clone()),
                Token::Ident(word) if KEYWORDS.contains(&word.to_ascii_lowercase().as_str()) => {}
                Token::Ident(name) => {
                    let matchers = match next {
                        Some(Token::Matchers(matchers)) => {
                            i += 1;
                            matchers.clone()
                        }
                        _ => Vec::new(),
                    };
                    let function = stack.iter().rev().find_map(|(function, _)| function.clone());
                    parsed.selectors.push(Selector { name: name.clone(), matchers, function });
                }
                Token::Matchers(matchers) => {
                    let function = stack.iter().rev().find_map(|(function, _)| function.clone());
                    let name = matchers
                        .iter()
                        .find(|m| m.label == "__name__" && m.op == "=")
                        .map_or_else(String::new, |m| m.value.clone());
                    parsed.selectors.push(Selector { name, matchers: matchers.clone(), function });
                }
                Token::Open => stack.push((pending.take(), Vec::new())),
                Token::Close => {
                    let (function, ranges) = stack.pop().ok_or("unbalanced )")?;
                    if let Some(function) = function {
                        parsed.calls.push(Call { function, ranges });
                    }
                }
                Token::Range(range) => match stack.last_mut() {
                    Some((_, ranges)) => ranges.push(range.clone()),
                    None => parsed.calls.push(Call { function: String::new(), ranges: vec![range.clone()] }),
                },
                Token::Other => {}
            }
            i += 1;
        }
        if !stack.is_empty() {
            return Err("unbalanced (".to_owned());
        }
        Ok(parsed)
    }
}

// ---------------------------------------------------------------------------------------------
// The test over the shipped dashboards

fn load_dashboards() -> Vec<(String, Result<Value, String>)> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards");
    let entries = std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("cannot list {}: {e}", folder.display()));
    let mut out: Vec<(String, Result<Value, String>)> = entries
        .map(|entry| entry.expect("a readable folder entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .map(|path| {
            let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            let parsed = std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|body| serde_json::from_str::<Value>(&body).map_err(|e| format!("not valid JSON: {e}")));
            (name, parsed)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Every problem of one dashboard, each as `rule: problem`.
fn lint(dashboard: &Value) -> Vec<String> {
    RULES.iter().flat_map(|(name, rule)| rule(dashboard).into_iter().map(move |p| format!("{name}: {p}"))).collect()
}

#[test]
fn every_dashboard_passes_every_rule() {
    let dashboards = load_dashboards();
    assert!(!dashboards.is_empty(), "no dashboards/*.json file");
    let mut problems = Vec::new();
    for (file, dashboard) in &dashboards {
        match dashboard {
            Err(error) => problems.push(format!("{file}: {error}")),
            Ok(dashboard) => problems.extend(lint(dashboard).into_iter().map(|p| format!("{file}: {p}"))),
        }
    }
    assert!(problems.is_empty(), "{} dashboard lint problem(s):\n{}", problems.len(), problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// The rules against bad snippets

const GOOD_EXPR: &str = r#"sum by (account, coin) (rate(capi_bills_total{job=~"$job", instance=~"$instance", account=~"$account", coin=~"$coin"}[$__rate_interval]))"#;

fn query_variable(name: &str, query: &str) -> Value {
    json!({
        "name": name,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"qryType": 1, "query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
    })
}

/// A variable that offers "All", as `.*`.
fn all_variable(mut variable: Value) -> Value {
    variable["includeAll"] = json!(true);
    variable["multi"] = json!(true);
    variable["allValue"] = json!(ALL_VALUE);
    variable
}

fn target(expr: &str) -> Value {
    json!({"refId": "A", "datasource": {"type": "prometheus", "uid": "${datasource}"}, "expr": expr})
}

/// A small dashboard that passes every rule.
fn good() -> Value {
    json!({
        "__inputs": [{"name": "DS_PROMETHEUS", "type": "datasource", "pluginId": "prometheus"}],
        "__requires": [
            {"type": "grafana", "id": "grafana"},
            {"type": "datasource", "id": "prometheus"},
            {"type": "panel", "id": "timeseries"},
            {"type": "panel", "id": "stat"},
            {"type": "panel", "id": "alertlist"},
        ],
        "uid": "test",
        "title": "test",
        "schemaVersion": 39,
        "links": [{"type": "link", "title": "Runbook", "url": "https://example.com/docs/runbook.md", "targetBlank": true}],
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus"},
            query_variable("job", "label_values(capi_exporter_build_info, job)"),
            query_variable("instance", r#"label_values(capi_exporter_build_info{job=~"$job"}, instance)"#),
            query_variable("account", r#"label_values(capi_up{job=~"$job", instance=~"$instance"}, account)"#),
            all_variable(query_variable(
                "coin",
                r#"label_values({__name__=~"capi_bills_total|capi_data_age_seconds", account=~"$account"}, coin)"#,
            )),
        ]},
        "panels": [
            {"type": "row", "id": 100, "title": "Row", "gridPos": {"x": 0, "y": 0, "w": 24, "h": 1}, "panels": []},
            {
                "type": "timeseries",
                "id": 1,
                "title": "Bills",
                "description": "Bills per second.",
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"x": 0, "y": 1, "w": 12, "h": 8},
                "fieldConfig": {"defaults": {"unit": "cps"}, "overrides": []},
                "targets": [target(GOOD_EXPR)],
            },
            {
                "type": "stat",
                "id": 2,
                "title": "Polling",
                "description": "Whether polling works.",
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"x": 12, "y": 1, "w": 12, "h": 8},
                "fieldConfig": {"defaults": {
                    "unit": "none",
                    "noValue": "NO DATA",
                    "thresholds": {"mode": "absolute", "steps": [{"color": "red", "value": null}, {"color": "green", "value": 1}]},
                    "mappings": [{"type": "special", "options": {"match": "null+nan", "result": {"text": "NO DATA", "color": "red"}}}],
                }, "overrides": []},
                "targets": [target(r#"min by (account) (capi_up{job=~"$job", instance=~"$instance", account=~"$account", coin=~"$coin"})"#)],
            },
            {
                "type": "alertlist",
                "id": 3,
                "title": "Alerts",
                "description": "The Capi alerts firing or pending.",
                "gridPos": {"x": 0, "y": 9, "w": 24, "h": 8},
                "options": {"alertName": "Capi"},
            },
        ],
    })
}

/// The good dashboard with the value at `pointer` replaced.
fn with(pointer: &str, value: Value) -> Value {
    let mut dashboard = good();
    *dashboard.pointer_mut(pointer).unwrap_or_else(|| panic!("no {pointer} in the good dashboard")) = value;
    dashboard
}

/// The good dashboard with the first panel's only expression replaced.
fn with_expr(expr: &str) -> Value {
    with("/panels/1/targets/0/expr", json!(expr))
}

/// Asserts that `rule` finds a problem containing `needle` in `dashboard`.
fn assert_reports(rule: Rule, dashboard: &Value, needle: &str) {
    let problems = rule(dashboard);
    assert!(problems.iter().any(|p| p.contains(needle)), "expected a problem with {needle:?}, got {problems:#?}");
}

#[test]
fn the_good_snippet_passes_every_rule() {
    assert_eq!(lint(&good()), Vec::<String>::new());
}

#[test]
fn dashboard_export_wants_requires_and_uid() {
    assert_reports(dashboard_export, &with("/__requires/2/id", json!("stat")), "panel \"timeseries\"");
    assert_reports(dashboard_export, &with("/__requires/1/id", json!("loki")), "datasource \"prometheus\"");
    assert_reports(dashboard_export, &with("/uid", json!("")), "no uid");
}

#[test]
fn template_datasource_wants_a_prometheus_variable_an_input_and_a_recent_schema() {
    assert_reports(template_datasource, &with("/templating/list/0/name", json!("ds")), "no variable named datasource");
    assert_reports(template_datasource, &with("/templating/list/0/query", json!("loki")), "not of type");
    assert_reports(template_datasource, &with("/__inputs", json!([])), "__inputs");
    assert_reports(template_datasource, &with("/__inputs/0/pluginId", json!("loki")), "__inputs");
    assert_reports(template_datasource, &with("/schemaVersion", json!(36)), "schemaVersion");
}

#[test]
fn template_variables_wants_the_variables_their_datasource_and_their_use() {
    assert_reports(template_variables, &with("/templating/list/4/name", json!("coin_id")), "no variable named coin");
    let other_source = json!({"type": "prometheus", "uid": "P1809F7CD0C75ACF3"});
    assert_reports(template_variables, &with("/templating/list/1/datasource", other_source), "variable job does not");
    let mut unused = good();
    unused["templating"]["list"]
        .as_array_mut()
        .unwrap()
        .push(query_variable("coin_id", "label_values(capi_bills_total, coin_id)"));
    assert_reports(template_variables, &unused, "variable coin_id is used by no panel target");
    let exact = query_variable("account", r#"label_values(capi_up{job="$job"}, account)"#);
    assert_reports(template_variables, &with("/templating/list/3", exact), "job=\"$job\"");
}

#[test]
fn template_all_value_wants_all_to_match_every_value() {
    assert_reports(template_all_value, &with("/templating/list/4/allValue", json!("")), "variable coin offers All");
    let mut listed = good();
    listed["templating"]["list"][4].as_object_mut().unwrap().remove("allValue");
    assert_reports(template_all_value, &listed, "allValue null, not \".*\"");
    // A variable without "All" needs none.
    assert!(template_all_value(&with("/templating/list/4/includeAll", json!(false))).is_empty());
}

#[test]
fn panel_amount_decimals_wants_eight_decimals_on_amounts_of_a_coin() {
    let filters = r#"{job=~"$job", instance=~"$instance", account=~"$account", coin=~"$coin"}"#;
    let fees = format!("sum by (account, coin) (increase(capi_bill_fill_fee_total{filters}[$__rate_interval]))");
    // The good panel shows bill counts and has no decimals: not an amount.
    assert!(panel_amount_decimals(&good()).is_empty());
    assert_reports(panel_amount_decimals, &with_expr(&fees), "capi_bill_fill_fee_total, an amount of a coin");
    let mut rounded = with_expr(&format!("max by (account, coin) (capi_bill_balance{filters})"));
    rounded["panels"][1]["fieldConfig"]["defaults"]["decimals"] = json!(2);
    assert_reports(panel_amount_decimals, &rounded, "decimals 2, not 8");
    let mut exact = with_expr(&format!("max by (account, coin) (capi_collateral_amount{filters})"));
    exact["panels"][1]["fieldConfig"]["defaults"]["decimals"] = json!(8);
    assert!(panel_amount_decimals(&exact).is_empty());
    assert!(is_coin_amount("capi_ledger_difference") && is_coin_amount("capi_position_open_value"));
    assert!(!is_coin_amount("capi_bills_total") && !is_coin_amount("capi_position_leverage"));
}

#[test]
fn panel_datasource_wants_the_variable_on_panels_and_targets() {
    let fixed = json!({"type": "prometheus", "uid": "P1809F7CD0C75ACF3"});
    assert_reports(panel_datasource, &with("/panels/1/datasource", fixed.clone()), "panel 1 \"Bills\" does not");
    assert_reports(panel_datasource, &with("/panels/1/targets/0/datasource", fixed), "target A does not");
    assert_reports(panel_datasource, &with("/panels/1/targets/0/datasource", Value::Null), "target A does not");
}

#[test]
fn panel_description_and_units_want_text() {
    assert_reports(panel_description, &with("/panels/1/description", json!(" ")), "has no description");
    assert_reports(panel_description, &with("/panels/1/title", json!("")), "has no title");
    assert_reports(panel_units, &with("/panels/1/fieldConfig/defaults/unit", json!("")), "has no unit");
    assert_reports(panel_units, &with("/panels/1/fieldConfig", json!({})), "has no unit");
}

#[test]
fn target_filters_wants_every_capi_selector_filtered() {
    let missing_account = r#"capi_up{job=~"$job", instance=~"$instance"}"#;
    assert_reports(target_filters, &with_expr(missing_account), "capi_up does not filter on account=~\"$account\"");
    let second_selector = format!(r#"{GOOD_EXPR} / on(account) capi_collateral_amount{{job=~"$job"}}"#);
    assert_reports(target_filters, &with_expr(&second_selector), "capi_collateral_amount does not filter on instance");
    let exact = r#"capi_up{job="$job", instance=~"$instance", account=~"$account"}"#;
    assert_reports(target_filters, &with_expr(exact), "capi_up does not filter on job");
    assert_reports(target_filters, &with_expr(exact), "use =~ with variables");
    assert_reports(target_filters, &with_expr(""), "has no expr");
    assert_reports(target_filters, &with_expr("rate(capi_up{job=~\"$job\""), "cannot read");
    // A metric name inside a string is not a selector.
    let string = r#"label_replace(vector(1), "x", "capi_up", "", "")"#;
    assert_eq!(target_filters(&with_expr(string)), Vec::<String>::new());
}

#[test]
fn target_rate_interval_wants_the_grafana_intervals() {
    let fixed = GOOD_EXPR.replace("$__rate_interval", "5m");
    assert_reports(target_rate_interval, &with_expr(&fixed), "rate() over [5m]");
    let interval = GOOD_EXPR.replace("rate(", "irate(").replace("$__rate_interval", "$__interval");
    assert_reports(target_rate_interval, &with_expr(&interval), "irate() over [$__interval]");
    let range = GOOD_EXPR.replace("$__rate_interval", "$__range");
    assert_reports(target_rate_interval, &with_expr(&range), "rate() over [$__range]");
    assert!(target_rate_interval(&with_expr(&range.replace("rate(", "increase("))).is_empty());
    let subquery = GOOD_EXPR.replace("$__rate_interval", "5m:1m");
    assert_reports(target_rate_interval, &with_expr(&subquery), "over [5m:1m]");
}

#[test]
fn target_counter_agg_wants_counters_inside_rate() {
    let filters = r#"{job=~"$job", instance=~"$instance", account=~"$account"}"#;
    assert_reports(target_counter_agg, &with_expr(&format!("capi_bills_total{filters}")), "outside any function");
    let summed = format!("sum by (account) (capi_bill_amount_total{filters})");
    assert_reports(target_counter_agg, &with_expr(&summed), "counter capi_bill_amount_total is used in sum()");
    let running = format!("max by (account) (capi_bill_amount_total{filters})");
    assert!(target_counter_agg(&with_expr(&running)).is_empty(), "a running sum of money");
    let requests = format!("max by (account) (capi_api_requests_total{filters})");
    assert_reports(target_counter_agg, &with_expr(&requests), "counter capi_api_requests_total is used in max()");
    let latency =
        format!("capi_api_request_duration_seconds_sum{filters} / capi_api_request_duration_seconds_count{filters}");
    assert_reports(target_counter_agg, &with_expr(&latency), "capi_api_request_duration_seconds_sum");
    assert_reports(target_counter_agg, &with_expr(&latency), "capi_api_request_duration_seconds_count");
    let quantile = format!("histogram_quantile(0.9, sum by (le) (capi_api_request_duration_seconds_bucket{filters}))");
    assert_reports(target_counter_agg, &with_expr(&quantile), "_bucket is used in sum()");
    let good = format!(
        "histogram_quantile(0.9, sum by (le) (rate(capi_api_request_duration_seconds_bucket{filters}[$__rate_interval])))"
    );
    assert!(target_counter_agg(&with_expr(&good)).is_empty());
}

#[test]
fn panel_ids_wants_unique_ids() {
    assert_reports(panel_ids, &with("/panels/1/id", json!(100)), "has the id of panel 100");
    assert_reports(panel_ids, &with("/panels/1/id", Value::Null), "has no integer id");
}

#[test]
fn stat_no_data_wants_no_data_in_red() {
    assert_reports(
        stat_no_data,
        &with("/panels/2/fieldConfig/defaults/noValue", json!("")),
        "has no fieldConfig.defaults.noValue",
    );
    let green = json!([{"color": "green", "value": null}]);
    assert_reports(
        stat_no_data,
        &with("/panels/2/fieldConfig/defaults/thresholds/steps", green),
        "base threshold color is not red",
    );
    assert_reports(
        stat_no_data,
        &with("/panels/2/fieldConfig/defaults/mappings", json!([])),
        "maps no null value to red",
    );
}

#[test]
fn alert_list_wants_the_capi_alerts() {
    assert_reports(alert_list, &with("/panels/3/type", json!("text")), "no alertlist panel");
    assert_reports(alert_list, &with("/panels/3/options/alertName", json!("")), "no alertlist panel");
}

#[test]
fn runbook_link_wants_a_link_to_the_runbook() {
    assert_reports(runbook_link, &with("/links", json!([])), "no dashboard link");
    assert_reports(runbook_link, &with("/links/0/url", json!("https://example.com/docs/")), "no dashboard link");
    assert_reports(runbook_link, &with("/links/0/type", json!("dashboards")), "no dashboard link");
}

#[test]
fn panel_grid_wants_24_columns_and_no_overlap() {
    assert_reports(panel_grid, &with("/panels/1/gridPos/x", json!(18)), "outside the 24 columns");
    assert_reports(panel_grid, &with("/panels/1/gridPos/y", json!(0)), "overlaps");
    assert_reports(panel_grid, &with("/panels/1/gridPos", json!({"x": 0})), "no complete gridPos");
}

#[test]
fn the_scanner_reads_selectors_calls_and_ranges() {
    let expr = Expr::parse(
        r#"histogram_quantile(0.99, sum by (le, endpoint) (rate(a_bucket{x=~"$x", y!="b}"}[$__rate_interval])))
           / on(endpoint) group_left max without (z) (b) # a comment with c_total
           + time() - c{"__name__"="d"}[5m:1m] offset 1h"#,
    )
    .unwrap();
    let names: Vec<(&str, Option<&str>)> =
        expr.selectors.iter().map(|s| (s.name.as_str(), s.function.as_deref())).collect();
    assert_eq!(names, [("a_bucket", Some("rate")), ("b", Some("max")), ("c", None)]);
    assert_eq!(expr.selectors[0].matchers[1].to_string(), r#"y!="b}""#);
    let calls: Vec<(&str, Vec<&str>)> =
        expr.calls.iter().map(|c| (c.function.as_str(), c.ranges.iter().map(String::as_str).collect())).collect();
    assert_eq!(
        calls,
        [
            ("rate", vec!["$__rate_interval"]),
            ("sum", vec![]),
            ("histogram_quantile", vec![]),
            ("max", vec![]),
            ("time", vec![]),
            ("", vec!["5m:1m"]),
        ]
    );
    assert!(references_variable("a{x=~\"${coin}\"}", "coin"));
    assert!(references_variable("a{x=~\"${coin:regex}\"}", "coin"));
    assert!(!references_variable("a{x=~\"$coin_id\"}", "coin"));
    assert!(Expr::parse("sum(rate(x[1m])").is_err());
    assert!(Expr::parse("x{y=~}").is_err());
}
