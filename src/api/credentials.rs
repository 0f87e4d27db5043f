//! API credentials, which never reach logs, errors, `Debug` output or metrics.

use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

/// A secret string: `Debug` prints a placeholder and there is no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself, for the one place that must use it (signing, headers).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// What signs requests for one account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub api_key: Secret,
    pub secret: Secret,
    pub passphrase: Secret,
}

/// What replaces a credential in a text from outside.
pub const REDACTED: &str = "[REDACTED]";

/// The longest credential taken: longer ones are refused at start. Real ones are tens of bytes.
pub const MAX_CREDENTIAL_BYTES: usize = 1024;

/// The longest form of a credential [`redact`] knows, in characters: at most six
/// for each of its bytes (`\u002b` for `+`).
pub const LONGEST_FORM_CHARS: usize = 6 * MAX_CREDENTIAL_BYTES;

impl Credentials {
    fn secrets(&self) -> [&str; 3] {
        [self.api_key.expose(), self.secret.expose(), self.passphrase.expose()]
    }
}

/// Every account's credentials under the configuration in force, shared by their clients: a
/// text from outside is cleaned of them all, not only of the account that asked (a proxy in
/// front of several may quote another's request). A reload puts in its configuration's.
#[derive(Debug, Clone, Default)]
pub struct Known(Arc<RwLock<Arc<[Credentials]>>>);

impl Known {
    pub fn set(&self, all: Vec<Credentials>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = all.into();
    }

