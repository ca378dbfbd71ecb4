//! The rules as CEL: for each rule, the places it looks at ("probes") and
//! the condition that makes each one a finding, or why the rule cannot be
//! exported. Mirrors the rule files in `src/rules/` at one target cluster;
//! `tests/admission_policy.rs` checks the two agree on the corpus.

use std::fmt::Write as _;

use super::cel_str;
use crate::cluster::Cluster;
use crate::policy::Policy;
use crate::version::KubeVersion;

/// Where a probe looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeScope {
    /// The pod spec (`variables.spec`).
    Pod,
    /// Every container of the three lists (`c`).
    Container,
    /// Every volume (`v`).
    Volume,
    /// Every volume mount (`m`) of every container (`c`).
    Mount,
}

/// The field a probe reports, below its scope's element.
#[derive(Debug, Clone)]
pub enum Field {
    /// Fixed keys, e.g. `["securityContext", "privileged"]`.
    Keys(&'static [&'static str]),
    /// A CEL list of strings, each a path suffix (starting with `.` or `[`)
    /// below the element; used where the key varies (map keys).
    Suffixes(String),
    /// A CEL list of complete field paths (the expression builds them).
    Absolute(String),
}

/// One place a rule looks at.
#[derive(Debug, Clone)]
pub struct Probe {
    pub scope: ProbeScope,
    /// For [`ProbeScope::Mount`]: a condition on the container `c` first.
    pub container_hit: Option<String>,
    /// CEL bool: this element is a finding.
    pub hit: String,
    pub field: Field,
    /// The mutation removes the field (what `/mutate` removes by default).
    pub removable: bool,
}

impl Probe {
    fn new(scope: ProbeScope, hit: impl Into<String>, keys: &'static [&'static str]) -> Self {
        Self {
            scope,
            container_hit: None,
            hit: hit.into(),
            field: Field::Keys(keys),
            removable: false,
        }
    }

    fn removable(mut self, yes: bool) -> Self {
        self.removable = yes;
        self
    }
}

