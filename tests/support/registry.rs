//! A real OCI registry for the tests: Debian's `docker-registry` (the CNCF
//! distribution registry) on loopback, plain HTTP or TLS with basic auth,
//! and small synthetic images pushed through the registry API; plus a
//! fake registry for the answers the real one cannot be made to give
//! (429, a malformed manifest).
#![allow(dead_code)] // each test target uses a part

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use oci_client::manifest::{
    ImageIndexEntry, OCI_IMAGE_INDEX_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor,
    OciImageIndex, OciImageManifest, Platform,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::json;
use sha2::Digest as _;

pub const USER: &str = "winadmit";
pub const PASSWORD: &str = "s3cret-pass";

/// A `docker-registry serve` process on a loopback port, stopped (killed
/// and reaped) when dropped, even after a failed assertion.
pub struct Registry {
    child: Option<Child>,
    /// `host:port` as images name it.
    pub host: String,
    pub dir: tempfile::TempDir,
    pub secure: bool,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl Registry {
    /// Plain HTTP and anonymous, or (`secure`) TLS with a CA of its own
    /// and basic auth from an htpasswd file.
    pub fn start(secure: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let p = |name: &str| dir.path().join(name).display().to_string();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            p("data")
        );
        let host = if secure {
            let bundle = winadmit::entry::certs::generate(
                "localhost",
                "test",
                time::OffsetDateTime::now_utc(),
                1,
            )
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

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// Stops the process where it is (SIGSTOP): it keeps its port, the
    /// kernel accepts connections, and nothing answers until
    /// [`Registry::resume`]. A registry that hangs, for real.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a paused registry go on (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, which: &str) {
        let pid = self.child.as_ref().expect("the registry runs").id();
        let ok = Command::new("kill")
            .args([which, &pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {which} {pid}");
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A paused process is killed as well; let it go first.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The flags that reach this registry.
    pub fn flags(&self) -> Vec<String> {
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

    pub fn client(&self) -> (Client, RegistryAuth) {
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

pub fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex(&sha2::Sha256::digest(data)))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One platform of a synthetic image.
#[derive(Clone, Copy)]
pub struct Plat {
    pub os: &'static str,
    pub arch: &'static str,
    pub variant: Option<&'static str>,
    pub version: Option<&'static str>,
}

pub const fn plat(os: &'static str, arch: &'static str, version: Option<&'static str>) -> Plat {
    Plat {
        os,
        arch,
        variant: None,
        version,
    }
}

/// Pushes a config blob, a layer blob and an image manifest for `p`
/// (tagged `tag`, or by digest); its descriptor.
pub async fn push_manifest(
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
pub async fn push_index(
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
pub fn push_images(registry: &Registry) -> BTreeMap<String, String> {
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

/// A fake registry (plain HTTP on loopback) for the answers the real one
/// cannot be made to give: every manifest of repository `limited` is
/// answered 429 Too Many Requests, every manifest of `malformed` with an
/// image index that is not one. Its thread lives as long as the test.
pub struct FakeRegistry {
    /// `host:port` as images name it.
    pub host: String,
}

impl FakeRegistry {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                std::thread::spawn(move || answer(stream));
            }
        });
        Self { host }
    }
}

fn answer(mut stream: std::net::TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" => break,
            Ok(_) => {}
        }
    }
    let path = first.split_whitespace().nth(1).unwrap_or("/");
    let (status, media, body) = if path.starts_with("/v2/limited/") {
        (
            "429 Too Many Requests",
            "application/json",
            r#"{"errors":[{"code":"TOOMANYREQUESTS","message":"pull rate limit reached","detail":null}]}"#,
        )
    } else if path.starts_with("/v2/malformed/") {
        (
            "200 OK",
            OCI_IMAGE_INDEX_MEDIA_TYPE,
            r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":"none"}"#,
        )
    } else if path == "/v2/" {
        ("200 OK", "application/json", "{}")
    } else {
        (
            "404 Not Found",
            "application/json",
            r#"{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry","detail":null}]}"#,
        )
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: {media}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}
