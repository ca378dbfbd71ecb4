//! Image facts from a real registry: Debian's `docker-registry` (the CNCF
//! distribution registry), started on loopback by each test, once plain
//! HTTP and once with TLS and basic auth. The tests push small synthetic
//! images through the registry API, then run the real binary:
//! `winadmit images resolve` writes the facts, and `lint --registry` gives
//! the same findings as `lint --image-facts` with that file. A registry
//! that is stopped, answers 401 or 404, or never answers fails open: the
//! finding says the fact is unknown and why.
//!
//! Without `docker-registry` and `htpasswd` on PATH these tests are
//! ignored (build.rs), unless `WINADMIT_REQUIRE_REGISTRY` is set (CI).

#![cfg_attr(no_registry, allow(dead_code, unused_imports))]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::binary::winadmit;
use crate::registry_support;
use registry_support::{FakeRegistry, Registry, push_images};

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// Pods that use the pushed images: a Windows pod per image, an
/// untargeted pod with the Windows-only image, a pod that selects
/// 10.0.20348 with the 10.0.17763-only image.
fn pods(dir: &Path, host: &str) -> PathBuf {
    let mut docs = Vec::new();
    for (name, image) in [
        ("multi", "multi:1"),
        ("linuxonly", "linuxonly:1"),
        ("armonly", "armonly:1"),
        ("missing", "missing:1"),
    ] {
        docs.push(format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n  containers:\n  - name: c\n    image: {host}/{image}\n"
        ));
    }
    docs.push(format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: unpinned\nspec:\n  containers:\n  - name: c\n    image: {host}/winonly:1\n"
    ));
    docs.push(format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: old\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n    node.kubernetes.io/windows-build: '10.0.20348'\n  containers:\n  - name: c\n    image: {host}/wincfg:1\n"
    ));
    let path = dir.join("pods.yaml");
    std::fs::write(&path, docs.join("---\n")).unwrap();
    path
}

/// (object, rule, field, message) of every finding of a JSON lint.
fn findings(out: &Output) -> Vec<(String, String, String, String)> {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let mut list: Vec<_> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap_or_default().to_owned(),
                f["rule"].as_str().unwrap().to_owned(),
                f["field"].as_str().unwrap().to_owned(),
                f["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    list.sort();
    list
}

/// (object, rule, field, message) of every finding of a JSON report.
fn report_findings(out: &Output) -> Vec<(String, String, String, String)> {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let mut list = Vec::new();
    for o in v["objects"].as_array().unwrap() {
        for f in o["findings"].as_array().unwrap() {
            list.push((
                o["name"].as_str().unwrap_or_default().to_owned(),
                f["rule"].as_str().unwrap().to_owned(),
                f["field"].as_str().unwrap().to_owned(),
                f["message"].as_str().unwrap().to_owned(),
            ));
        }
    }
    list.sort();
    list
}

/// The pods of `pods.yaml` as a JSON `List` (`kubectl get -o json`'s
/// shape), for the report's JSON reader.
fn pods_json(yaml: &Path) -> PathBuf {
    let items: Vec<Value> =
        serde_saphyr::from_multiple::<Value>(&std::fs::read_to_string(yaml).unwrap()).unwrap();
    let path = yaml.with_extension("json");
    std::fs::write(
        &path,
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    )
    .unwrap();
    path
}

fn rule_on<'a>(
    list: &'a [(String, String, String, String)],
    object: &str,
    rule: &str,
) -> Option<&'a str> {
    list.iter()
        .find(|f| f.0 == object && f.1 == rule)
        .map(|f| f.3.as_str())
}

