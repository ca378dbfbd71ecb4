//! gMSA in a live report: whether the cluster serves GMSACredentialSpecs,
//! and the lookup that asks the API server, with SubjectAccessReviews,
//! whether a service account may use the credential specs its pods name.

use kube::Client;
use serde_json::Value;

use super::Live;
use crate::decision::gmsa::{self, Authz, AuthzKey};
use crate::entry::commands::report::Progress;
use crate::entry::errors::error_chain;

impl Live {
    /// Whether the cluster serves GMSACredentialSpecs (`windows.k8s.io/v1`);
    /// says on stderr when it does not, or cannot tell.
    pub(super) fn gmsa_served(&self, progress: &Progress) -> bool {
        let path = format!("/apis/{}/{}", gmsa::GROUP, gmsa::VERSION);
        let served = match self.get_json(&path) {
            Ok(doc) => doc
                .as_ref()
                .and_then(|d| d.get("resources"))
                .and_then(Value::as_array)
                .is_some_and(|rs| {
                    rs.iter()
                        .any(|r| r.get("name").and_then(Value::as_str) == Some(gmsa::RESOURCE))
                }),
            Err(why) => {
                progress.note(&format!(
                    "note: cannot tell whether {} serves {}.{} ({path}): {why}; gMSA credential specs are not checked",
                    self.server,
                    gmsa::RESOURCE,
                    gmsa::GROUP
                ));
                return false;
            }
        };
        if !served {
            progress.note(&format!(
                "note: {} does not serve {}.{}/{} (no GMSACredentialSpec CRD): gMSA credential specs and who may use them are not checked",
                self.server,
                gmsa::RESOURCE,
                gmsa::GROUP,
                gmsa::VERSION
            ));
        }
        served
    }

    /// The lookup that asks, with a SubjectAccessReview per distinct
    /// (namespace, service account, credential spec), whether a pod's
    /// service account may `use` the credential specs it names: `None` when
    /// the cluster serves no GMSACredentialSpecs.
    pub fn gmsa_lookup(&self, quiet: bool) -> Option<crate::render::report::NamespaceLookup> {
        self.gmsa.then(|| {
            crate::render::report::NamespaceLookup(std::sync::Arc::new(LiveGmsa {
                runtime: std::sync::Arc::clone(&self.runtime),
                client: self.client.clone(),
                server: self.server.clone(),
                timeout: self.deadlines.call_timeout,
                quiet,
                answers: std::sync::Mutex::new(std::collections::HashMap::new()),
                refused: std::sync::Mutex::new(None),
            }))
        })
    }
}

/// The live report's gMSA lookup: whether a pod's service account may
/// `use` the credential specs it names, asked with SubjectAccessReviews
/// (the answer cached for the run). When the report's identity may not
/// create them, or a call fails, the answer is unknown
/// (WIN-GMSA-AUTHZ-UNKNOWN), never "not authorized".
struct LiveGmsa {
    runtime: std::sync::Arc<tokio::runtime::Runtime>,
    client: Client,
    server: String,
    /// `--api-timeout`, per call.
    timeout: std::time::Duration,
    quiet: bool,
    answers: std::sync::Mutex<std::collections::HashMap<AuthzKey, Result<Authz, String>>>,
    /// Why SubjectAccessReviews may not be created (asked once).
    refused: std::sync::Mutex<Option<String>>,
}

impl crate::decision::cluster::ClusterLookup for LiveGmsa {
    /// Namespace labels come from the listed Namespaces.
    fn label(&self, _namespace: &str, _key: &str) -> Option<String> {
        None
    }

    fn gmsa(&self, namespace: Option<&str>, account: &str, names: &[&str]) -> Option<gmsa::Facts> {
        let namespace = namespace?;
        let mut facts = gmsa::Facts::default();
        for name in names {
            let key = (namespace.to_owned(), account.to_owned(), (*name).to_owned());
            let known = self
                .answers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&key)
                .cloned();
            let answer = known.unwrap_or_else(|| {
                let answer = self.ask(namespace, account, name);
                self.answers
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(key.clone(), answer.clone());
                answer
            });
            match answer {
                Ok(a) => {
                    facts.authz.insert(key, a);
                }
                Err(why) => {
                    facts.unasked.insert(key, why);
                }
            }
        }
        Some(facts)
    }
}

impl LiveGmsa {
    /// One SubjectAccessReview: may `account` in `namespace` use `name`?
    fn ask(&self, namespace: &str, account: &str, name: &str) -> Result<Authz, String> {
        use k8s_openapi::api::authorization::v1::SubjectAccessReview;
        if let Some(why) = self
            .refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
        {
            return Err(why);
        }
        let review = SubjectAccessReview {
            spec: gmsa::use_review(namespace, account, name),
            ..Default::default()
        };
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.client.clone());
        let params = kube::api::PostParams::default();
        let call = async { tokio::time::timeout(self.timeout, api.create(&params, &review)).await };
        match self.runtime.block_on(call) {
            Ok(Ok(answer)) => {
                let status = answer.status.unwrap_or_default();
                Ok(Authz {
                    allowed: status.allowed && !status.denied.unwrap_or(false),
                    reason: status
                        .reason
                        .filter(|r| !r.is_empty())
                        .or(status.evaluation_error)
                        .unwrap_or_default(),
                })
            }
            Ok(Err(kube::Error::Api(status))) if status.code == 403 || status.code == 401 => {
                let why = format!(
                    "the report's identity may not create subjectaccessreviews.authorization.k8s.io at {} (API server: {})",
                    self.server, status.message
                );
                if !self.quiet {
                    eprintln!(
                        "winadmit: note: {why}; whether service accounts may use the GMSACredentialSpecs their pods name is unknown (WIN-GMSA-AUTHZ-UNKNOWN)"
                    );
                }
                *self
                    .refused
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why.clone());
                Err(why)
            }
            Ok(Err(e)) => Err(format!(
                "the SubjectAccessReview failed at {}: {}",
                self.server,
                error_chain(&e)
            )),
            Err(_) => Err(format!(
                "no answer to the SubjectAccessReview from {} within {:?} (--api-timeout)",
                self.server, self.timeout
            )),
        }
    }
}