/// How a rule fares in the export.
#[derive(Debug, Clone)]
pub enum Export {
    /// Exported: the probes, a message and the fix.
    Cel {
        probes: Vec<Probe>,
        message: &'static str,
        /// What the export leaves out of an otherwise exported rule.
        partial: Option<&'static str>,
    },
    /// Not exported, and why.
    Gap(&'static str),
}

/// `x` present on the pod's security context.
fn pod_sc(key: &str) -> String {
    format!("has(variables.spec.securityContext) && has(variables.spec.securityContext.{key})")
}

/// `x` present on the container's security context.
fn c_sc(key: &str) -> String {
    format!("has(c.securityContext) && has(c.securityContext.{key})")
}

/// The container `c` has a mount with Bidirectional propagation.
const C_BIDIRECTIONAL: &str = "(has(c.volumeMounts) && c.volumeMounts.exists(m, has(m.mountPropagation) && m.mountPropagation == 'Bidirectional'))";

/// The container is HostProcess (its own value, else the pod's).
pub const C_HOST_PROCESS: &str = "(has(c.securityContext) && has(c.securityContext.windowsOptions) && has(c.securityContext.windowsOptions.hostProcess) ? c.securityContext.windowsOptions.hostProcess : variables.podHostProcess)";

const SUBPATH: &str =
    "((has(m.subPath) && m.subPath != '') || (has(m.subPathExpr) && m.subPathExpr != ''))";
const SUBPATH_KEY: &str = "[(has(m.subPath) && m.subPath != '' ? '.subPath' : '.subPathExpr')]";

/// `rules::host_path_os::is_windows_path` as a regular expression: a drive
/// (`C:`, `C:\\...`, `c:/...`), a UNC path or a device path.
pub const WINDOWS_PATH: &str = r"(?s)^([A-Za-z]:([\\/].*)?|\\\\.*|//\./.*|//\?/.*)$";

/// Escapes the RE2 metacharacters of `s`.
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if "\\.+*?()|[]{}^$".contains(ch) {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// `crate::glob::glob_match` patterns (`*`: any run of characters) as one
/// anchored regular expression; `None` for no pattern.
#[must_use]
pub fn globs_regex(patterns: &[String]) -> Option<String> {
    if patterns.is_empty() {
        return None;
    }
    let alternatives: Vec<String> = patterns
        .iter()
        .map(|p| {
            p.split('*')
                .map(regex_escape)
                .collect::<Vec<_>>()
                .join(".*")
        })
        .collect();
    Some(format!("(?s)^(?:{})$", alternatives.join("|")))
}

/// A decimal number of at most `max` (leading zeros allowed), as a
/// regular expression: what `str::parse` accepts for an unsigned type.
fn decimal_at_most(max: u64) -> String {
    let digits: Vec<u8> = max.to_string().bytes().map(|b| b - b'0').collect();
    let n = digits.len();
    let mut alternatives = Vec::new();
    for (i, &d) in digits.iter().enumerate() {
        if d == 0 {
            continue;
        }
        let prefix: String = digits[..i].iter().map(|&d| char::from(b'0' + d)).collect();
        let rest = n - i - 1;
        let tail = if rest == 0 {
            String::new()
        } else {
            format!("[0-9]{{{rest}}}")
        };
        alternatives.push(format!("{prefix}[0-{}]{tail}", d - 1));
    }
    alternatives.push(max.to_string());
    if n > 1 {
        alternatives.push(format!("[0-9]{{1,{}}}", n - 1));
    }
    format!("0*(?:{})", alternatives.join("|"))
}

/// A `10.MINOR.BUILD[.REVISION]` word as `windows_builds::Build` parses it.
fn ten_build() -> String {
    format!(
        r"10\.{}\.{}(?:\.[0-9]+)?",
        decimal_at_most(u64::from(u16::MAX)),
        decimal_at_most(u64::from(u32::MAX))
    )
}

/// The Windows build the embedded table (`policies/windows-builds.yaml`)
/// reads from image tags: `(known, unknown, word, names)`. A tag's words
/// (split at `-` and `_`, lowercased) are written with a leading `*` when
/// they follow a marker word (`nanoserver-1809` gives `nanoserver`,
/// `*1809`); `known` matches a word that names a build in a repository of
/// the table, `unknown` in any other (release names that are not plain
/// numbers anywhere, the others and `10.x` versions only after a marker).
/// `word` finds such a word anywhere in an image name (a superset, for the
/// match condition), and `names` maps release names to builds (a CEL map).
#[must_use]
pub fn build_regexes() -> (String, String, String, String) {
    let table = &*crate::windows_builds::EMBEDDED;
    let mut all = Vec::new();
    let mut words = Vec::new();
    let mut names = Vec::new();
    for r in &table.releases {
        for n in &r.names {
            all.push(regex_escape(n));
            if !n.bytes().all(|b| b.is_ascii_digit()) {
                words.push(regex_escape(n));
            }
            names.push(format!("{}: {}", cel_str(n), cel_str(&r.build.to_string())));
        }
    }
    let all = all.join("|");
    let ten = ten_build();
    let known = format!(r"^\*?(?:{all}|{ten})$");
    let mut unknown = vec![format!(r"^\*(?:{all}|{ten})$")];
    if !words.is_empty() {
        unknown.push(format!(r"^\*?(?:{})$", words.join("|")));
    }
    let word = format!(r"{all}|10\.[0-9]+\.[0-9]+");
    (
        known,
        unknown.join("|"),
        word,
        format!("{{{}}}", names.join(", ")),
    )
}

/// The variables that work out, once per request, what each container
/// image is: its Windows build by the table (as `Build` displays it), a
/// Windows image by `params.windowsImages`, an image known to run only on
/// Linux (`params.linuxImages`, `params.linuxTagWords`). They mirror
/// `RuleParams::facts_of` and `windows_builds::image_build` step by step:
/// the name without its digest, its repository (without `docker.io/`,
/// `index.docker.io/` and `library/`) and tag, the tag's words, then the
/// facts. Each is a list with one entry per container that has an image,
/// in the engine's order (init, regular, ephemeral containers).
#[must_use]
pub fn image_variables(policy: &Policy) -> Vec<(&'static str, String)> {
    let params = &policy.params;
    let table = &*crate::windows_builds::EMBEDDED;
    let (known, unknown, _, names) = build_regexes();
    let matches = |subject: &str, re: Option<&String>| {
        re.map_or_else(
            || "false".to_owned(),
            |re| format!("{subject}.matches({})", cel_str(re)),
        )
    };
    let strip = |repo: &str| {
        format!(
            "[{repo}].map(r, r.startsWith('docker.io/') ? r.substring(10, size(r)) : (r.startsWith('index.docker.io/') ? r.substring(16, size(r)) : r)).map(r, r.startsWith('library/') ? r.substring(8, size(r)) : r)[0]"
        )
    };
    let linux_words = if params.linux_tag_words.is_empty() {
        None
    } else {
        let words: Vec<String> = params
            .linux_tag_words
            .iter()
            .map(|w| regex_escape(w))
            .collect();
        Some(format!("(?:^|[-_])(?:{})(?:[-_]|$)", words.join("|")))
    };
    // 'listed' (params.linuxImages), 'tag' (a params.linuxTagWords word
    // only) or '', as `RuleParams::linux_by`.
    let linux = format!(
        "p[2].matches('windows|nanoserver|servercore|(?:^|[-_])win(?:[-_]|$)') ? '' : ({} ? 'listed' : ({} ? 'tag' : ''))",
        matches("p[3]", globs_regex(&params.linux_images).as_ref()),
        matches("p[2]", linux_words.as_ref()),
    );
    // Each word in its own `-w-`, then `*` before a word that follows a
    // marker; only words with a digit can name a build (a cheap test before
    // the long expressions: the API server charges `matches` by the length
    // of the string times that of the expression).
    let mut marked = "('-' + p[2].replace('_', '-').replace('-', '--') + '-')".to_owned();
    for m in &table.markers {
        let m = m.to_ascii_lowercase();
        let _ = write!(marked, ".replace('-{m}-', '-{m}-*')");
    }
    marked.push_str(".replace('*-', '-*').split('-').filter(w, w != '')");
    let words = format!(
        "variables.imageParts.map(p, [p[0], [{marked}.filter(w, w.matches('[0-9]'))].map(ws, {} ? ws.filter(w, w.matches({})) : ws.filter(w, w.matches({}))).map(l, size(l) > 0 ? l[0] : '')[0], {linux}])",
        matches("p[1]", globs_regex(&table.repositories).as_ref()),
        cel_str(&known),
        cel_str(&unknown),
    );
    let build = format!(
        "p[1] == '' ? '' : [p[1].startsWith('*') ? p[1].substring(1, size(p[1])) : p[1]].map(x, x in {names} ? {names}[x] : [x.split('.')].map(v, '10.' + string(int(v[1])) + '.' + string(int(v[2])))[0])[0]"
    );
    let windows = matches(
        "p[0].lowerAscii()",
        globs_regex(&params.windows_images).as_ref(),
    );
    let u16_ = decimal_at_most(u64::from(u16::MAX));
    let u32_ = decimal_at_most(u64::from(u32::MAX));
    let selected = format!(
        "[has(variables.spec.nodeSelector) && 'node.kubernetes.io/windows-build' in variables.spec.nodeSelector ? variables.spec.nodeSelector['node.kubernetes.io/windows-build'] : ''].map(v, v.matches({}) ? [v.split('.')].map(x, string(int(x[0])) + '.' + string(int(x[1])) + '.' + string(int(x[2])))[0] : '')[0]",
        cel_str(&format!(r"^{u16_}\.{u16_}\.{u32_}(?:\.[0-9]+)?$")),
    );
    vec![
        (
            "images",
            "(variables.initContainers + variables.containers + variables.ephemeralContainers).filter(c, has(c.image)).map(c, string(c.image))".to_owned(),
        ),
        // [image, repository, tag], as `windows_builds::split_image`.
        (
            "imageNames",
            "variables.images.map(i, [i.trim().split('@')[0]].map(n, [n.lastIndexOf(':')].map(k, k >= 0 && !n.substring(k, size(n)).contains('/') ? [string(i), n.substring(0, k), n.substring(k + 1, size(n))] : [string(i), n, ''])[0])[0])".to_owned(),
        ),
        // [image, repository without the prefixes (then lowercased), tag
        // (lowercased), repository lowercased first (as the Linux check
        // reads it)].
        (
            "imageParts",
            format!(
                "variables.imageNames.map(p, [p[0], {}.lowerAscii(), p[2].lowerAscii(), {}])",
                strip("p[1]"),
                strip("p[1].lowerAscii()")
            ),
        ),
        // [image, the first tag word naming a build or '', 'listed', 'tag'
        // or ''].
        ("imageWords", words),
        // [image, build or '', 'windows' or '', 'listed', 'tag' or ''].
        (
            "imageFacts",
            format!(
                "variables.imageWords.map(p, [p[0], {build}, {windows} ? 'windows' : '', p[2]])"
            ),
        ),
        (
            "firstBuild",
            "variables.imageFacts.exists(f, f[1] != '') ? variables.imageFacts.filter(f, f[1] != '')[0][1] : ''".to_owned(),
        ),
        (
            "otherBuildImages",
            "variables.imageFacts.filter(f, f[1] != '' && f[1] != variables.firstBuild).map(f, f[0])".to_owned(),
        ),
        ("selectedBuild", selected),
        (
            "mismatchImages",
            "variables.selectedBuild == '' ? [] : variables.imageFacts.filter(f, f[1] != '' && f[1] != variables.selectedBuild).map(f, f[0])".to_owned(),
        ),
        (
            "windowsImages",
            "variables.imageFacts.filter(f, f[2] != '').map(f, f[0])".to_owned(),
        ),
        (
            "anyWindowsImage",
            "variables.imageFacts.exists(f, f[2] != '' || f[1] != '')".to_owned(),
        ),
        (
            "linuxImages",
            "variables.imageFacts.filter(f, f[1] == '' && f[2] == '' && f[3] != '').map(f, f[0])".to_owned(),
        ),
        (
            "listedLinuxImages",
            "variables.imageFacts.filter(f, f[1] == '' && f[2] == '' && f[3] == 'listed').map(f, f[0])".to_owned(),
        ),
        (
            "taggedLinuxImages",
            "variables.imageFacts.filter(f, f[1] == '' && f[2] == '' && f[3] == 'tag').map(f, f[0])".to_owned(),
        ),
    ]
}

/// A container whose image is in the list variable `list`.
fn image_in(list: &str) -> String {
    format!("has(c.image) && c.image in variables.{list}")
}

/// A pod-level security-context field Windows ignores.
fn pod_field(key: &'static str, keys: &'static [&'static str]) -> Probe {
    Probe::new(ProbeScope::Pod, pod_sc(key), keys)
}

/// A container security-context field Windows ignores.
fn container_field(key: &'static str, keys: &'static [&'static str]) -> Probe {
    Probe::new(ProbeScope::Container, c_sc(key), keys)
}

/// `windowsOptions` on the pod or a container; with `os_linux`, only where
/// `spec.os.name` is (`Some(true)`) or is not (`Some(false)`) `linux`.
fn windows_options(os_linux: Option<bool>) -> Vec<Probe> {
    const OS_LINUX: &str = "(has(variables.spec.os) && has(variables.spec.os.name) && variables.spec.os.name == 'linux')";
    let os = match os_linux {
        None => String::new(),
        Some(true) => format!("{OS_LINUX} && "),
        Some(false) => format!("!{OS_LINUX} && "),
    };
    let keys: &'static [&'static str] = &["securityContext", "windowsOptions"];
    vec![
        Probe::new(
            ProbeScope::Pod,
            format!("{os}{}", pod_sc("windowsOptions")),
            keys,
        ),
        Probe::new(
            ProbeScope::Container,
            format!("{os}{}", c_sc("windowsOptions")),
            keys,
        ),
    ]
}

/// The export of rule `id` at `cluster` with `policy`'s parameters.
#[must_use]
#[allow(clippy::too_many_lines)] // one arm per rule, like the rule table
pub fn export(id: &str, cluster: &Cluster, policy: &Policy) -> Export {
    let strict = cluster.is_strict();
    let docker = cluster.is_docker();
    let v = cluster.kubernetes_version;
    let cel = |probes: Vec<Probe>, message: &'static str| Export::Cel {
        probes,
        message,
        partial: None,
    };
    match id {
        // Kept on a container with a Bidirectional mount, which the API
        // server refuses unprivileged (WIN-API-REFUSED), as /mutate does.
        "WIN-PRIVILEGED" => cel(
            [false, true]
                .into_iter()
                .map(|bidirectional| {
                    Probe::new(
                        ProbeScope::Container,
                        format!(
                            "{} && c.securityContext.privileged == true && !{C_HOST_PROCESS} && {}{C_BIDIRECTIONAL}",
                            c_sc("privileged"),
                            if bidirectional { "" } else { "!" },
                        ),
                        &["securityContext", "privileged"],
                    )
                    .removable(!strict && !bidirectional)
                })
                .collect(),
            "privileged: true is ignored on Windows nodes (the container runs unprivileged); use a HostProcess container for node-level work",
        ),
        "WIN-RUNASUSER" => cel(
            vec![
                pod_field("runAsUser", &["securityContext", "runAsUser"]).removable(true),
                container_field("runAsUser", &["securityContext", "runAsUser"]).removable(true),
            ],
            "runAsUser is ignored on Windows nodes (no numeric user ids); use windowsOptions.runAsUserName",
        ),
        "WIN-RUNASGROUP" => cel(
            vec![
                pod_field("runAsGroup", &["securityContext", "runAsGroup"]).removable(true),
                container_field("runAsGroup", &["securityContext", "runAsGroup"]).removable(true),
            ],
            "runAsGroup is ignored on Windows nodes (no numeric group ids); use windowsOptions.runAsUserName",
        ),
        "WIN-HOSTNETWORK" => cel(
            vec![Probe::new(
                ProbeScope::Pod,
                "has(variables.spec.hostNetwork) && variables.spec.hostNetwork == true && !variables.anyHostProcess",
                &["hostNetwork"],
            )],
            "hostNetwork: true without HostProcess is not honoured on Windows nodes: the pod gets its own address but reports the node IP, so Services route to nothing",
        ),
        "WIN-HOSTPID" => cel(
            vec![Probe::new(
                ProbeScope::Pod,
                "has(variables.spec.hostPID) && variables.spec.hostPID == true && !variables.anyHostProcess",
                &["hostPID"],
            )],
            "hostPID: true is ignored on Windows nodes: the namespace is not shared",
        ),
        "WIN-HOSTIPC" => cel(
            vec![Probe::new(
                ProbeScope::Pod,
                "has(variables.spec.hostIPC) && variables.spec.hostIPC == true && !variables.anyHostProcess",
                &["hostIPC"],
            )],
            "hostIPC: true is ignored on Windows nodes: the namespace is not shared",
        ),
        "WIN-SHAREPROCESSNS" => cel(
            vec![Probe::new(
                ProbeScope::Pod,
                "has(variables.spec.shareProcessNamespace) && variables.spec.shareProcessNamespace == true",
                &["shareProcessNamespace"],
            )],
            "shareProcessNamespace: true is ignored on Windows nodes: the namespace is not shared",
        ),
        "WIN-SUBPATH" => {
            let container_hit = if docker {
                format!("has(c.volumeMounts) && c.volumeMounts.exists(m, {SUBPATH})")
            } else {
                format!("has(c.volumeMounts) && size(c.volumeMounts.filter(m, {SUBPATH})) >= 2")
            };
            cel(
                vec![Probe {
                    scope: ProbeScope::Mount,
                    container_hit: Some(container_hit),
                    hit: SUBPATH.to_owned(),
                    field: Field::Suffixes(SUBPATH_KEY.to_owned()),
                    removable: false,
                }],
                if docker {
                    "subPath mounts fail on Docker Windows nodes; mount the whole volume"
                } else {
                    "two or more subPath mounts in one container can leave the pod stuck Terminating on Windows kubelets without the subPath handle fix (kubernetes#138367)"
                },
            )
        }
        "WIN-EMPTYDIR-MEMORY" => cel(
            vec![
                Probe::new(
                    ProbeScope::Volume,
                    "has(v.emptyDir) && has(v.emptyDir.medium) && v.emptyDir.medium == 'Memory'",
                    &["emptyDir", "medium"],
                )
                .removable(policy.mutation.empty_dir_off_memory),
            ],
            if docker {
                "emptyDir medium Memory is not supported on Docker Windows nodes"
            } else {
                "emptyDir medium Memory is a disk directory on Windows nodes (no RAM disk; sizeLimit is not a tmpfs size)"
            },
        ),
        "WIN-SELINUX" => cel(
            vec![
                pod_field("seLinuxOptions", &["securityContext", "seLinuxOptions"]).removable(true),
                container_field("seLinuxOptions", &["securityContext", "seLinuxOptions"])
                    .removable(true),
            ],
            "seLinuxOptions is ignored on Windows nodes (no SELinux)",
        ),
        "WIN-SECCOMP" => {
            let not_default = |base: &str| {
                format!(
                    "!(has({base}.seccompProfile.type) && {base}.seccompProfile.type in ['RuntimeDefault', 'Localhost'])"
                )
            };
            cel(
                vec![
                    Probe::new(
                        ProbeScope::Pod,
                        format!(
                            "{} && {}",
                            pod_sc("seccompProfile"),
                            not_default("variables.spec.securityContext")
                        ),
                        &["securityContext", "seccompProfile"],
                    )
                    .removable(true),
                    Probe::new(
                        ProbeScope::Container,
                        format!(
                            "{} && {}",
                            c_sc("seccompProfile"),
                            not_default("c.securityContext")
                        ),
                        &["securityContext", "seccompProfile"],
                    )
                    .removable(true),
                ],
                "seccompProfile Unconfined is ignored on Windows nodes (no seccomp)",
            )
        }
        "WIN-APPARMOR" => {
            let annotation = "k.startsWith('container.apparmor.security.beta.kubernetes.io/')";
            cel(
                vec![
                    pod_field("appArmorProfile", &["securityContext", "appArmorProfile"])
                        .removable(true),
                    container_field("appArmorProfile", &["securityContext", "appArmorProfile"])
                        .removable(true),
                    Probe {
                        scope: ProbeScope::Pod,
                        container_hit: None,
                        hit: format!("variables.podAnnotations.exists(k, {annotation})"),
                        field: Field::Absolute(format!(
                            "variables.podAnnotations.filter(k, {annotation}).map(k, variables.metaPrefix + '.annotations[' + k + ']')"
                        )),
                        removable: false,
                    },
                ],
                if v >= KubeVersion::new(1, 20) {
                    "AppArmor is ignored on Windows nodes (no AppArmor)"
                } else {
                    "AppArmor is not supported on Windows nodes: up to Kubernetes 1.19 the kubelet blocks the pod"
                },
            )
        }
        "WIN-CAPABILITIES" => cel(
            vec![
                Probe::new(
                    ProbeScope::Container,
                    format!(
                        "{} && has(c.securityContext.capabilities.add) && size(c.securityContext.capabilities.add) > 0",
                        c_sc("capabilities")
                    ),
                    &["securityContext", "capabilities", "add"],
                )
                .removable(!strict),
            ],
            "capabilities.add is ignored on Windows nodes: the capability is not granted",
        ),
        "WIN-PRIV-ESCALATION" => cel(
            vec![
                Probe::new(
                    ProbeScope::Container,
                    format!(
                        "{} && c.securityContext.allowPrivilegeEscalation == true",
                        c_sc("allowPrivilegeEscalation")
                    ),
                    &["securityContext", "allowPrivilegeEscalation"],
                )
                .removable(true),
            ],
            "allowPrivilegeEscalation: true is not supported on Windows nodes",
        ),
        "WIN-PROCMOUNT" => cel(
            vec![
                Probe::new(
                    ProbeScope::Container,
                    format!(
                        "{} && c.securityContext.procMount != 'Default'",
                        c_sc("procMount")
                    ),
                    &["securityContext", "procMount"],
                )
                .removable(true),
            ],
            "procMount Unmasked is ignored on Windows nodes (no /proc filesystem)",
        ),
        "WIN-READONLY-ROOTFS" => cel(
            vec![Probe::new(
                ProbeScope::Container,
                format!(
                    "{} && c.securityContext.readOnlyRootFilesystem == true",
                    c_sc("readOnlyRootFilesystem")
                ),
                &["securityContext", "readOnlyRootFilesystem"],
            )],
            "readOnlyRootFilesystem: true is not supported on Windows nodes (the registry needs write access)",
        ),
        "WIN-SUPPLEMENTAL-GROUPS" => cel(
            vec![
                pod_field("supplementalGroups", &["securityContext", "supplementalGroups"])
                    .removable(true),
                pod_field(
                    "supplementalGroupsPolicy",
                    &["securityContext", "supplementalGroupsPolicy"],
                )
                .removable(true),
            ],
            "supplementalGroups and supplementalGroupsPolicy are ignored on Windows nodes (no group ids)",
        ),
        "WIN-SYSCTLS" => cel(
            vec![pod_field("sysctls", &["securityContext", "sysctls"])],
            if v >= KubeVersion::new(1, 27) {
                "sysctls are refused by the Windows kubelet (SysctlForbidden): the pod fails"
            } else {
                "sysctls are ignored on Windows nodes (no sysctl interface)"
            },
        ),
        "WIN-FSGROUP" => cel(
            vec![pod_field("fsGroup", &["securityContext", "fsGroup"]).removable(true)],
            "fsGroup is ignored on Windows nodes (no group ids or POSIX volume ownership)",
        ),
        "WIN-FSGROUP-CHANGE-POLICY" => cel(
            vec![
                pod_field("fsGroupChangePolicy", &["securityContext", "fsGroupChangePolicy"])
                    .removable(true),
            ],
            "fsGroupChangePolicy is ignored on Windows nodes (no POSIX volume ownership)",
        ),
        "WIN-VOLUME-DEVICES" => cel(
            vec![Probe::new(
                ProbeScope::Container,
                "has(c.volumeDevices)",
                &["volumeDevices"],
            )],
            "volumeDevices (raw block volumes) are not supported on Windows nodes",
        ),
        "WIN-POD-RESOURCES" => cel(
            vec![Probe::new(
                ProbeScope::Pod,
                // As the kubelet's IsPodLevelResourcesSet: cpu, memory or hugepages.
                "has(variables.spec.resources) && ((has(variables.spec.resources.requests) && variables.spec.resources.requests.exists(k, k == 'cpu' || k == 'memory' || k.startsWith('hugepages-'))) || (has(variables.spec.resources.limits) && variables.spec.resources.limits.exists(k, k == 'cpu' || k == 'memory' || k.startsWith('hugepages-'))))",
                &["resources"],
            )],
            "pod-level resources are refused by the Windows kubelet from Kubernetes 1.34; set resources per container",
        ),
        "WIN-HUGEPAGES" => {
            let list = |l: &str| {
                format!(
                    "(has(c.resources) && has(c.resources.{l}) ? c.resources.{l}.filter(k, k.startsWith('hugepages-')).map(k, '.resources.{l}[' + k + ']') : [])"
                )
            };
            cel(
                vec![
                    Probe {
                        scope: ProbeScope::Container,
                        container_hit: None,
                        hit: "has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(k, k.startsWith('hugepages-'))) || (has(c.resources.requests) && c.resources.requests.exists(k, k.startsWith('hugepages-'))))".to_owned(),
                        field: Field::Suffixes(format!("{} + {}", list("limits"), list("requests"))),
                        removable: false,
                    },
                    Probe::new(
                        ProbeScope::Volume,
                        "has(v.emptyDir) && has(v.emptyDir.medium) && v.emptyDir.medium.startsWith('HugePages')",
                        &["emptyDir", "medium"],
                    ),
                ],
                "huge pages are not supported on Windows nodes",
            )
        }
        "WIN-MOUNT-PROPAGATION" => cel(
            vec![Probe {
                scope: ProbeScope::Mount,
                container_hit: None,
                hit: "has(m.mountPropagation) && m.mountPropagation != 'None'".to_owned(),
                field: Field::Keys(&["mountPropagation"]),
                removable: false,
            }],
            "mountPropagation is ignored on Windows nodes (mounts stay private)",
        ),
        "WIN-NFS" => cel(
            vec![Probe::new(ProbeScope::Volume, "has(v.nfs)", &["nfs"])],
            "NFS volumes are not supported on Windows nodes; use SMB or a CSI driver with Windows support",
        ),
        "WIN-DNS-HOSTNET" => cel(
            vec![Probe::new(
                ProbeScope::Pod,
                "variables.anyHostProcess && has(variables.spec.dnsPolicy) && variables.spec.dnsPolicy == 'ClusterFirstWithHostNet'",
                &["dnsPolicy"],
            )],
            "dnsPolicy ClusterFirstWithHostNet on a HostProcess pod uses the node's DNS settings: cluster names may not resolve",
        ),
        "WIN-HOSTPROCESS-USER" => {
            let pod_user = "has(variables.spec.securityContext) && has(variables.spec.securityContext.windowsOptions) && has(variables.spec.securityContext.windowsOptions.runAsUserName) && variables.spec.securityContext.windowsOptions.runAsUserName != ''";
            let own_user = "has(c.securityContext) && has(c.securityContext.windowsOptions) && has(c.securityContext.windowsOptions.runAsUserName) && c.securityContext.windowsOptions.runAsUserName != ''";
            cel(
                vec![Probe::new(
                    ProbeScope::Container,
                    format!(
                        "variables.anyHostProcess && !({pod_user}) && {C_HOST_PROCESS} && !({own_user})"
                    ),
                    &["securityContext", "windowsOptions", "runAsUserName"],
                )],
                "HostProcess container has no runAsUserName (pod or container): the image's user does not exist on the host",
            )
        }
        "WIN-HOSTPROCESS-NONROOT" => cel(
            vec![
                Probe::new(
                    ProbeScope::Pod,
                    format!(
                        "variables.anyHostProcess && {} && variables.spec.securityContext.runAsNonRoot == true",
                        pod_sc("runAsNonRoot")
                    ),
                    &["securityContext", "runAsNonRoot"],
                ),
                Probe::new(
                    ProbeScope::Container,
                    format!(
                        "variables.anyHostProcess && {C_HOST_PROCESS} && {} && c.securityContext.runAsNonRoot == true",
                        c_sc("runAsNonRoot")
                    ),
                    &["securityContext", "runAsNonRoot"],
                ),
            ],
            "runAsNonRoot: true is not enforced for HostProcess containers (SYSTEM and service accounts pass the check)",
        ),
        "WIN-NONROOT-ADMIN" => {
            let non_root = "(has(c.securityContext) && has(c.securityContext.runAsNonRoot) ? c.securityContext.runAsNonRoot : (has(variables.spec.securityContext) && has(variables.spec.securityContext.runAsNonRoot) && variables.spec.securityContext.runAsNonRoot)) == true";
            let own_set = "has(c.securityContext) && has(c.securityContext.windowsOptions) && has(c.securityContext.windowsOptions.runAsUserName)";
            let admin = "matches('^(?i)containeradministrator$')";
            let pod_user = "variables.spec.securityContext.windowsOptions.runAsUserName";
            let pod_set = "has(variables.spec.securityContext) && has(variables.spec.securityContext.windowsOptions) && has(variables.spec.securityContext.windowsOptions.runAsUserName)";
            let inherits = format!("{non_root} && !({own_set})");
            cel(
                vec![
                    Probe::new(
                        ProbeScope::Container,
                        format!(
                            "{non_root} && {own_set} && c.securityContext.windowsOptions.runAsUserName.{admin}"
                        ),
                        &["securityContext", "windowsOptions", "runAsUserName"],
                    ),
                    Probe::new(
                        ProbeScope::Pod,
                        format!(
                            "{pod_set} && {pod_user}.{admin} && (variables.initContainers.exists(c, {inherits}) || variables.containers.exists(c, {inherits}) || variables.ephemeralContainers.exists(c, {inherits}))"
                        ),
                        &["securityContext", "windowsOptions", "runAsUserName"],
                    ),
                ],
                "a container that must run as non-root has runAsUserName ContainerAdministrator: the kubelet refuses to start it",
            )
        }
        "WIN-HYPERV" | "WIN-HYPERV-ANNOTATION" => {
            let key = cel_str(crate::rules::hyperv::ISOLATION_ANNOTATION);
            let mut hit = format!(
                "{key} in variables.podAnnotations && variables.podAnnotations[{key}] == 'hyperv'"
            );
            if id == "WIN-HYPERV" {
                hit.push_str(" && size(variables.containers) > 1");
            }
            cel(
                vec![Probe {
                    scope: ProbeScope::Pod,
                    container_hit: None,
                    hit,
                    field: Field::Absolute(format!(
                        "[variables.metaPrefix + '.annotations[' + {key} + ']']"
                    )),
                    removable: false,
                }],
                if id == "WIN-HYPERV" {
                    "Hyper-V isolation by annotation supports one container per pod"
                } else {
                    "the Hyper-V isolation annotation has no effect (the HyperVContainer feature gate was removed in 1.21): the pod runs process-isolated; use a RuntimeClass with a Hyper-V handler"
                },
            )
        }
        "WIN-DNS-SEARCHES" => cel(
            vec![Probe::new(
                ProbeScope::Pod,
                "has(variables.spec.dnsConfig) && has(variables.spec.dnsConfig.searches) && size(variables.spec.dnsConfig.searches) > 1",
                &["dnsConfig", "searches"],
            )],
            "Windows uses only one DNS search suffix (the pod namespace's) and ignores the rest: use fully qualified names",
        ),
        "WIN-HOSTPATH-LINUX-PATH" => {
            let prefixes: Vec<String> = policy
                .params
                .linux_host_paths
                .iter()
                .map(|p| regex_escape(p.trim_end_matches('/')))
                .collect();
            if prefixes.is_empty() {
                return Export::Gap("params.linuxHostPaths is empty: nothing to check");
            }
            // The path, or the path under a prefix, with trailing slashes allowed.
            let re = format!("^({})(/.*)?$", prefixes.join("|"));
            cel(
                vec![Probe::new(
                    ProbeScope::Volume,
                    format!(
                        "has(v.hostPath) && has(v.hostPath.path) && v.hostPath.path.matches({})",
                        cel_str(&format!("(?s){re}"))
                    ),
                    &["hostPath", "path"],
                )],
                "hostPath names a location that exists only on Linux hosts; a Windows node resolves it to an empty directory on C:",
            )
        }
        "WIN-HOSTPATH-LINUX-DEVICE" => cel(
            vec![Probe::new(
                ProbeScope::Volume,
                format!(
                    "has(v.hostPath) && has(v.hostPath.path) && has(v.hostPath.type) && v.hostPath.type in ['Socket', 'CharDevice', 'BlockDevice'] && !v.hostPath.path.matches({})",
                    cel_str(WINDOWS_PATH)
                ),
                &["hostPath", "type"],
            )],
            "a hostPath socket or device on a Linux path does not exist on a Windows node: the mount fails (FailedMount)",
        ),
        "WIN-OS-CONFLICT" => os_conflict(cluster, policy),
        "WIN-TAINT-TOLERATION" => {
            let Some(taint) = &policy.params.windows_taint else {
                return Export::Gap(
                    "needs the Windows node taint: set params.windowsTaint (the webhook learns it from the nodes)",
                );
            };
            let (key, value, effect) = (
                cel_str(&taint.key),
                cel_str(taint.value.as_deref().unwrap_or_default()),
                cel_str(&taint.effect),
            );
            let tolerates = format!(
                "(!has(t.effect) || t.effect == '' || t.effect == {effect}) && (((!has(t.key) || t.key == '') && has(t.operator) && t.operator == 'Exists') || (has(t.key) && t.key == {key} && ((has(t.operator) && t.operator == 'Exists') || ((!has(t.operator) || t.operator in ['Equal', '']) && (has(t.value) ? t.value : '') == {value}))))"
            );
            cel(
                vec![Probe::new(
                    ProbeScope::Pod,
                    format!(
                        "!(has(variables.spec.tolerations) && variables.spec.tolerations.exists(t, {tolerates}))"
                    ),
                    &["tolerations"],
                )],
                "no toleration for the Windows node taint: the pod cannot be scheduled onto Windows nodes",
            )
        }
        "WIN-UNPINNED-IMAGE" => {
            // The first container with a Windows image, as the rule reports.
            let lists: Vec<String> = super::CONTAINER_LISTS
                .iter()
                .map(|l| {
                    format!(
                        "variables.{l}.filter(c, {}).map(c, variables.prefix + '.{l}[' + string(variables.{l}Names.indexOf(c.name)) + '].image')",
                        image_in("windowsImages")
                    )
                })
                .collect();
            cel(
                vec![Probe {
                    scope: ProbeScope::Pod,
                    container_hit: None,
                    hit: "!variables.windows && size(variables.windowsImages) > 0".to_owned(),
                    field: Field::Absolute(format!(
                        "[{}].map(l, size(l) > 0 ? [l[0]] : [])[0]",
                        lists.join(" + ")
                    )),
                    removable: false,
                }],
                "a Windows image (params.windowsImages) in a pod that nothing pins to Windows nodes (no OS node selector, spec.os.name, affinity or Windows RuntimeClass): the scheduler may place it on a Linux node, where it cannot run",
            )
        }
        // Refused by the API server with `spec.os.name: linux` (1.23+);
        // ignored by the Linux kubelet where node selection alone targets Linux.
        "WIN-WINDOWSOPTIONS-LINUX" => cel(
            windows_options(Some(true)),
            "windows options cannot be set for a linux pod",
        ),
        "WIN-WINDOWSOPTIONS-LINUX-IGNORED" => cel(
            windows_options(cluster.version_at_least(1, 23).then_some(false)),
            "windowsOptions is ignored on Linux nodes, where this pod runs",
        ),
        "WIN-HOSTPATH-WINDOWS-PATH" => cel(
            vec![Probe::new(
                ProbeScope::Volume,
                format!(
                    "has(v.hostPath) && has(v.hostPath.path) && v.hostPath.path.matches({})",
                    cel_str(WINDOWS_PATH)
                ),
                &["hostPath", "path"],
            )],
            "hostPath is a Windows path but the pod targets Linux nodes",
        ),
        "WIN-MIXED-OS" => cel(
            vec![Probe::new(
                ProbeScope::Container,
                format!("variables.anyWindowsImage && {}", image_in("linuxImages")),
                &["image"],
            )],
            "the image runs only on Linux (params.linuxImages, params.linuxTagWords) but the pod also has a Windows image; a pod runs on one node, under one OS",
        ),
        "WIN-LINUX-IMAGE" => Export::Cel {
            probes: vec![Probe::new(
                ProbeScope::Container,
                format!(
                    "!variables.anyWindowsImage && {}",
                    image_in("listedLinuxImages")
                ),
                &["image"],
            )],
            message: "the image runs only on Linux (its repository is in params.linuxImages) but the pod targets Windows nodes: there is no Windows variant to pull",
            partial: Some(
                "images are judged by their names (params.linuxImages); the platforms their registries list (--image-facts, --registry) are not read",
            ),
        },
        "WIN-LINUX-IMAGE-TAG" => cel(
            vec![Probe::new(
                ProbeScope::Container,
                format!(
                    "!variables.anyWindowsImage && {}",
                    image_in("taggedLinuxImages")
                ),
                &["image"],
            )],
            "the image tag has a Linux distribution word (params.linuxTagWords) but the pod targets Windows nodes: a Linux-only build has no Windows variant to pull",
        ),
        "WIN-BUILD-MIXED" => cel(
            vec![Probe::new(
                ProbeScope::Container,
                format!(
                    "!variables.allHostProcess && {}",
                    image_in("otherBuildImages")
                ),
                &["image"],
            )],
            "the image needs another Windows build (by its tag) than the first image of the pod with a known build; one of them cannot match the node",
        ),
        "WIN-BUILD-NODE-MISMATCH" => Export::Cel {
            probes: vec![Probe::new(
                ProbeScope::Container,
                format!(
                    "!variables.allHostProcess && !variables.hyperv && {}",
                    image_in("mismatchImages")
                ),
                &["image"],
            )],
            message: "the image needs another Windows build (by its tag) than the pod selects with nodeSelector node.kubernetes.io/windows-build; a process-isolated container of another build does not start",
            partial: Some(
                "the build is read from the pod's nodeSelector only (the webhook also reads a RuntimeClass's scheduling.nodeSelector), and Hyper-V isolation is recognised by the names in params.hypervRuntimeClasses only (the webhook also reads RuntimeClass handlers)",
            ),
        },
        "WIN-HOSTPROCESS" => host_process(cluster, policy),
        "WIN-OS-FIELDS" => os_fields(v),
        _ => Export::Gap(gap_reason(id)),
    }
}

/// `WIN-OS-CONFLICT`: a Linux signal on a pod the match conditions found
/// Windows-targeted. Each Linux signal is reported at its field.
fn os_conflict(cluster: &Cluster, policy: &Policy) -> Export {
    let selector = |key: &str| {
        let k = cel_str(key);
        Probe {
            scope: ProbeScope::Pod,
            container_hit: None,
            hit: format!(
                "has(variables.spec.nodeSelector) && {k} in variables.spec.nodeSelector && variables.spec.nodeSelector[{k}] == 'linux'"
            ),
            field: Field::Suffixes(format!("[{}]", cel_str(&format!(".nodeSelector[{key}]")))),
            removable: false,
        }
    };
    let mut probes = vec![
        selector(crate::targeting::OS_LABEL),
        selector(crate::targeting::BETA_OS_LABEL),
    ];
    if cluster.version_at_least(1, 23) {
        probes.push(Probe::new(
            ProbeScope::Pod,
            "has(variables.spec.os) && has(variables.spec.os.name) && variables.spec.os.name == 'linux'",
            &["os", "name"],
        ));
    }
    let terms = "variables.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    probes.push(Probe::new(
        ProbeScope::Pod,
        format!(
            "has(variables.spec.affinity) && has(variables.spec.affinity.nodeAffinity) && has(variables.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) && has({terms}) && size({terms}) > 0 && {terms}.all(t, has(t.matchExpressions) && t.matchExpressions.exists(r, r.key in ['kubernetes.io/os', 'beta.kubernetes.io/os'] && r.operator == 'In' && has(r.values) && size(r.values) > 0 && r.values.all(x, x == 'linux')))"
        ),
        &["affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"],
    ));
    let linux_classes = policy
        .runtime_classes
        .names_for(crate::targeting::Os::Linux);
    if !linux_classes.is_empty() {
        probes.push(Probe::new(
            ProbeScope::Pod,
            format!(
                "has(variables.spec.runtimeClassName) && variables.spec.runtimeClassName in {}",
                super::cel_list(&linux_classes)
            ),
            &["runtimeClassName"],
        ));
    }
    Export::Cel {
        probes,
        message: "targets linux, but the pod also targets windows: no node matches both",
        partial: Some(
            "RuntimeClasses are known by the policy's lists only; the webhook also reads the cluster's RuntimeClasses",
        ),
    }
}

