//! JSON answers read in one pass, straight from the answer's bytes.
//!
//! An answer is scanned once into a flat list of its values (a "tape"), each with its exact text
//! and, for an object or array, where its contents end. Nothing is decoded until a record reads
//! it: a number is its exact digits, a string without escapes a slice of the answer. Opening a
//! nested object costs nothing; finding a member walks the object's members, skipping over
//! their contents. Parsing answers into `serde_json::Value` trees allocated a string per key
//! and per number and a map per object; reading nested raw values with serde_json scanned each
//! level again.

use std::borrow::Cow;
use std::fmt;
use std::rc::Rc;

/// How deep objects and arrays may nest: `serde_json` allows 127 levels.
const MAX_DEPTH: usize = 127;

/// Why some bytes are not the JSON expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON at byte {at}: {what}")]
pub struct JsonError {
    pub at: usize,
    pub what: &'static str,
}

/// One JSON value of an answer, not yet decoded.
#[derive(Clone)]
pub struct Json<'a> {
    tape: Rc<Vec<Node<'a>>>,
    at: usize,
}

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

/// One value on the tape.
#[derive(Debug, Clone, Copy)]
struct Node<'a> {
    /// The value's exact text: a string with its quotes, an object or array from its opening
    /// bracket to its closing one.
    raw: &'a str,
    /// The index of the first node after this value and its contents.
    end: usize,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    True,
    False,
    Number,
    /// A string; `escaped` when it holds a backslash escape to undo.
    String {
        escaped: bool,
    },
    /// An object: its members follow as key, value, key, value...
    Object,
    Array,
}

impl<'a> Json<'a> {
    /// Checks that `bytes` are one complete JSON value.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, JsonError> {
        Ok(Self { tape: Rc::new(Parser::tape(bytes)?), at: 0 })
    }

    fn node(&self) -> Node<'a> {
        self.tape[self.at]
    }

    /// The value's text exactly as it appears in the answer.
    pub fn raw(&self) -> &'a str {
        self.node().raw
    }

    pub fn is_null(&self) -> bool {
        self.node().kind == Kind::Null
    }

    pub fn scalar(&self) -> Scalar<'a> {
        let node = self.node();
        match node.kind {
            Kind::Null => Scalar::Null,
            Kind::True => Scalar::Bool(true),
            Kind::False => Scalar::Bool(false),
            Kind::Number => Scalar::Number(node.raw),
            Kind::String { escaped } => string_text(node.raw, escaped).map_or(Scalar::Composite, Scalar::Text),
            Kind::Object | Kind::Array => Scalar::Composite,
        }
    }

    /// The members of an object; `None` for any other value.
    pub fn object(&self) -> Option<JsonObject<'a>> {
        (self.node().kind == Kind::Object).then(|| JsonObject { value: self.clone() })
    }

    /// The items of an array; `None` for any other value.
    pub fn array(&self) -> Option<Vec<Json<'a>>> {
        (self.node().kind == Kind::Array).then(|| self.children().collect())
    }

    /// The values directly inside this object or array, in order (an object's keys included).
    fn children(&self) -> impl Iterator<Item = Json<'a>> + '_ {
        let end = self.node().end;
        let mut next = self.at + 1;
        std::iter::from_fn(move || {
            let at = (next < end).then_some(next)?;
            next = self.tape[at].end;
            Some(Json { tape: self.tape.clone(), at })
        })
    }
}

impl fmt::Debug for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw())
    }
}

/// An object's members in the order of the answer.
#[derive(Clone)]
pub struct JsonObject<'a> {
    value: Json<'a>,
}

impl<'a> JsonObject<'a> {
    /// The object `bytes` hold; an error for anything else.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, JsonError> {
        Json::parse(bytes)?.object().ok_or(JsonError { at: 0, what: "not an object" })
    }

    /// The value of member `name`. A repeated name means its last value, as in `serde_json::Value`.
    pub fn get(&self, name: &str) -> Option<Json<'a>> {
        let tape = &self.value.tape;
        let mut found = None;
        let mut key = self.value.at + 1;
        while key < tape[self.value.at].end {
            if key_is(tape[key], name) {
                found = Some(key + 1);
            }
            key = tape[key + 1].end;
        }
        found.map(|at| Json { tape: tape.clone(), at })
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Every member whose key is text, repeated names included. (A key that is no text, a lone
    /// surrogate escape, names no field: its member is passed over, and the rest is read.)
    pub fn iter(&self) -> impl Iterator<Item = (Cow<'a, str>, Json<'a>)> + '_ {
        let mut children = self.value.children();
        std::iter::from_fn(move || loop {
            let (key, value) = (children.next()?, children.next()?);
            if let Some(text) = key_text(key.node()) {
                return Some((text, value));
            }
        })
    }
}

impl fmt::Debug for JsonObject<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

/// Whether a key node spells `name`; escaped keys are rare, and compared once undone.
fn key_is(key: Node<'_>, name: &str) -> bool {
    match key.kind {
        Kind::String { escaped: false } => inner(key.raw) == name,
        _ => key_text(key).is_some_and(|text| text == name),
    }
}

