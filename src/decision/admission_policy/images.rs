//! The variables that work out, once per request, what each container
//! image is (its Windows build by `policies/windows-builds.yaml`, a Windows
//! image by `params.windowsImages`, a Linux-only image by
//! `params.linuxImages` and `params.linuxTagWords`), and the regular
//! expressions behind them.

use std::fmt::Write as _;

use crate::decision::policy::Policy;
use crate::decision::rules::cel::{cel_str, globs_regex, regex_escape};

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
    let table = &*crate::decision::windows_builds::EMBEDDED;
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

/// `subject.matches(re)` in CEL, or `false` without an expression.
fn matches(subject: &str, re: Option<&String>) -> String {
    re.map_or_else(
        || "false".to_owned(),
        |re| format!("{subject}.matches({})", cel_str(re)),
    )
}

/// The repository `repo` without `docker.io/`, `index.docker.io/` and `library/`.
fn strip(repo: &str) -> String {
    format!(
        "[{repo}].map(r, r.startsWith('docker.io/') ? r.substring(10, size(r)) : (r.startsWith('index.docker.io/') ? r.substring(16, size(r)) : r)).map(r, r.startsWith('library/') ? r.substring(8, size(r)) : r)[0]"
    )
}

/// 'listed' (params.linuxImages), 'tag' (a params.linuxTagWords word
/// only) or '', as `RuleParams::linux_by`, of the parts `p`.
fn linux_by(policy: &Policy) -> String {
    let params = &policy.params;
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
    format!(
        "p[2].matches('windows|nanoserver|servercore|(?:^|[-_])win(?:[-_]|$)') ? '' : ({} ? 'listed' : ({} ? 'tag' : ''))",
        matches("p[3]", globs_regex(&params.linux_images).as_ref()),
        matches("p[2]", linux_words.as_ref()),
    )
}

/// The `imageWords` variable: [image, the first tag word naming a build
/// or '', 'listed', 'tag' or ''].
fn image_words(policy: &Policy, known: &str, unknown: &str) -> String {
    let table = &*crate::decision::windows_builds::EMBEDDED;
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
    format!(
        "variables.imageParts.map(p, [p[0], [{marked}.filter(w, w.matches('[0-9]'))].map(ws, {} ? ws.filter(w, w.matches({})) : ws.filter(w, w.matches({}))).map(l, size(l) > 0 ? l[0] : '')[0], {}])",
        matches("p[1]", globs_regex(&table.repositories).as_ref()),
        cel_str(known),
        cel_str(unknown),
        linux_by(policy),
    )
}

/// The `selectedBuild` variable: the build the pod's nodeSelector
/// `node.kubernetes.io/windows-build` names, or ''.
fn selected_build() -> String {
    let u16_ = decimal_at_most(u64::from(u16::MAX));
    let u32_ = decimal_at_most(u64::from(u32::MAX));
    format!(
        "[has(variables.spec.nodeSelector) && 'node.kubernetes.io/windows-build' in variables.spec.nodeSelector ? variables.spec.nodeSelector['node.kubernetes.io/windows-build'] : ''].map(v, v.matches({}) ? [v.split('.')].map(x, string(int(x[0])) + '.' + string(int(x[1])) + '.' + string(int(x[2])))[0] : '')[0]",
        cel_str(&format!(r"^{u16_}\.{u16_}\.{u32_}(?:\.[0-9]+)?$")),
    )
}

