//! Objects out of JSON, one at a time: a single object, a `List` (`kubectl
//! get -o json`, or a list API response), an array of objects, or several
//! such values one after another (`jq` output). The `items` of a list are
//! handed over one by one as they are parsed, so a list of 100,000 objects
//! never sits in memory whole.
//!
//! Items of a typed list response (`PodList`) carry no `kind`/`apiVersion`;
//! they get the list's (`PodList` -> `Pod`), as kubectl does.

use std::io::BufRead;

use serde::de::DeserializeSeed;
use serde_json::Value;

mod seeds;

use seeds::TopSeed;

/// A callback that receives each object; its error stops the parse.
pub type OnObject<'f> = dyn FnMut(Value) -> Result<(), StopError> + 'f;

/// Why the callback stopped the parse (an output write failed, ...).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StopError(pub String);

/// The input is not JSON we can read, or the callback stopped.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// Not valid JSON; line and column of the problem.
    #[error("invalid JSON at line {line} column {column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    /// The callback asked to stop.
    #[error(transparent)]
    Stopped(StopError),
    /// Reading failed.
    #[error("cannot read: {0}")]
    Io(#[source] std::io::Error),
}

/// What a list said about itself: its `metadata.continue` token, for paging.
#[derive(Debug, Clone, Default)]
pub struct ListInfo {
    pub continue_token: Option<String>,
    /// Objects seen (list items, or single objects).
    pub objects: usize,
}

/// Reads every object from a reader (see the module docs).
///
/// # Errors
/// The input is not JSON, or `on_object` stopped.
pub fn for_each_object<R: BufRead>(
    reader: R,
    on_object: &mut OnObject<'_>,
) -> Result<ListInfo, StreamError> {
    read_values(reader, on_object, false)
}

/// A quick first pass: hands over only the objects of
/// [`super::CLUSTER_KINDS`], skipping the bodies of all other list
/// items without building them.
///
/// # Errors
/// As [`for_each_object`].
pub fn for_each_context_object<R: BufRead>(
    reader: R,
    on_object: &mut OnObject<'_>,
) -> Result<ListInfo, StreamError> {
    read_values(reader, on_object, true)
}

fn is_cluster_kind(kind: Option<&str>) -> bool {
    kind.is_some_and(|k| super::CLUSTER_KINDS.contains(&k))
}

fn read_values<R: BufRead>(
    mut reader: R,
    on_object: &mut OnObject<'_>,
    probe: bool,
) -> Result<ListInfo, StreamError> {
    let mut info = ListInfo::default();
    let mut stop = None;
    loop {
        // Skip whitespace between top-level values; stop at the end.
        let more = loop {
            let buf = reader.fill_buf().map_err(StreamError::Io)?;
            if buf.is_empty() {
                break false;
            }
            let ws = buf.iter().take_while(|b| b.is_ascii_whitespace()).count();
            if ws == buf.len() {
                let n = buf.len();
                reader.consume(n);
                continue;
            }
            reader.consume(ws);
            break true;
        };
        if !more {
            break;
        }
        let mut de = serde_json::Deserializer::from_reader(&mut reader);
        let seed = TopSeed {
            on_object,
            stop: &mut stop,
            info: &mut info,
            probe,
        };
        if let Err(e) = seed.deserialize(&mut de) {
            return Err(match stop.take() {
                Some(s) => StreamError::Stopped(s),
                None => json_error(&e),
            });
        }
    }
    Ok(info)
}

/// Reads every object from a byte slice (a list page, a request body).
///
/// # Errors
/// As [`for_each_object`].
pub fn for_each_object_in(
    bytes: &[u8],
    on_object: &mut OnObject<'_>,
) -> Result<ListInfo, StreamError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    for_each_object(bytes, on_object)
}

/// Reads a list API response whose items are of a known type (`v1`,
/// `Pod`): items without `kind` get it whatever the order of the list's
/// own fields.
///
/// # Errors
/// As [`for_each_object`].
pub fn for_each_item_of_type(
    bytes: &[u8],
    api_version: &str,
    kind: &str,
    on_object: &mut OnObject<'_>,
) -> Result<ListInfo, StreamError> {
    let item_type = (api_version.to_owned(), kind.to_owned());
    for_each_object_in(bytes, &mut |v| on_object(typed(v, Some(&item_type))))
}

