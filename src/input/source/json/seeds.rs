//! The serde seeds that walk a JSON value as it is parsed: [`TopSeed`] for
//! a value at the top of the input (an object, a list, an array of them),
//! `ItemsSeed` for a list's `items`, each handed to the callback as soon as
//! it is parsed, and `Probe` for the first pass, which keeps only the items
//! of the cluster kinds it learns from.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::{ListInfo, OnObject, StopError, is_cluster_kind, item_type, typed};

pub(super) struct TopSeed<'a, 'f> {
    pub(super) on_object: &'a mut OnObject<'f>,
    pub(super) stop: &'a mut Option<StopError>,
    pub(super) info: &'a mut ListInfo,
    /// The first pass: keep only the objects of the cluster kinds.
    pub(super) probe: bool,
}

impl<'de> DeserializeSeed<'de> for TopSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object, a List, or an array of objects")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(TopSeed {
                on_object: &mut *self.on_object,
                stop: &mut *self.stop,
                info: &mut *self.info,
                probe: self.probe,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut fields = Map::new();
        let mut was_list = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" && !was_list {
                was_list = true;
                let item_type = item_type(
                    fields.get("apiVersion").and_then(Value::as_str),
                    fields.get("kind").and_then(Value::as_str),
                );
                map.next_value_seed(ItemsSeed {
                    on_object: &mut *self.on_object,
                    stop: &mut *self.stop,
                    info: &mut *self.info,
                    item_type,
                    probe: self.probe,
                })?;
            } else {
                let v: Value = map.next_value()?;
                fields.insert(key, v);
            }
        }
        if was_list {
            self.info.continue_token = fields
                .get("metadata")
                .and_then(|m| m.get("continue"))
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            return Ok(());
        }
        self.info.objects += 1;
        if self.probe && !is_cluster_kind(fields.get("kind").and_then(Value::as_str)) {
            return Ok(());
        }
        if let Err(e) = (self.on_object)(Value::Object(fields)) {
            *self.stop = Some(e);
            return Err(de::Error::custom("stopped"));
        }
        Ok(())
    }
}

struct ItemsSeed<'a, 'f> {
    on_object: &'a mut OnObject<'f>,
    stop: &'a mut Option<StopError>,
    info: &'a mut ListInfo,
    item_type: Option<(String, String)>,
    probe: bool,
}

impl<'de> DeserializeSeed<'de> for ItemsSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItemsSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`items`: an array of objects")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        loop {
            let item = if self.probe {
                let seed = Probe {
                    item_kind: self.item_type.as_ref().map(|(_, kind)| kind.as_str()),
                };
                match seq.next_element_seed(seed)? {
                    None => break,
                    Some(Probed(None)) => {
                        self.info.objects += 1;
                        continue;
                    }
                    Some(Probed(Some(v))) => v,
                }
            } else {
                match seq.next_element::<Value>()? {
                    None => break,
                    Some(v) => v,
                }
            };
            self.info.objects += 1;
            if let Err(e) = (self.on_object)(typed(item, self.item_type.as_ref())) {
                *self.stop = Some(e);
                return Err(de::Error::custom("stopped"));
            }
        }
        Ok(())
    }
}

/// A list item read for the first pass: kept (as a value) only when it is
/// of a cluster kind (its own `kind`, else the list's item type); the
/// fields of other items are skipped unbuilt. Fields before `kind` are
/// kept only when they are `apiVersion` or `metadata` (kubectl writes
/// `apiVersion` and `kind` first).
struct Probe<'k> {
    item_kind: Option<&'k str>,
}

/// What [`Probe`] read: the item, when it is of a cluster kind.
struct Probed(Option<Value>);

impl<'de> DeserializeSeed<'de> for Probe<'_> {
    type Value = Probed;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Probed, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Probe<'_> {
    type Value = Probed;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Probed, A::Error> {
        let mut fields = Map::new();
        // Known once `kind` is read (or from the list's type).
        let mut keep = self.item_kind.map(|k| is_cluster_kind(Some(k)));
        while let Some(key) = map.next_key::<String>()? {
            let wanted = match keep {
                Some(keep) => keep,
                None => matches!(key.as_str(), "kind" | "apiVersion" | "metadata"),
            };
            if wanted {
                let value = map.next_value::<Value>()?;
                if key == "kind" {
                    keep = Some(is_cluster_kind(value.as_str()));
                }
                fields.insert(key, value);
            } else {
                map.next_value::<de::IgnoredAny>()?;
            }
        }
        let keep = keep == Some(true)
            && is_cluster_kind(
                fields
                    .get("kind")
                    .and_then(Value::as_str)
                    .or(self.item_kind),
            );
        Ok(Probed(keep.then_some(Value::Object(fields))))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Probed, A::Error> {
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(Probed(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Probed, E> {
        Ok(Probed(None))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Probed, E> {
        Ok(Probed(None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Probed, E> {
        Ok(Probed(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Probed, E> {
        Ok(Probed(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Probed, E> {
        Ok(Probed(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Probed, E> {
        Ok(Probed(None))
    }
}