/// A key's text; `None` for a key that is no text (a lone surrogate escape).
fn key_text(key: Node<'_>) -> Option<Cow<'_, str>> {
    let escaped = key.kind == (Kind::String { escaped: true });
    string_text(key.raw, escaped)
}

/// A string without its quotes.
fn inner(raw: &str) -> &str {
    &raw[1..raw.len() - 1]
}

/// A string's text: borrowed when it has no escapes; `None` when an escape is a lone surrogate.
fn string_text(raw: &str, escaped: bool) -> Option<Cow<'_, str>> {
    if escaped {
        unescape(inner(raw)).map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(inner(raw)))
    }
}

/// Undoes the escapes of a string the parser has checked.
fn unescape(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(slash) = rest.find('\\') {
        out.push_str(&rest[..slash]);
        let escape = &rest[slash + 1..];
        let (c, used) = match escape.as_bytes()[0] {
            b'u' => unicode_escape(escape)?,
            b'b' => ('\u{8}', 1),
            b'f' => ('\u{c}', 1),
            b'n' => ('\n', 1),
            b'r' => ('\r', 1),
            b't' => ('\t', 1),
            other => (char::from(other), 1),
        };
        out.push(c);
        rest = &escape[used..];
    }
    out.push_str(rest);
    Some(out)
}

/// `uXXXX`, or a surrogate pair `uXXXX\uXXXX`: the character and the bytes it took.
fn unicode_escape(escape: &str) -> Option<(char, usize)> {
    let unit = |at: usize| escape.get(at..at + 4).and_then(|hex| u32::from_str_radix(hex, 16).ok());
    let first = unit(1)?;
    if !(0xD800..0xDC00).contains(&first) {
        return char::from_u32(first).map(|c| (c, 5));
    }
    let second = escape.get(5..7).filter(|s| *s == "\\u").and_then(|_| unit(7))?;
    if !(0xDC00..0xE000).contains(&second) {
        return None;
    }
    char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)).map(|c| (c, 11))
}

/// Builds the tape of one JSON document, rejecting anything RFC 8259 does not allow.
struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    tape: Vec<Node<'a>>,
    /// The tape indexes of the objects and arrays not closed yet.
    open: Vec<usize>,
}

impl<'a> Parser<'a> {
    fn tape(bytes: &'a [u8]) -> Result<Vec<Node<'a>>, JsonError> {
        let text = std::str::from_utf8(bytes).map_err(|e| JsonError { at: e.valid_up_to(), what: "not UTF-8" })?;
        // About one value per 8 bytes in the exchange's answers.
        let tape = Vec::with_capacity(bytes.len() / 8 + 1);
        let mut parser = Parser { text, bytes, at: 0, tape, open: Vec::new() };
        parser.document()?;
        Ok(parser.tape)
    }

    fn error(&self, what: &'static str) -> JsonError {
        JsonError { at: self.at, what }
    }

    fn document(&mut self) -> Result<(), JsonError> {
        loop {
            self.value()?;
            if !self.after_value()? {
                break;
            }
        }
        self.skip_whitespace();
        if self.at != self.bytes.len() {
            return Err(self.error("trailing characters"));
        }
        Ok(())
    }

    /// Reads one value; an object or array is only opened, its contents follow.
    fn value(&mut self) -> Result<(), JsonError> {
        self.skip_whitespace();
        let start = self.at;
        let kind = match self.peek() {
            Some(b'{') => return self.open(Kind::Object, b'}'),
            Some(b'[') => return self.open(Kind::Array, b']'),
            Some(b'"') => self.string()?,
            Some(b't') => self.literal("true", Kind::True)?,
            Some(b'f') => self.literal("false", Kind::False)?,
            Some(b'n') => self.literal("null", Kind::Null)?,
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(_) => return Err(self.error("expected a value")),
            None => return Err(self.error("unexpected end")),
        };
        self.push(start, kind);
        Ok(())
    }

    /// After a value: reads separators, closing brackets and the next member's key, and says
    /// whether another value follows.
    fn after_value(&mut self) -> Result<bool, JsonError> {
        loop {
            let Some(&container) = self.open.last() else { return Ok(false) };
            self.skip_whitespace();
            let in_object = self.tape[container].kind == Kind::Object;
            match (self.peek(), in_object) {
                (Some(b','), _) => {
                    self.at += 1;
                    if in_object {
                        self.key()?;
                    }
                    return Ok(true);
                }
                (Some(b'}'), true) | (Some(b']'), false) => self.close(),
                (Some(_), _) => return Err(self.error("expected a comma or a closing bracket")),
                (None, _) => return Err(self.error("unexpected end")),
            }
        }
    }

    /// Opens an object or array; reads an empty one whole, or the first key of an object.
    fn open(&mut self, kind: Kind, closing: u8) -> Result<(), JsonError> {
        if self.open.len() >= MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        self.open.push(self.tape.len());
        self.push(self.at, kind);
        self.at += 1;
        self.skip_whitespace();
        if self.peek() == Some(closing) {
            self.close();
            return Ok(());
        }
        if kind == Kind::Object {
            self.key()?;
        }
        // The first item of an array, or the first member's value.
        self.value()
    }

    /// Closes the innermost object or array at its closing bracket.
    fn close(&mut self) {
        self.at += 1;
        let index = self.open.pop().expect("only called with a container open");
        let end = self.tape.len();
        let node = &mut self.tape[index];
        let start = node.raw.as_ptr() as usize - self.text.as_ptr() as usize;
        node.raw = &self.text[start..self.at];
        node.end = end;
    }

    /// A member's key and its colon.
    fn key(&mut self) -> Result<(), JsonError> {
        self.skip_whitespace();
        let start = self.at;
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a key"));
        }
        let kind = self.string()?;
        self.push(start, kind);
        self.skip_whitespace();
        if self.peek() != Some(b':') {
            return Err(self.error("expected a colon"));
        }
        self.at += 1;
        Ok(())
    }