/// `images resolve`, then `lint --registry` and `lint --image-facts`
/// with its file; checks what the facts decide.
fn resolve_and_lint(registry: &Registry, digests: &BTreeMap<String, String>) {
    let host = &registry.host;
    let facts = registry.path("facts.json");
    let mut args = strings(&["images", "resolve", "-o", &facts]);
    args.extend(registry.flags());
    args.extend(digests.keys().cloned());
    let missing = format!("{host}/missing:1");
    args.push(missing.clone());
    let out = winadmit(&args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "one image is missing: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let known = winadmit::input::facts::read(Path::new(&facts)).unwrap();
    for (image, digest) in digests {
        let f = known
            .facts(image)
            .unwrap_or_else(|| panic!("{image}: {:?}", known.get(image)));
        assert_eq!(f.digest.as_deref(), Some(digest.as_str()), "{image}");
    }
    let multi = known.facts(&format!("{host}/multi:1")).unwrap();
    assert_eq!(
        multi.platform_list(),
        "windows/amd64 10.0.17763.5830, windows/amd64 10.0.20348.2527, linux/amd64"
    );
    let wincfg = known.facts(&format!("{host}/wincfg:1")).unwrap();
    assert_eq!(wincfg.platform_list(), "windows/amd64 10.0.17763.1");
    assert_eq!(
        known
            .facts(&format!("{host}/armonly:1"))
            .unwrap()
            .platform_list(),
        "linux/arm64/v8"
    );
    match known.get(&missing) {
        Some(winadmit::decision::images::Lookup::Unknown(why)) => {
            assert!(why.contains("404"), "{why}");
        }
        other => panic!("{other:?}"),
    }

    let pods = pods(registry.dir.path(), host);
    let pods = pods.to_str().unwrap();
    let mut live = strings(&["lint", "--format", "json", "--registry"]);
    live.extend(registry.flags());
    live.push(pods.into());
    let live = findings(&winadmit(&live));
    let file = findings(&winadmit(&strings(&[
        "lint",
        "--format",
        "json",
        "--image-facts",
        &facts,
        pods,
    ])));
    assert_eq!(live, file, "lint --registry and lint --image-facts differ");

    // `report --from-file --registry`, from YAML and from a JSON List: what
    // lint finds, and what the facts file gives the report.
    let json = pods_json(Path::new(pods));
    for input in [pods, json.to_str().unwrap()] {
        let mut args = strings(&[
            "report",
            "--format",
            "json",
            "--quiet",
            "--registry",
            "--from-file",
            input,
        ]);
        args.extend(registry.flags());
        let out = winadmit(&args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{input}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let reported = report_findings(&out);
        assert_eq!(
            reported, live,
            "report --registry and lint --registry differ ({input})"
        );
        let from_file = report_findings(&winadmit(&strings(&[
            "report",
            "--format",
            "json",
            "--quiet",
            "--image-facts",
            &facts,
            "--from-file",
            input,
        ])));
        assert_eq!(
            from_file, reported,
            "report --image-facts and report --registry differ ({input})"
        );
    }

    let linux = rule_on(&live, "linuxonly", "WIN-LINUX-IMAGE").expect("linux-only image");
    assert!(
        linux.contains("has platforms linux/amd64, linux/arm64/v8: no Windows variant"),
        "{linux}"
    );
    assert!(rule_on(&live, "armonly", "WIN-LINUX-IMAGE").is_some());
    assert!(rule_on(&live, "multi", "WIN-LINUX-IMAGE").is_none());
    assert!(rule_on(&live, "unpinned", "WIN-IMAGE-WINDOWS-ONLY").is_some());
    let old = rule_on(&live, "old", "WIN-BUILD-NODE-MISMATCH").expect("ltsc2019-only image");
    assert!(old.contains("10.0.17763 (ltsc2019) only"), "{old}");
    let unknown = rule_on(&live, "missing", "WIN-IMAGE-FACTS-UNKNOWN").expect("missing image");
    assert!(unknown.contains("404"), "{unknown}");
}

#[test]
#[cfg_attr(
    no_registry,
    ignore = "needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils); CI sets WINADMIT_REQUIRE_REGISTRY"
)]
fn plain_registry_facts_resolve_and_lint_alike() {
    let mut registry = Registry::start(false);
    let digests = push_images(&registry);
    resolve_and_lint(&registry, &digests);

    // A stopped registry fails open: the images are judged by their names,
    // and the finding says why their facts are unknown.
    registry.stop();
    let pods = registry.dir.path().join("pods.yaml");
    let mut args = strings(&["lint", "--format", "json", "--registry"]);
    args.extend(registry.flags());
    args.push(pods.display().to_string());
    let out = winadmit(&args);
    let list = findings(&out);
    let unknown: Vec<_> = list
        .iter()
        .filter(|f| f.1 == "WIN-IMAGE-FACTS-UNKNOWN")
        .collect();
    assert_eq!(unknown.len(), 6, "{list:?}");
    assert!(
        !list
            .iter()
            .any(|f| f.1 == "WIN-IMAGE-WINDOWS-ONLY" || f.1 == "WIN-BUILD-NODE-MISMATCH"),
        "no verdict from facts nobody could learn: {list:?}"
    );
    assert_eq!(out.status.code(), Some(0), "{list:?}");

    // So does `report --registry`: exit 0, never 2, and the same findings.
    let mut args = strings(&["report", "--format", "json", "--quiet", "--registry"]);
    args.extend(registry.flags());
    args.extend(["--from-file".to_owned(), pods.display().to_string()]);
    let out = winadmit(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report_findings(&out), list);
}