/// `WIN-HOSTPROCESS`: consistency, hostNetwork, and the target's support.
fn host_process(cluster: &Cluster, policy: &Policy) -> Export {
    let own_set = "has(c.securityContext) && has(c.securityContext.windowsOptions) && has(c.securityContext.windowsOptions.hostProcess)";
    let mut probes = vec![
        Probe::new(
            ProbeScope::Container,
            format!(
                "variables.podHostProcessSet && {own_set} && c.securityContext.windowsOptions.hostProcess != variables.podHostProcess"
            ),
            &["securityContext", "windowsOptions", "hostProcess"],
        ),
        Probe::new(
            ProbeScope::Pod,
            "variables.anyHostProcess && !variables.allHostProcess",
            &[],
        ),
        Probe::new(
            ProbeScope::Pod,
            "variables.anyHostProcess && !(has(variables.spec.hostNetwork) && variables.spec.hostNetwork == true)",
            &["hostNetwork"],
        ),
    ];
    let unsupported = !cluster.version_at_least(1, 22) || cluster.is_docker();
    // The first HostProcess field: the pod's, else the first HostProcess container's.
    let first = "[variables.podHostProcess ? variables.prefix + '.securityContext.windowsOptions.hostProcess' : (variables.initContainers.filter(c, HP).map(c, variables.prefix + '.initContainers[' + string(variables.initContainersNames.indexOf(c.name)) + '].securityContext.windowsOptions.hostProcess') + variables.containers.filter(c, HP).map(c, variables.prefix + '.containers[' + string(variables.containersNames.indexOf(c.name)) + '].securityContext.windowsOptions.hostProcess') + variables.ephemeralContainers.filter(c, HP).map(c, variables.prefix + '.ephemeralContainers[' + string(variables.ephemeralContainersNames.indexOf(c.name)) + '].securityContext.windowsOptions.hostProcess'))[0]]"
        .replace("HP", C_HOST_PROCESS);
    if unsupported {
        probes.push(Probe {
            scope: ProbeScope::Pod,
            container_hit: None,
            hit: "variables.anyHostProcess".to_owned(),
            field: Field::Absolute(first.clone()),
            removable: false,
        });
    }
    let hyperv = &policy.params.hyperv_runtime_classes;
    if !hyperv.is_empty() {
        probes.push(Probe {
            scope: ProbeScope::Pod,
            container_hit: None,
            hit: format!(
                "variables.anyHostProcess && has(variables.spec.runtimeClassName) && variables.spec.runtimeClassName in {}",
                super::cel_list(hyperv)
            ),
            field: Field::Absolute(first),
            removable: false,
        });
    }
    Export::Cel {
        probes,
        message: "HostProcess pods must be consistent (all containers or none, the same value on pod and containers), use hostNetwork: true, and need Kubernetes 1.22+ on containerd outside Hyper-V isolation",
        partial: Some(
            "Hyper-V isolation is recognised by the RuntimeClass names in params.hypervRuntimeClasses only; a class known as Hyper-V only by its handler (hypervRuntimeHandlers) needs the live RuntimeClass",
        ),
    }
}

