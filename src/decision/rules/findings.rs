//! Where a rule writes its findings ([`RuleFindings`]), and the check
//! several rules share for a security-context field at pod and container
//! level ([`security_field`]).

use super::RuleContext;
use crate::decision::finding::{Finding, Fix, FixKind, Severity};
use crate::decision::path::FieldPath;
use crate::decision::view::SecurityContextView;

/// Where a rule writes its findings. The engine sets the rule and severity;
/// the rule gives the field, the message and, where safe, the fix.
pub struct RuleFindings {
    pub(crate) rule: &'static str,
    pub(crate) severity: Severity,
    pub(crate) findings: Vec<Finding>,
}

impl RuleFindings {
    #[must_use]
    pub fn new() -> Self {
        Self {
            rule: "",
            severity: Severity::Error,
            findings: Vec::new(),
        }
    }

    /// Drops the findings after the first `len` (a rule the workload opted out of).
    pub(crate) fn truncate(&mut self, len: usize) {
        self.findings.truncate(len);
    }

    /// The findings reported so far.
    pub(crate) fn into_findings(self) -> Vec<Finding> {
        self.findings
    }

    pub fn report(&mut self, field: FieldPath, message: impl Into<String>) {
        self.push(field, message.into(), None);
    }

    /// Reports a finding whose fix removes the offending field: safe only
    /// for settings that have no effect on Windows.
    pub fn report_removable(&mut self, field: FieldPath, message: impl Into<String>, fix: &str) {
        let op = crate::decision::finding::remove_op(&field);
        let fix = Fix {
            kind: FixKind::RemoveNoOp,
            description: fix.to_owned(),
            ops: vec![op],
        };
        self.push(field, message.into(), Some(fix));
    }

    pub fn report_with_fix(&mut self, field: FieldPath, message: impl Into<String>, fix: Fix) {
        self.push(field, message.into(), Some(fix));
    }

    /// Reports a removable finding when `removable`, a plain one otherwise
    /// (the strict stance keeps "intent lost" fields so validation sees them).
    pub fn report_maybe_removable(
        &mut self,
        removable: bool,
        field: FieldPath,
        message: impl Into<String>,
        fix: &str,
    ) {
        if removable {
            self.report_removable(field, message, fix);
        } else {
            self.report(field, message);
        }
    }

    fn push(&mut self, field: FieldPath, message: String, fix: Option<Fix>) {
        self.findings.push(Finding {
            rule: self.rule,
            severity: self.severity,
            field,
            message,
            fix,
        });
    }
}

impl Default for RuleFindings {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether a rule reports a security-context field, and whether the fix
/// may remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reported {
    /// Not set, or set to an accepted value: not reported.
    No,
    /// Reported; removing it would change behaviour somewhere, so no
    /// automatic fix.
    Kept,
    /// Reported, and set to a value that has no effect on Windows:
    /// removing it is safe.
    Removable,
}

/// A field Windows ignores: reported, and removable, when `set`.
#[must_use]
pub fn removable_if(set: bool) -> Reported {
    if set {
        Reported::Removable
    } else {
        Reported::No
    }
}

impl From<bool> for Reported {
    fn from(reported: bool) -> Self {
        if reported { Self::Kept } else { Self::No }
    }
}

/// Checks one security-context field at pod level and in every container.
/// `pod` and `container` say whether the field is reported; `message` is the
/// finding's text and `fix` describes the removal for no-op values.
pub(crate) fn security_field(
    cx: &RuleContext<'_, '_, '_>,
    out: &mut RuleFindings,
    key: &'static str,
    message: &str,
    pod: Option<&dyn Fn(&crate::decision::view::PodSecurityContextView<'_>) -> Reported>,
    container: Option<&dyn Fn(&SecurityContextView<'_>) -> Reported>,
    fix: &str,
) {
    // Paths are built only for hits: this runs for every container and rule.
    let mut emit = |hit: Reported, path: &dyn Fn() -> FieldPath| match hit {
        Reported::No => {}
        Reported::Kept => out.report(path(), message),
        Reported::Removable => out.report_removable(path(), message, fix),
    };
    if let (Some(pod), Some(sc)) = (pod, cx.pod_security_context()) {
        emit(pod(sc), &|| cx.spec_field(&["securityContext", key]));
    }
    if let Some(container) = container {
        for c in cx.containers() {
            if let Some(sc) = c.security_context() {
                emit(container(sc), &|| {
                    cx.container_field(&c, &["securityContext", key])
                });
            }
        }
    }
}
