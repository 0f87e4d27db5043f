//! The alerts' links hold: every alert of `deploy/prometheus/rules.yml` has a `runbook_url` whose
//! anchor is its own `## <AlertName>` section of `docs/runbook.md`, and a `dashboard_url` to the
//! shipped dashboard's uid, on the alert's `job`, `account` and `coin` where it has them; the
//! runbook has no section for an alert that does not exist.
//!
//! Also held here, as the same kind of drift: `deploy/README.md`'s alert table lists every alert;
//! `rules.test.yml` makes every alert fire at least once, and its expected `dashboard_url`s carry
//! `var-job`/`var-account`/`var-coin` exactly when the alert has those labels (promtool checks
//! that the templates render what is expected); every `capi_` metric the runbook names is one
//! that README.md, the golden files or the rules' expressions name.
//!
//! The test fails listing every problem, each naming its alert (or runbook section).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

/// How the path of every `runbook_url` ends, before its `#anchor` (the base is the deployer's).
const RUNBOOK_PATH: &str = "docs/runbook.md";
/// The dashboard every `dashboard_url` opens.
const DASHBOARD: &str = "dashboards/capi-overview.json";

#[derive(Debug, Clone, Deserialize)]
struct RulesFile {
    groups: Vec<Group>,
}

#[derive(Debug, Clone, Deserialize)]
struct Group {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone, Deserialize)]
struct Rule {
    alert: Option<String>,
    expr: String,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
struct TestFile {
    tests: Vec<TestCase>,
}

#[derive(Debug, Clone, Deserialize)]
struct TestCase {
    name: String,
    #[serde(default)]
    alert_rule_test: Vec<AlertTest>,
}

#[derive(Debug, Clone, Deserialize)]
struct AlertTest {
    alertname: String,
    #[serde(default)]
    exp_alerts: Vec<ExpectedAlert>,
}

#[derive(Debug, Clone, Deserialize)]
struct ExpectedAlert {
    #[serde(default)]
    exp_labels: BTreeMap<String, String>,
    #[serde(default)]
    exp_annotations: BTreeMap<String, String>,
}

/// Everything the checks read, parsed.
#[derive(Debug, Clone)]
struct Inputs {
    rules: RulesFile,
    rule_tests: TestFile,
    runbook: String,
    dashboard_uid: String,
    dashboard_variables: Vec<String>,
    deploy_readme: String,
    /// README.md, the golden files and the rules' expressions: the metrics that exist.
    metric_sources: String,
}

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn load() -> Inputs {
    let rules: RulesFile = serde_yaml_ng::from_str(&read("deploy/prometheus/rules.yml"))
        .unwrap_or_else(|e| panic!("deploy/prometheus/rules.yml: {e}"));
    let rule_tests: TestFile = serde_yaml_ng::from_str(&read("deploy/prometheus/rules.test.yml"))
        .unwrap_or_else(|e| panic!("deploy/prometheus/rules.test.yml: {e}"));
    let dashboard: serde_json::Value =
        serde_json::from_str(&read(DASHBOARD)).unwrap_or_else(|e| panic!("{DASHBOARD}: {e}"));
    let dashboard_uid = dashboard["uid"].as_str().unwrap_or_else(|| panic!("{DASHBOARD} has no uid")).to_owned();
    let dashboard_variables = dashboard
        .pointer("/templating/list")
        .and_then(serde_json::Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(|variable| variable["name"].as_str().map(str::to_owned))
        .collect();
    let mut metric_sources = read("README.md");
    let snapshots = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots");
    for entry in std::fs::read_dir(&snapshots).unwrap_or_else(|e| panic!("cannot list {}: {e}", snapshots.display())) {
        let path = entry.expect("a readable folder entry").path();
        if path.extension().is_some_and(|ext| ext == "snap") {
            metric_sources.push_str(&std::fs::read_to_string(&path).expect("a readable golden file"));
        }
    }
    for rule in rules.groups.iter().flat_map(|group| &group.rules) {
        metric_sources.push_str(&rule.expr);
        metric_sources.push('\n');
    }
    Inputs {
        rules,
        rule_tests,
        runbook: read(RUNBOOK_PATH),
        dashboard_uid,
        dashboard_variables,
        deploy_readme: read("deploy/README.md"),
        metric_sources,
    }
}

/// The anchor GitHub gives a heading: lower case, punctuation other than `-` and `_` dropped,
/// spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The text of every `## ` heading of the runbook, in order.
fn sections(runbook: &str) -> Vec<&str> {
    let mut in_code = false;
    let mut out = Vec::new();
    for line in runbook.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        } else if let Some(heading) = line.strip_prefix("## ").filter(|_| !in_code) {
            out.push(heading.trim());
        }
    }
    out
}

