//! Decoding report input: a `POST /report` body (AdmissionReview, JSON
//! objects, or YAML) and YAML text. Pure: bytes in, objects to the builder.

use serde_json::Value;

use crate::decision::cluster::ClusterObjects;
use crate::decision::engine::Context;
use crate::decision::policy::Policy;
use crate::input::source;
use crate::input::source::json::{self, StopError, StreamError};
use crate::input::yaml::Positions;
use crate::render::InputProblem;
use crate::render::report::{Added, ObjectReport, Origin, Report, ReportBuilder, ReportOptions};

/// A `/report` body that cannot be read. Maps to HTTP 400 (415 for the
/// media type); the message says what to send instead.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The Content-Type is neither JSON nor YAML.
    #[error(
        "unsupported Content-Type {0:?}: send application/json (an AdmissionReview, an object, a List or an array) or application/yaml (one or more documents)"
    )]
    UnsupportedMediaType(String),
    /// Nothing to read.
    #[error("the body is empty: send an AdmissionReview or Kubernetes objects")]
    Empty,
    /// Not valid JSON.
    #[error("invalid JSON body: {0}")]
    Json(#[source] StreamError),
    /// Not valid YAML (or not UTF-8, or too deep).
    #[error("invalid YAML body: {0}")]
    Yaml(source::InputError),
    /// An AdmissionReview that does not decode (as `/validate` would refuse it).
    #[error("invalid AdmissionReview: {0}")]
    AdmissionReview(String),
}

/// The media types `/report` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaType {
    Json,
    Yaml,
}

impl MediaType {
    /// Reads a Content-Type header value (parameters such as `charset` ignored).
    ///
    /// # Errors
    /// Neither JSON nor YAML.
    pub fn from_content_type(content_type: &str) -> Result<Self, ReportError> {
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "application/json" => Ok(Self::Json),
            "application/yaml" | "application/x-yaml" | "text/yaml" | "text/x-yaml" => {
                Ok(Self::Yaml)
            }
            e if e.starts_with("application/") && e.ends_with("+json") => Ok(Self::Json),
            _ => Err(ReportError::UnsupportedMediaType(content_type.to_owned())),
        }
    }
}

/// The `/report` answer for a request body: one entry per workload in it,
/// and a summary. Same engine, same policy, same verdicts as `/validate`
/// and `/mutate`; no side effects.
///
/// JSON bodies may be an AdmissionReview (its `request.object`; the
/// request's namespace, operation and user are taken into account as
/// `/validate` would), a single object, a `List`, or an array of objects.
/// YAML bodies may hold many documents and `List`s; findings then carry
/// line and column.
///
/// # Errors
/// The body cannot be read; see [`ReportError`].
pub fn report_body(
    policy: &Policy,
    cx: &Context<'_>,
    options: &ReportOptions,
    content_type: &str,
    body: &[u8],
) -> Result<Report, ReportError> {
    let media = MediaType::from_content_type(content_type)?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ReportError::Empty);
    }
    let mut builder = ReportBuilder::new(policy, cx, options.clone());
    let mut objects = Vec::new();
    // Each object of a JSON body with its slice of the body, for line and
    // column (AdmissionReview: its request.object).
    let located = match media {
        MediaType::Json => json_body(&mut builder, body, &mut objects)?,
        MediaType::Yaml => {
            yaml_body(&mut builder, body, &mut objects)?;
            None
        }
    };
    let finished = builder.finish();
    objects.extend(finished.objects);
    if let Some((text, json)) = &located {
        locate_json_findings(text, json, &mut objects);
    }
    Ok(Report {
        api_version: crate::render::report::REPORT_API_VERSION,
        kind: crate::render::report::REPORT_KIND,
        objects,
        input_errors: finished.input_errors,
        summary: finished.summary,
    })
}

/// A JSON body read whole and its objects, each with its slice of it.
type Located<'b> = (&'b str, Vec<json::JsonObject<'b>>);

