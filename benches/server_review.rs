//! Criterion: in-process server time per review, and the decoding choice
//! (purpose-built borrowed envelope + `ObjectView` vs kube's
//! `AdmissionReview<DynamicObject>` vs a `serde_json::Value` tree vs a
//! typed k8s-openapi `Pod`). Numbers: docs/BENCHMARKS.md, "Decoding".

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kube::core::DynamicObject;
use kube::core::admission::AdmissionReview;
use serde::Deserialize;
use serde_json::value::RawValue;
use winadmit::decision::policy::Policy;
use winadmit::decision::view::ObjectView;
use winadmit::entry::admission::{self, Admission, Endpoint};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/admission/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn reviews(c: &mut Criterion) {
    let adm = Admission {
        policy: Policy::default_policy(),
        target: winadmit::decision::cluster::TargetCluster::default(),
        lookup: None,
    };
    let mut g = c.benchmark_group("review");
    for (name, ep) in [
        ("pod-windows-create.json", Endpoint::Validate),
        ("pod-windows-create.json", Endpoint::Mutate),
        ("pod-windows-denied.json", Endpoint::Validate),
        ("pod-windows-fixable.json", Endpoint::Mutate),
        ("deployment-windows-create.json", Endpoint::Validate),
        ("pod-linux-create.json", Endpoint::Validate),
        ("pod-windows-create-20k.json", Endpoint::Validate),
        ("pod-update-30k.json", Endpoint::Validate),
    ] {
        let body = fixture(name);
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_function(format!("{}/{name}", ep.as_str()), |b| {
            b.iter(|| admission::review(&adm, ep, black_box(&body)).unwrap());
        });
    }
    g.finish();
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    request: Request<'a>,
}

#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow)]
    object: &'a RawValue,
}

#[derive(Deserialize)]
struct OnePass<'a> {
    #[serde(borrow)]
    request: OnePassRequest<'a>,
}

#[derive(Deserialize)]
struct OnePassRequest<'a> {
    #[serde(borrow)]
    object: ObjectView<'a>,
}

#[derive(Deserialize)]
struct TypedEnvelope {
    request: TypedRequest,
}

#[derive(Deserialize)]
struct TypedRequest {
    object: Pod,
}

fn decoding(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode");
    for name in ["pod-windows-create.json", "pod-update-30k.json"] {
        let body = fixture(name);
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_function(format!("raw-envelope+ObjectView/{name}"), |b| {
            b.iter(|| {
                let e: Envelope<'_> = serde_json::from_slice(black_box(&body)).unwrap();
                let v: ObjectView<'_> = serde_json::from_str(e.request.object.get()).unwrap();
                black_box(v.spec.is_some())
            });
        });
        g.bench_function(format!("one-pass-envelope-with-ObjectView/{name}"), |b| {
            b.iter(|| {
                let e: OnePass<'_> = serde_json::from_slice(black_box(&body)).unwrap();
                black_box(e.request.object.spec.is_some())
            });
        });
        g.bench_function(format!("kube-AdmissionReview<DynamicObject>/{name}"), |b| {
            b.iter(|| {
                let r: AdmissionReview<DynamicObject> =
                    serde_json::from_slice(black_box(&body)).unwrap();
                black_box(r.request.is_some())
            });
        });
        g.bench_function(format!("serde_json::Value/{name}"), |b| {
            b.iter(|| {
                let v: serde_json::Value = serde_json::from_slice(black_box(&body)).unwrap();
                black_box(v.is_object())
            });
        });
        g.bench_function(format!("k8s-openapi-Pod/{name}"), |b| {
            b.iter(|| {
                let v: TypedEnvelope = serde_json::from_slice(black_box(&body)).unwrap();
                black_box(v.request.object.spec.is_some())
            });
        });
    }
    g.finish();
}

criterion_group!(benches, reviews, decoding);
criterion_main!(benches);
