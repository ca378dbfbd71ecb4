//! The gMSA boundary as a `ValidatingAdmissionPolicy` of its own,
//! `winadmit-gmsa`, for the install that runs no webhook.
//!
//! An admission policy cannot read the cluster's GMSACredentialSpecs, but it
//! can ask the authorization question: CEL's `authorizer.serviceAccount(ns,
//! name)` (k8s.io/apiserver `pkg/cel/library/authz.go`) checks verb `use` on
//! the named credential spec for the pod's service account, in the pod's
//! namespace (so a RoleBinding there counts), as the webhook's
//! LocalSubjectAccessReview does (WIN-GMSA-NOT-AUTHORIZED). What it cannot
//! check it refuses outright: `gmsaCredentialSpec` contents, named or not,
//! since nothing can compare them with a credential spec
//! (WIN-GMSA-CONTENTS-MISMATCH, WIN-GMSA-CONTENTS-WITHOUT-NAME). A name
//! alone gives a pod no identity: with no webhook to fill the contents in,
//! the kubelet passes nothing to the runtime.
//!
//! The boundary holds whatever a namespace's or a pod's author sets: the
//! binding always denies (no mode), its namespaceSelector leaves out only
//! the namespaces the operator excludes by name (never the opt-out labels,
//! never the mode label), and no skip annotation is read. The operator's own
//! exemptions (users, groups, `exemptions.labelSelectors`) apply, as in
//! the engine.
//!
//! Cost: each authorization check costs 350,000 in the API server's CEL
//! cost model, and one expression may spend 1,000,000. So each distinct
//! name is checked in a variable of its own ([`SLOTS`] of them; a name
//! already checked costs nothing), and a pod that names more places than
//! that is refused (the API server's budget for a binding is 10,000,000).

use serde_json::{Value, json};

use super::GROUP;
use super::conditions::match_conditions;
use super::documents::match_constraints;
use crate::decision::cluster::TargetCluster;
use crate::decision::policy::Policy;
use crate::decision::rules::cel::{CONTAINER_LISTS, cel_str};

/// The name of the policy and its binding.
pub const NAME: &str = "winadmit-gmsa";

/// At most this many places (pod, containers) may name a credential spec
/// in one pod the policy checks; more are refused.
pub const SLOTS: usize = 16;

const NOT_AUTHORIZED: &str = "WIN-GMSA-NOT-AUTHORIZED";
const CONTENTS_MISMATCH: &str = "WIN-GMSA-CONTENTS-MISMATCH";
const CONTENTS_WITHOUT_NAME: &str = "WIN-GMSA-CONTENTS-WITHOUT-NAME";

/// The rules `winadmit-gmsa` checks for this policy and target (those the
/// policy has not turned off), in its order.
#[must_use]
pub fn rules(policy: &Policy, cluster: &TargetCluster) -> Vec<&'static str> {
    [NOT_AUTHORIZED, CONTENTS_MISMATCH, CONTENTS_WITHOUT_NAME]
        .into_iter()
        .filter(|id| policy.level_of(id, cluster).is_some())
        .collect()
}

/// What each exported gMSA rule leaves out (a partial gap).
#[must_use]
pub fn partial_reason(rule: &str) -> Option<&'static str> {
    match rule {
        NOT_AUTHORIZED => Some(
            "policy winadmit-gmsa asks with CEL's authorizer.serviceAccount() whether the pod's service account may `use` each credential spec it names, on CREATE and for ephemeral containers added later; a pod naming credential specs in more than 16 places is refused",
        ),
        CONTENTS_MISMATCH => Some(
            "an admission policy cannot read the GMSACredentialSpec to compare: policy winadmit-gmsa refuses every gmsaCredentialSpec set with a name, matching or not (run the webhook with components/gmsa for gMSA pods)",
        ),
        CONTENTS_WITHOUT_NAME => Some(
            "policy winadmit-gmsa refuses it whether or not the cluster serves GMSACredentialSpecs",
        ),
        _ => None,
    }
}