    fn push(&mut self, start: usize, kind: Kind) {
        let end = self.tape.len() + 1;
        self.tape.push(Node { raw: &self.text[start..self.at], end, kind });
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn literal(&mut self, word: &'static str, kind: Kind) -> Result<Kind, JsonError> {
        if !self.bytes[self.at..].starts_with(word.as_bytes()) {
            return Err(self.error("expected true, false or null"));
        }
        self.at += word.len();
        Ok(kind)
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Result<Kind, JsonError> {
        self.eat(b'-');
        if !self.eat(b'0') && self.digits() == 0 {
            return Err(self.error("expected a digit"));
        }
        if self.eat(b'.') && self.digits() == 0 {
            return Err(self.error("expected a digit after the decimal point"));
        }
        if self.eat(b'e') || self.eat(b'E') {
            let _ = self.eat(b'+') || self.eat(b'-');
            if self.digits() == 0 {
                return Err(self.error("expected a digit in the exponent"));
            }
        }
        Ok(Kind::Number)
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        self.at += usize::from(found);
        found
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        self.at - start
    }

    /// A string, from its opening quote past its closing one; escapes are checked, not undone.
    fn string(&mut self) -> Result<Kind, JsonError> {
        self.at += 1;
        let mut escaped = false;
        loop {
            let plain = self.bytes[self.at..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20);
            self.at += plain.ok_or(JsonError { at: self.bytes.len(), what: "unterminated string" })?;
            match self.bytes[self.at] {
                b'"' => {
                    self.at += 1;
                    return Ok(Kind::String { escaped });
                }
                b'\\' => {
                    escaped = true;
                    self.escape()?;
                }
                _ => return Err(self.error("a control character in a string")),
            }
        }
    }

    /// One backslash escape: `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t` or `\u` and 4 hex digits.
    fn escape(&mut self) -> Result<(), JsonError> {
        let len = match self.bytes.get(self.at + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => 2,
            Some(b'u')
                if self.bytes.get(self.at + 2..self.at + 6).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) =>
            {
                6
            }
            _ => return Err(self.error("an invalid escape")),
        };
        self.at += len;
        Ok(())
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
        let keys: Vec<Cow<'_, str>> = object.iter().map(|(key, _)| key).collect();
        assert_eq!(keys, ["a", "a", "n", "e"]);
    }

    #[test]
    fn only_complete_json_parses() {
        assert!(JsonObject::parse(br#"{"a":1"#).is_err());
        assert!(JsonObject::parse(br#"{"a":1} x"#).is_err());
        assert!(JsonObject::parse(b"[1]").is_err());
        for bad in [
            "[1,]",
            "{,}",
            r#"{"a"}"#,
            r#"{"a":}"#,
            "01",
            "1.",
            "-",
            "1e",
            ".5",
            "tru",
            "\"\t\"",
            r#""\x""#,
            "[1 2]",
            "]",
        ] {
            assert!(Json::parse(bad.as_bytes()).is_err(), "{bad} parsed");
        }
        assert!(Json::parse(br#""\ud800""#).map(|j| j.scalar()).is_ok_and(|s| s == Scalar::Composite));
        let lone = JsonObject::parse(br#"{"a":1,"\ud800":2,"b":3}"#).expect("a key that is no text sinks nothing");
        let readable: Vec<String> = lone.iter().map(|(key, _)| key.into_owned()).collect();
        assert_eq!(readable, ["a", "b"], "its member is passed over");
        assert!(Json::parse(b"\"\xff\"").is_err());
    }

    #[test]
    fn nesting_is_limited_as_in_serde_json() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        for depth in [1, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1] {
            let ours = Json::parse(nested(depth).as_bytes()).is_ok();
            let theirs = serde_json::from_str::<serde_json::Value>(&nested(depth)).is_ok();
            assert_eq!(ours, theirs, "depth {depth}");
        }
    }
}
