//! The exchange's answers, read leniently with serde_json.
//!
//! A value stays its raw text (`serde_json`'s `RawValue`, borrowed from the answer) until a field
//! reader decodes it: a number keeps its exact digits (ids above 2^53, decimals of 28 digits),
//! and one field of the wrong kind never fails the answer around it. An object is read into its
//! members in answer order, so that a record is decoded in one walk over them.

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// The most items of an array, or members of an object, that are kept; the rest are read past.
/// No array or object of an answer holds more (the decoders refuse over 10,000 records of a
/// kind): 16 MiB of `0,` would otherwise index 8 million items, 128 MiB or more.
pub const MAX_ITEMS: usize = 10_001;

/// One JSON value of an answer, not yet decoded.
#[derive(Clone, Copy)]
pub struct Json<'a>(&'a RawValue);

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
        serde_json::from_slice(bytes).map(Json)
    }

    /// The value's text exactly as it appears in the answer.
    pub fn raw(&self) -> &'a str {
        self.0.get()
    }

    pub fn is_null(&self) -> bool {
        self.raw() == "null"
    }

    pub fn scalar(&self) -> Scalar<'a> {
        let raw = self.raw();
        match raw.as_bytes().first() {
            Some(b'n') => Scalar::Null,
            Some(b't') => Scalar::Bool(true),
            Some(b'f') => Scalar::Bool(false),
            Some(b'"') => string(raw).map_or(Scalar::Composite, Scalar::Text),
            Some(b'{' | b'[') | None => Scalar::Composite,
            Some(_) => Scalar::Number(raw),
        }
    }

    /// The members of an object; `None` for any other value.
    pub fn object(&self) -> Option<JsonObject<'a>> {
        // Only an object is read as one: see [`JsonObject::parse`].
        if !self.raw().starts_with('{') {
            return None;
        }
        serde_json::from_str(self.raw()).ok()
    }

    /// The items of an array, [`MAX_ITEMS`] at most; `None` for any other value.
    pub fn array(&self) -> Option<Vec<Json<'a>>> {
        if !self.raw().starts_with('[') {
            return None;
        }
        let mut deserializer = serde_json::Deserializer::from_str(self.raw());
        deserializer.deserialize_seq(ItemsVisitor).ok()
    }
}

/// A string's text: borrowed when it has no escapes; `None` for a lone surrogate escape. (Not
/// read as a `&str` first: serde_json's error for an escaped one quotes the whole string.)
fn string(raw: &str) -> Option<Cow<'_, str>> {
    let text = raw.strip_prefix('"')?.strip_suffix('"')?;
    if text.contains('\\') {
        serde_json::from_str::<String>(raw).ok().map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(text))
    }
}

impl fmt::Debug for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw())
    }
}

/// An object's members in the order of the answer, [`MAX_ITEMS`] at most.
#[derive(Clone, Default)]
pub struct JsonObject<'a> {
    members: Vec<(Cow<'a, str>, Json<'a>)>,
    /// Whether members beyond [`MAX_ITEMS`] were read past.
    cut: bool,
}

impl<'a> JsonObject<'a> {
    /// The object `bytes` hold; an error for anything else.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, serde_json::Error> {
        // serde_json's error for a value of another type quotes the value, escaped: 16 MiB of
        // string would take a 48 MiB message, and 100 MiB to write it. Such a value is only
        // checked to be JSON, and then refused without its text.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            serde_json::from_slice::<IgnoredAny>(bytes)?;
            return Err(serde::de::Error::invalid_type(serde::de::Unexpected::Other("value"), &"a JSON object"));
        }
        serde_json::from_slice(bytes)
    }

    /// The value of member `name`. A repeated name means its last value, as in `serde_json::Value`.
    pub fn get(&self, name: &str) -> Option<Json<'a>> {
        self.members.iter().rev().find(|(key, _)| key == name).map(|(_, value)| *value)
    }

    /// Whether the object has more members than [`MAX_ITEMS`], which were read past.
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// Every member whose key is text, repeated names included. (A key that is no text, a lone
    /// surrogate escape, names no field: its member is passed over, and the rest is read.)
    pub fn iter(&self) -> impl Iterator<Item = (&str, Json<'a>)> + '_ {
        self.members.iter().map(|(key, value)| (key.as_ref(), *value))
    }
}

impl fmt::Debug for JsonObject<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.members.iter().map(|(key, value)| (key, value))).finish()
    }
}

impl<'de> Deserialize<'de> for JsonObject<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MembersVisitor)
    }
}

struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = JsonObject<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        let mut members = Vec::new();
        while members.len() < MAX_ITEMS {
            let Some((Key(key), value)) = map.next_entry::<Key<'de>, &'de RawValue>()? else {
                return Ok(JsonObject { members, cut: false });
            };
            if let Some(key) = key {
                members.push((key, Json(value)));
            }
        }
        let mut cut = false;
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
            cut = true;
        }
        Ok(JsonObject { members, cut })
    }
}

