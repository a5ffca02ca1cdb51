//! The alerts and recording rules of `manifests/monitoring/`: Prometheus' own `promtool` checks
//! them and runs their unit tests (synthetic series for every alert, firing when it should and
//! silent when it should not); the PrometheusRule is `rules.yaml` under `spec:`, byte for byte;
//! every alert has tests both ways and a runbook section in docs/monitoring.md; the rules name
//! only series the controller exports; and every query of the Grafana dashboard parses and
//! returns data from a sample of those series.
//!
//! promtool (looked up by `groundskeeper_e2e::prometheus`): `GROUNDSKEEPER_PROMTOOL`, else what
//! `cargo xtask test` fetched into `target/tools/prometheus/` (Debian's prometheus package), else
//! `promtool` on PATH. Without one the promtool tests skip saying so; under CI=true they fail. The
//! same rules and dashboard against a real Prometheus: `tests/tests/it/monitoring.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use groundskeeper_e2e::prometheus::{check_metrics, promtool_or_skip, text_format};
use serde_json::Value;

fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn monitoring() -> PathBuf {
    project().join("manifests/monitoring")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml(path: &Path) -> Value {
    serde_saphyr::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The unit-test files of the rules.
fn test_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(monitoring().join("tests"))
        .expect("manifests/monitoring/tests/")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

fn promtool(promtool: &Path, args: &[&str], files: &[PathBuf]) {
    let output = Command::new(promtool)
        .args(args)
        .args(files)
        .current_dir(monitoring())
        .output()
        .expect("promtool runs");
    let said =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "promtool {}:\n{said}", args.join(" "));
    println!("promtool {}:\n{said}", args.join(" "));
}

#[test]
fn promtool_checks_the_rules_and_runs_their_tests() {
    let Some(promtool_path) = promtool_or_skip() else { return };
    promtool(&promtool_path, &["check", "rules"], &[monitoring().join("rules.yaml")]);
    promtool(&promtool_path, &["test", "rules"], &test_files());
}

/// `prometheusrule.yaml` is its header (up to `spec:`) and `rules.yaml` from `groups:` on,
/// indented under it: made from it, as its header says, never kept by hand.
#[test]
fn the_prometheus_rule_is_the_rules_file_under_spec() {
    let rules = read(&monitoring().join("rules.yaml"));
    let resource = read(&monitoring().join("prometheusrule.yaml"));
    let header_end =
        resource.find("\nspec:\n").expect("prometheusrule.yaml has a `spec:` line") + "\nspec:\n".len();
    let groups = &rules[rules.find("\ngroups:\n").expect("rules.yaml has a `groups:` line") + 1..];
    let indented: String = groups
        .lines()
        .map(|line| if line.is_empty() { "\n".to_owned() } else { format!("  {line}\n") })
        .collect();
    assert!(
        resource[header_end..] == indented,
        "manifests/monitoring/prometheusrule.yaml is not rules.yaml under `spec:`: remake it with the \
         command in its header"
    );
    let resource: Value = serde_saphyr::from_str(&resource).unwrap();
    assert_eq!(resource["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(resource["kind"], "PrometheusRule");
    assert_eq!(resource["metadata"]["namespace"], "groundskeeper");
    assert_eq!(resource["spec"]["groups"], serde_saphyr::from_str::<Value>(&rules).unwrap()["groups"]);
}

fn alerts() -> Vec<Value> {
    let rules = yaml(&monitoring().join("rules.yaml"));
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|group| group["rules"].as_array().unwrap().clone())
        .filter(|rule| rule.get("alert").is_some())
        .collect()
}

/// Per alert: whether some test expects it firing, and some expects it silent.
fn tested_both_ways() -> BTreeMap<String, (bool, bool)> {
    let mut seen: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for file in test_files() {
        for test in yaml(&file)["tests"].as_array().unwrap() {
            for case in test.get("alert_rule_test").and_then(Value::as_array).into_iter().flatten() {
                let firing = case["exp_alerts"].as_array().is_some_and(|alerts| !alerts.is_empty());
                let entry = seen.entry(case["alertname"].as_str().unwrap().to_owned()).or_default();
                if firing {
                    entry.0 = true;
                } else {
                    entry.1 = true;
                }
            }
        }
    }
    seen
}

#[test]
fn every_alert_is_tested_both_ways_and_has_a_runbook() {
    let tested = tested_both_ways();
    let runbook = read(&project().join("docs/monitoring.md"));
    let headings: BTreeSet<String> =
        runbook.lines().filter_map(|l| l.strip_prefix("### ")).map(|h| h.trim().to_lowercase()).collect();
    for alert in alerts() {
        let name = alert["alert"].as_str().unwrap();
        assert_eq!(
            tested.get(name),
            Some(&(true, true)),
            "{name}: a test where it fires and one where it does not"
        );
        let url = alert["annotations"]["runbook_url"].as_str().unwrap_or_default();
        let anchor = url.rsplit_once("docs/monitoring.md#").map(|(_, a)| a).unwrap_or_default();
        assert!(
            headings.contains(anchor),
            "{name}: runbook_url {url:?} names no `### ` section of docs/monitoring.md"
        );
        assert!(alert["labels"].get("severity").is_some(), "{name}: no severity label");
    }
}

/// The names of the series the controller exports, as its samples are named (a counter's with
/// `_total`, a histogram's `_bucket`, `_count`, `_sum`).
fn exported_series() -> BTreeSet<String> {
    let exposition = groundskeeper_controller::sample_metrics().encode();
    let sample = regex::Regex::new(r"^([a-z_]+)[{ ]").unwrap();
    exposition.lines().filter_map(|line| Some(sample.captures(line)?[1].to_owned())).collect()
}

#[test]
fn the_rules_name_only_series_the_controller_exports() {
    let exported = exported_series();
    assert!(exported.contains("groundskeeper_task_state"), "a sample of every family: {exported:?}");
    let rules = read(&monitoring().join("rules.yaml"));
    let metric = regex::Regex::new(r"[a-z_:]*groundskeeper_[a-z0-9_:]+").unwrap();
    let recorded: BTreeSet<&str> =
        rules.lines().filter_map(|l| l.trim().strip_prefix("- record: ")).collect();
    for expression in
        yaml(&monitoring().join("rules.yaml"))["groups"].as_array().unwrap().iter().flat_map(|g| {
            g["rules"].as_array().unwrap().iter().map(|r| r["expr"].as_str().unwrap().to_owned())
        })
    {
        for name in metric.find_iter(&expression).map(|m| m.as_str()) {
            assert!(
                exported.contains(name) || recorded.contains(name),
                "{name}, in `{expression}`, is neither exported by the controller nor recorded"
            );
        }
    }
}

/// promtool's lint of names, units and help texts on a sample of every series. One finding is
/// known and left: `groundskeeper_etcd_partition_clock_skew_milliseconds` (base unit seconds);
/// renaming it would rename a series in use.
#[test]
fn promtool_lints_the_metric_names() {
    let Some(promtool_path) = promtool_or_skip() else { return };
    let exposition = text_format(&groundskeeper_controller::sample_metrics().encode());
    let said = check_metrics(&promtool_path, &exposition).expect("promtool runs");
    let known = "groundskeeper_etcd_partition_clock_skew_milliseconds use base unit \"seconds\" instead of \"milliseconds\"";
    let findings: Vec<&String> = said.iter().filter(|l| *l != known).collect();
    assert!(findings.is_empty(), "promtool check metrics:\n{}\non:\n{exposition}", said.join("\n"));
}

/// Every query of `manifests/monitoring/dashboard.json`, with where it is.
fn dashboard_queries() -> Vec<(String, String)> {
    let dashboard: Value = serde_json::from_str(&read(&monitoring().join("dashboard.json"))).expect("JSON");
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel.get("targets").and_then(Value::as_array).into_iter().flatten() {
            let place = format!(
                "{} ({})",
                panel["title"].as_str().unwrap_or_default(),
                target["refId"].as_str().unwrap_or_default()
            );
            queries.push((place, target["expr"].as_str().expect("an expr").to_owned()));
        }
    }
    queries
}

/// The sample exposition as promtool input series: two hours of them, counters growing.
fn sample_series() -> String {
    let exposition = groundskeeper_controller::sample_metrics().encode();
    let counted = regex::Regex::new(r"_(total|bucket|count|sum)\{|_(total|count|sum) ").unwrap();
    let mut text = String::from("    input_series:\n");
    for line in exposition.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').expect("a sample is its series and its value");
        let step = if counted.is_match(line) { "+1" } else { "" };
        text.push_str(&format!("      - series: '{series}'\n        values: '{value}{step}x120'\n"));
    }
    text
}