/// `WIN-OS-FIELDS`: the API server's `validateWindows` list at `v`.
fn os_fields(v: KubeVersion) -> Export {
    if v < KubeVersion::new(1, 23) {
        return Export::Gap("spec.os does not exist before Kubernetes 1.23");
    }
    let at = |maj_min: (u16, u16)| v >= KubeVersion::new(maj_min.0, maj_min.1);
    let os = "variables.osWindows && ";
    let mut probes = Vec::new();
    let pod = |cond: String, keys: &'static [&'static str], removable: bool| {
        Probe::new(ProbeScope::Pod, format!("{os}{cond}"), keys).removable(removable)
    };
    if at((1, 25)) {
        probes.push(pod(
            "has(variables.spec.hostUsers)".into(),
            &["hostUsers"],
            false,
        ));
    }
    probes.push(pod(
        "has(variables.spec.hostPID) && variables.spec.hostPID == true".into(),
        &["hostPID"],
        false,
    ));
    probes.push(pod(
        "has(variables.spec.hostIPC) && variables.spec.hostIPC == true".into(),
        &["hostIPC"],
        false,
    ));
    probes.push(pod(
        "has(variables.spec.shareProcessNamespace) && variables.spec.shareProcessNamespace == true"
            .into(),
        &["shareProcessNamespace"],
        false,
    ));
    probes.push(pod(
        "has(variables.spec.shareProcessNamespace) && variables.spec.shareProcessNamespace == false"
            .into(),
        &["shareProcessNamespace"],
        true,
    ));
    if at((1, 34)) {
        probes.push(pod(
            "has(variables.spec.resources)".into(),
            &["resources"],
            false,
        ));
    }
    macro_rules! pod_sc {
        ($key:literal) => {
            (
                pod_sc($key),
                &["securityContext", $key] as &'static [&'static str],
            )
        };
    }
    let mut pod_fields = vec![
        pod_sc!("seLinuxOptions"),
        pod_sc!("fsGroup"),
        pod_sc!("fsGroupChangePolicy"),
        pod_sc!("sysctls"),
        pod_sc!("runAsUser"),
        pod_sc!("runAsGroup"),
        pod_sc!("supplementalGroups"),
    ];
    if at((1, 30)) {
        pod_fields.push(pod_sc!("appArmorProfile"));
    }
    if at((1, 31)) {
        pod_fields.push(pod_sc!("supplementalGroupsPolicy"));
    }
    if at((1, 32)) {
        pod_fields.push(pod_sc!("seLinuxChangePolicy"));
    }
    for (cond, keys) in pod_fields {
        probes.push(pod(cond, keys, false));
    }
    let rd = "has(variables.spec.securityContext.seccompProfile.type) && variables.spec.securityContext.seccompProfile.type == 'RuntimeDefault'";
    probes.push(pod(
        format!("{} && {rd}", pod_sc("seccompProfile")),
        &["securityContext", "seccompProfile"],
        true,
    ));
    probes.push(pod(
        format!("{} && !({rd})", pod_sc("seccompProfile")),
        &["securityContext", "seccompProfile"],
        false,
    ));
    let container = |cond: String, keys: &'static [&'static str], removable: bool| {
        Probe::new(ProbeScope::Container, format!("{os}{cond}"), keys).removable(removable)
    };
    macro_rules! c_sc {
        ($key:literal) => {
            (
                c_sc($key),
                &["securityContext", $key] as &'static [&'static str],
            )
        };
    }
    let mut plain = vec![
        c_sc!("seLinuxOptions"),
        c_sc!("runAsUser"),
        c_sc!("runAsGroup"),
    ];
    if at((1, 30)) {
        plain.push(c_sc!("appArmorProfile"));
    }
    for (cond, keys) in plain {
        probes.push(container(cond, keys, false));
    }
    // Fields whose no-op value the mutation removes: (key, CEL no-op test).
    let split: [(&'static str, &'static [&'static str], &str); 5] = [
        (
            "seccompProfile",
            &["securityContext", "seccompProfile"],
            "has(c.securityContext.seccompProfile.type) && c.securityContext.seccompProfile.type == 'RuntimeDefault'",
        ),
        (
            "capabilities",
            &["securityContext", "capabilities"],
            "!(has(c.securityContext.capabilities.add) && size(c.securityContext.capabilities.add) > 0)",
        ),
        (
            "readOnlyRootFilesystem",
            &["securityContext", "readOnlyRootFilesystem"],
            "c.securityContext.readOnlyRootFilesystem == false",
        ),
        (
            "privileged",
            &["securityContext", "privileged"],
            "c.securityContext.privileged == false",
        ),
        (
            "allowPrivilegeEscalation",
            &["securityContext", "allowPrivilegeEscalation"],
            "c.securityContext.allowPrivilegeEscalation == false",
        ),
    ];
    for (key, keys, no_op) in split {
        probes.push(container(format!("{} && {no_op}", c_sc(key)), keys, true));
        probes.push(container(
            format!("{} && !({no_op})", c_sc(key)),
            keys,
            false,
        ));
    }
    probes.push(container(
        format!(
            "{} && c.securityContext.procMount == 'Default'",
            c_sc("procMount")
        ),
        &["securityContext", "procMount"],
        true,
    ));
    probes.push(container(
        format!(
            "{} && c.securityContext.procMount != 'Default'",
            c_sc("procMount")
        ),
        &["securityContext", "procMount"],
        false,
    ));
    Export::Cel {
        probes,
        message: "cannot be set for a windows pod (the API server refuses it with spec.os.name: windows)",
        partial: None,
    }
}

/// Why a rule is not exported.
fn gap_reason(id: &str) -> &'static str {
    match id {
        "WIN-OS-INVALID" => {
            "the API server validates spec.os itself (Required / NotSupported); nothing to add"
        }
        "WIN-API-REFUSED" => {
            "the API server refuses these pods itself, for every OS; nothing to add"
        }
        "WIN-LINUX-TOLERATES-WINDOWS" => {
            "judges the tolerations of workloads that do not target Windows against params.windowsTaint; not exported in this version"
        }
        "WIN-BUILD-NO-NODE" => "needs the builds of the cluster's Windows nodes: live facts",
        "WIN-IMAGE-WINDOWS-ONLY" | "WIN-IMAGE-FACTS-UNKNOWN" | "WIN-IMAGE-ARCH-NO-NODE" => {
            "needs the images' platforms from their registries, which CEL cannot read: the webhook, `lint --image-facts` and `lint --registry` judge them"
        }
        "WIN-SERVICE-AFFINITY-TIMEOUT" => {
            "judges Services by the pods behind them: needs live facts"
        }
        "WIN-GMSA-NOT-FOUND" | "WIN-GMSA-NO-CREDSPEC" | "WIN-GMSA-CONTENTS-MISMATCH" => {
            "needs the cluster's GMSACredentialSpec objects, which CEL in an admission policy cannot read: live facts"
        }
        "WIN-GMSA-NOT-AUTHORIZED" => {
            "needs a SubjectAccessReview for the pod's service account, which CEL can ask only for the requesting user: live facts"
        }
        "WIN-GMSA-AUTHZ-UNKNOWN" => {
            "says that the live report could not ask a SubjectAccessReview; an admission policy asks nothing: nothing to export"
        }
        "WIN-GMSA-CONTENTS-WITHOUT-NAME" => {
            "applies only where the cluster serves GMSACredentialSpecs, which an admission policy cannot tell: left to the webhook"
        }
        "WIN-GMSA-INLINE" => {
            "a mutation from a GMSACredentialSpec's contents, which an admission policy cannot read: live facts"
        }
        "WIN-GMSA-UPDATE" => {
            "the API server already refuses changes to a pod's windowsOptions (pod spec immutability); nothing to add"
        }
        "WIN-WINDOWSOPTIONS-FORMAT" => {
            "mirrors the API server's own validation of windowsOptions (gMSA names and specs, runAsUserName), which refuses these objects itself; nothing to add"
        }
        _ => "left to the webhook in this version",
    }
}