struct ItemsVisitor;

impl<'de> Visitor<'de> for ItemsVisitor {
    type Value = Vec<Json<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON array")
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
        let mut items = Vec::new();
        while items.len() < MAX_ITEMS {
            let Some(item) = seq.next_element::<&'de RawValue>()? else { return Ok(items) };
            items.push(Json(item));
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(items)
    }
}

/// A member's key, read as bytes so that a lone surrogate escape (no UTF-8) is `None` instead of
/// an error for the whole answer.
struct Key<'a>(Option<Cow<'a, str>>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_bytes(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_borrowed_bytes<E>(self, bytes: &'de [u8]) -> Result<Self::Value, E> {
        Ok(Key(std::str::from_utf8(bytes).ok().map(Cow::Borrowed)))
    }

    fn visit_bytes<E>(self, bytes: &[u8]) -> Result<Self::Value, E> {
        Ok(Key(std::str::from_utf8(bytes).ok().map(|key| Cow::Owned(key.to_owned()))))
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
        assert_eq!(scalar(r#""a\"b\u00e9\/\t\ud83d\ude00""#), Scalar::Text(Cow::Owned("a\"bé/\t😀".into())));
        assert_eq!(scalar("null"), Scalar::Null);
        assert_eq!(scalar("false"), Scalar::Bool(false));
        assert_eq!(scalar("true"), Scalar::Bool(true));
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
        let object = JsonObject::parse(br#" {"a":{"b":[1,{"c":2}]},"a":{"b":[]},"n":null, "e":{}} "#).unwrap();
        assert_eq!(object.iter().count(), 4);
        // The last of a repeated name counts, as in serde_json's own map.
        assert_eq!(object.get("a").unwrap().raw(), r#"{"b":[]}"#);
        let first = object.iter().next().unwrap().1.object().unwrap();
        let items = first.get("b").unwrap().array().unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[1].object().unwrap().get("c").unwrap().scalar(), Scalar::Number("2"));
        assert!(object.get("n").unwrap().is_null());
        assert!(items[0].object().is_none() && items[0].array().is_none());
        assert!(object.get("missing").is_none());
        assert_eq!(object.get("e").unwrap().object().unwrap().iter().count(), 0);
        let keys: Vec<&str> = object.iter().map(|(key, _)| key).collect();
        assert_eq!(keys, ["a", "a", "n", "e"]);
    }

    #[test]
    fn only_complete_json_parses() {
        assert!(JsonObject::parse(br#"{"a":1"#).is_err());
        assert!(JsonObject::parse(br#"{"a":1} x"#).is_err());
        assert!(JsonObject::parse(b"[1]").is_err());
        for bad in
            ["[1,]", "{,}", r#"{"a"}"#, r#"{"a":}"#, "01", "1.", "-", "1e", ".5", "tru", "\"\t\"", r#""\x""#, "]"]
        {
            assert!(Json::parse(bad.as_bytes()).is_err(), "{bad} parsed");
        }
        assert!(Json::parse(br#""\ud800""#).map(|j| j.scalar()).is_ok_and(|s| s == Scalar::Composite));
        let lone = JsonObject::parse(br#"{"a":1,"\ud800":2,"b":3}"#).expect("a key that is no text sinks nothing");
        let readable: Vec<&str> = lone.iter().map(|(key, _)| key).collect();
        assert_eq!(readable, ["a", "b"], "its member is passed over");
        assert!(Json::parse(b"\"\xff\"").is_err());
    }

    #[test]
    fn arrays_and_objects_keep_a_bounded_number_of_items() {
        let array = format!("[{}0]", "0,".repeat(MAX_ITEMS + 4));
        assert_eq!(Json::parse(array.as_bytes()).unwrap().array().unwrap().len(), MAX_ITEMS, "the rest read past");
        let members = |n: usize| format!("{{{}}}", (0..n).map(|i| format!(r#""{i}":0"#)).collect::<Vec<_>>().join(","));
        let (whole, cut) = (members(MAX_ITEMS), members(MAX_ITEMS + 1));
        assert!(!JsonObject::parse(whole.as_bytes()).unwrap().is_cut());
        let cut = JsonObject::parse(cut.as_bytes()).unwrap();
        assert!(cut.is_cut());
        assert_eq!(cut.iter().count(), MAX_ITEMS);
        assert!(
            JsonObject::parse(format!("{{\"a\":{}}}", &array[..array.len() - 1]).as_bytes()).is_err(),
            "still checked whole"
        );
    }

    #[test]
    fn errors_say_where() {
        let error = JsonObject::parse(b"{\"a\":\n tru}").unwrap_err();
        assert_eq!(error.to_string(), "expected ident at line 2 column 5");
    }
}