/// Hands over the objects of an already-parsed value, with the same rules
/// as the streaming reader.
///
/// # Errors
/// `on_object` stopped.
pub fn for_each_object_of(value: Value, on_object: &mut OnObject<'_>) -> Result<usize, StopError> {
    let mut n = 0;
    match value {
        Value::Array(items) => {
            for item in items {
                n += for_each_object_of(item, on_object)?;
            }
        }
        Value::Object(mut map) if map.get("items").is_some_and(Value::is_array) => {
            let item_type = item_type(
                map.get("apiVersion").and_then(Value::as_str),
                map.get("kind").and_then(Value::as_str),
            );
            if let Some(Value::Array(items)) = map.remove("items") {
                for item in items {
                    n += 1;
                    on_object(typed(item, item_type.as_ref()))?;
                }
            }
        }
        Value::Null => {}
        other => {
            n += 1;
            on_object(other)?;
        }
    }
    Ok(n)
}

/// One object of a JSON text read whole: its text (a slice of the whole),
/// and the type of the list it is an item of.
pub struct JsonObject<'t> {
    pub text: &'t str,
    item_type: Option<std::rc::Rc<(String, String)>>,
}

impl JsonObject<'_> {
    /// The object, typed as [`for_each_object_of`] types list items.
    #[must_use]
    pub fn value(&self) -> Option<Value> {
        let value = serde_json::from_str(self.text).ok()?;
        Some(typed(value, self.item_type.as_deref()))
    }
}

/// The objects of a JSON text read whole, in the order
/// [`for_each_object_of`] gives them, each as its own slice of the text
/// (parsed one at a time with [`JsonObject::value`]; positions are found
/// in that slice alone, for the objects that need them). `None` when the
/// text is not one JSON value.
#[must_use]
pub fn json_objects(text: &str) -> Option<Vec<JsonObject<'_>>> {
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct Shape<'a> {
        #[serde(borrow, default)]
        items: Option<Vec<&'a RawValue>>,
        #[serde(default, rename = "apiVersion")]
        api_version: Option<String>,
        #[serde(default)]
        kind: Option<String>,
    }
    fn walk<'t>(raw: &'t RawValue, out: &mut Vec<JsonObject<'t>>) -> Option<()> {
        let text = raw.get();
        match text.as_bytes().first()? {
            b'[' => {
                for item in serde_json::from_str::<Vec<&RawValue>>(text).ok()? {
                    walk(item, out)?;
                }
            }
            b'{' => match serde_json::from_str::<Shape<'_>>(text) {
                Ok(Shape {
                    items: Some(items),
                    api_version,
                    kind,
                }) => {
                    let item_type =
                        item_type(api_version.as_deref(), kind.as_deref()).map(std::rc::Rc::new);
                    out.extend(items.into_iter().map(|item| JsonObject {
                        text: item.get(),
                        item_type: item_type.clone(),
                    }));
                }
                _ => out.push(JsonObject {
                    text,
                    item_type: None,
                }),
            },
            b'n' => {}
            _ => out.push(JsonObject {
                text,
                item_type: None,
            }),
        }
        Some(())
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let raw: &RawValue = serde_json::from_str(text).ok()?;
    let mut out = Vec::new();
    walk(raw, &mut out)?;
    Some(out)
}

fn json_error(e: &serde_json::Error) -> StreamError {
    let message = e.to_string();
    // serde_json appends " at line L column C"; keep the cause only.
    let message = message
        .rsplit_once(" at line ")
        .map_or(message.clone(), |(m, _)| m.to_owned());
    StreamError::Json {
        line: e.line(),
        column: e.column(),
        message,
    }
}

/// `PodList` in `v1` -> (`v1`, `Pod`).
fn item_type(api_version: Option<&str>, kind: Option<&str>) -> Option<(String, String)> {
    let kind = kind?.strip_suffix("List").filter(|k| !k.is_empty())?;
    Some((api_version?.to_owned(), kind.to_owned()))
}

