//! Criterion benchmarks of the decision and of lint throughput.
//!
//! `cargo bench --bench engine`. Numbers and method: docs/BENCHMARKS.md.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use winadmit::decision::engine::{Context, evaluate};
use winadmit::decision::policy::Policy;
use winadmit::decision::view::ObjectView;
use winadmit::decision::workload::Workload;
use winadmit::entry::lint::lint_text;
use winadmit::render::LintReport;

/// A defaulted Windows pod as the API server sends it (~3 KB of JSON).
const WINDOWS_POD: &str = include_str!("../tests/fixtures/bench/windows-pod.json");
const LINUX_POD: &str = include_str!("../tests/fixtures/bench/linux-pod.json");

fn wide_pod(containers: usize) -> String {
    let c: Vec<String> = (0..containers)
        .map(|i| {
            format!(
                r#"{{"name":"c{i}","image":"mcr.microsoft.com/windows/servercore:ltsc2022","securityContext":{{"runAsNonRoot":true,"windowsOptions":{{"runAsUserName":"ContainerUser"}}}},"volumeMounts":[{{"name":"data","mountPath":"C:\\data{i}"}}],"resources":{{"limits":{{"memory":"1Gi","cpu":"1"}}}},"terminationMessagePath":"/dev/termination-log"}}"#
            )
        })
        .collect();
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"wide","namespace":"bench"}},"spec":{{"nodeSelector":{{"kubernetes.io/os":"windows"}},"containers":[{}],"volumes":[{{"name":"data","emptyDir":{{}}}}]}}}}"#,
        c.join(",")
    )
}

fn decision(c: &mut Criterion) {
    let policy = Policy::default_policy();
    let cx = Context::default();
    let mut group = c.benchmark_group("decision");
    for (name, json) in [
        ("windows_pod", WINDOWS_POD.to_owned()),
        ("linux_pod", LINUX_POD.to_owned()),
        ("windows_pod_50_containers", wide_pod(50)),
    ] {
        let view: ObjectView<'_> = serde_json::from_str(&json).unwrap();
        let workload = Workload::from_view(&view).unwrap();
        group.bench_function(name, |b| {
            b.iter(|| evaluate(black_box(&policy), black_box(&workload), &cx));
        });
        group.bench_function(format!("{name}_parse_and_decide"), |b| {
            b.iter(|| {
                let view: ObjectView<'_> = serde_json::from_str(black_box(&json)).unwrap();
                let w = Workload::from_view(&view).unwrap();
                evaluate(&policy, &w, &cx).findings.len()
            });
        });
    }
    group.finish();
}

/// 10,000 generated manifests: a mix of Windows Deployments (some with
/// findings), Linux Deployments and Services, as one multi-document stream.
fn generated_manifests(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        match i % 4 {
            0 => out.push_str(&format!("---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: win-{i}\n  namespace: team-{}\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: win-{i}}}\n  template:\n    metadata:\n      labels: {{app: win-{i}}}\n    spec:\n      nodeSelector:\n        kubernetes.io/os: windows\n      containers:\n      - name: web\n        image: mcr.microsoft.com/windows/servercore/iis:ltsc2022\n        ports:\n        - containerPort: 80\n        resources:\n          limits: {{cpu: '1', memory: 1Gi}}\n", i % 17)),
            1 => out.push_str(&format!("---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: win-bad-{i}\nspec:\n  template:\n    spec:\n      nodeSelector:\n        kubernetes.io/os: windows\n      containers:\n      - name: web\n        image: mcr.microsoft.com/windows/nanoserver:ltsc2022\n        securityContext:\n          runAsUser: 1000\n        volumeMounts:\n        - name: cfg\n          mountPath: C:\\cfg\\a.json\n          subPath: a.json\n      volumes:\n      - name: cfg\n        configMap:\n          name: cfg\n")),
            2 => out.push_str(&format!("---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: linux-{i}\nspec:\n  template:\n    spec:\n      nodeSelector:\n        kubernetes.io/os: linux\n      containers:\n      - name: nginx\n        image: nginx:1.27\n        securityContext:\n          runAsUser: 101\n          capabilities:\n            drop: [ALL]\n")),
            _ => out.push_str(&format!("---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc-{i}\nspec:\n  selector:\n    app: win-{i}\n  ports:\n  - port: 80\n")),
        }
    }
    out
}

fn lint_throughput(c: &mut Criterion) {
    let policy = Policy::default_policy();
    let cx = Context::default();
    let text = generated_manifests(10_000);
    let mut group = c.benchmark_group("lint");
    group.throughput(Throughput::Elements(10_000));
    group.sample_size(10);
    group.bench_function("10000_manifests", |b| {
        b.iter(|| {
            let mut report = LintReport::default();
            lint_text("bench.yaml", black_box(&text), &policy, &cx, &mut report);
            assert_eq!(
                report.summary.objects,
                10_000,
                "{:?}",
                report.input_errors.first()
            );
            report.summary.errors
        });
    });
    group.finish();
}

criterion_group!(benches, decision, lint_throughput);
criterion_main!(benches);
