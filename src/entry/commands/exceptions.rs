//! `winadmit exceptions from-annotations`: the `winadmit.io/skip.<RULE>`
//! annotations of manifests (files, or a live cluster's through `kubectl
//! get -o yaml | ... -`) as `PolicyException` objects, one per workload and
//! rule, with the annotation's text as the reason and `--expires` as the
//! end date, printed as YAML for `kubectl apply -f -`.

use std::io::Read as _;
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::decision::exceptions::{self, Timestamp};
use crate::decision::policy::{Policy, SKIP_ANNOTATION_PREFIX};
use crate::decision::workload::Workload;
use crate::entry::cli::{ExceptionsArgs, ExceptionsCommand, FromAnnotationsArgs};

/// # Errors
/// A file cannot be read or parsed, the policy cannot be loaded, or
/// `--expires` is not a date within the policy's longest lifetime.
pub fn run(args: ExceptionsArgs) -> anyhow::Result<ExitCode> {
    match args.what {
        ExceptionsCommand::FromAnnotations(a) => from_annotations_command(a),
    }
}

fn from_annotations_command(args: FromAnnotationsArgs) -> anyhow::Result<ExitCode> {
    let (policy, _) = super::load_policy(&args.policy)?;
    let expires = Timestamp::parse(&args.expires).map_err(|e| anyhow::anyhow!("--expires: {e}"))?;
    let now = crate::entry::exceptions::now(args.now.as_deref())?;
    let longest = now.plus_days(policy.exceptions.max_lifetime_days);
    if expires <= now || expires > longest {
        anyhow::bail!(
            "--expires {expires}: give an end date after now ({now}) and at most the policy's exceptions.maxLifetimeDays ({} days) ahead, by {longest}",
            policy.exceptions.max_lifetime_days
        );
    }
    let objects = read_inputs(&args.paths)?;
    let grant = Grant {
        namespace: &args.namespace,
        expires,
        owner: args.owner.as_deref(),
        ticket: args.ticket.as_deref(),
    };
    let (made, notes) = from_annotations(&policy, &objects, &grant);
    for n in notes {
        eprintln!("winadmit: {n}");
    }
    let mut out = String::new();
    for e in &made {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(e).context("writing YAML")?);
    }
    print!("{out}");
    eprintln!(
        "winadmit: {} PolicyException{} in namespace {}",
        made.len(),
        if made.len() == 1 { "" } else { "s" },
        args.namespace
    );
    Ok(ExitCode::SUCCESS)
}

/// The objects of `paths` (files, directories, `-` for stdin).
fn read_inputs(paths: &[std::path::PathBuf]) -> anyhow::Result<Vec<Value>> {
    let mut objects = Vec::new();
    let mut read = |name: &str, text: &str| -> anyhow::Result<()> {
        let docs = crate::input::source::parse(text).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        objects.extend(docs.into_iter().map(|d| d.value));
        Ok(())
    };
    for p in paths {
        if p.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading stdin")?;
            read("<stdin>", &text)?;
            continue;
        }
        let (files, problems) = crate::input::source::manifest_paths(std::slice::from_ref(p));
        if let Some(problem) = problems.first() {
            anyhow::bail!("{}: {}", problem.file, problem.message);
        }
        for f in files {
            let text =
                std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
            read(&f.display().to_string(), &text)?;
        }
    }
    Ok(objects)
}

/// Where and how the exceptions are granted.
pub struct Grant<'a> {
    /// The namespace the exceptions are created in (one the policy lists).
    pub namespace: &'a str,
    pub expires: Timestamp,
    pub owner: Option<&'a str>,
    pub ticket: Option<&'a str>,
}

/// One `PolicyException` per workload and skip annotation with a reason:
/// the workload's namespace, kind and name (and the names of the objects
/// its controllers create, `NAME-*`), the rule, the annotation's text as
/// the reason. Annotations no exception may replace (a gMSA rule, an
/// unknown rule, an empty reason) are named in the notes.
#[must_use]
pub fn from_annotations(
    policy: &Policy,
    objects: &[Value],
    grant: &Grant<'_>,
) -> (Vec<Value>, Vec<String>) {
    let mut made = Vec::new();
    let mut notes = Vec::new();
    for o in objects {
        let Ok(view) = policy.pod_templates.read(o) else {
            continue;
        };
        let Some(w) = Workload::from_view(&view) else {
            continue;
        };
        for (rule, reason) in skips(&w) {
            let at = format!("{} {}/{}", w.kind_name, w.namespace.unwrap_or("-"), w.name);
            if crate::decision::rules::find(&rule).is_none() {
                notes.push(format!(
                    "{at}: {SKIP_ANNOTATION_PREFIX}{rule}: no rule {rule}; left out"
                ));
                continue;
            }
            if !policy
                .exceptions
                .may_cover(&rule, crate::decision::rules::is_boundary(&rule))
            {
                notes.push(format!("{at}: {SKIP_ANNOTATION_PREFIX}{rule}: {rule} guards a security boundary; an exception covers it only where the policy's exceptions.boundaryRules names it; left out"));
                continue;
            }
            if reason.trim().is_empty() {
                notes.push(format!(
                    "{at}: {SKIP_ANNOTATION_PREFIX}{rule}: no reason; left out"
                ));
                continue;
            }
            made.push(exception(&w, &rule, &reason, grant));
        }
    }
    (made, notes)
}

/// The workload's skip annotations (the pod template's first), by rule.
fn skips(w: &Workload<'_, '_>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for map in [w.pod_annotations(), w.annotations].into_iter().flatten() {
        for (k, v) in map.iter() {
            if let Some(rule) = k.strip_prefix(SKIP_ANNOTATION_PREFIX)
                && !out.iter().any(|(r, _)| r == rule)
            {
                out.push((rule.to_owned(), v.to_owned()));
            }
        }
    }
    out
}

fn exception(w: &Workload<'_, '_>, rule: &str, reason: &str, grant: &Grant<'_>) -> Value {
    let mut name = format!(
        "{}-{}-{}",
        w.kind_name.to_ascii_lowercase(),
        w.name,
        rule.to_ascii_lowercase()
    );
    name.retain(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    name.truncate(253);
    let name = name.trim_end_matches(['-', '.']).to_owned();
    let mut matches = json!({"names": [w.name, format!("{}-*", w.name)]});
    if let Some(ns) = w.namespace {
        matches["namespaces"] = json!([ns]);
    }
    let mut spec = json!({
        "rules": [rule],
        "match": matches,
        "reason": reason,
        "expiresAt": grant.expires.to_string(),
    });
    if let Some(o) = grant.owner {
        spec["owner"] = o.into();
    }
    if let Some(t) = grant.ticket {
        spec["ticket"] = t.into();
    }
    json!({
        "apiVersion": exceptions::API_VERSION,
        "kind": exceptions::KIND,
        "metadata": {
            "name": name,
            "namespace": grant.namespace,
            "annotations": {"winadmit.io/from-annotation": format!("{SKIP_ANNOTATION_PREFIX}{rule}")},
        },
        "spec": spec,
    })
}