fn typed(mut item: Value, item_type: Option<&(String, String)>) -> Value {
    if let (Some((api, kind)), Value::Object(map)) = (item_type, &mut item)
        && !map.contains_key("kind")
    {
        map.insert("apiVersion".into(), Value::String(api.clone()));
        map.insert("kind".into(), Value::String(kind.clone()));
    }
    item
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(input: &str) -> (Vec<Value>, ListInfo) {
        let mut out = Vec::new();
        let info = for_each_object_in(input.as_bytes(), &mut |v| {
            out.push(v);
            Ok(())
        })
        .unwrap();
        (out, info)
    }

    #[test]
    fn json_objects_are_what_the_streaming_reader_gives_with_their_text() {
        let text = r#"[{"kind": "PodList", "apiVersion": "v1", "items": [{"metadata": {"name": "a"}}]},
            {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "b"}}, null]"#;
        let objects = json_objects(text).unwrap();
        let (streamed, _) = collect(text);
        let values: Vec<Value> = objects.iter().map(|o| o.value().unwrap()).collect();
        assert_eq!(values, streamed);
        assert_eq!(objects[0].text, r#"{"metadata": {"name": "a"}}"#);
        assert!(objects[1].text.starts_with(r#"{"kind": "Pod""#));
        // Each text is a slice of the whole, for its position.
        assert!(text.contains(objects[1].text));
        // Not one JSON value (`jq` output): none; the streaming reader reads it.
        assert!(json_objects("{} {}").is_none());
        assert!(json_objects(r#"{"a": [1, }"#).is_none());
    }

    #[test]
    fn lists_objects_arrays_and_concatenations() {
        let (v, info) = collect(
            r#"{"kind":"PodList","apiVersion":"v1","metadata":{"continue":"abc"},"items":[{"metadata":{"name":"a"}},{"kind":"Pod","apiVersion":"v1","metadata":{"name":"b"}}]}"#,
        );
        assert_eq!(v.len(), 2);
        assert_eq!(v[0]["kind"], "Pod");
        assert_eq!(v[0]["apiVersion"], "v1");
        assert_eq!(info.continue_token.as_deref(), Some("abc"));
        let (v, _) =
            collect(r#" {"kind":"Pod"} [{"kind":"A"},{"kind":"B"}] {"kind":"List","items":[]} "#);
        assert_eq!(v.len(), 3);
        // kubectl writes `kind: List` after `items`; items carry their own kind.
        let (v, _) =
            collect(r#"{"apiVersion":"v1","items":[{"kind":"Pod"}],"kind":"List","metadata":{}}"#);
        assert_eq!(v.len(), 1);
    }

    #[test]
    fn errors_name_the_position() {
        let err = for_each_object_in(b"{\"items\": [1,\n }", &mut |_| Ok(())).unwrap_err();
        let StreamError::Json { line, .. } = err else {
            panic!("{err}")
        };
        assert_eq!(line, 2);
        let err = for_each_object_in(b"{\"a\":1} x", &mut |_| Ok(())).unwrap_err();
        assert!(matches!(err, StreamError::Json { .. }), "{err}");
    }

    #[test]
    fn the_first_pass_keeps_only_cluster_objects_whole() {
        let input = r#"{"apiVersion":"v1","items":[{"kind":"Pod","apiVersion":"v1","spec":{"x":[1,2]}},
            {"kind":"Namespace","apiVersion":"v1","metadata":{"name":"a","labels":{"l":"v"}},"status":{}},
            {"kind":"RuntimeClass","apiVersion":"node.k8s.io/v1","metadata":{"name":"w"},"handler":"h","scheduling":{"nodeSelector":{}}},
            {"kind":"Node","apiVersion":"v1","metadata":{"name":"n"},"status":{"nodeInfo":{"kubeletVersion":"v1.31.0"}}}],
            "kind":"List"} {"kind":"Namespace","metadata":{"name":"b"}}
            {"kind":"NodeList","apiVersion":"v1","items":[{"metadata":{"name":"m"},"status":{"nodeInfo":{}}},{"kind":"Pod","spec":{}}]}"#;
        let mut out = Vec::new();
        let info = for_each_context_object(input.as_bytes(), &mut |v| {
            out.push(v);
            Ok(())
        })
        .unwrap();
        assert_eq!(out.len(), 5, "{out:?}");
        assert_eq!(out[0]["metadata"]["labels"]["l"], "v");
        assert!(out[0].get("status").is_some());
        assert_eq!(out[1]["handler"], "h");
        assert!(out[1].get("scheduling").is_some());
        assert_eq!(out[2]["status"]["nodeInfo"]["kubeletVersion"], "v1.31.0");
        assert_eq!(out[3]["metadata"]["name"], "b");
        // An item of a typed list gets the list's kind.
        assert_eq!(out[4]["kind"], "Node");
        assert!(out[4].get("status").is_some());
        assert_eq!(info.objects, 7);
    }

    #[test]
    fn the_callback_can_stop() {
        let err = for_each_object_in(br#"{"items":[{},{}]}"#, &mut |_| {
            Err(StopError("full".into()))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "full");
    }
}
