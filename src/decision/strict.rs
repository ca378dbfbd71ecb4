//! Reading objects into the views as the API server reads them: a struct
//! is read from a JSON object only. serde's derived structs also accept a
//! JSON array and read its items as the fields in order, so
//! `request.object: ["v1", "Pod", {...}, {...}]` would be read as a pod;
//! the API server's decoder refuses that, and so does winadmit.
//!
//! [`Strict`] wraps any deserializer and everything it hands on (maps,
//! sequences, options, enums), refusing a sequence wherever a struct is
//! asked for. On an error, [`located`] reads the input again to name the
//! field path (`request.object.spec.template`) with `serde_path_to_error`:
//! the path costs nothing on the success path.

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

/// A deserializer, a visitor, an access or a seed, wrapped so that every
/// value below it is read strictly.
pub struct Strict<T>(pub T);

/// Reads `T` from JSON text strictly.
///
/// # Errors
/// The text is not JSON, or does not fit `T` (an array where an object is
/// required included).
pub fn from_str<'de, T: de::Deserialize<'de>>(json: &'de str) -> Result<T, serde_json::Error> {
    let mut d = serde_json::Deserializer::from_str(json);
    let value = T::deserialize(Strict(&mut d))?;
    d.end()?;
    Ok(value)
}

/// Reads `T` from a JSON tree strictly.
///
/// # Errors
/// The tree does not fit `T` (an array where an object is required
/// included).
pub fn from_value<'de, T: de::Deserialize<'de>>(
    value: &'de serde_json::Value,
) -> Result<T, serde_json::Error> {
    T::deserialize(Strict(value))
}

/// The dotted field path (`request.object.spec`) where reading `T` from
/// `json` fails, and the error; `None` when it does not fail.
#[must_use]
pub fn located<'de, T: de::Deserialize<'de>>(
    json: &'de str,
) -> Option<(String, serde_json::Error)> {
    let mut d = serde_json::Deserializer::from_str(json);
    match serde_path_to_error::deserialize::<_, T>(Strict(&mut d)) {
        Ok(_) => None,
        Err(e) => {
            let path = e.path().to_string();
            Some((path, e.into_inner()))
        }
    }
}

/// The same for a JSON tree.
#[must_use]
pub fn located_in_value<'de, T: de::Deserialize<'de>>(
    value: &'de serde_json::Value,
) -> Option<(String, serde_json::Error)> {
    match serde_path_to_error::deserialize::<_, T>(Strict(value)) {
        Ok(_) => None,
        Err(e) => {
            let path = e.path().to_string();
            Some((path, e.into_inner()))
        }
    }
}

macro_rules! forward_deserialize {
    ($($method:ident),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
                self.0.$method(Strict(visitor))
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward_deserialize!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any,
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_unit_struct(name, Strict(visitor))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_newtype_struct(name, Strict(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_tuple(len, Strict(visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_tuple_struct(name, len, Strict(visitor))
    }

    /// The one change: a struct is read from a map, never from a sequence.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0
            .deserialize_struct(name, fields, StructOnly(Strict(visitor)))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_enum(name, variants, Strict(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// A struct's visitor that refuses a sequence.
struct StructOnly<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for StructOnly<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(map)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _seq: A) -> Result<Self::Value, A::Error> {
        Err(de::Error::invalid_type(de::Unexpected::Seq, &self))
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
                self.0.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Strict<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.expecting(f)
    }

    forward_visit!(
        visit_bool(bool),
        visit_i8(i8),
        visit_i16(i16),
        visit_i32(i32),
        visit_i64(i64),
        visit_i128(i128),
        visit_u8(u8),
        visit_u16(u16),
        visit_u32(u32),
        visit_u64(u64),
        visit_u128(u128),
        visit_f32(f32),
        visit_f64(f64),
        visit_char(char),
        visit_str(&str),
        visit_borrowed_str(&'de str),
        visit_string(String),
        visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]),
        visit_byte_buf(Vec<u8>),
    );

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.visit_some(Strict(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.visit_newtype_struct(Strict(d))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.visit_seq(Strict(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(Strict(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.0.visit_enum(Strict(data))
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Strict<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(Strict(d))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Strict<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        self.0.next_element_seed(Strict(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Strict<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        self.0.next_key_seed(Strict(seed))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.next_value_seed(Strict(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for Strict<A> {
    type Error = A::Error;
    type Variant = Strict<A::Variant>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self::Variant), Self::Error> {
        self.0
            .variant_seed(Strict(seed))
            .map(|(v, variant)| (v, Strict(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Strict<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), Self::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, Self::Error> {
        self.0.newtype_variant_seed(Strict(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.tuple_variant(len, Strict(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.struct_variant(fields, StructOnly(Strict(visitor)))
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Inner<'a> {
        #[serde(borrow)]
        name: Option<&'a str>,
        list: Option<Vec<u8>>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Outer<'a> {
        #[serde(borrow)]
        inner: Option<Inner<'a>>,
    }

    #[test]
    fn structs_are_read_from_objects_only_and_borrow_still() {
        let ok: Outer<'_> = super::from_str(r#"{"inner": {"name": "x", "list": [1, 2]}}"#).unwrap();
        assert_eq!(ok.inner.unwrap().name, Some("x"));
        // serde's derive alone reads the array positionally.
        let loose: Outer<'_> = serde_json::from_str(r#"{"inner": ["x", [1]]}"#).unwrap();
        assert_eq!(loose.inner.unwrap().name, Some("x"));
        let err = super::from_str::<Outer<'_>>(r#"{"inner": ["x", [1]]}"#).unwrap_err();
        assert!(
            err.to_string()
                .contains("invalid type: sequence, expected an object"),
            "{err}"
        );
        let (path, _) = super::located::<Outer<'_>>(r#"{"inner": ["x", [1]]}"#).unwrap();
        assert_eq!(path, "inner");
        let value = serde_json::json!([{"inner": null}]);
        assert!(super::from_value::<Outer<'_>>(&value).is_err());
    }
}
