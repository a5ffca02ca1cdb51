//! A real Prometheus for tests: the server and promtool of Debian's `prometheus` package
//! (Prometheus 2.42), not written here.
//!
//! [`Prometheus::start`] runs the server on a loopback port with a configuration of the test's
//! (one scrape target every second, rules evaluated every second, the rule files given), its
//! storage in a temporary folder; dropping it kills the server and removes the folder. Its port is
//! picked by binding port 0; if another process takes it before the server binds it, the server is
//! started again on a new one. [`Prometheus::query`] and [`Prometheus::alerts`] ask its HTTP API.
//!
//! The binaries are found through `GROUNDSKEEPER_PROMETHEUS` and `GROUNDSKEEPER_PROMTOOL` (each
//! taken as it is), then where `cargo xtask test` fetches the package
//! (`target/tools/prometheus/usr/bin/`), then on `PATH`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How the tests are told where the Prometheus server is (`cargo xtask test` sets it).
pub const SERVER_ENV_VAR: &str = "GROUNDSKEEPER_PROMETHEUS";
/// How the tests are told where promtool is (`cargo xtask test` sets it).
pub const PROMTOOL_ENV_VAR: &str = "GROUNDSKEEPER_PROMTOOL";

/// How often the server scrapes its target and evaluates its rules.
pub const INTERVAL: Duration = Duration::from_secs(1);

const START_ATTEMPTS: usize = 5;
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// `name` from `env_var`, `target/tools/prometheus/usr/bin/`, or `PATH`; or why none was found.
fn find(env_var: &str, name: &str) -> Result<PathBuf, String> {
    let runs = |binary: &Path| {
        Command::new(binary)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let hint = format!(
        "`cargo xtask test` fetches Debian's prometheus package into target/tools/; or `apt-get \
         install prometheus`, or point {env_var} at the binary"
    );
    if let Some(path) = std::env::var_os(env_var) {
        let binary = PathBuf::from(path);
        return if runs(&binary) {
            Ok(binary)
        } else {
            Err(format!("{env_var}={} does not run ({hint})", binary.display()))
        };
    }
    let fetched = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/prometheus/usr/bin").join(name);
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).map(|dir| dir.join(name)).collect::<Vec<_>>())
        .unwrap_or_default();
    std::iter::once(fetched)
        .chain(on_path)
        .find(|binary| runs(binary))
        .ok_or_else(|| format!("{name} not found ({env_var}, target/tools/prometheus/, PATH): {hint}"))
}

/// The Prometheus server, or why none was found.
pub fn find_prometheus() -> Result<PathBuf, String> {
    find(SERVER_ENV_VAR, "prometheus")
}

/// promtool, or why none was found.
pub fn find_promtool() -> Result<PathBuf, String> {
    find(PROMTOOL_ENV_VAR, "promtool")
}