    pub fn all(&self) -> Arc<[Credentials]> {
        self.0.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// `text` with every occurrence of the credentials of `own` and of `signature` replaced by
/// [`REDACTED`], also as a JSON string may write them (`/` as `\/`, quotes and controls
/// escaped, `<`, `>` and `&` as Go escapes them, and as .NET does) and as a page may (see
/// `page_forms`), each with its runs of spaces as one (as the text is quoted); and of the
/// credentials of `others` as they are. For texts from outside that may echo the request: a
/// proxy's error page, an exchange's message (decoded, so that any escape of it is undone).
/// Another account's are looked for only as they are: with every form of a few hundred
/// accounts', each error page of an outage would take milliseconds to clean.
pub fn redact(text: &str, own: &Credentials, others: &[Credentials], signature: &str) -> String {
    let escaped = own.secrets().into_iter().chain([signature]).flat_map(|secret| {
        let json = serde_json::to_string(secret).unwrap_or_default();
        let json = json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_owned();
        let go = json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026");
        [secret.to_string(), secret.replace('/', "\\/"), json, go, dotnet_json(secret)]
            .into_iter()
            .chain(page_forms(secret))
    });
    let as_they_are = others.iter().flat_map(Credentials::secrets).map(str::to_owned);
    let forms: Vec<String> = escaped
        .chain(as_they_are)
        .map(|form| form.split(' ').filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" "))
        .collect();
    let mut all: Vec<&str> = forms.iter().map(String::as_str).filter(|s| !s.is_empty()).collect();
    // Longest first, so that a secret holding another is replaced whole; each form once.
    all.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    all.dedup();
    let replaced = |text: String, form: &str| if text.contains(form) { text.replace(form, REDACTED) } else { text };
    all.into_iter().fold(text.to_owned(), replaced)
}

/// Whether `text` is part of a credential of `own` or `others`, or of `signature`.
pub fn is_part_of_one(text: &str, own: &Credentials, others: &[Credentials], signature: &str) -> bool {
    let secrets = own.secrets().into_iter().chain(others.iter().flat_map(Credentials::secrets));
    signature.contains(text) || secrets.into_iter().any(|secret| secret.contains(text))
}

/// `secret` as .NET's JSON writer writes a string by default: `\` doubled, and the signs HTML
/// gives a meaning to, `+` and `` ` `` as `\u00XX` in capitals.
fn dotnet_json(secret: &str) -> String {
    let escape = |c: char| match c {
        '\\' => "\\\\".to_string(),
        '"' | '&' | '\'' | '+' | '<' | '>' | '`' => format!("\\u{:04X}", u32::from(c)),
        _ => c.to_string(),
    };
    secret.chars().map(escape).collect()
}

/// How a page may write `secret`: HTML-escaped (as named entities, as Go's `html` package and
/// as Python's `html.escape` write quotes), and percent-encoded in a URL (hex in upper and in
/// lower case, a space as `+` in a form, `!*'()` kept as JavaScript's `encodeURIComponent`
/// keeps them, and `/` as Python's `quote` keeps it).
fn page_forms(secret: &str) -> Vec<String> {
    let html = |quote: &str, apostrophe: &str| {
        [('&', "&amp;"), ('<', "&lt;"), ('>', "&gt;"), ('"', quote), ('\'', apostrophe)]
            .into_iter()
            .fold(secret.to_owned(), |text, (plain, escaped)| text.replace(plain, escaped))
    };
    let url = |also_kept: &[u8], space: &str, lower_case_hex: bool| -> String {
        let kept = |byte: u8| byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) || also_kept.contains(&byte);
        let write = |byte: u8| match byte {
            b' ' => space.to_owned(),
            _ if kept(byte) => char::from(byte).to_string(),
            _ if lower_case_hex => format!("%{byte:02x}"),
            _ => format!("%{byte:02X}"),
        };
        secret.bytes().map(write).collect()
    };
    vec![
        html("&quot;", "&#39;"),
        html("&#34;", "&#39;"),
        html("&quot;", "&#x27;"),
        url(b"", "%20", false),
        url(b"", "%20", true),
        url(b"", "+", false),
        url(b"!*'()", "%20", false),
        url(b"/", "%20", false),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_the_signature_are_redacted_from_outside_texts() {
        let credentials = Credentials {
            api_key: Secret::new("key-123"),
            secret: Secret::new("sec-456"),
            passphrase: Secret::new("pass-789"),
        };
        let echo =
            r#"<pre>ACCESS-KEY: key-123\nACCESS-PASSPHRASE: pass-789</pre>{"sign":"ab\/cd+ef=","again":"key-123"}"#;
        let redacted = redact(echo, &credentials, &[], "ab/cd+ef=");
        assert_eq!(
            redacted,
            r#"<pre>ACCESS-KEY: [REDACTED]\nACCESS-PASSPHRASE: [REDACTED]</pre>{"sign":"[REDACTED]","again":"[REDACTED]"}"#
        );
        assert_eq!(redact("nothing secret here", &credentials, &[], "zz"), "nothing secret here");
    }

    #[test]
    fn credentials_are_redacted_as_a_json_string_escapes_them() {
        let credentials = Credentials {
            api_key: Secret::new("key-123"),
            secret: Secret::new("sec-456"),
            passphrase: Secret::new(r#"p<a"ss\"#),
        };
        for echo in [r#"{"msg":"p\u003ca\"ss\\"}"#, r#"{"msg":"p<a\"ss\\"}"#] {
            let redacted = redact(echo, &credentials, &[], "zz");
            assert_eq!(redacted, r#"{"msg":"[REDACTED]"}"#, "{echo}");
        }
    }

    #[test]
    fn credentials_are_redacted_as_an_html_page_or_a_url_escapes_them() {
        let credentials = Credentials {
            api_key: Secret::new("key-123"),
            secret: Secret::new("sec-456"),
            passphrase: Secret::new("p&ss<1>'\""),
        };
        let page = "<pre>ACCESS-PASSPHRASE: p&amp;ss&lt;1&gt;&#39;&quot;</pre><a href=\"?sign=ab%2Fcd%2Bef%3D&s=ab%2fcd%2bef%3d\">";
        let redacted = redact(page, &credentials, &[], "ab/cd+ef=");
        assert_eq!(redacted, "<pre>ACCESS-PASSPHRASE: [REDACTED]</pre><a href=\"?sign=[REDACTED]&s=[REDACTED]\">");
        let credentials = Credentials { passphrase: Secret::new("p\"w 1!@'"), ..credentials };
        for echo in
            ["p&#34;w 1!@&#39;", "p&quot;w 1!@&#x27;", "p%22w+1%21%40%27", "p%22w%201!%40'", "p%22w%201%21%40%27"]
        {
            assert_eq!(redact(echo, &credentials, &[], "zz"), "[REDACTED]", "{echo}");
        }
    }

    #[test]
    fn debug_output_hides_every_part() {
        let credentials = Credentials {
            api_key: Secret::new("key-123"),
            secret: Secret::new("sec-456"),
            passphrase: Secret::new("pass-789"),
        };
        let printed = format!("{credentials:?} {credentials:#?}");
        for hidden in ["key-123", "sec-456", "pass-789"] {
            assert!(!printed.contains(hidden), "{printed}");
        }
    }
}
