use super::*;

use crate::entry::manifests::{Customization, Render, customize};

const CA: &[u8] = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

fn base() -> Vec<Value> {
    customize(
        Render::Base,
        &Customization {
            certs: None,
            namespace: None,
            image: None,
            ca_bundle: None,
        },
    )
    .unwrap()
}

fn target(url: &str) -> WebhookTarget<'_> {
    WebhookTarget { url, ca_pem: CA }
}

fn exprs(selector: &Value) -> Vec<(String, String, Vec<String>)> {
    selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["key"].as_str().unwrap().to_owned(),
                e["operator"].as_str().unwrap().to_owned(),
                e["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn webhooks_are_called_by_url_with_the_ca_and_named_static() {
    let files = webhook_files(&base(), target("https://10.96.0.50:443/"), &[]).unwrap();
    let names: Vec<(Plugin, &str)> = files.iter().map(|f| (f.plugin, f.name.as_str())).collect();
    assert_eq!(
        names,
        [
            (Plugin::MutatingWebhook, "winadmit.static.k8s.io.yaml"),
            (Plugin::ValidatingWebhook, "winadmit.static.k8s.io.yaml"),
        ]
    );
    let ca = base64::engine::general_purpose::STANDARD.encode(CA);
    let mut urls = Vec::new();
    for f in &files {
        let obj = &f.objects[0];
        assert_eq!(obj["metadata"]["name"], "winadmit.static.k8s.io");
        for w in obj["webhooks"].as_array().unwrap() {
            assert_eq!(w["clientConfig"]["caBundle"], ca.as_str());
            assert!(w["clientConfig"].get("service").is_none());
            urls.push(format!(
                "{} {}",
                w["name"].as_str().unwrap(),
                w["clientConfig"]["url"].as_str().unwrap()
            ));
            // kube-system and winadmit's namespace stay out; the opt-out
            // label is not read.
            let e = exprs(&w["namespaceSelector"]);
            assert_eq!(
                e,
                [(
                    "kubernetes.io/metadata.name".to_owned(),
                    "NotIn".to_owned(),
                    vec!["kube-system".to_owned(), "winadmit".to_owned()]
                )],
                "{}",
                w["name"]
            );
        }
    }
    assert_eq!(
        urls,
        [
            "mutate.winadmit.io https://10.96.0.50:443/mutate",
            "pin-linux.winadmit.io https://10.96.0.50:443/mutate",
            "validate.winadmit.io https://10.96.0.50:443/validate",
        ]
    );
}

#[test]
fn failure_policies_and_timeouts_are_the_installs() {
    let files = webhook_files(&base(), target("https://winadmit.example"), &[]).unwrap();
    let got: Vec<String> = files
        .iter()
        .flat_map(|f| f.objects[0]["webhooks"].as_array().unwrap().clone())
        .map(|w| {
            format!(
                "{} {} {}",
                w["name"].as_str().unwrap(),
                w["failurePolicy"].as_str().unwrap(),
                w["timeoutSeconds"]
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            "mutate.winadmit.io Fail 5",
            "pin-linux.winadmit.io Ignore 2",
            "validate.winadmit.io Fail 5"
        ]
    );
}

#[test]
fn exempt_namespaces_join_the_left_out_ones() {
    let files = webhook_files(
        &base(),
        target("https://10.0.0.9:8443"),
        &["calico-system".to_owned()],
    )
    .unwrap();
    let w = &files[1].objects[0]["webhooks"][0];
    assert_eq!(
        exprs(&w["namespaceSelector"])[0].2,
        ["kube-system", "winadmit", "calico-system"]
    );
    assert_eq!(
        webhook_files(
            &base(),
            target("https://10.0.0.9"),
            &["Not_A_NS".to_owned()]
        ),
        Err(StaticError::Namespace("Not_A_NS".to_owned()))
    );
}

#[test]
fn urls_the_api_server_would_not_call_are_refused() {
    for (url, why) in [
        ("http://10.0.0.1", "the scheme must be https"),
        (
            "https://10.0.0.1/?a=b",
            "a webhook URL has no query or fragment",
        ),
        (
            "https://user@10.0.0.1",
            "a webhook URL has no user information",
        ),
        ("https://", "no host"),
        ("https://:443", "no host"),
        ("10.0.0.1:443", "the scheme must be https"),
    ] {
        assert_eq!(
            webhook_files(&base(), target(url), &[]),
            Err(StaticError::Url {
                url: url.to_owned(),
                why
            }),
            "{url}"
        );
    }
    assert_eq!(
        webhook_files(
            &base(),
            WebhookTarget {
                url: "https://10.0.0.1",
                ca_pem: b"not a certificate"
            },
            &[]
        ),
        Err(StaticError::CaBundle)
    );
}

fn exported() -> Vec<Value> {
    use clap::Parser as _;
    let cli = crate::entry::cli::Cli::try_parse_from(["winadmit", "admission-policy"]).unwrap();
    let crate::entry::cli::Command::AdmissionPolicy(args) = cli.command else {
        unreachable!("parsed as admission-policy")
    };
    let (pol, cluster) = crate::entry::commands::load_policy(&args.policy).unwrap();
    crate::decision::admission_policy::export(&pol, &cluster, None, true)
        .unwrap()
        .documents
}

#[test]
fn policies_get_one_binding_each_with_the_exports_mode_and_static_names() {
    let files = policy_files(&exported(), &[]).unwrap();
    let mut seen = Vec::new();
    for f in &files {
        let policy = &f.objects[0];
        let name = policy["metadata"]["name"].as_str().unwrap();
        assert_eq!(f.name, format!("{name}.yaml"));
        assert!(
            policy
                .get("spec")
                .and_then(|s| s.get("paramKind"))
                .is_none()
        );
        for b in &f.objects[1..] {
            assert_eq!(b["spec"]["policyName"], name);
            assert!(b["metadata"]["name"].as_str().unwrap().ends_with(SUFFIX));
            let e = exprs(&b["spec"]["matchResources"]["namespaceSelector"]);
            assert_eq!(
                e,
                [(
                    "kubernetes.io/metadata.name".to_owned(),
                    "NotIn".to_owned(),
                    vec!["kube-system".to_owned()]
                )],
                "{}",
                b["metadata"]["name"]
            );
            seen.push(format!(
                "{} {} {}",
                f.plugin.dir(),
                b["metadata"]["name"].as_str().unwrap(),
                b["spec"]["validationActions"]
            ));
        }
    }
    assert_eq!(
        seen,
        [
            "validating-policies winadmit-errors-default.static.k8s.io [\"Deny\"]",
            "validating-policies winadmit-gmsa.static.k8s.io [\"Deny\"]",
            "mutating-policies winadmit-mutate.static.k8s.io null",
            "validating-policies winadmit-warnings.static.k8s.io [\"Warn\"]",
        ]
    );
}

fn file(plugin: Plugin, objects: Vec<Value>) -> File {
    let name = format!("{}.yaml", objects[0]["metadata"]["name"].as_str().unwrap());
    File {
        plugin,
        name,
        objects,
    }
}

fn vap(name: &str) -> Value {
    json!({"apiVersion": API_VERSION, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name}, "spec": {}})
}

fn binding(name: &str, policy: &str) -> Value {
    json!({"apiVersion": API_VERSION, "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name}, "spec": {"policyName": policy}})
}

fn refused(files: &[File]) -> String {
    check(files).unwrap_err().to_string()
}

#[test]
fn the_loaders_rules_are_checked() {
    let p = "p.static.k8s.io";
    assert_eq!(
        check(&[file(
            Plugin::ValidatingPolicy,
            vec![vap(p), binding("b.static.k8s.io", p)]
        )]),
        Ok(())
    );
    assert_eq!(
        refused(&[file(Plugin::ValidatingPolicy, vec![vap("p")])]),
        "validating-policies/p.yaml: ValidatingAdmissionPolicy \"p\": metadata.name must end with .static.k8s.io"
    );
    let mut with_params = vap(p);
    with_params["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    assert!(
        refused(&[file(Plugin::ValidatingPolicy, vec![with_params])]).contains("spec.paramKind")
    );
    let mut b = binding("b.static.k8s.io", p);
    b["spec"]["paramRef"] = json!({"name": "x"});
    assert!(refused(&[file(Plugin::ValidatingPolicy, vec![vap(p), b])]).contains("spec.paramRef"));
    assert!(
        refused(&[file(
            Plugin::ValidatingPolicy,
            vec![vap(p), binding("b.static.k8s.io", "q")]
        )])
        .contains("spec.policyName \"q\" must end with .static.k8s.io")
    );
    // A binding of a policy in another directory (or none).
    assert!(
        refused(&[file(
            Plugin::ValidatingPolicy,
            vec![vap(p), binding("b.static.k8s.io", "q.static.k8s.io")]
        )])
        .contains("is no policy of validating-policies/")
    );
    assert!(
        refused(&[
            file(Plugin::ValidatingPolicy, vec![vap(p)]),
            file(
                Plugin::ValidatingPolicy,
                vec![vap(p), binding("c.static.k8s.io", p)]
            ),
        ])
        .contains("written twice")
    );
    assert!(
        refused(&[
            file(Plugin::ValidatingPolicy, vec![vap(p)]),
            File {
                plugin: Plugin::ValidatingPolicy,
                name: "other.yaml".into(),
                objects: vec![vap(p)]
            },
        ])
        .contains("the name is also used in p.static.k8s.io.yaml")
    );
    assert!(
        refused(&[file(Plugin::MutatingPolicy, vec![vap(p)])])
            .contains("the ValidatingAdmissionPolicy plugin loads it, not MutatingAdmissionPolicy")
    );
    // A webhook that names a Service.
    let mut files = webhook_files(&base(), target("https://10.0.0.1"), &[]).unwrap();
    files[0].objects[0]["webhooks"][0]["clientConfig"] =
        json!({"service": {"name": "winadmit", "namespace": "winadmit"}});
    assert!(refused(&files).contains(
        "webhook \"mutate.winadmit.io\": clientConfig.service: a static webhook is called by clientConfig.url"
    ));
    files[0].objects[0]["webhooks"][0]["clientConfig"] = json!({"url": "https://10.0.0.1/mutate"});
    assert!(refused(&files).contains("clientConfig.caBundle holds no PEM certificate"));
}

#[test]
fn the_admission_configuration_names_each_plugins_directory() {
    let c = admission_configuration("/etc/kubernetes/winadmit/", &Plugin::ALL);
    let got: Vec<String> = c["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{} {} {}",
                p["name"].as_str().unwrap(),
                p["configuration"]["kind"].as_str().unwrap(),
                p["configuration"]["staticManifestsDir"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            "MutatingAdmissionWebhook WebhookAdmissionConfiguration /etc/kubernetes/winadmit/mutating-webhooks",
            "ValidatingAdmissionWebhook WebhookAdmissionConfiguration /etc/kubernetes/winadmit/validating-webhooks",
            "MutatingAdmissionPolicy MutatingAdmissionPolicyConfiguration /etc/kubernetes/winadmit/mutating-policies",
            "ValidatingAdmissionPolicy ValidatingAdmissionPolicyConfiguration /etc/kubernetes/winadmit/validating-policies",
        ]
    );
}
