//! `report --from-file`: YAML, and JSON up to the manifest size limit, is
//! read whole, with line and column for findings (found by the locator
//! `lint` uses); a larger JSON text (a `kubectl get -A -o json` List of any
//! size) is streamed item by item in bounded memory, without them.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

use super::Driver;
use crate::report::body::{FeedError, feed_yaml, input_problem};
use crate::report::stream::{self, StopError, StreamError};
use crate::report::{Added, ObjectReport, Origin};
use crate::source;

const READ_BUFFER: usize = 256 * 1024;

pub(super) fn run(files: &[PathBuf], driver: &mut Driver<'_>) {
    for path in files {
        let name = if path.as_os_str() == "-" {
            "<stdin>".to_owned()
        } else {
            path.display().to_string()
        };
        let reader: Box<dyn Read> = if path.as_os_str() == "-" {
            Box::new(std::io::stdin().lock())
        } else {
            match std::fs::File::open(path) {
                Ok(f) => Box::new(f),
                Err(e) => {
                    driver.builder.input_problem(input_problem(
                        &name,
                        None,
                        None,
                        format!("cannot read: {e}"),
                    ));
                    continue;
                }
            }
        };
        let reopen = (path.as_os_str() != "-").then_some(path.as_path());
        read_one(&name, reader, reopen, driver);
    }
}

/// Namespaces (mode labels) and RuntimeClasses (OS) apply to every object
/// in a file, wherever they are in it: a quick first pass over a JSON file
/// reads only them. (Stdin cannot be read twice: there they apply to the
/// objects after them; put `ns,runtimeclass` first in `kubectl get`.)
fn first_pass(path: &std::path::Path, driver: &mut Driver<'_>) {
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    let reader = BufReader::with_capacity(READ_BUFFER, file);
    // Errors show up again, with their position, in the main pass.
    let _ = stream::for_each_context_object(reader, &mut |v| {
        driver.builder.learn_from(&v);
        Ok(())
    });
}

/// `--registry`, for a JSON file streamed item by item: one more pass
/// collects its images, looked up together before its objects are judged.
fn images_pass(path: &std::path::Path, driver: &mut Driver<'_>) {
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    let reader = BufReader::with_capacity(READ_BUFFER, file);
    let mut wanted = BTreeSet::new();
    // Errors show up again, with their position, in the main pass.
    let _ = stream::for_each_object(reader, &mut |v| {
        driver.builder.unknown_images(&v, &mut wanted);
        Ok(())
    });
    driver.resolve_images(wanted);
}

/// A JSON text read whole: each object is parsed and reported in turn,
/// its findings located in its own slice of the text with the locator
/// `lint` uses.
fn whole_json(name: &str, text: &str, objects: &[stream::JsonObject<'_>], driver: &mut Driver<'_>) {
    let mut positions = crate::report::body::JsonPositions::new(text, objects);
    let write = |r: &ObjectReport, driver: &mut Driver<'_>| {
        driver
            .sink
            .object(r)
            .map_err(|e| format!("cannot write the report: {e}"))
    };
    if driver.wants_images() {
        let mut wanted = BTreeSet::new();
        for value in objects.iter().filter_map(stream::JsonObject::value) {
            driver.builder.unknown_images(&value, &mut wanted);
        }
        driver.resolve_images(wanted);
    }
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
fn stream_json(name: &str, reader: impl Read, driver: &mut Driver<'_>) {
    let reader = BufReader::with_capacity(READ_BUFFER, reader);
    let mut document = 0;
    let result = stream::for_each_object(reader, &mut |value| {
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

fn read_one(
    name: &str,
    reader: Box<dyn Read>,
    reopen: Option<&std::path::Path>,
    driver: &mut Driver<'_>,
) {
    let mut reader = BufReader::with_capacity(READ_BUFFER, reader);
    let is_json = match reader.fill_buf() {
        Ok(head) => stream::looks_like_json(head),
        Err(e) => {
            driver.builder.input_problem(input_problem(
                name,
                None,
                None,
                format!("cannot read: {e}"),
            ));
            return;
        }
    };
    if is_json {
        if let Some(path) = reopen {
            first_pass(path, driver);
        }
        // A text up to lint's size limit is read whole, so findings get
        // line and column; a larger one is streamed, without them. A file
        // says its size; stdin is read up to the limit, then streamed on.
        let size = reopen
            .and_then(|p| std::fs::metadata(p).ok())
            .map(|m| m.len());
        if size.is_some_and(|n| n > source::MAX_FILE_BYTES as u64) {
            if let Some(path) = reopen.filter(|_| driver.wants_images()) {
                images_pass(path, driver);
            }
            stream_json(name, reader, driver);
            return;
        }
        let mut head = Vec::with_capacity(size.map_or(READ_BUFFER, |n| n as usize + 1));
        if let Err(e) = (&mut reader)
            .take(source::MAX_FILE_BYTES as u64 + 1)
            .read_to_end(&mut head)
        {
            driver.builder.input_problem(input_problem(
                name,
                None,
                None,
                format!("cannot read: {e}"),
            ));
            return;
        }
        if head.len() <= source::MAX_FILE_BYTES
            && let Ok(text) = std::str::from_utf8(&head)
            && let Some(objects) = stream::json_objects(text)
        {
            whole_json(name, text, &objects, driver);
            return;
        }
        stream_json(name, std::io::Cursor::new(head).chain(reader), driver);
        return;
    }
    let bytes = match stream::read_limited(reader, source::MAX_FILE_BYTES) {
        Ok(b) => b,
        Err(e) => {
            driver.builder.input_problem(input_problem(
                name,
                None,
                None,
                format!("cannot read: {e}"),
            ));
            return;
        }
    };
    let text = match source::decode(&bytes) {
        Ok(t) => t,
        Err(e) => {
            driver
                .builder
                .input_problem(input_problem(name, e.line, e.column, e.message));
            return;
        }
    };
    if driver.wants_images() {
        let mut wanted = BTreeSet::new();
        // Errors show up again, with their position, in the main pass.
        let _ = source::for_each_document_in(&mut std::borrow::Cow::Borrowed(text), |part| {
            if let source::Part::Documents(docs, _) = part {
                for d in docs {
                    driver.builder.unknown_images(&d.value, &mut wanted);
                }
            }
        });
        driver.resolve_images(wanted);
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
