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
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use oci_client::manifest::{
    ImageIndexEntry, OCI_IMAGE_INDEX_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor,
    OciImageIndex, OciImageManifest, Platform,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::{Value, json};
use sha2::Digest as _;

const USER: &str = "winadmit";
const PASSWORD: &str = "s3cret-pass";

/// A `docker-registry serve` process on a loopback port, stopped (killed
/// and reaped) when dropped, even after a failed assertion.
struct Registry {
    child: Option<Child>,
    /// `host:port` as images name it.
    host: String,
    dir: tempfile::TempDir,
    secure: bool,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl Registry {
    /// Plain HTTP and anonymous, or (`secure`) TLS with a CA of its own
    /// and basic auth from an htpasswd file.
    fn start(secure: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let p = |name: &str| dir.path().join(name).display().to_string();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            p("data")
        );
        let host = if secure {
            let bundle =
                winadmit::certs::generate("localhost", "test", time::OffsetDateTime::now_utc(), 1)
                    .unwrap();
            std::fs::write(p("ca.pem"), &bundle.ca_pem).unwrap();
            std::fs::write(
                p("cert.pem"),
                format!("{}{}", bundle.cert_pem, bundle.ca_pem),
            )
            .unwrap();
            std::fs::write(p("key.pem"), &bundle.key_pem).unwrap();
            let htpasswd = Command::new("htpasswd")
                .args(["-Bbn", USER, PASSWORD])
                .output()
                .expect("runs htpasswd (Debian package apache2-utils)");
            assert!(htpasswd.status.success(), "{htpasswd:?}");
            std::fs::write(p("htpasswd"), &htpasswd.stdout).unwrap();
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\nauth:\n  htpasswd:\n    realm: winadmit-test\n    path: {}\n",
                p("cert.pem"),
                p("key.pem"),
                p("htpasswd")
            ));
            let host = format!("localhost:{port}");
            let auth =
                base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
            std::fs::write(
                p("config.json"),
                json!({"auths": {&host: {"auth": auth}}}).to_string(),
            )
            .unwrap();
            host
        } else {
            format!("127.0.0.1:{port}")
        };
        std::fs::write(p("config.yml"), config).unwrap();
        let log = std::fs::File::create(p("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .args(["serve", &p("config.yml")])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starts docker-registry (Debian package docker-registry)");
        let mut registry = Self {
            child: Some(child),
            host,
            dir,
            secure,
        };
        registry.wait_until_listening(port);
        registry
    }

    /// Readiness, not timing: the port accepts connections, or the
    /// process has ended (its log says why).
    fn wait_until_listening(&mut self, port: u16) {
        let give_up = Instant::now() + Duration::from_secs(60);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return;
            }
            let exited = self.child.as_mut().unwrap().try_wait().unwrap();
            assert!(
                exited.is_none() && Instant::now() < give_up,
                "docker-registry did not start ({exited:?}):\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The flags that reach this registry.
    fn flags(&self) -> Vec<String> {
        if self.secure {
            vec![
                "--registry-ca".into(),
                self.path("ca.pem"),
                "--registry-config".into(),
                self.path("config.json"),
            ]
        } else {
            vec!["--insecure-registry".into(), self.host.clone()]
        }
    }

    fn client(&self) -> (Client, RegistryAuth) {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = oci_client::client::ClientConfig::default();
        if self.secure {
            config.extra_root_certificates = vec![oci_client::client::Certificate {
                encoding: oci_client::client::CertificateEncoding::Pem,
                data: std::fs::read(self.path("ca.pem")).unwrap(),
            }];
        } else {
            config.protocol =
                oci_client::client::ClientProtocol::HttpsExcept(vec![self.host.clone()]);
        }
        let auth = if self.secure {
            RegistryAuth::Basic(USER.into(), PASSWORD.into())
        } else {
            RegistryAuth::Anonymous
        };
        (Client::new(config), auth)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex(&sha2::Sha256::digest(data)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One platform of a synthetic image.
#[derive(Clone, Copy)]
struct Plat {
    os: &'static str,
    arch: &'static str,
    variant: Option<&'static str>,
    version: Option<&'static str>,
}

const fn plat(os: &'static str, arch: &'static str, version: Option<&'static str>) -> Plat {
    Plat {
        os,
        arch,
        variant: None,
        version,
    }
}

/// Pushes a config blob, a layer blob and an image manifest for `p`
/// (tagged `tag`, or by digest); its descriptor.
async fn push_manifest(
    client: &Client,
    auth: &RegistryAuth,
    host: &str,
    repo: &str,
    tag: Option<&str>,
    p: Plat,
) -> (String, i64) {
    let layer = format!("synthetic layer {repo} {} {}", p.os, p.arch).into_bytes();
    let mut config = json!({
        "architecture": p.arch, "os": p.os,
        "rootfs": {"type": "layers", "diff_ids": [sha256(&layer)]},
        "config": {}
    });
    if let Some(v) = p.version {
        config["os.version"] = json!(v);
    }
    if let Some(v) = p.variant {
        config["variant"] = json!(v);
    }
    let config = serde_json::to_vec(&config).unwrap();
    let blob_ref = Reference::with_tag(host.into(), repo.into(), "blobs".into());
    client
        .store_auth_if_needed(blob_ref.resolve_registry(), auth)
        .await;
    for data in [&config, &layer] {
        client
            .push_blob(&blob_ref, data.clone(), &sha256(data))
            .await
            .unwrap();
    }
    let descriptor = |media: &str, data: &[u8]| OciDescriptor {
        media_type: media.into(),
        digest: sha256(data),
        size: i64::try_from(data.len()).unwrap(),
        urls: None,
        annotations: None,
        artifact_type: None,
    };
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.into()),
        config: descriptor("application/vnd.oci.image.config.v1+json", &config),
        layers: vec![descriptor("application/vnd.oci.image.layer.v1.tar", &layer)],
        subject: None,
        artifact_type: None,
        annotations: None,
    };
    let body = serde_json::to_vec(&manifest).unwrap();
    let digest = sha256(&body);
    let reference = match tag {
        Some(t) => Reference::with_tag(host.into(), repo.into(), t.into()),
        None => Reference::with_digest(host.into(), repo.into(), digest.clone()),
    };
    client
        .push_manifest_raw(
            &reference,
            body.clone(),
            http::HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE),
        )
        .await
        .unwrap();
    (digest, i64::try_from(body.len()).unwrap())
}

/// Pushes an image index `repo:tag` of one manifest per platform; its
/// digest.
async fn push_index(
    client: &Client,
    auth: &RegistryAuth,
    host: &str,
    repo: &str,
    tag: &str,
    platforms: &[Plat],
) -> String {
    let mut manifests = Vec::new();
    for p in platforms {
        let (digest, size) = push_manifest(client, auth, host, repo, None, *p).await;
        let platform: Platform = serde_json::from_value(json!({
            "os": p.os, "architecture": p.arch,
            "variant": p.variant, "os.version": p.version,
        }))
        .unwrap();
        manifests.push(ImageIndexEntry {
            media_type: OCI_IMAGE_MEDIA_TYPE.into(),
            digest,
            size,
            platform: Some(platform),
            annotations: None,
            artifact_type: None,
        });
    }
    let index = OciImageIndex {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_INDEX_MEDIA_TYPE.into()),
        manifests,
        artifact_type: None,
        annotations: None,
    };
    let body = serde_json::to_vec(&index).unwrap();
    client
        .push_manifest_raw(
            &Reference::with_tag(host.into(), repo.into(), tag.into()),
            body.clone(),
            http::HeaderValue::from_static(OCI_IMAGE_INDEX_MEDIA_TYPE),
        )
        .await
        .unwrap();
    sha256(&body)
}