/// Every `capi_...` metric name in `text`, recording rule names (`a:capi_b:c`) left out.
fn metric_names(text: &str) -> BTreeSet<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|word| word.starts_with("capi_") && !word.contains(':'))
        .collect()
}

/// The `var-NAME=VALUE` pairs of a URL's query, in order.
fn query_variables(url: &str) -> Vec<(&str, &str)> {
    let Some((_, query)) = url.split_once('?') else { return Vec::new() };
    query
        .split('&')
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .filter_map(|(key, value)| Some((key.strip_prefix("var-")?, value)))
        .collect()
}

fn problems(inputs: &Inputs) -> Vec<String> {
    let mut problems = Vec::new();
    let alerts: Vec<(&str, &BTreeMap<String, String>)> = inputs
        .rules
        .groups
        .iter()
        .flat_map(|group| &group.rules)
        .filter_map(|rule| Some((rule.alert.as_deref()?, &rule.annotations)))
        .collect();
    if alerts.is_empty() {
        problems.push("deploy/prometheus/rules.yml has no alert".to_owned());
    }
    let names: BTreeSet<&str> = alerts.iter().map(|(name, _)| *name).collect();
    let sections = sections(&inputs.runbook);

    // The runbook: one section per alert, none for an alert that does not exist.
    let mut seen = BTreeSet::new();
    for section in &sections {
        if !seen.insert(*section) {
            problems.push(format!("{section}: {RUNBOOK_PATH} has two sections of this name"));
        }
        if !names.contains(section) {
            problems.push(format!("{section}: {RUNBOOK_PATH} has a section for it, but no alert of this name exists"));
        }
    }

    for (alert, annotations) in &alerts {
        if !sections.contains(alert) {
            problems.push(format!("{alert}: {RUNBOOK_PATH} has no section \"## {alert}\""));
        }

        // runbook_url: the runbook, anchored at the alert's own section.
        match annotations.get("runbook_url").map(String::as_str) {
            None | Some("") => problems.push(format!("{alert}: no runbook_url annotation")),
            Some(url) => match url.split_once('#') {
                None => problems.push(format!("{alert}: runbook_url {url:?} has no #anchor")),
                Some((page, fragment)) => {
                    if !page.ends_with(RUNBOOK_PATH) {
                        problems.push(format!("{alert}: runbook_url {url:?} is not {RUNBOOK_PATH}"));
                    }
                    if fragment != anchor(alert) {
                        problems.push(format!(
                            "{alert}: runbook_url {url:?} points at #{fragment}, not at #{}",
                            anchor(alert)
                        ));
                    }
                    if !sections.iter().any(|section| anchor(section) == fragment) {
                        problems.push(format!(
                            "{alert}: runbook_url {url:?}: no heading of {RUNBOOK_PATH} has the anchor #{fragment}"
                        ));
                    }
                }
            },
        }

        // dashboard_url: the shipped dashboard, its variables set from the alert's labels.
        match annotations.get("dashboard_url").map(String::as_str) {
            None | Some("") => problems.push(format!("{alert}: no dashboard_url annotation")),
            Some(url) => {
                let uid = url.split_once("/d/").and_then(|(_, rest)| rest.split(['/', '?']).next());
                if uid != Some(inputs.dashboard_uid.as_str()) {
                    problems.push(format!(
                        "{alert}: dashboard_url {url:?} opens the dashboard uid {uid:?}, not {:?} ({DASHBOARD})",
                        inputs.dashboard_uid
                    ));
                }
                for (variable, value) in query_variables(url) {
                    if !inputs.dashboard_variables.iter().any(|v| v == variable) {
                        problems.push(format!(
                            "{alert}: dashboard_url sets var-{variable}, which {DASHBOARD} does not have"
                        ));
                    }
                    let wanted = format!("{{{{ $labels.{variable} }}}}");
                    if value != wanted {
                        problems.push(format!(
                            "{alert}: dashboard_url sets var-{variable}={value}, not var-{variable}={wanted}"
                        ));
                    }
                }
            }
        }

        // deploy/README.md's alert table.
        if !inputs.deploy_readme.lines().any(|line| line.starts_with(&format!("| `{alert}` |"))) {
            problems.push(format!("{alert}: the alert table of deploy/README.md has no row \"| `{alert}` |\""));
        }
    }

    // rules.test.yml: every alert fires in a case; each expected dashboard_url of an account's
    // alert sets the job, account and coin variables exactly when the alert has those labels.
    let mut fired = BTreeSet::new();
    for case in &inputs.rule_tests.tests {
        for test in &case.alert_rule_test {
            for expected in &test.exp_alerts {
                fired.insert(test.alertname.as_str());
                let alert = &test.alertname;
                let Some(url) = expected.exp_annotations.get("dashboard_url") else {
                    continue; // promtool reports the annotation missing against the rule
                };
                let labels = &expected.exp_labels;
                let mut wanted = Vec::new();
                if let Some(account) = labels.get("account") {
                    if let Some(job) = labels.get("job") {
                        wanted.push(("job", job.as_str()));
                    }
                    wanted.push(("account", account.as_str()));
                    if let Some(coin) = labels.get("coin") {
                        wanted.push(("coin", coin.as_str()));
                    }
                }
                if query_variables(url) != wanted {
                    problems.push(format!(
                        "{alert}: in rules.test.yml case {:?}, the alert with labels {labels:?} expects dashboard_url {url:?}: \
                         the variables should be {wanted:?}",
                        case.name
                    ));
                }
            }
        }
    }
    for alert in &names {
        if !fired.contains(alert) {
            problems.push(format!("{alert}: no case of deploy/prometheus/rules.test.yml expects it to fire"));
        }
    }

    // The metrics the runbook names exist.
    let known = metric_names(&inputs.metric_sources);
    for metric in metric_names(&inputs.runbook) {
        if !known.contains(metric) {
            let section = sections
                .iter()
                .rev()
                .find(|section| {
                    let at = inputs.runbook.find(&format!("## {section}\n")).unwrap_or(usize::MAX);
                    inputs.runbook.find(metric).is_some_and(|first| first > at)
                })
                .copied()
                .unwrap_or("(introduction)");
            problems.push(format!(
                "{section}: {RUNBOOK_PATH} names the metric {metric}, which neither README.md, the golden files nor the rules name"
            ));
        }
    }
    problems
}

