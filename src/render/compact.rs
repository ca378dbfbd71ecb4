//! The report as `lint` holds it while files are read: findings as small
//! records that share their strings, so a large input costs little more
//! memory than its text.
//!
//! A finding's object (file, document, kind, name), field path, message
//! and patch are shared ([`Strings`] keeps one copy of each distinct text
//! per part of the input): a large input has many findings but few
//! distinct messages and field paths, and a record is far smaller than a
//! [`LintFinding`] with its eight strings and patch.
//! The renderers read either form through [`Report`];
//! [`CompactReport::into_report`] gives the [`LintReport`] of the library
//! API. The two forms are kept because the compact one pays in peak
//! memory (docs/BENCHMARKS.md, "lint on one large file" and "What was
//! tried and not kept").

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{
    CheckedRef, FindingRef, InputProblem, LintFinding, LintReport, LintSummary, ObjectId, Report,
};
use crate::decision::exceptions::ExceptionRef;
use crate::decision::finding::{PatchOperation, Severity};
use crate::decision::rules::RuleInfo;

/// A shared text: one pointer wide, so a record stays small.
pub type Shared = Arc<String>;

/// Which object a finding or a checked workload is about, and where it is
/// (shared by its findings).
#[derive(Debug, PartialEq, Eq)]
pub struct Object {
    pub file: Shared,
    /// Files are at most [`crate::input::source::MAX_FILE_BYTES`]: object indexes,
    /// lines and columns fit.
    pub document: u32,
    pub api_version: Shared,
    pub kind: Shared,
    pub namespace: Option<Shared>,
    pub name: Box<str>,
}

/// One finding: [`LintFinding`] with its texts shared (56 bytes).
#[derive(Debug, Clone)]
pub struct Record {
    pub object: Arc<Object>,
    pub field: Shared,
    pub message: Shared,
    /// Kept only when the output shows patches ([`CompactReport::new`]).
    pub patch: Option<Arc<Vec<PatchOperation>>>,
    pub rule: &'static RuleInfo,
    pub line: u32,
    pub column: u32,
    pub severity: Severity,
}

impl Record {
    /// Sets the position, 1-based as the parser gives it.
    pub fn place(&mut self, line: u64, column: u64) {
        self.line = narrow(line);
        self.column = narrow(column);
    }

    #[must_use]
    pub fn at(&self) -> (u64, u64) {
        (u64::from(self.line), u64::from(self.column))
    }
}