fn or_skip(found: Result<PathBuf, String>) -> Option<PathBuf> {
    match found {
        Ok(path) => Some(path),
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{why}; CI=true, so a missing Prometheus binary fails the test")
        }
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// The server for a test, or `None` after printing why the test is skipped. Under CI
/// (`CI=true`) a missing binary fails the test instead.
pub fn prometheus_or_skip() -> Option<PathBuf> {
    or_skip(find_prometheus())
}

/// promtool for a test, as [`prometheus_or_skip`].
pub fn promtool_or_skip() -> Option<PathBuf> {
    or_skip(find_promtool())
}

/// One sample of an instant query's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A running Prometheus server. Drop kills it and removes its data.
pub struct Prometheus {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub address: String,
    log: PathBuf,
    // Last, so the server is killed before its data goes.
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts a server scraping `target` (`host:port`, path `/metrics`, job `groundskeeper`,
    /// keeping the target's own labels as the rules expect) every [`INTERVAL`], evaluating the
    /// rules of `rule_files` as often, and waits until it is ready.
    pub fn start(binary: &Path, target: &str, rule_files: &[PathBuf]) -> Result<Self, String> {
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS {
            let dir = tempfile::Builder::new()
                .prefix("groundskeeper-prometheus-")
                .tempdir()
                .map_err(|e| e.to_string())?;
            let config = dir.path().join("prometheus.yml");
            std::fs::write(&config, configuration(target, rule_files))
                .map_err(|e| format!("{}: {e}", config.display()))?;
            let log = dir.path().join("prometheus.log");
            let port = crate::net::free_ports(1)?[0];
            let log_file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
            let child = Command::new(binary)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdin(Stdio::null())
                .stdout(log_file.try_clone().map_err(|e| e.to_string())?)
                .stderr(log_file)
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
            let mut server = Self { child, address: format!("127.0.0.1:{port}"), log, dir };
            match server.wait_ready() {
                Ok(()) => return Ok(server),
                // Someone took the port between the pick and the server's bind: a new one.
                Err(err) if server.log_text().contains("address already in use") => last_error = err,
                Err(err) => return Err(format!("{err}\n--- prometheus log ---\n{}", server.log_text())),
            }
        }
        Err(format!("could not start prometheus in {START_ATTEMPTS} attempts: {last_error}"))
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("prometheus exited at start ({status})"));
            }
            if http_get(&self.address, "/-/ready").is_ok_and(|(status, _)| status == 200) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("prometheus was not ready within {READY_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's log, for failure messages.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The server's folder (its configuration, log and `data/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `data` of the HTTP API's answer to `GET path` (`/api/v1/…`), or why there is none.
    pub async fn api(&self, path: &str) -> Result<Value, String> {
        let (address, request) = (self.address.clone(), path.to_owned());
        let (status, body) = tokio::task::spawn_blocking(move || http_get(&address, &request))
            .await
            .map_err(|e| format!("GET {path}: {e}"))??;
        let answer: Value = serde_json::from_str(&body)
            .map_err(|e| format!("GET {path}: {status}, not JSON ({e}): {body}"))?;
        if status != 200 || answer["status"] != "success" {
            return Err(format!("GET {path}: {status}: {body}"));
        }
        Ok(answer["data"].clone())
    }

    /// The answer to an instant query of `promql` now: its samples (a scalar is one sample
    /// without labels).
    pub async fn query(&self, promql: &str) -> Result<Vec<Sample>, String> {
        let data = self.api(&format!("/api/v1/query?query={}", url_encode(promql))).await?;
        let value = |pair: &Value| -> Result<f64, String> {
            let text = pair[1].as_str().ok_or_else(|| format!("{promql}: no value in {pair}"))?;
            text.parse::<f64>().map_err(|e| format!("{promql}: value {text:?}: {e}"))
        };
        match data["resultType"].as_str() {
            Some("vector") => data["result"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|item| {
                    let labels = item["metric"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect();
                    Ok(Sample { labels, value: value(&item["value"])? })
                })
                .collect(),
            Some("scalar") => Ok(vec![Sample { labels: BTreeMap::new(), value: value(&data["result"])? }]),
            other => Err(format!("{promql}: a {other:?} answer, not an instant vector or scalar: {data}")),
        }
    }

    /// The alerts pending or firing now (`/api/v1/alerts`), each with its `labels`, `state`,
    /// `activeAt` and `value`.
    pub async fn alerts(&self) -> Result<Vec<Value>, String> {
        let data = self.api("/api/v1/alerts").await?;
        Ok(data["alerts"].as_array().cloned().unwrap_or_default())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server's configuration: `target` scraped and the rules evaluated every [`INTERVAL`].
fn configuration(target: &str, rule_files: &[PathBuf]) -> String {
    let seconds = INTERVAL.as_secs();
    let rules: String = rule_files.iter().map(|f| format!("  - {:?}\n", f.display().to_string())).collect();
    format!(
        "global:\n  scrape_interval: {seconds}s\n  scrape_timeout: {seconds}s\n  \
         evaluation_interval: {seconds}s\n\
         rule_files:\n{rules}\
         scrape_configs:\n  - job_name: groundskeeper\n    honor_labels: true\n    static_configs:\n      \
         - targets: [{target:?}]\n"
    )
}

/// `GET path` on `address` (`host:port`) over HTTP/1.0 (the answer ends with the connection, never
/// chunked): the status and the body.
pub fn http_get(address: &str, path: &str) -> Result<(u16, String), String> {
    let failed = |e: std::io::Error| format!("GET http://{address}{path}: {e}");
    let socket = address.parse().map_err(|e| format!("{address}: {e}"))?;
    let mut stream = TcpStream::connect_timeout(&socket, HTTP_TIMEOUT).map_err(failed)?;
    stream.set_read_timeout(Some(HTTP_TIMEOUT)).map_err(failed)?;
    stream.set_write_timeout(Some(HTTP_TIMEOUT)).map_err(failed)?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\nAccept: */*\r\n\r\n").map_err(failed)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(failed)?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("GET http://{address}{path}: no end of headers in {answer:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("GET http://{address}{path}: no status in {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// `text` percent-encoded for a URL's query (every byte but the unreserved ones).
pub fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An OpenMetrics exposition (what the controller serves) in Prometheus' text format 0.0.4, the
/// one promtool 2.42's `check metrics` reads: a counter's HELP and TYPE name it with its
/// `_total`, and there is no `# EOF`.
pub fn text_format(openmetrics: &str) -> String {
    let counters: BTreeSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .filter(|name| !name.contains(' '))
        .collect();
    let mut text = String::new();
    for line in openmetrics.lines().filter(|l| *l != "# EOF") {
        let named = ["HELP", "TYPE"].into_iter().find_map(|what| {
            let (name, rest) = line.strip_prefix(&format!("# {what} "))?.split_once(' ')?;
            Some((what, name, rest))
        });
        match named {
            Some((what, name, rest)) if counters.contains(name) => {
                text.push_str(&format!("# {what} {name}_total {rest}\n"))
            }
            _ => text.push_str(&format!("{line}\n")),
        }
    }
    text
}

/// `promtool check metrics` on `exposition` (text format 0.0.4, see [`text_format`]): what it
/// said, one finding a line; `Err` when it could not be run.
pub fn check_metrics(promtool: &Path, exposition: &str) -> Result<Vec<String>, String> {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", promtool.display()))?;
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(exposition.as_bytes())
        .map_err(|e| format!("promtool's stdin: {e}"))?;
    let output = child.wait_with_output().map_err(|e| format!("promtool: {e}"))?;
    let said =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Ok(said.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_named_with_their_total_and_the_eof_goes() {
        let openmetrics = "# HELP gk_jobs Jobs.\n# TYPE gk_jobs counter\ngk_jobs_total{op=\"a\"} 1\n\
                           # HELP gk_leader Leader.\n# TYPE gk_leader gauge\ngk_leader 1\n# EOF\n";
        assert_eq!(
            text_format(openmetrics),
            "# HELP gk_jobs_total Jobs.\n# TYPE gk_jobs_total counter\ngk_jobs_total{op=\"a\"} 1\n\
             # HELP gk_leader Leader.\n# TYPE gk_leader gauge\ngk_leader 1\n"
        );
    }

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(url_encode(r#"up{job="a b"} > 0"#), "up%7Bjob%3D%22a%20b%22%7D%20%3E%200");
    }

    #[test]
    fn the_configuration_scrapes_the_target_and_loads_the_rules() {
        let config = configuration("127.0.0.1:9", &[PathBuf::from("/x/rules.yaml")]);
        assert!(config.contains("- targets: [\"127.0.0.1:9\"]"), "{config}");
        assert!(config.contains("  - \"/x/rules.yaml\"\n"), "{config}");
        assert!(config.contains("evaluation_interval: 1s"), "{config}");
        assert!(config.contains("honor_labels: true"), "{config}");
    }
}