/// The objects of a JSON body (an AdmissionReview's object, or objects, a
/// `List`, an array), given to the builder; the body's objects with their
/// slices of it, for line and column.
fn json_body<'b>(
    builder: &mut ReportBuilder<'_>,
    body: &'b [u8],
    objects: &mut Vec<ObjectReport>,
) -> Result<Option<Located<'b>>, ReportError> {
    let value: Value = serde_json::from_slice(body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body))
        .map_err(|e| {
        // Re-run through the streaming reader for its error shape.
        match json::for_each_object_in(body, &mut |_| Ok(())) {
            Err(err) => ReportError::Json(err),
            Ok(_) => ReportError::Json(StreamError::Json {
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            }),
        }
    })?;
    if value.get("kind").and_then(Value::as_str) == Some("AdmissionReview") {
        if let Some(object) = admission_object(builder, body)? {
            add(builder, &object, 0, objects);
        }
        return Ok(review_object_text(body));
    }
    let mut all = Vec::new();
    let located = std::str::from_utf8(body)
        .ok()
        .and_then(|t| Some((t, json::json_objects(t)?)));
    let result = json::for_each_object_of(value, &mut |v| {
        all.push(v);
        Ok::<(), StopError>(())
    });
    // The callback never stops.
    debug_assert!(result.is_ok());
    // The cluster objects anywhere in the body apply to all of it.
    let mut known = ClusterObjects::default();
    for v in &all {
        known.learn(v);
    }
    builder.learnt(known);
    builder.learn_in_order = false;
    for (n, v) in all.iter().enumerate() {
        add(builder, v, n, objects);
    }
    Ok(located)
}

/// The objects of a YAML body, given to the builder, with line and column.
fn yaml_body(
    builder: &mut ReportBuilder<'_>,
    body: &[u8],
    objects: &mut Vec<ObjectReport>,
) -> Result<(), ReportError> {
    let text = source::decode(body).map_err(ReportError::Yaml)?;
    // The cluster objects anywhere in the body apply to all of it.
    let mut known = ClusterObjects::default();
    source::prescan::cluster_objects(&mut std::borrow::Cow::Borrowed(text), &mut known);
    builder.learnt(known);
    builder.learn_in_order = false;
    feed_yaml(builder, "<request>", text, &mut |r| {
        objects.push(r);
        Ok(())
    })
    .map_err(|e| match e {
        FeedError::Parse(e) => ReportError::Yaml(e),
        FeedError::Stopped(_) => unreachable!("the callback never stops"),
    })?;
    Ok(())
}

/// The images of the workloads in a `/report` body (every container
/// list), which a server with `--registry` looks up before the report. A
/// body that does not read names none (the report then says why).
#[must_use]
pub fn body_images(
    policy: &Policy,
    content_type: &str,
    body: &[u8],
) -> std::collections::BTreeSet<String> {
    let mut images = std::collections::BTreeSet::new();
    let Ok(media) = MediaType::from_content_type(content_type) else {
        return images;
    };
    match media {
        MediaType::Json => {
            let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
            let Ok(value) = serde_json::from_slice::<Value>(body) else {
                return images;
            };
            if value.get("kind").and_then(Value::as_str) == Some("AdmissionReview") {
                if let Some(object) = value.pointer("/request/object") {
                    crate::decision::lookups::workload_images(policy, object, &mut images);
                }
            } else {
                let _ = json::for_each_object_of(value, &mut |v| {
                    crate::decision::lookups::workload_images(policy, &v, &mut images);
                    Ok(())
                });
            }
        }
        MediaType::Yaml => {
            let Ok(text) = source::decode(body) else {
                return images;
            };
            source::prescan::images(&mut std::borrow::Cow::Borrowed(text), policy, &mut images);
        }
    }
    images
}

/// The text of an AdmissionReview's `request.object`, for positions.
fn review_object_text(body: &[u8]) -> Option<(&str, Vec<json::JsonObject<'_>>)> {
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct Review<'a> {
        #[serde(borrow)]
        request: Request<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Request<'a> {
        #[serde(borrow)]
        object: &'a RawValue,
    }
    let text = std::str::from_utf8(body).ok()?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let review: Review<'_> = serde_json::from_str(text).ok()?;
    let object = review.request.object.get();
    Some((text, json::json_objects(object)?))
}