fn narrow(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A [`Shared`] text looked up by `&str`.
#[derive(Debug)]
struct Key(Shared);

impl std::borrow::Borrow<str> for Key {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.as_str().hash(h);
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Key {}

/// Where a [`CompactReport`] stood ([`CompactReport::mark`]).
#[derive(Debug, Clone)]
pub struct Mark {
    pub(crate) findings: usize,
    excepted: usize,
    checked: usize,
    input_errors: usize,
    notes: usize,
    input_warnings: usize,
    summary: LintSummary,
}

/// One copy of each distinct text.
#[derive(Debug, Default)]
pub struct Strings {
    texts: HashSet<Key>,
    /// Patches by their JSON text.
    patches: HashMap<String, Arc<Vec<PatchOperation>>>,
    /// Where [`Strings::display`] writes.
    scratch: String,
    /// The texts last looked up (at most [`RECENT`]), and which to replace next.
    recent: Vec<Shared>,
    next_recent: usize,
}

/// How many recent texts [`Strings::get`] compares before hashing.
const RECENT: usize = 16;

impl Strings {
    /// The shared copy of `s`.
    pub fn get(&mut self, s: &str) -> Shared {
        // The texts of one object's findings come round again with the
        // next object's: compared with the last few before hashing.
        if let Some(a) = self.recent.iter().find(|a| a.as_str() == s) {
            return Arc::clone(a);
        }
        let a = match self.texts.get(s) {
            Some(k) => Arc::clone(&k.0),
            None => {
                let a = Arc::new(s.to_owned());
                self.texts.insert(Key(Arc::clone(&a)));
                a
            }
        };
        if self.recent.len() < RECENT {
            self.recent.push(Arc::clone(&a));
        } else {
            self.recent[self.next_recent] = Arc::clone(&a);
            self.next_recent = (self.next_recent + 1) % RECENT;
        }
        a
    }

    /// The shared copy of `d`'s text (written into a buffer kept for the
    /// next, not a new string each time).
    pub fn display(&mut self, d: &impl std::fmt::Display) -> Shared {
        use std::fmt::Write as _;
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        write!(scratch, "{d}").expect("writing to a String does not fail");
        let shared = self.get(&scratch);
        self.scratch = scratch;
        shared
    }

    fn patch(&mut self, ops: Vec<PatchOperation>) -> Arc<Vec<PatchOperation>> {
        let key = serde_json::to_string(&ops).expect("patches are plain data");
        Arc::clone(self.patches.entry(key).or_insert_with(|| Arc::new(ops)))
    }
}

/// Everything `lint` found, held compactly. Same content as [`LintReport`].
#[derive(Debug, Default)]
pub struct CompactReport {
    pub findings: Vec<Record>,
    /// The findings a `PolicyException` covers, with it: shown as skipped,
    /// never counted.
    pub excepted: Vec<(Record, Arc<ExceptionRef>)>,
    /// The workloads checked, in input order.
    pub checked: Vec<Arc<Object>>,
    pub input_errors: Vec<InputProblem>,
    pub notes: Vec<InputProblem>,
    pub input_warnings: Vec<InputProblem>,
    pub summary: LintSummary,
    /// Whether findings keep their patches (only JSON shows them).
    pub keep_patches: bool,
    pub strings: Strings,
    /// Rules seen, for [`CompactReport::record`].
    rules: Vec<&'static RuleInfo>,
}

impl CompactReport {
    /// An empty report; `keep_patches` when the output shows patches.
    #[must_use]
    pub fn new(keep_patches: bool) -> Self {
        Self {
            keep_patches,
            ..Self::default()
        }
    }

    /// An empty report for a later part of the input, keeping what this
    /// one keeps.
    #[must_use]
    pub fn part(&self) -> Self {
        Self::new(self.keep_patches)
    }

    /// The shared record of an object, document `document` of `file`.
    pub fn object(&mut self, file: &Shared, document: usize, id: ObjectId<'_>) -> Arc<Object> {
        Arc::new(Object {
            file: Arc::clone(file),
            document: u32::try_from(document).unwrap_or(u32::MAX),
            api_version: self.strings.get(id.api_version),
            kind: self.strings.get(id.kind),
            namespace: id.namespace.map(|n| self.strings.get(n)),
            name: id.name.into(),
        })
    }

    /// A record of `f` about `object`, at line and column 0 until placed.
    ///
    /// # Panics
    /// If the finding names a rule outside the catalogue (a bug: findings
    /// only come from catalogued rules).
    pub fn record(&mut self, object: &Arc<Object>, f: crate::decision::finding::Finding) -> Record {
        let rule = self.rule(f.rule);
        Record {
            object: Arc::clone(object),
            field: self.strings.display(&f.field),
            message: self.strings.get(&f.message),
            patch: match f.fix {
                Some(fix) if self.keep_patches => Some(self.strings.patch(fix.ops)),
                _ => None,
            },
            rule,
            line: 0,
            column: 0,
            severity: f.severity,
        }
    }

    /// A rule's documentation, by its id: looked up among the few rules
    /// this report has named so far (usually the same string, compared by
    /// address) before the whole catalogue.
    fn rule(&mut self, id: &'static str) -> &'static RuleInfo {
        if let Some(info) = self
            .rules
            .iter()
            .find(|r| std::ptr::eq(r.id, id) || r.id == id)
        {
            return info;
        }
        let info = &crate::decision::rules::find(id)
            .expect("findings name catalogued rules")
            .info;
        self.rules.push(info);
        info
    }

    /// Records that `object` was checked.
    pub fn add_checked(&mut self, object: &Arc<Object>) {
        self.checked.push(Arc::clone(object));
    }

    /// Where the report stands, to [`rollback`](Self::rollback) to.
    #[must_use]
    pub fn mark(&self) -> Mark {
        Mark {
            findings: self.findings.len(),
            excepted: self.excepted.len(),
            checked: self.checked.len(),
            input_errors: self.input_errors.len(),
            notes: self.notes.len(),
            input_warnings: self.input_warnings.len(),
            summary: self.summary.clone(),
        }
    }

    /// Takes out everything added since `mark`.
    pub fn rollback(&mut self, mark: &Mark) {
        self.findings.truncate(mark.findings);
        self.excepted.truncate(mark.excepted);
        self.checked.truncate(mark.checked);
        self.input_errors.truncate(mark.input_errors);
        self.notes.truncate(mark.notes);
        self.input_warnings.truncate(mark.input_warnings);
        self.summary = mark.summary.clone();
    }

    /// Appends the report of a later part of the input, keeping input order.
    pub fn absorb(&mut self, other: Self) {
        let Self {
            findings,
            excepted,
            checked,
            input_errors,
            notes,
            input_warnings,
            summary,
            keep_patches: _,
            strings: _,
            rules: _,
        } = other;
        super::append(&mut self.findings, findings);
        super::append(&mut self.excepted, excepted);
        super::append(&mut self.checked, checked);
        super::append(&mut self.input_errors, input_errors);
        super::append(&mut self.notes, notes);
        super::append(&mut self.input_warnings, input_warnings);
        self.summary.absorb(&summary);
    }

    /// The report as the library API gives it.
    #[must_use]
    pub fn into_report(self) -> LintReport {
        LintReport {
            findings: self
                .findings
                .iter()
                .map(|r| {
                    let f = finding_ref(r);
                    LintFinding {
                        file: f.file.to_owned(),
                        line: f.line,
                        column: f.column,
                        document: f.document,
                        api_version: f.api_version.to_owned(),
                        kind: f.kind.to_owned(),
                        namespace: f.namespace.map(str::to_owned),
                        name: f.name.to_owned(),
                        rule: f.rule,
                        severity: f.severity,
                        field: f.field.to_owned(),
                        message: f.message.to_owned(),
                        title: f.title,
                        doc_url: f.doc_url,
                        fix: f.fix,
                        patch: f.patch.map(<[PatchOperation]>::to_vec),
                    }
                })
                .collect(),
            checked: self
                .checked
                .iter()
                .map(|c| super::Checked {
                    file: c.file.to_string(),
                    document: c.document as usize,
                    kind: c.kind.to_string(),
                    namespace: c.namespace.as_deref().cloned(),
                    name: c.name.to_string(),
                })
                .collect(),
            input_errors: self.input_errors,
            notes: self.notes,
            input_warnings: self.input_warnings,
            summary: self.summary,
        }
    }
}

fn finding_ref(r: &Record) -> FindingRef<'_> {
    let o = &r.object;
    FindingRef {
        file: &o.file,
        line: u64::from(r.line),
        column: u64::from(r.column),
        document: o.document as usize,
        api_version: &o.api_version,
        kind: &o.kind,
        namespace: o.namespace.as_deref().map(String::as_str),
        name: &o.name,
        rule: r.rule.id,
        severity: r.severity,
        field: &r.field,
        message: &r.message,
        title: r.rule.title,
        doc_url: r.rule.doc_url,
        fix: r.rule.fix,
        patch: r.patch.as_deref().map(Vec::as_slice),
    }
}

impl Report for CompactReport {
    fn finding_count(&self) -> usize {
        self.findings.len()
    }

    fn excepted_count(&self) -> usize {
        self.excepted.len()
    }

    fn excepted(&self, i: usize) -> Option<(FindingRef<'_>, &ExceptionRef)> {
        self.excepted
            .get(i)
            .map(|(r, e)| (finding_ref(r), e.as_ref()))
    }

    fn finding(&self, i: usize) -> FindingRef<'_> {
        finding_ref(&self.findings[i])
    }

    fn checked_count(&self) -> usize {
        self.checked.len()
    }

    fn checked(&self, i: usize) -> CheckedRef<'_> {
        let c = &self.checked[i];
        CheckedRef {
            file: &c.file,
            document: c.document as usize,
            kind: &c.kind,
            namespace: c.namespace.as_deref().map(String::as_str),
            name: &c.name,
        }
    }

    fn input_errors(&self) -> &[InputProblem] {
        &self.input_errors
    }

    fn notes(&self) -> &[InputProblem] {
        &self.notes
    }

    fn input_warnings(&self) -> &[InputProblem] {
        &self.input_warnings
    }

    fn summary(&self) -> &LintSummary {
        &self.summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_shared_beyond_the_recent_ones() {
        let mut strings = Strings::default();
        let first = strings.get("spec.hostNetwork");
        for i in 0..RECENT * 2 {
            strings.get(&format!("message {i}"));
        }
        let again = strings.get("spec.hostNetwork");
        assert!(Arc::ptr_eq(&first, &again));
        assert!(Arc::ptr_eq(
            &strings.get("message 3"),
            &strings.get("message 3")
        ));
        assert!(Arc::ptr_eq(
            &strings.display(&"message 3"),
            &strings.get("message 3")
        ));
    }

    #[test]
    fn rollback_takes_out_what_was_added() {
        let mut report = CompactReport::new(false);
        report.summary.files = 1;
        let mark = report.mark();
        let file = report.strings.get("a.yaml");
        let id = ObjectId {
            api_version: "v1",
            kind: "Pod",
            namespace: None,
            name: "p",
        };
        let object = report.object(&file, 0, id);
        report.add_checked(&object);
        report.summary.objects += 1;
        report.rollback(&mark);
        assert!(report.checked.is_empty());
        assert_eq!(report.summary.objects, 0);
        assert_eq!(report.summary.files, 1);
    }
}
