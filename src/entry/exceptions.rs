//! Exceptions at the entry points: the `PolicyException` objects an entry
//! point has (its input, `--exceptions DIR`, the cluster), read and sorted
//! into those in force at "now" and those that do not count, with why.
//! The decision gets the set; the entry point reports the rest.

use std::path::Path;

use anyhow::Context as _;
use serde_json::Value;

use crate::decision::exceptions::{self, Exception, ExceptionSet, Timestamp};
use crate::decision::policy::Policy;

/// winadmit's own namespace when the entry point is not told
/// (`--own-namespace`, `WINADMIT_NAMESPACE`): the chart's and the
/// manifests' default.
pub const DEFAULT_OWN_NAMESPACE: &str = "winadmit";

/// One problem with an exception: its `PolicyException ns/name` and what
/// is wrong or why it does not count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub exception: String,
    pub message: String,
}

/// The exceptions of `objects` in force at `now`, and the problems of the
/// others (unreadable, in a namespace the policy does not list, ended,
/// too long).
#[must_use]
pub fn sort(
    policy: &Policy,
    own: &str,
    objects: &[Value],
    now: Timestamp,
) -> (ExceptionSet, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut exceptions = Vec::new();
    for o in objects {
        match read(o) {
            Ok(e) => exceptions.push(e),
            Err(message) => problems.push(Problem {
                exception: title(o),
                message: format!("not read: {message}"),
            }),
        }
    }
    let set = ExceptionSet::new(&policy.exceptions, own, exceptions, now);
    problems.extend(set.ignored.iter().map(|i| Problem {
        exception: format!("{} {}/{}", exceptions::KIND, i.namespace, i.name),
        message: format!("ignored: {}", i.why),
    }));
    (set, problems)
}

/// Reads one exception object: its fields, and rule ids that exist.
///
/// # Errors
/// A missing or invalid field, or an unknown rule id.
pub fn read(o: &Value) -> Result<Exception, String> {
    let e = Exception::from_object(o, None)?;
    if let Some(r) = e
        .rules
        .iter()
        .find(|r| crate::decision::rules::find(r).is_none())
    {
        return Err(format!(
            "spec.rules: unknown rule id `{r}` (run `winadmit rules` for the list)"
        ));
    }
    Ok(e)
}

/// `PolicyException ns/name` of an object, as far as it says.
#[must_use]
pub fn title(o: &Value) -> String {
    let meta = &o["metadata"];
    format!(
        "{} {}/{}",
        exceptions::KIND,
        meta["namespace"].as_str().unwrap_or("-"),
        meta["name"].as_str().unwrap_or("-")
    )
}

/// The `PolicyException` objects in the YAML and JSON files of `dir` (and
/// below); other objects are left aside.
///
/// # Errors
/// A file cannot be read or parsed; the error names it.
pub fn read_dir(dir: &Path) -> anyhow::Result<Vec<Value>> {
    if !dir.is_dir() {
        anyhow::bail!("--exceptions {}: not a directory", dir.display());
    }
    let mut out = Vec::new();
    let (paths, problems) = crate::input::source::manifest_paths(&[dir.to_owned()]);
    if let Some(p) = problems.first() {
        anyhow::bail!("--exceptions {}: {}", p.file, p.message);
    }
    for path in paths {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let docs = crate::input::source::parse(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        out.extend(
            docs.into_iter()
                .map(|d| d.value)
                .filter(is_exception_object),
        );
    }
    Ok(out)
}

/// The `PolicyException` objects in manifest files (those that cannot be
/// read are left to the report, which names them).
#[must_use]
pub fn read_files(files: &[std::path::PathBuf]) -> Vec<Value> {
    let mut out = Vec::new();
    for path in files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        if !text.contains(exceptions::KIND) {
            continue;
        }
        let Ok(docs) = crate::input::source::parse(&text) else {
            continue;
        };
        out.extend(
            docs.into_iter()
                .map(|d| d.value)
                .filter(is_exception_object),
        );
    }
    out
}

fn is_exception_object(v: &Value) -> bool {
    exceptions::is_exception(
        v["apiVersion"].as_str().unwrap_or_default(),
        v["kind"].as_str().unwrap_or_default(),
    )
}

/// `--now`: an RFC 3339 instant, or the clock's.
///
/// # Errors
/// The text is not an RFC 3339 date-time.
pub fn now(given: Option<&str>) -> anyhow::Result<Timestamp> {
    match given {
        Some(t) => Timestamp::parse(t).map_err(|e| anyhow::anyhow!("--now: {e}")),
        None => Ok(clock()),
    }
}

/// The clock, to the second.
#[must_use]
pub fn clock() -> Timestamp {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Timestamp(i64::try_from(secs).unwrap_or(i64::MAX))
}

/// The API resource of `PolicyException`.
#[must_use]
pub fn api_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: exceptions::GROUP.into(),
        version: "v1alpha1".into(),
        api_version: exceptions::API_VERSION.into(),
        kind: exceptions::KIND.into(),
        plural: "policyexceptions".into(),
    }
}

/// Every namespace's `PolicyException`s, listed; none when the cluster
/// does not serve the resource (the CRD is not installed).
///
/// # Errors
/// The list call fails otherwise (refused, unreachable).
pub async fn list(client: kube::Client) -> anyhow::Result<Vec<Value>> {
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client, &api_resource());
    match api.list(&kube::api::ListParams::default()).await {
        Ok(list) => list
            .items
            .into_iter()
            .map(|o| {
                let mut v = serde_json::to_value(o)?;
                v["apiVersion"] = exceptions::API_VERSION.into();
                v["kind"] = exceptions::KIND.into();
                Ok(v)
            })
            .collect(),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
        Err(e) => Err(anyhow::Error::new(e).context("listing policyexceptions.winadmit.io")),
    }
}