/// The dashboard's queries parse (`promtool check rules`, each one a recording rule), name only
/// series the controller exports or the rules record, and each returns data from a sample of
/// every series the controller exports (`promtool test rules`: an alert on `absent()` of each
/// must stay silent).
#[test]
fn every_dashboard_query_parses_and_returns_data() {
    let queries = dashboard_queries();
    let exported = exported_series();
    let rules = read(&monitoring().join("rules.yaml"));
    let recorded: BTreeSet<&str> =
        rules.lines().filter_map(|l| l.trim().strip_prefix("- record: ")).collect();
    let metric = regex::Regex::new(r"[a-z_:]*groundskeeper_[a-z0-9_:]+").unwrap();
    for (place, query) in &queries {
        for name in metric.find_iter(query).map(|m| m.as_str()) {
            assert!(
                exported.contains(name) || recorded.contains(name),
                "{place}: {name} is neither exported nor recorded"
            );
        }
    }
    let Some(promtool_path) = promtool_or_skip() else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-queries");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut panels = String::from("groups:\n  - name: dashboard\n    rules:\n");
    let mut checks = String::new();
    for (i, (place, query)) in queries.iter().enumerate() {
        let query = serde_json::to_string(query).unwrap();
        panels.push_str(&format!("      - record: dashboard:query_{i}\n        expr: {query}\n"));
        let labelled = serde_json::to_string(place).unwrap();
        panels.push_str(&format!(
            "      - alert: Query{i}ReturnsNothing\n        expr: absent(dashboard:query_{i})\n        \
             labels:\n          query: {labelled}\n"
        ));
        checks.push_str(&format!(
            "      # {place}\n      - eval_time: 1h\n        alertname: Query{i}ReturnsNothing\n        exp_alerts: []\n"
        ));
    }
    std::fs::write(dir.join("dashboard.yaml"), panels).unwrap();
    let rules_file = monitoring().join("rules.yaml");
    let test = format!(
        "rule_files:\n  - {}\n  - dashboard.yaml\nevaluation_interval: 1m\ngroup_eval_order:\n  - \
         groundskeeper.rules\n  - groundskeeper.alerts\n  - dashboard\ntests:\n  - interval: 1m\n{}    \
         alert_rule_test:\n{checks}",
        rules_file.display(),
        sample_series()
    );
    std::fs::write(dir.join("test.yaml"), test).unwrap();
    let run = |args: &[&str], file: &str| {
        let output = Command::new(&promtool_path).args(args).arg(file).current_dir(&dir).output().unwrap();
        let said =
            format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(
            output.status.success(),
            "promtool {} {file} (in {}):\n{said}",
            args.join(" "),
            dir.display()
        );
    };
    run(&["check", "rules"], "dashboard.yaml");
    run(&["test", "rules"], "test.yaml");
}