/// CEL: can a host of build `host` run an image of build `image` (both
/// CEL strings `MAJOR.MINOR.BUILD`), as `windows_builds::runs_on` with the
/// embedded table's stable-ABI releases.
#[must_use]
pub fn cel_runs_on(host: &str, image: &str) -> String {
    let table = &*crate::decision::windows_builds::EMBEDDED;
    let mut ltsc: Vec<u32> = table
        .releases
        .iter()
        .filter(|r| r.stable_abi)
        .map(|r| r.build.build)
        .collect();
    ltsc.sort_unstable();
    let from = crate::decision::windows_builds::STABLE_ABI_FROM.build;
    let mut oldest = from.to_string();
    for b in ltsc {
        oldest = format!("(int(p[0][2]) > {b} ? {b} : {oldest})");
    }
    format!(
        "[[{host}.split('.'), {image}.split('.')]].all(p, p[0][0] == p[1][0] && p[0][1] == p[1][1] && (int(p[0][2]) < {from} ? int(p[0][2]) == int(p[1][2]) : {oldest} <= int(p[1][2]) && int(p[1][2]) <= int(p[0][2])))"
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
    let (known, unknown, _, names) = build_regexes();
    let words = image_words(policy, &known, &unknown);
    let build = format!(
        "p[1] == '' ? '' : [p[1].startsWith('*') ? p[1].substring(1, size(p[1])) : p[1]].map(x, x in {names} ? {names}[x] : [x.split('.')].map(v, '10.' + string(int(v[1])) + '.' + string(int(v[2])))[0])[0]"
    );
    let windows = matches(
        "p[0].lowerAscii()",
        globs_regex(&policy.params.windows_images).as_ref(),
    );
    let selected = selected_build();
    vec![
        (
            "images",
            "variables.allContainers.filter(c, has(c.image)).map(c, string(c.image))".to_owned(),
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
            format!(
                "variables.imageFacts.filter(f, f[1] != '' && !({} || {})).map(f, f[0])",
                cel_runs_on("f[1]", "variables.firstBuild"),
                cel_runs_on("variables.firstBuild", "f[1]")
            ),
        ),
        ("selectedBuild", selected),
        (
            "mismatchImages",
            format!(
                "variables.selectedBuild == '' ? [] : variables.imageFacts.filter(f, f[1] != '' && !{}).map(f, f[0])",
                cel_runs_on("variables.selectedBuild", "f[1]")
            ),
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
        // `RuleParams::is_certain_windows_image`: a tag word
        // `windowsservercore` or `nanoserver`, a Windows build by the
        // table, or `params.certainWindowsImages`.
        (
            "certainWindowsImages",
            format!(
                "variables.imageParts.filter(p, p[2].replace('_', '-').split('-').exists(w, w == 'windowsservercore' || w == 'nanoserver') || {}).map(p, p[0]) + variables.imageFacts.filter(f, f[1] != '').map(f, f[0])",
                matches(
                    "p[0].lowerAscii()",
                    globs_regex(&policy.params.certain_windows_images).as_ref()
                )
            ),
        ),
        ("pinnableByImages", pinnable_by_images(policy)),
    ]
}

/// Does the policy pin pods to Windows by their images' names?
pub(super) fn pins_by_images(policy: &Policy) -> bool {
    policy.mutation.pin_windows_images
        && policy.mutation.inject_node_selector
        && policy
            .level_of(
                crate::decision::rules::unpinned_image::ID,
                &crate::decision::cluster::TargetCluster::default(),
            )
            .is_some()
}

/// The images pin a pod that selects no OS to Windows
/// (`mutation.pinWindowsImages`, as WIN-UNPINNED-IMAGE's fix): an image is
/// Windows by `params.windowsImages`, one can only be Windows by its name,
/// and none is known to run only on Linux; not when the object is exempt or
/// skips WIN-UNPINNED-IMAGE, or the policy turns the rule, the pin or the
/// node selector off. Whether the pod selects an OS is the match
/// conditions' to say, at the target's version
/// (`conditions::mutation_match_conditions`).
fn pinnable_by_images(policy: &Policy) -> String {
    if !pins_by_images(policy) {
        return "false".to_owned();
    }
    format!(
        "!({}) && size(variables.windowsImages) > 0 && size(variables.certainWindowsImages) > 0 && size(variables.linuxImages) == 0",
        super::validations::exempt_or_skipped(policy, crate::decision::rules::unpinned_image::ID)
    )
}
