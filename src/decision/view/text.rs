//! The scalar types the views are built from: [`Text`], a string borrowed
//! where the input allows, [`StrMap`], a `map[string]string` in source
//! order, [`Present`], a field that is set to anything but `null`, and
//! [`Names`], the names of a list of references such as `imagePullSecrets`.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A string field, borrowed from the input where the input allows.
///
/// (`Option<Cow<str>>` never borrows under serde's derive, hence this type.)
/// Non-string scalars are read as their text rather than failing the whole
/// object: a view is for reading, and validation is the API server's job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Text<'a>(pub Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Text<'_> {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Text<'_> {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Text<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Marks a field that is set (to anything but `null`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Present;

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Present)
    }
}

/// A `map[string]string` (labels, annotations, nodeSelector, resource lists),
/// kept in source order. Scalar values that are not strings (`replicas: 1`
/// style mistakes, quantities written as numbers) are kept as their text
/// rather than failing the whole object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StrMap<'a>(pub Vec<(Text<'a>, Text<'a>)>);

impl<'a> StrMap<'a> {
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| &**k == key).map(|(_, v)| &**v)
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, number or boolean")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed("")))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for StrMap<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrMap<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(StrMap::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(k) = map.next_key::<Text<'de>>()? {
                    let v = map.next_value::<Text<'de>>()?;
                    out.push((k, v));
                }
                Ok(StrMap(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// The names of a list of references by name (`imagePullSecrets`), in
/// order: each item's `name`. An item or a list of another shape adds
/// nothing rather than failing the whole object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names<'a>(pub Vec<Text<'a>>);

/// Scalars, `null` and maps other than the expected shape: nothing.
macro_rules! nothing_for_scalars {
    ($value:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}

impl<'de: 'a, 'a> Deserialize<'de> for Names<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// One item: its `name`, if it is a map with one.
        struct Item<'a>(Option<Text<'a>>);
        impl<'de: 'a, 'a> Deserialize<'de> for Item<'a> {
            fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = Item<'de>;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a reference by name")
                    }
                    nothing_for_scalars!(Item(None));
                    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Item<'de>, A::Error> {
                        while s.next_element::<IgnoredAny>()?.is_some() {}
                        Ok(Item(None))
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Item<'de>, A::Error> {
                        let mut name = None;
                        while let Some(key) = m.next_key::<Text<'de>>()? {
                            if &*key == "name" {
                                name = m.next_value::<Option<Text<'de>>>()?;
                            } else {
                                m.next_value::<IgnoredAny>()?;
                            }
                        }
                        Ok(Item(name))
                    }
                }
                d.deserialize_any(V)
            }
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Names<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of references by name")
            }
            nothing_for_scalars!(Names::default());
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Names<'de>, A::Error> {
                let mut names = Vec::new();
                while let Some(Item(name)) = s.next_element::<Item<'de>>()? {
                    names.extend(name);
                }
                Ok(Names(names))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Names<'de>, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Names::default())
            }
        }
        d.deserialize_any(V)
    }
}