/// The pod spec's places with `windowsOptions`, as variables (`gmsaPod`: a
/// list of zero or one `windowsOptions`; `gmsaInitContainers`...: the
/// containers with `windowsOptions`). On a pod UPDATE only ephemeral
/// containers the old pod did not have (the rest of a pod's spec is
/// immutable, and what was there was judged when it came).
fn place_variables() -> Vec<(String, String)> {
    let mut out = vec![
        (
            "gmsaOldEphemeral".to_owned(),
            "variables.podUpdate && oldObject != null && has(oldObject.spec) && has(oldObject.spec.ephemeralContainers) ? oldObject.spec.ephemeralContainers.map(c, c.name) : []".to_owned(),
        ),
        (
            "gmsaPod".to_owned(),
            "!variables.podUpdate && has(variables.spec.securityContext) && has(variables.spec.securityContext.windowsOptions) ? [variables.spec.securityContext.windowsOptions] : []".to_owned(),
        ),
    ];
    for list in CONTAINER_LISTS {
        let with_options = "has(c.securityContext) && has(c.securityContext.windowsOptions)";
        let def = if list == "ephemeralContainers" {
            format!(
                "variables.{list}.filter(c, !(c.name in variables.gmsaOldEphemeral) && {with_options})"
            )
        } else {
            format!("variables.podUpdate ? [] : variables.{list}.filter(c, {with_options})")
        };
        out.push((place_var(list), def));
    }
    out
}

/// `gmsaContainers` for `containers`.
fn place_var(list: &str) -> String {
    let mut chars = list.chars();
    let first = chars
        .next()
        .map(|c| c.to_ascii_uppercase())
        .unwrap_or_default();
    format!("gmsa{first}{}", chars.as_str())
}

/// A CEL list of the field paths of `field` (a key of `windowsOptions`) in
/// every place where `hit` holds (`hit` of the CEL `windowsOptions`).
fn paths_where(field: &str, hit: &dyn Fn(&str) -> String) -> String {
    let mut parts = vec![format!(
        "variables.gmsaPod.filter(o, {}).map(o, variables.prefix + '.securityContext.windowsOptions.{field}')",
        hit("o")
    )];
    for list in CONTAINER_LISTS {
        parts.push(format!(
            "variables.{v}.filter(c, {}).map(c, variables.prefix + '.{list}[' + string(variables.{list}Names.indexOf(c.name)) + '].securityContext.windowsOptions.{field}')",
            hit("c.securityContext.windowsOptions"),
            v = place_var(list)
        ));
    }
    format!("({})", parts.join(" + "))
}

/// The names of every place, in order, with repeats.
fn names() -> String {
    let mut parts = vec![
        "variables.gmsaPod.filter(o, has(o.gmsaCredentialSpecName)).map(o, o.gmsaCredentialSpecName)".to_owned(),
    ];
    for list in CONTAINER_LISTS {
        parts.push(format!(
            "variables.{v}.filter(c, has(c.securityContext.windowsOptions.gmsaCredentialSpecName)).map(c, c.securityContext.windowsOptions.gmsaCredentialSpecName)",
            v = place_var(list)
        ));
    }
    parts.join(" + ")
}

/// May the pod's service account `use` credential spec `name` (CEL
/// string), in the request's namespace?
fn may_use(name: &str) -> String {
    format!(
        "authorizer.serviceAccount(request.namespace, variables.gmsaAccount).group('windows.k8s.io').resource('gmsacredentialspecs').namespace(request.namespace).name({name}).check('use').allowed()"
    )
}

/// The variables of `winadmit-gmsa` after the shared ones it reads.
fn own_variables() -> Vec<(String, String)> {
    let mut out = vec![(
        "gmsaAccount".to_owned(),
        "has(variables.spec.serviceAccountName) && variables.spec.serviceAccountName != '' ? variables.spec.serviceAccountName : (has(variables.spec.serviceAccount) && variables.spec.serviceAccount != '' ? variables.spec.serviceAccount : 'default')".to_owned(),
    )];
    out.extend(place_variables());
    out.push(("gmsaNames".to_owned(), names()));
    // One check per slot, each in its own variable (the cost limit of
    // one expression allows two); a name an earlier slot holds is not
    // asked again.
    for k in 0..SLOTS {
        let earlier: Vec<String> = (0..k)
            .map(|j| format!("variables.gmsaNames[{j}]"))
            .collect();
        let name = format!("variables.gmsaNames[{k}]");
        out.push((
            format!("gmsaMayUse{k}"),
            format!(
                "size(variables.gmsaNames) <= {k} || {name} in [{}] || {}",
                earlier.join(", "),
                may_use(&name)
            ),
        ));
    }
    out
}

