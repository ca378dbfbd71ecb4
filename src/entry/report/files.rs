//! The files of a report (`report --from-file`): the inputs are read by the manifest reader `lint`
//! uses ([`crate::input::source::Inputs`]), whose first pass learns the cluster
//! objects of the whole input. YAML, and JSON up to the manifest size
//! limit, is read whole, with line and column for findings (found by the
//! locator `lint` uses); a larger JSON text (a `kubectl get -A -o json`
//! List of any size) is streamed item by item in bounded memory, without
//! them. With `--registry`, the images of the workloads are looked up
//! before they are judged: those of the texts read whole together, found
//! in the first pass; those of a JSON file streamed in one more pass over
//! it, before its objects; those of a JSON stream from stdin object by
//! object ([`Driver::add`]).

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::body::{FeedError, feed_yaml, input_problem};
use super::driver::Driver;
use crate::input::source::json::{self, StopError, StreamError};
use crate::input::source::{Input, Inputs, Text};
use crate::render::report::{Added, ObjectReport, Origin, ReportBuilder};

/// Reads the manifests `paths` name into the driver (see the module docs).
pub(super) fn read(paths: &[PathBuf], driver: &mut Driver<'_>) {
    let (mut inputs, problems) = Inputs::open(paths, false, true);
    for problem in problems {
        driver.builder.input_problem(problem);
    }
    // With `--registry`, the images of every text read whole are collected
    // in the same pass and looked up together before any object is judged.
    let mut wanted = BTreeSet::new();
    let wants_images = driver.wants_images();
    let builder = &driver.builder;
    let known = inputs.learn(|text| {
        if wants_images {
            unknown_images(text, builder, &mut wanted);
        }
    });
    driver.builder.learnt(known);
    driver.resolve_images(wanted);
    for i in 0..inputs.len() {
        let name = inputs.input(i).name();
        // A JSON stream from stdin is read once: its cluster objects apply
        // to the objects after them (put `ns,runtimeclass` first in
        // `kubectl get`).
        driver.builder.learn_in_order = !inputs.learnt_from(i);
        match inputs.take(i) {
            Ok(Text::Whole(text)) => whole(&name, &text, driver),
            Ok(Text::Stream(reader)) => {
                if let Input::File(path) = inputs.input(i)
                    && driver.wants_images()
                    && inputs.learnt_from(i)
                {
                    images_pass(path, driver);
                }
                stream_json(&name, reader, driver);
            }
            Err(problem) => driver.builder.input_problem(problem),
        }
    }
}

/// Adds to `wanted` the images of the workloads of a text read whole
/// whose facts are not known yet (`--registry`), read as the second pass
/// reads it: JSON with the JSON reader, anything else as YAML. A text that
/// does not read adds what precedes the error (the second pass reports it).
fn unknown_images(
    text: &mut Cow<'_, str>,
    builder: &ReportBuilder<'_>,
    wanted: &mut BTreeSet<String>,
) {
    if !text.contains("image") {
        return;
    }
    if crate::input::source::looks_like_json(text.as_bytes()) {
        let _ = json::for_each_object_in(text.as_bytes(), &mut |v| {
            builder.unknown_images(&v, wanted);
            Ok(())
        });
        return;
    }
    let _ = crate::input::source::for_each_document_in(text, |part| {
        if let crate::input::source::Part::Documents(docs, _) = part {
            for d in docs {
                builder.unknown_images(&d.value, wanted);
            }
        }
    });
}

/// `--registry`, for a JSON file streamed item by item (the first pass
/// reads only its cluster objects): one more pass collects its images,
/// looked up together before its objects are judged.
fn images_pass(path: &Path, driver: &mut Driver<'_>) {
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    let reader = BufReader::with_capacity(256 * 1024, file);
    let mut wanted = BTreeSet::new();
    // Errors show up again, with their position, in the main pass.
    let _ = json::for_each_object(reader, &mut |v| {
        driver.builder.unknown_images(&v, &mut wanted);
        Ok(())
    });
    driver.resolve_images(wanted);
}

/// A text read whole: JSON (one value: objects located in their slices;
/// several values, `jq` output: streamed from the text) or YAML.
fn whole(name: &str, text: &str, driver: &mut Driver<'_>) {
    if crate::input::source::looks_like_json(text.as_bytes()) {
        match json::json_objects(text) {
            Some(objects) => whole_json(name, text, &objects, driver),
            None => stream_json(name, text.as_bytes(), driver),
        }
        return;
    }
    let Driver {
        builder,
        sink,
        progress,
        ..
    } = driver;
    let result = feed_yaml(builder, name, text, &mut |r| {
        progress.tick();
        sink.object(&r)
            .map_err(|e| StopError(format!("cannot write the report: {e}")))
    });
    match result {
        Ok(_) => {}
        Err(FeedError::Parse(e)) => builder.input_problem(input_problem(
            name,
            e.line,
            e.column,
            format!("invalid YAML: {}", e.message),
        )),
        Err(FeedError::Stopped(StopError(message))) => {
            builder.input_problem(input_problem(name, None, None, message));
        }
    }
}

/// A JSON text read whole: each object is parsed and reported in turn,
/// its findings located in its own slice of the text with the locator
/// `lint` uses.
fn whole_json(name: &str, text: &str, objects: &[json::JsonObject<'_>], driver: &mut Driver<'_>) {
    let mut positions = super::body::JsonPositions::new(text, objects);
    let write = |r: &ObjectReport, driver: &mut Driver<'_>| {
        driver
            .sink
            .object(r)
            .map_err(|e| format!("cannot write the report: {e}"))
    };
    for (document, object) in objects.iter().enumerate() {
        let Some(value) = object.value() else {
            continue;
        };
        let origin = Origin {
            file: name,
            document,
        };
        driver.progress.tick();
        if let Added::Report(mut r) = driver.builder.add(&value, &origin) {
            positions.locate(&mut r);
            if let Err(message) = write(&r, driver) {
                driver
                    .builder
                    .input_problem(input_problem(name, None, None, message));
                return;
            }
        }
    }
    // Objects listed before their owner in this text (those of earlier
    // inputs keep the positions they have: none).
    for mut r in driver.builder.resolve_pending() {
        if r.findings.first().is_some_and(|f| f.file == name) {
            positions.locate(&mut r);
        }
        if let Err(message) = write(&r, driver) {
            driver
                .builder
                .input_problem(input_problem(name, None, None, message));
            return;
        }
    }
}

/// A JSON text streamed item by item (bounded memory), without positions.
fn stream_json(name: &str, reader: impl BufRead, driver: &mut Driver<'_>) {
    let mut document = 0;
    let result = json::for_each_object(reader, &mut |value| {
        let origin = Origin {
            file: name,
            document,
        };
        document += 1;
        driver.add(&value, &origin)
    });
    match result {
        Ok(_) => {}
        Err(StreamError::Json {
            line,
            column,
            message,
        }) => driver.builder.input_problem(input_problem(
            name,
            Some(line as u64),
            Some(column as u64),
            format!("invalid JSON: {message}"),
        )),
        Err(StreamError::Io(e)) => driver.builder.input_problem(input_problem(
            name,
            None,
            None,
            format!("cannot read: {e}"),
        )),
        Err(StreamError::Stopped(StopError(message))) => {
            driver
                .builder
                .input_problem(input_problem(name, None, None, message));
        }
    }
}