#[test]
#[cfg_attr(
    no_registry,
    ignore = "needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils); CI sets WINADMIT_REQUIRE_REGISTRY"
)]
fn tls_registry_with_basic_auth() {
    let registry = Registry::start(true);
    let digests = push_images(&registry);
    resolve_and_lint(&registry, &digests);

    // Without the credentials: 401, so unknown, and no denial.
    let image = format!("{}/linuxonly:1", registry.host);
    let out = winadmit(&strings(&[
        "images",
        "resolve",
        "--registry-ca",
        &registry.path("ca.pem"),
        &image,
    ]));
    assert_eq!(out.status.code(), Some(1));
    let known =
        winadmit::decision::images::KnownImages::parse(&String::from_utf8_lossy(&out.stdout))
            .unwrap();
    match known.get(&image) {
        Some(winadmit::decision::images::Lookup::Unknown(why)) => {
            assert!(
                why.contains("401") || why.to_lowercase().contains("auth"),
                "{why}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// A registry that accepts connections and never answers: the lookup
/// gives up at its deadline and the image is judged by its name. (A fake:
/// the real registry cannot be made to hang.)
#[test]
fn a_registry_that_never_answers_is_unknown_past_the_deadline() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let host = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    let held = std::thread::spawn(move || {
        // Accept and hold connections until the test ends.
        let mut open = Vec::new();
        for stream in listener.incoming().take(4) {
            open.push(stream);
        }
        std::thread::sleep(Duration::from_secs(5));
    });
    let image = format!("{host}/hangs:1");
    let out = winadmit(&strings(&[
        "images",
        "resolve",
        "--insecure-registry",
        &host,
        "--registry-timeout",
        "0.5",
        &image,
    ]));
    assert_eq!(out.status.code(), Some(1));
    let known =
        winadmit::decision::images::KnownImages::parse(&String::from_utf8_lossy(&out.stdout))
            .unwrap();
    match known.get(&image) {
        Some(winadmit::decision::images::Lookup::Unknown(why)) => {
            // The words of every unreachable registry: silence reads as a
            // closed port does.
            assert!(
                why.contains("unreachable: no connection, TLS session or answer in time"),
                "{why}"
            );
        }
        other => panic!("{other:?}"),
    }
    drop(held);
}

/// 429 Too Many Requests and a malformed image index fail open in `lint
/// --registry`: the pods pass, and the finding says why the facts are
/// unknown. (A fake: the real registry gives neither.)
#[test]
fn rate_limited_and_malformed_images_are_unknown_in_lint() {
    let fake = FakeRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    let mut docs = Vec::new();
    for name in ["limited", "malformed"] {
        docs.push(format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n  containers:\n  - name: c\n    image: {}/{name}:1\n",
            fake.host
        ));
    }
    let pods = dir.path().join("pods.yaml");
    std::fs::write(&pods, docs.join("---\n")).unwrap();
    let out = winadmit(&strings(&[
        "lint",
        "--format",
        "json",
        "--registry",
        "--insecure-registry",
        &fake.host,
        pods.to_str().unwrap(),
    ]));
    let list = findings(&out);
    assert_eq!(out.status.code(), Some(0), "{list:?}");
    let limited = rule_on(&list, "limited", "WIN-IMAGE-FACTS-UNKNOWN").expect("429");
    assert!(limited.contains("429 Too Many Requests"), "{limited}");
    let malformed = rule_on(&list, "malformed", "WIN-IMAGE-FACTS-UNKNOWN").expect("malformed");
    assert!(malformed.contains("malformed manifest"), "{malformed}");
}

/// `--registry-mirror`: images are looked up at the mirror first (under
/// its path), at the registry itself when the mirror does not have them or
/// is down, and a lookup that fails at both says why at each.
#[test]
#[cfg_attr(
    no_registry,
    ignore = "needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils); CI sets WINADMIT_REQUIRE_REGISTRY"
)]
fn mirrors_are_asked_first_and_the_registry_after_them() {
    let mut upstream = Registry::start(false);
    push_images(&upstream);
    let mut mirror = Registry::start(false);
    // The mirror's copy of linuxonly:1 differs from the registry's (amd64
    // only), so the facts say who answered.
    let (client, auth) = mirror.client();
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        registry_support::push_index(
            &client,
            &auth,
            &mirror.host,
            "cache/linuxonly",
            "1",
            &[registry_support::plat("linux", "amd64", None)],
        )
        .await
    });
    let up = upstream.host.clone();
    let mirror_host = mirror.host.clone();
    let resolve = |images: &[String]| {
        let mut args = strings(&[
            "images",
            "resolve",
            "--registry-timeout",
            "10",
            "--insecure-registry",
            &up,
            "--registry-mirror",
            &format!("{up}=http://{mirror_host}/cache"),
        ]);
        args.extend(images.iter().cloned());
        let out = winadmit(&args);
        let known =
            winadmit::decision::images::KnownImages::parse(&String::from_utf8_lossy(&out.stdout))
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), known)
    };
    let linux = format!("{up}/linuxonly:1");
    let windows = format!("{up}/winonly:1");
    let platforms = |known: &winadmit::decision::images::KnownImages, image: &str| {
        known
            .facts(image)
            .unwrap_or_else(|| panic!("{image}: {:?}", known.get(image)))
            .platform_list()
    };

    // The mirror has linuxonly:1 (its copy answers), not winonly:1 (the
    // registry answers).
    let (code, known) = resolve(&[linux.clone(), windows.clone()]);
    assert_eq!(code, Some(0));
    assert_eq!(platforms(&known, &linux), "linux/amd64");
    assert_eq!(platforms(&known, &windows), "windows/amd64 10.0.20348.2527");

    // The mirror is down: the registry answers.
    mirror.stop();
    let (code, known) = resolve(std::slice::from_ref(&linux));
    assert_eq!(code, Some(0));
    assert_eq!(platforms(&known, &linux), "linux/amd64, linux/arm64/v8");

    // The registry is down too: unknown, and the reason names both.
    upstream.stop();
    let (code, known) = resolve(std::slice::from_ref(&linux));
    assert_eq!(code, Some(1));
    match known.get(&linux) {
        Some(winadmit::decision::images::Lookup::Unknown(why)) => assert!(
            why.contains(&format!("registry {up}:"))
                && why.contains(&format!("after mirror {mirror_host}:")),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }

    // A mirror that is not HOST=MIRROR is a usage error.
    let out = winadmit(&strings(&[
        "images",
        "resolve",
        "--registry-mirror",
        "mirror.example",
        "nginx:1.27",
    ]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--registry-mirror \"mirror.example\": expected HOST=MIRROR"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