fn add(
    builder: &mut ReportBuilder<'_>,
    value: &Value,
    document: usize,
    out: &mut Vec<ObjectReport>,
) {
    let origin = Origin {
        file: "<request>",
        document,
    };
    if let Added::Report(r) = builder.add(value, &origin) {
        out.push(*r);
    }
}

/// The object of an AdmissionReview, with the request's namespace filled in
/// (pods created with `generateName` often carry none), and the builder
/// told about the operation and an exempt user. Decoded by the webhook's
/// own envelope decoder ([`crate::entry::admission::envelope`]).
fn admission_object(
    builder: &mut ReportBuilder<'_>,
    body: &[u8],
) -> Result<Option<Value>, ReportError> {
    let env = crate::entry::admission::envelope(body)
        .map_err(|e| ReportError::AdmissionReview(e.to_string()))?;
    let mut object = env.object;
    if let (Some(ns), Some(Value::Object(obj))) = (env.namespace.as_deref(), object.as_mut())
        && let Some(Value::Object(meta)) = obj.get_mut("metadata")
        && !meta.contains_key("namespace")
    {
        meta.insert("namespace".into(), Value::String(ns.to_owned()));
    }
    builder.create = env.operation == "CREATE";
    builder.user = Some((env.username, env.groups));
    if env.operation == "DELETE" {
        return Ok(None);
    }
    Ok(object)
}

/// Reading YAML failed, or the callback stopped.
#[derive(Debug)]
pub enum FeedError {
    Parse(source::InputError),
    Stopped(StopError),
}

/// Feeds every object of a YAML (or small JSON) text to the builder, with
/// line and column for findings. Returns the number of objects read. The
/// caller gives the builder the text's cluster objects first
/// ([`crate::input::source::prescan`]).
///
/// # Errors
/// The text is not valid YAML, or `on_report` stopped.
pub fn feed_yaml(
    builder: &mut ReportBuilder<'_>,
    file: &str,
    text: &str,
    on_report: &mut dyn FnMut(ObjectReport) -> Result<(), StopError>,
) -> Result<usize, FeedError> {
    let (docs, positions) = source::parse_located(text).map_err(FeedError::Parse)?;
    let mut reports: Vec<(usize, String, ObjectReport)> = Vec::new();
    for doc in &docs {
        let origin = Origin {
            file,
            document: doc.index,
        };
        if let Added::Report(r) = builder.add(&doc.value, &origin) {
            reports.push((doc.yaml_doc, doc.pointer.clone(), *r));
        }
    }
    // Objects listed before their owner in this text get their positions
    // too (those of earlier inputs keep theirs: none).
    let mut earlier = Vec::new();
    for r in builder.resolve_pending() {
        let at = r.findings.first().filter(|f| f.file == file).and_then(|f| {
            // Documents are numbered in order.
            let i = docs.binary_search_by_key(&f.document, |d| d.index).ok()?;
            docs.get(i)
        });
        match at {
            Some(d) => reports.push((d.yaml_doc, d.pointer.clone(), r)),
            None => earlier.push((0, String::new(), r)),
        }
    }
    locate_findings(&positions, &mut reports);
    reports.extend(earlier);
    for (_, _, r) in reports {
        on_report(r).map_err(FeedError::Stopped)?;
    }
    Ok(docs.len())
}