#[test]
fn every_alert_links_its_runbook_section_and_the_dashboard() {
    let problems = problems(&load());
    assert!(problems.is_empty(), "{} runbook link problem(s):\n{}", problems.len(), problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// The checks against broken copies of the real files

/// The real files, with the annotations of `alert` changed by `edit`.
fn with_annotations(alert: &str, edit: impl FnOnce(&mut BTreeMap<String, String>)) -> Inputs {
    let mut inputs = load();
    let rule = inputs
        .rules
        .groups
        .iter_mut()
        .flat_map(|group| &mut group.rules)
        .find(|rule| rule.alert.as_deref() == Some(alert))
        .unwrap_or_else(|| panic!("no alert {alert} in rules.yml"));
    edit(&mut rule.annotations);
    inputs
}

fn assert_reports(inputs: &Inputs, needles: &[&str]) {
    let problems = problems(inputs);
    assert!(
        problems.iter().any(|p| needles.iter().all(|needle| p.contains(needle))),
        "expected a problem with {needles:?}, got {problems:#?}"
    );
}

#[test]
fn a_missing_or_wrong_runbook_url_is_reported_with_its_alert() {
    assert_reports(
        &with_annotations("CapiDataStale", |a| {
            a.remove("runbook_url");
        }),
        &["CapiDataStale", "no runbook_url"],
    );
    let wrong = with_annotations("CapiDataStale", |a| {
        a.insert("runbook_url".into(), "https://capi-exporter.example.com/docs/runbook.md#capiexporterdown".into());
    });
    assert_reports(&wrong, &["CapiDataStale", "not at #capidatastale"]);
    let nowhere = with_annotations("CapiDataStale", |a| {
        a.insert("runbook_url".into(), "https://capi-exporter.example.com/docs/runbook.md".into());
    });
    assert_reports(&nowhere, &["CapiDataStale", "no #anchor"]);
}

#[test]
fn a_missing_or_wrong_dashboard_url_is_reported_with_its_alert() {
    assert_reports(
        &with_annotations("CapiRateLimited", |a| {
            a.remove("dashboard_url");
        }),
        &["CapiRateLimited", "no dashboard_url"],
    );
    let other = with_annotations("CapiRateLimited", |a| {
        a.insert("dashboard_url".into(), "https://grafana.example.com/d/other/capi-overview".into());
    });
    assert_reports(&other, &["CapiRateLimited", "uid Some(\"other\")"]);
    let fixed = with_annotations("CapiRateLimited", |a| {
        a.insert(
            "dashboard_url".into(),
            "https://grafana.example.com/d/capi-overview/capi-overview?var-account=main".into(),
        );
    });
    assert_reports(&fixed, &["CapiRateLimited", "var-account=main"]);
    let unknown = with_annotations("CapiRateLimited", |a| {
        a.insert(
            "dashboard_url".into(),
            "https://grafana.example.com/d/capi-overview/capi-overview?var-acount={{ $labels.acount }}".into(),
        );
    });
    assert_reports(&unknown, &["CapiRateLimited", "does not have"]);
}

#[test]
fn runbook_sections_and_alerts_must_match() {
    let mut orphan = load();
    orphan.runbook.push_str("\n## CapiSomethingGone\n\nNo longer an alert.\n");
    assert_reports(&orphan, &["CapiSomethingGone", "no alert of this name exists"]);
    let mut missing = load();
    missing.runbook = missing.runbook.replace("## CapiRateLimited\n", "## Rate limits\n");
    assert_reports(&missing, &["CapiRateLimited", "no section"]);
    assert_reports(&missing, &["Rate limits", "no alert of this name exists"]);
    let mut code = load();
    code.runbook.push_str("\n```sh\n## CapiSomethingGone: a shell comment, not a heading\n```\n");
    assert_eq!(problems(&code), Vec::<String>::new());
}

#[test]
fn the_alert_table_the_rule_tests_and_the_metrics_are_held_too() {
    let mut untabled = load();
    untabled.deploy_readme = untabled.deploy_readme.replace("| `CapiBillsMissed` |", "| CapiBillsMissed |");
    assert_reports(&untabled, &["CapiBillsMissed", "alert table"]);
    let mut untested = load();
    for case in &mut untested.rule_tests.tests {
        case.alert_rule_test.retain(|test| test.alertname != "CapiStateFileFailing");
    }
    assert_reports(&untested, &["CapiStateFileFailing", "no case"]);
    let mut coinless = load();
    let expected = coinless
        .rule_tests
        .tests
        .iter_mut()
        .flat_map(|case| &mut case.alert_rule_test)
        .filter(|test| test.alertname == "CapiAccountLiquidating")
        .flat_map(|test| &mut test.exp_alerts)
        .next()
        .expect("an expected CapiAccountLiquidating");
    let url = expected.exp_annotations.get_mut("dashboard_url").expect("its dashboard_url");
    *url = url.replace("&var-coin=USDT", "");
    assert_reports(&coinless, &["CapiAccountLiquidating", "should be"]);
    let mut invented = load();
    invented.runbook = invented.runbook.replace("`capi_poll_backoff_seconds`", "`capi_poll_backoff_total`");
    assert_reports(&invented, &["CapiDataStale", "capi_poll_backoff_total"]);
}

#[test]
fn anchors_and_query_variables_are_read_as_github_and_grafana_do() {
    assert_eq!(anchor("CapiExporterDown"), "capiexporterdown");
    assert_eq!(anchor("When bills can be lost, and how"), "when-bills-can-be-lost-and-how");
    assert_eq!(
        query_variables("https://g/d/u/n?var-account={{ $labels.account }}&orgId=1&var-coin=x"),
        [("account", "{{ $labels.account }}"), ("coin", "x")]
    );
    assert!(query_variables("https://g/d/u/n").is_empty());
    assert_eq!(
        metric_names("a `capi_up` and account:capi_data_age_seconds:max, capi:alert_threshold:x{capi_b=\"1\"}"),
        BTreeSet::from(["capi_up", "capi_b"])
    );
}
