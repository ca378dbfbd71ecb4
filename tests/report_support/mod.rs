//! Shared by the report tests: a generator of cluster-like object lists.
#![allow(dead_code)]

pub mod fake_api;

use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::{Value, json};

/// One generated "application": a Deployment, its ReplicaSet and pods, in
/// namespace `ns`; every fifth app targets Windows and some carry problems.
fn app(ns: &str, i: usize, pods: usize, out: &mut Vec<Value>) {
    let windows = i.is_multiple_of(5);
    let name = format!("app-{i}");
    let mut spec = json!({
        "containers": [{
            "name": "main",
            "image": if windows { "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022" } else { "nginx:1.27" },
            "ports": [{"containerPort": 80, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "env": [{"name": "APP", "value": name}, {"name": "MODE", "value": "prod"}],
            "volumeMounts": [{"name": "config", "mountPath": if windows { "C:\\config" } else { "/etc/app" }}]
        }],
        "volumes": [{"name": "config", "configMap": {"name": format!("{name}-config")}}],
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "terminationGracePeriodSeconds": 30,
        "serviceAccountName": "default"
    });
    if windows {
        spec["nodeSelector"] = json!({"kubernetes.io/os": "windows"});
        if i.is_multiple_of(10) {
            spec["containers"][0]["securityContext"] =
                json!({"privileged": true, "runAsUser": 1000});
        }
        if i.is_multiple_of(15) {
            spec["containers"][0]["volumeMounts"][0]["subPath"] = json!("app.json");
        }
    }
    let labels = json!({"app": name, "tier": "web"});
    let template = json!({"metadata": {"labels": labels}, "spec": spec});
    let meta = |kind_name: &str, owner: Option<(&str, &str)>| {
        let mut m = json!({
            "name": kind_name, "namespace": ns, "uid": format!("uid-{ns}-{kind_name}"),
            "resourceVersion": "123456", "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": labels, "annotations": {"deployment.kubernetes.io/revision": "3"}
        });
        if let Some((k, n)) = owner {
            m["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": k, "name": n,
                "uid": format!("uid-{ns}-{n}"), "controller": true, "blockOwnerDeletion": true}]);
        }
        m
    };
    out.push(
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(&name, None),
        "spec": {"replicas": pods, "selector": {"matchLabels": labels}, "template": template,
                 "strategy": {"type": "RollingUpdate"}},
        "status": {"replicas": pods, "readyReplicas": pods}}),
    );
    let rs = format!("{name}-5d8f7c9b4");
    out.push(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta(&rs, Some(("Deployment", &name))),
        "spec": {"replicas": pods, "selector": {"matchLabels": labels}, "template": template},
        "status": {"replicas": pods}}));
    for p in 0..pods {
        let pod = format!("{rs}-{p:05}");
        let mut pspec = spec.clone();
        pspec["nodeName"] = json!(format!("node-{}", p % 50));
        out.push(json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta(&pod, Some(("ReplicaSet", &rs))),
            "spec": pspec,
            "status": {"phase": "Running", "podIP": "10.0.0.1", "hostIP": "192.168.0.1",
                       "conditions": [{"type": "Ready", "status": "True"}]}}));
    }
}

/// Writes a `kind: List` of about `n` objects (Deployments, ReplicaSets,
/// Pods over 50 namespaces), controllers before pods as `kubectl get
/// deploy,rs,pods -A -o json` writes them. Returns a description.
pub fn write_cluster_list(path: &Path, n: usize) -> String {
    let mut w = BufWriter::new(std::fs::File::create(path).unwrap());
    w.write_all(b"{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n")
        .unwrap();
    let mut written = 0;
    let mut i = 0;
    let mut first = true;
    let mut buf = Vec::new();
    while written < n {
        buf.clear();
        let ns = format!("team-{}", i % 50);
        app(&ns, i, 3, &mut buf);
        for v in &buf {
            if written == n {
                break;
            }
            if !first {
                w.write_all(b",\n").unwrap();
            }
            first = false;
            serde_json::to_writer_pretty(&mut w, v).unwrap();
            written += 1;
        }
        i += 1;
    }
    w.write_all(b"\n    ],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n")
        .unwrap();
    w.flush().unwrap();
    format!("{i} apps, each a Deployment, a ReplicaSet and 3 Pods, over 50 namespaces")
}