/// The shared variables `winadmit-gmsa` reads (`shared` is
/// [`super::variables`]), in their order.
fn shared_needed(shared: &[(&'static str, String)]) -> Vec<(String, String)> {
    const NEEDED: &[&str] = &[
        "spec",
        "prefix",
        "labels",
        "podLabels",
        "initContainers",
        "containers",
        "ephemeralContainers",
        "initContainersNames",
        "containersNames",
        "ephemeralContainersNames",
        "exempt",
        "podUpdate",
    ];
    shared
        .iter()
        .filter(|(n, _)| NEEDED.contains(n))
        .map(|(n, e)| ((*n).to_owned(), e.clone()))
        .collect()
}

/// The pod (template) names a credential spec or sets its contents, on
/// the pod or any container (a match condition: no variables).
fn names_gmsa() -> String {
    let spec = super::variables::by_kind(
        "object.spec",
        "object.spec.jobTemplate.spec.template.spec",
        "object.spec.template.spec",
    );
    let set = |o: &str| {
        format!(
            "has({o}.windowsOptions) && (has({o}.windowsOptions.gmsaCredentialSpecName) || has({o}.windowsOptions.gmsaCredentialSpec))"
        )
    };
    let lists: Vec<String> = CONTAINER_LISTS
        .iter()
        .map(|l| format!("(has(s.{l}) ? s.{l} : [])"))
        .collect();
    format!(
        "[{spec}].exists(s, (has(s.securityContext) && {}) || [{}].exists(cs, cs.exists(c, has(c.securityContext) && {})))",
        set("s.securityContext"),
        lists.join(", "),
        set("c.securityContext"),
    )
}

/// One validation: `ok` must hold; the message names the `paths` (a CEL
/// list) and says `text` (CEL) after them.
fn validation(ok: &str, paths: &str, text: &str, rule: &str, fallback: &str) -> Value {
    json!({
        "expression": format!("variables.exempt || {ok}"),
        "messageExpression": format!("'winadmit: ' + {paths}.join(', ') + {text}"),
        "message": format!("winadmit: {fallback} ({rule})"),
        "reason": "Forbidden",
    })
}

/// The validations of `winadmit-gmsa` for `rules`, in order.
fn validations(rules: &[&str]) -> Vec<Value> {
    let mut validations = Vec::new();
    if rules.contains(&NOT_AUTHORIZED) {
        // A validation per slot: a message cannot read the authorizer
        // (nor a variable that does), so each slot's message names its own
        // credential spec.
        for k in 0..SLOTS {
            let name = format!("variables.gmsaNames[{k}]");
            let paths = paths_where("gmsaCredentialSpecName", &|o| {
                format!("has({o}.gmsaCredentialSpecName) && {o}.gmsaCredentialSpecName == {name}")
            });
            let mut v = validation(
                &format!("variables.gmsaMayUse{k}"),
                &paths,
                &format!(
                    "': service account \"' + variables.gmsaAccount + '\" is not authorized to `use` GMSA cred spec \"' + {name} + '\" ({NOT_AUTHORIZED}). Fix: grant it verb use on gmsacredentialspecs in API group windows.k8s.io (resourceNames: [' + {name} + ']) with a ClusterRole and a RoleBinding in namespace ' + request.namespace + ' to ServiceAccount ' + variables.gmsaAccount + '.'"
                ),
                NOT_AUTHORIZED,
                "the pod's service account is not authorized to `use` a GMSA cred spec it names",
            );
            // Evaluated on every request: nothing to say for an empty slot.
            v["messageExpression"] = format!(
                "size(variables.gmsaNames) <= {k} ? '' : ({})",
                v["messageExpression"].as_str().unwrap_or_default()
            )
            .into();
            validations.push(v);
        }
        validations.push(validation(
            &format!("size(variables.gmsaNames) <= {SLOTS}"),
            &paths_where("gmsaCredentialSpecName", &|o| {
                format!("has({o}.gmsaCredentialSpecName)")
            }),
            &cel_str(&format!(
                ": more than {SLOTS} places name a GMSA cred spec, more than this admission policy can check ({NOT_AUTHORIZED}). Fix: name it on the pod (securityContext.windowsOptions) rather than on each container, or run the webhook with components/gmsa."
            )),
            NOT_AUTHORIZED,
            "more places name a GMSA cred spec than this admission policy can check",
        ));
    }
    let named_contents =
        |o: &str| format!("has({o}.gmsaCredentialSpec) && has({o}.gmsaCredentialSpecName)");
    let unnamed_contents =
        |o: &str| format!("has({o}.gmsaCredentialSpec) && !has({o}.gmsaCredentialSpecName)");
    if rules.contains(&CONTENTS_MISMATCH) {
        let paths = paths_where("gmsaCredentialSpec", &named_contents);
        validations.push(validation(
            &format!("size({paths}) == 0"),
            &paths,
            &cel_str(&format!(
                ": GMSA cred spec contents cannot be checked against the named GMSACredentialSpec by an admission policy, so they are refused ({CONTENTS_MISMATCH}). Fix: remove gmsaCredentialSpec and keep gmsaCredentialSpecName; for pods that need the contents, run the webhook with components/gmsa, which fills them in."
            )),
            CONTENTS_MISMATCH,
            "GMSA cred spec contents cannot be checked by an admission policy",
        ));
    }
    if rules.contains(&CONTENTS_WITHOUT_NAME) {
        let paths = paths_where("gmsaCredentialSpec", &unnamed_contents);
        validations.push(validation(
            &format!("size({paths}) == 0"),
            &paths,
            &cel_str(&format!(
                ": has a GMSA cred spec set, but does not define the name of the corresponding resource ({CONTENTS_WITHOUT_NAME}). Fix: replace gmsaCredentialSpec by gmsaCredentialSpecName, the name of the GMSACredentialSpec that holds these contents."
            )),
            CONTENTS_WITHOUT_NAME,
            "GMSA cred spec contents without the name of the corresponding resource",
        ));
    }
    validations
}

/// `winadmit-gmsa` and its binding, or nothing when the policy turns every
/// gMSA rule it could check off.
#[must_use]
pub fn documents(
    policy: &Policy,
    cluster: &TargetCluster,
    shared: &[(&'static str, String)],
) -> Vec<Value> {
    let rules = rules(policy, cluster);
    if rules.is_empty() {
        return Vec::new();
    }
    let mut vars = shared_needed(shared);
    vars.extend(own_variables());
    let validations = validations(&rules);
    let mut conditions: Vec<(&'static str, String)> = match_conditions(policy, cluster)
        .into_iter()
        .filter(|(n, _)| *n != "targets-windows")
        .collect();
    conditions.push(("names-gmsa", names_gmsa()));
    let all: Vec<String> = conditions.iter().map(|(_, e)| format!("({e})")).collect();
    let vars: Vec<Value> = vars
        .into_iter()
        .map(|(name, expression)| json!({"name": name, "expression": expression}))
        .collect();
    vec![
        json!({
            "apiVersion": format!("{GROUP}/v1"),
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": NAME},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": match_constraints(),
                "matchConditions": [{"name": "names-gmsa", "expression": all.join(" && ")}],
                "variables": vars,
                "validations": validations,
            }
        }),
        json!({
            "apiVersion": format!("{GROUP}/v1"),
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": NAME},
            "spec": {
                "policyName": NAME,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": namespace_selector(policy)},
            }
        }),
    ]
}

/// The namespaces the operator leaves out by name (`reach.excludedNamespaces`,
/// `exemptions.namespaces`); no label a namespace's author may set.
fn namespace_selector(policy: &Policy) -> Value {
    let mut skipped = policy.reach.excluded_namespaces.clone();
    for n in &policy.exemptions.namespaces {
        if !skipped.contains(n) {
            skipped.push(n.clone());
        }
    }
    json!({"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": skipped}
    ]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binding_ignores_every_label_a_namespace_author_sets() {
        let policy = Policy::default_policy();
        let docs = documents(
            &policy,
            &TargetCluster::default(),
            &super::super::variables(&policy),
        );
        let binding = &docs[1];
        assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
        let selector = binding["spec"]["matchResources"]["namespaceSelector"].to_string();
        assert!(!selector.contains("winadmit.io/ignore"), "{selector}");
        assert!(
            !selector.contains(&policy.namespace_mode_label),
            "{selector}"
        );
        assert!(selector.contains("kube-system"), "{selector}");
        // No skip annotation is read.
        let text = docs[0].to_string();
        assert!(!text.contains("winadmit.io/skip"), "{text}");
        // Every slot has its variable, and no expression asks twice.
        for k in 0..SLOTS {
            assert!(text.contains(&format!("\"gmsaMayUse{k}\"")), "{k}");
        }
        for v in docs[0]["spec"]["variables"].as_array().unwrap() {
            let e = v["expression"].as_str().unwrap();
            assert!(e.matches("check('use')").count() <= 1, "{e}");
        }
        // Off in the policy: not exported.
        let off = Policy::from_yaml(
            "p.yaml",
            "rules: {WIN-GMSA-NOT-AUTHORIZED: off, WIN-GMSA-CONTENTS-MISMATCH: off, WIN-GMSA-CONTENTS-WITHOUT-NAME: off}\n",
        )
        .unwrap();
        assert!(
            documents(
                &off,
                &TargetCluster::default(),
                &super::super::variables(&off)
            )
            .is_empty()
        );
    }
}
