//! `winadmit audit` run by a test against a real API server
//! (`controlplane.rs`), and the results of the Reports it writes. For any
//! test target (`#[path = "support/audit.rs"] mod audit;` beside
//! `controlplane.rs`):
//! - [`install_report_crds`]: the report CRDs the chart ships
//!   (charts/winadmit/files/crds/, as their projects publish them);
//! - [`Audit::start`]: the audit with an audit pass and a policy check
//!   every 200 ms, [`Audit::start_with_defaults`] with the command's
//!   default intervals; its log lines and its metrics;
//! - [`results`], [`pairs`], [`has`]: the results of a namespace's
//!   openreports.io Reports.

#![allow(dead_code)] // each test target uses a part

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::controlplane::{self, ControlPlane};

pub const BIN: &str = env!("CARGO_BIN_EXE_winadmit");

/// Installs the report CRDs of the chart in `cp` (once per control plane)
/// and waits until they are established.
pub fn install_report_crds(cp: &ControlPlane) {
    let key: &'static str =
        Box::leak(format!("report CRDs in {}", cp.work.display()).into_boxed_str());
    controlplane::once_per::<()>(key).get_or_init(|| {
        let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/winadmit/files/crds");
        cp.kubectl_ok(&["apply", "--server-side", "-f", crds.to_str().unwrap()]);
        for crd in [
            "reports.openreports.io",
            "clusterreports.openreports.io",
            "policyreports.wgpolicyk8s.io",
            "clusterpolicyreports.wgpolicyk8s.io",
        ] {
            cp.kubectl_ok(&[
                "wait",
                "--for",
                "condition=established",
                "--timeout",
                "60s",
                &format!("crd/{crd}"),
            ]);
        }
    });
}

/// A running `winadmit audit`, its log lines kept.
pub struct Audit {
    child: Child,
    metrics: String,
    logs: Arc<Mutex<Vec<String>>>,
}

impl Audit {
    /// The audit of `cp` with `policy`, a pass and a policy check every
    /// 200 ms, and `extra` flags.
    pub fn start(cp: &ControlPlane, policy: &Path, extra: &[&str]) -> Self {
        let fast = [
            "--audit-interval",
            "200ms",
            "--policy-reload-interval",
            "200ms",
        ];
        Self::start_with_defaults(cp, policy, &[&fast[..], extra].concat())
    }

    /// The audit of `cp` with `policy` and `extra` flags, at the command's
    /// default intervals otherwise.
    pub fn start_with_defaults(cp: &ControlPlane, policy: &Path, extra: &[&str]) -> Self {
        Self::start_as(cp, &cp.kubeconfig, policy, extra)
    }

    /// The audit of `cp` as the user of `kubeconfig` (a service account's,
    /// `ControlPlane::service_account_kubeconfig`), at the command's
    /// default intervals but for `extra` flags.
    pub fn start_as(cp: &ControlPlane, kubeconfig: &Path, policy: &Path, extra: &[&str]) -> Self {
        let port = controlplane::free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut child = Command::new(BIN)
            .args(["audit", "--kubeconfig"])
            .arg(kubeconfig)
            .arg("--policy")
            .arg(policy)
            .args([
                "--metrics-listen",
                &listen,
                "--log-format",
                "json",
                "--gmsa",
                "off",
            ])
            .args(extra)
            .env_remove("KUBECONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        cp.adopt(child.id());
        let logs = Arc::new(Mutex::new(Vec::new()));
        for pipe in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let sink = Arc::clone(&logs);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    sink.lock().unwrap().push(line);
                }
            });
        }
        Self {
            child,
            metrics: format!("http://{listen}/metrics"),
            logs,
        }
    }

    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().join("\n")
    }

    /// The process id (for its CPU time and memory in /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The exposition, parsed to (name{labels}, value).
    pub fn metrics(&self) -> Vec<(String, f64)> {
        let Ok(text) = http_get(&self.metrics) else {
            return Vec::new();
        };
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| {
                let (k, v) = l.rsplit_once(' ')?;
                Some((k.to_owned(), v.parse().ok()?))
            })
            .collect()
    }

    /// The sum of metric `name`'s series.
    pub fn metric(&self, name: &str) -> f64 {
        self.metrics()
            .into_iter()
            .filter(|(k, _)| k == name || k.starts_with(&format!("{name}{{")))
            .map(|(_, v)| v)
            .sum()
    }

    /// Sends `signal` (`STOP`, `CONT`) to the process.
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{signal} {}", self.child.id());
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Audit {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A plain HTTP GET (the metrics listener), without a client crate.
pub fn http_get(url: &str) -> std::io::Result<String> {
    use std::io::{Read as _, Write as _};
    let rest = url.strip_prefix("http://").unwrap();
    let (addr, path) = rest.split_once('/').unwrap();
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET /{path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default())
}

/// The results of namespace `ns`'s openreports.io Reports; `None` while
/// it has none.
pub fn results(cp: &ControlPlane, ns: &str) -> Option<Vec<Value>> {
    let out = cp.kubectl(&["get", "reports.openreports.io", "-n", ns, "-o", "json"]);
    if !out.status.success() {
        return None;
    }
    let list: Value = serde_json::from_slice(&out.stdout).ok()?;
    let items = list["items"].as_array()?;
    if items.is_empty() {
        return None;
    }
    Some(
        items
            .iter()
            .flat_map(|r| r["results"].as_array().cloned().unwrap_or_default())
            .collect(),
    )
}

/// (workload name, rule) pairs of `results`, sorted.
pub fn pairs(results: &[Value]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = results
        .iter()
        .map(|r| {
            (
                r["resources"][0]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                r["rule"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Whether `results` hold one of `rule` for workload `workload`.
pub fn has(results: &[Value], workload: &str, rule: &str) -> bool {
    pairs(results)
        .iter()
        .any(|(w, r)| w == workload && r == rule)
}