/// The synthetic images, pushed; the digest of each reference.
fn push_images(registry: &Registry) -> BTreeMap<String, String> {
    let (client, auth) = registry.client();
    let host = registry.host.clone();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut digests = BTreeMap::new();
        let arm = Plat {
            variant: Some("v8"),
            ..plat("linux", "arm64", None)
        };
        for (repo, platforms) in [
            (
                "multi",
                vec![
                    plat("windows", "amd64", Some("10.0.17763.5830")),
                    plat("windows", "amd64", Some("10.0.20348.2527")),
                    plat("linux", "amd64", None),
                ],
            ),
            ("linuxonly", vec![plat("linux", "amd64", None), arm]),
            (
                "winonly",
                vec![plat("windows", "amd64", Some("10.0.20348.2527"))],
            ),
            ("armonly", vec![arm]),
        ] {
            let digest = push_index(&client, &auth, &host, repo, "1", &platforms).await;
            digests.insert(format!("{host}/{repo}:1"), digest);
        }
        let (digest, _) = push_manifest(
            &client,
            &auth,
            &host,
            "wincfg",
            Some("1"),
            plat("windows", "amd64", Some("10.0.17763.1")),
        )
        .await;
        digests.insert(format!("{host}/wincfg:1"), digest);
        digests
    })
}

fn winadmit(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args(args)
        .env_remove("WINADMIT_POLICY")
        .env("NO_COLOR", "1")
        .output()
        .expect("runs winadmit")
}

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
    let known = winadmit::images::KnownImages::read(Path::new(&facts)).unwrap();
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
        Some(winadmit::images::Lookup::Unknown(why)) => assert!(why.contains("404"), "{why}"),
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
        winadmit::images::KnownImages::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    match known.get(&image) {
        Some(winadmit::images::Lookup::Unknown(why)) => {
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
        winadmit::images::KnownImages::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    match known.get(&image) {
        Some(winadmit::images::Lookup::Unknown(why)) => {
            assert!(why.contains("no answer within 0.5s"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    drop(held);
}