/// Sets every finding's line and column from the positions recorded when
/// the text was read (`positions[n]` for YAML document `n`, as `lint`
/// does), and puts findings in text order, as `lint` does. Each report
/// comes with its YAML document (0 for a JSON text) and the JSON Pointer of
/// its object in that document (`/items/3`, or empty).
pub fn locate_findings(positions: &[Positions], reports: &mut [(usize, String, ObjectReport)]) {
    // Each document's wants at once: a `List` of many objects is indexed
    // once, not once per object.
    let mut wants: Vec<(usize, String)> = Vec::new();
    for (yaml_doc, pointer, r) in reports.iter() {
        wants.extend(
            r.pointers
                .iter()
                .map(|p| (*yaml_doc, format!("{pointer}{p}"))),
        );
    }
    let mut found = vec![None; wants.len()];
    let mut by_doc: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for (i, (doc, _)) in wants.iter().enumerate() {
        by_doc.entry(*doc).or_default().push(i);
    }
    for (doc, mine) in by_doc {
        let Some(at) = positions.get(doc) else {
            continue;
        };
        let refs: Vec<&str> = mine.iter().map(|&i| wants[i].1.as_str()).collect();
        for (i, p) in mine.into_iter().zip(at.locate(&refs)) {
            found[i] = p;
        }
    }
    let mut at = found.into_iter();
    for (_, _, r) in reports {
        for f in &mut r.findings {
            if let Some(p) = at.next().flatten() {
                f.line = p.line;
                f.column = p.column;
            }
        }
        r.findings.sort_by_key(|f| (f.line, f.column));
    }
}

/// Line and column for the findings of reports made from a JSON text read
/// whole (see [`JsonPositions::locate`]).
pub fn locate_json_findings(
    text: &str,
    objects: &[json::JsonObject<'_>],
    reports: &mut [ObjectReport],
) {
    let mut positions = JsonPositions::new(text, objects);
    for r in reports {
        positions.locate(r);
    }
}

/// Finds positions in a JSON text read whole: each report's object is
/// located in its own slice of the text (`objects[n]` for document `n`, see
/// [`json::json_objects`]) with the locator `lint` uses, and the slice's
/// place in the text is added. Only objects with findings are read again.
pub struct JsonPositions<'a, 't> {
    text: &'t str,
    objects: &'a [json::JsonObject<'t>],
    /// Where each line ends, found once, on the first finding (u32: the
    /// texts read whole are at most lint's size limit).
    newlines: Option<Vec<u32>>,
}

impl<'a, 't> JsonPositions<'a, 't> {
    #[must_use]
    pub fn new(text: &'t str, objects: &'a [json::JsonObject<'t>]) -> Self {
        Self {
            text,
            objects,
            newlines: None,
        }
    }

    /// Sets line and column on `r`'s findings and puts them in text order.
    pub fn locate(&mut self, r: &mut ObjectReport) {
        let Some(object) = r
            .findings
            .first()
            .and_then(|f| self.objects.get(f.document))
        else {
            return;
        };
        // Where the slice starts in the text: lines before it, and its
        // column on its first line (0-based).
        let offset = (object.text.as_ptr() as usize).wrapping_sub(self.text.as_ptr() as usize);
        if offset > self.text.len() {
            return;
        }
        let text = self.text;
        let newlines = self.newlines.get_or_insert_with(|| {
            memchr::memchr_iter(b'\n', text.as_bytes())
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
                .collect()
        });
        let before = newlines.partition_point(|&n| (n as usize) < offset);
        let line = before as u64;
        let column = offset
            - before
                .checked_sub(1)
                .map_or(0, |i| newlines[i] as usize + 1);
        let wants: Vec<(usize, &str)> = r.pointers.iter().map(|p| (0, p.as_str())).collect();
        let at = crate::input::yaml::locate_many(object.text, &wants);
        for (f, p) in r.findings.iter_mut().zip(at) {
            if let Some(p) = p {
                f.line = p.line + line;
                f.column = if p.line == 1 {
                    p.column + column as u64
                } else {
                    p.column
                };
            }
        }
        r.findings.sort_by_key(|f| (f.line, f.column));
    }
}

/// A problem with a whole input (file or stream), for the report's `inputErrors`.
#[must_use]
pub fn input_problem(
    file: &str,
    line: Option<u64>,
    column: Option<u64>,
    message: String,
) -> InputProblem {
    InputProblem {
        file: file.to_owned(),
        line,
        column,
        message,
    }
}
