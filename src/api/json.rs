//! JSON answers read lazily, straight from the answer's bytes.
//!
//! An object's members stay raw text until a record reads them, and only what it reads is
//! decoded: a number is its exact digits, a string without escapes a slice of the answer.
//! Parsing whole answers into `serde_json::Value` trees allocated a string per key and per
//! number and a map per object, and cost the exporter a quarter of its polling CPU.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// One JSON value of an answer, not yet decoded.
#[derive(Clone, Copy, Deserialize)]
#[serde(transparent)]
pub struct Json<'a>(#[serde(borrow)] &'a RawValue);

/// What a value is, with a scalar's content.
#[derive(Debug, PartialEq)]
pub enum Scalar<'a> {
    Null,
    Bool(bool),
    /// The number's exact text, as the exchange wrote it.
    Number(&'a str),
    Text(Cow<'a, str>),
    /// An array or object, or a string that is no text (a lone surrogate escape): nothing a
    /// scalar field can hold.
    Composite,
}

impl<'a> Json<'a> {
    /// Checks that `bytes` are one complete JSON value.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// The value's text exactly as it appears in the answer.
    pub fn raw(self) -> &'a str {
        self.0.get()
    }

    pub fn is_null(self) -> bool {
        self.raw() == "null"
    }

    pub fn scalar(self) -> Scalar<'a> {
        let raw = self.raw();
        match raw.as_bytes().first() {
            Some(b'"') => match serde_json::from_str::<Text<'a>>(raw) {
                Ok(Text(text)) => Scalar::Text(text),
                // Only a lone surrogate escape gets here: a string that is no text.
                Err(_) => Scalar::Composite,
            },
            Some(b'{' | b'[') => Scalar::Composite,
            _ => match raw {
                "null" => Scalar::Null,
                "true" => Scalar::Bool(true),
                "false" => Scalar::Bool(false),
                number => Scalar::Number(number),
            },
        }
    }

    /// The members of an object; `None` for any other value.
    pub fn object(self) -> Option<JsonObject<'a>> {
        self.raw().starts_with('{').then(|| serde_json::from_str(self.raw()).ok()).flatten()
    }

    /// The items of an array; `None` for any other value.
    pub fn array(self) -> Option<Vec<Json<'a>>> {
        self.raw().starts_with('[').then(|| serde_json::from_str(self.raw()).ok()).flatten()
    }
}

impl fmt::Debug for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw())
    }
}

/// An object's members in the order of the answer.
#[derive(Debug, Default)]
pub struct JsonObject<'a> {
    members: Vec<(Cow<'a, str>, Json<'a>)>,
}

impl<'a> JsonObject<'a> {
    /// The object `bytes` hold; an error for anything else.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// The value of member `name`. A repeated name means its last value, as in `serde_json::Value`.
    pub fn get(&self, name: &str) -> Option<Json<'a>> {
        self.members.iter().rev().find(|(key, _)| key == name).map(|(_, value)| *value)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Every member, repeated names included.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Json<'a>)> + '_ {
        self.members.iter().map(|(key, value)| (key.as_ref(), *value))
    }
}

impl<'de> Deserialize<'de> for JsonObject<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = JsonObject<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                // Room for a typical record's fields without growing.
                let mut members = Vec::with_capacity(16);
                while let Some((Text(key), value)) = map.next_entry::<Text<'de>, Json<'de>>()? {
                    members.push((key, value));
                }
                Ok(JsonObject { members })
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

/// A string, borrowed from the answer unless it had escapes to undo. (serde's own `Cow<str>`
/// always copies.)
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(text: &str) -> Scalar<'_> {
        Json::parse(text.as_bytes()).unwrap().scalar()
    }

    #[test]
    fn scalars_keep_their_exact_text() {
        assert_eq!(scalar("686960019383517339"), Scalar::Number("686960019383517339"));
        assert_eq!(scalar(" 0.1000000000000000055511 "), Scalar::Number("0.1000000000000000055511"));
        assert_eq!(scalar("-1e-3"), Scalar::Number("-1e-3"));
        assert_eq!(scalar("\"USDT\""), Scalar::Text(Cow::Borrowed("USDT")));
        assert_eq!(scalar(r#""a\"b\u00e9""#), Scalar::Text(Cow::Owned("a\"bé".into())));
        assert_eq!(scalar("null"), Scalar::Null);
        assert_eq!(scalar("false"), Scalar::Bool(false));
        assert_eq!(scalar("[1]"), Scalar::Composite);
        assert_eq!(scalar(r#"{"a":1}"#), Scalar::Composite);
    }

    #[test]
    fn an_unescaped_string_is_borrowed_from_the_answer() {
        let object = JsonObject::parse(br#"{"coin":"USDT","we\"ird":"x\ny"}"#).unwrap();
        assert!(matches!(object.get("coin").unwrap().scalar(), Scalar::Text(Cow::Borrowed("USDT"))));
        assert_eq!(object.get("we\"ird").unwrap().scalar(), Scalar::Text(Cow::Owned("x\ny".into())));
    }

    #[test]
    fn objects_and_arrays_open_on_demand() {
        let object = JsonObject::parse(br#"{"a":{"b":[1,{"c":2}]},"a":{"b":[]},"n":null}"#).unwrap();
        assert_eq!(object.iter().count(), 3);
        // The last of a repeated name counts, as in serde_json's own map.
        assert_eq!(object.get("a").unwrap().raw(), r#"{"b":[]}"#);
        let first = object.iter().next().unwrap().1.object().unwrap();
        let items = first.get("b").unwrap().array().unwrap();
        assert_eq!(items[1].object().unwrap().get("c").unwrap().scalar(), Scalar::Number("2"));
        assert!(object.get("n").unwrap().is_null());
        assert!(items[0].object().is_none() && items[0].array().is_none());
        assert!(object.get("missing").is_none());
    }

    #[test]
    fn only_complete_json_parses() {
        assert!(JsonObject::parse(br#"{"a":1"#).is_err());
        assert!(JsonObject::parse(br#"{"a":1} x"#).is_err());
        assert!(JsonObject::parse(b"[1]").is_err());
        assert!(Json::parse(b"[1,]").is_err());
        assert!(Json::parse(br#""\ud800""#).map(Json::scalar).is_ok_and(|s| s == Scalar::Composite));
    }
}
