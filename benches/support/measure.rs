//! What the benchmarks through a real kube-apiserver measure with: the CPU
//! time and resident memory of a process, the API server's process, open
//! connections, percentiles and medians, and the machine they ran on.
//! Used by `benches/admission_latency.rs` and `benches/concurrent_creates.rs`.

#![allow(dead_code)] // each benchmark uses a part

use std::process::Command;
use std::time::Duration;

/// Resident memory of a process, in MiB.
pub fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// CPU time (user + system, all threads) `pid` has used, in milliseconds,
/// from /proc/PID/stat (clock ticks of 10 ms).
pub fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after "(comm)": state is the first, utime the 12th, stime the 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => (user + system) * 10.0,
        _ => f64::NAN,
    }
}

/// The kube-apiserver serving on `port`, found by its command line.
pub fn apiserver_pid(port: u16) -> u32 {
    let flag = format!("--secure-port={port}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            cmdline.contains("kube-apiserver") && cmdline.split('\0').any(|a| a == flag)
        })
        .expect("the control plane's kube-apiserver process")
}

/// Established TCP connections to `port` on this machine, from
/// /proc/net/tcp: after thousands of creates, 1 means the API server keeps
/// one connection alive and, with 8 concurrent clients, multiplexes them
/// (HTTP/2); HTTP/1.1 would need one connection per request in flight.
pub fn connections_to(port: u16) -> usize {
    let local = format!(":{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(&local) && f[3] == "01"
        })
        .count()
}

pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    if xs.is_empty() {
        return f64::NAN;
    }
    let mid = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[mid]
    } else {
        f64::midpoint(xs[mid - 1], xs[mid])
    }
}

/// The machine: cores and CPU model.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    format!("{cores} cores ({cpu})")
}

/// Today's date (UTC), as the tables give it.
pub fn today() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}
