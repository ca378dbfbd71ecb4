//! `--registry-pull-secrets`: the registry credentials of the Secrets a
//! workload's `imagePullSecrets` names, read once per report.

use serde_json::Value;

use super::Live;
use crate::entry::commands::report::{Driver, Progress};
use crate::entry::errors::error_chain;

impl Live {
    /// The credentials of the Secrets `names` in `namespace`, in order (the
    /// first naming a registry gives its credentials), each read once per
    /// report (`read`). A Secret that cannot be read is a note on stderr,
    /// and the images are looked up with `--registry-config`'s credentials.
    pub(super) fn pull_credentials(
        &self,
        namespace: &str,
        names: &[String],
        read: &mut std::collections::HashMap<
            (String, String),
            Option<crate::input::registry::Credentials>,
        >,
        progress: &Progress,
    ) -> crate::input::registry::Credentials {
        let mut credentials = crate::input::registry::Credentials::default();
        for name in names {
            let key = (namespace.to_owned(), name.clone());
            let found =
                read.entry(key)
                    .or_insert_with(|| match self.secret_credentials(namespace, name) {
                        Ok(c) => Some(c),
                        Err(why) => {
                            progress.note(&format!(
                                "note: imagePullSecrets {namespace}/{name} not used: {why}"
                            ));
                            None
                        }
                    });
            if let Some(c) = found {
                credentials.absorb(c.clone());
            }
        }
        credentials
    }

    /// One Secret's registry credentials, within --api-timeout.
    pub(super) fn secret_credentials(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<crate::input::registry::Credentials, String> {
        use k8s_openapi::api::core::v1::Secret;
        let api: kube::Api<Secret> = kube::Api::namespaced(self.client.clone(), namespace);
        let call = async { tokio::time::timeout(self.deadlines.call_timeout, api.get(name)).await };
        let secret = match self.runtime.block_on(call) {
            Ok(Ok(s)) => s,
            Ok(Err(kube::Error::Api(status))) if status.code == 403 => {
                return Err(format!(
                    "the report's identity may not get secrets in namespace {namespace} (grant `get` on secrets, or leave out --registry-pull-secrets)"
                ));
            }
            Ok(Err(kube::Error::Api(status))) if status.code == 404 => {
                return Err("no such Secret".to_owned());
            }
            Ok(Err(e)) => return Err(error_chain(&e)),
            Err(_) => {
                return Err(format!(
                    "no answer within {:?} (--api-timeout)",
                    self.deadlines.call_timeout
                ));
            }
        };
        crate::input::registry::Credentials::of_secret(secret)
    }

    /// For `--registry-pull-secrets`: adds to `own` the credentials the
    /// workload `value`'s `imagePullSecrets` give for the registry of each
    /// of its `images` (the first workload naming an image gives them).
    pub(super) fn pod_credentials(
        &self,
        value: &Value,
        images: &std::collections::BTreeSet<String>,
        secrets: &mut std::collections::HashMap<
            (String, String),
            Option<crate::input::registry::Credentials>,
        >,
        driver: &Driver<'_>,
        own: &mut std::collections::BTreeMap<String, crate::input::registry::Credentials>,
    ) {
        let names = crate::decision::lookups::pull_secret_names(driver.builder.policy(), value);
        let Some(namespace) = value.pointer("/metadata/namespace").and_then(Value::as_str) else {
            return;
        };
        if names.is_empty() {
            return;
        }
        let credentials = self.pull_credentials(namespace, &names, secrets, &driver.progress);
        for image in images {
            if let Some(c) =
                crate::input::registry::registry_of(image).and_then(|r| credentials.only(&r))
            {
                own.entry(image.clone()).or_insert(c);
            }
        }
    }
}
