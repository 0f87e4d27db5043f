//! Request signing, as the exchange documents it: no I/O, so it is unit-tested against the two
//! worked examples of the facts document, and property-tested for any request.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The text that is signed: timestamp, upper-case method, path, `?query` when there is one, body.
pub fn prehash(timestamp_ms: &str, method: &str, path: &str, query: &str, body: &[u8]) -> Vec<u8> {
    let mut text = Vec::with_capacity(timestamp_ms.len() + method.len() + path.len() + query.len() + body.len() + 1);
    text.extend_from_slice(timestamp_ms.as_bytes());
    text.extend_from_slice(method.to_ascii_uppercase().as_bytes());
    text.extend_from_slice(path.as_bytes());
    if !query.is_empty() {
        text.push(b'?');
        text.extend_from_slice(query.as_bytes());
    }
    text.extend_from_slice(body);
    text
}

/// `ACCESS-SIGN`: Base64(HMAC-SHA256(secret, prehash)).
pub fn signature(secret: &str, prehash: &[u8]) -> String {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(prehash);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Signs one request: the bytes passed here must be the bytes sent.
pub fn sign(secret: &str, timestamp_ms: &str, method: &str, path: &str, query: &str, body: &[u8]) -> String {
    signature(secret, &prehash(timestamp_ms, method, path, query, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_query_matches_the_documented_example() {
        let pre = prehash("1591089508404", "get", "/capi/v2/account/account", "coinId=2", b"");
        assert_eq!(pre, b"1591089508404GET/capi/v2/account/account?coinId=2");
        assert_eq!(signature("secret", &pre), "ZJG7QgZ4EX9YtHx67o5b8jg5FvqplvKB1lpiA3zIJr0=");
    }

    #[test]
    fn bill_query_matches_the_documented_example() {
        let body = br#"{"limit":100,"startTime":1591089000000}"#;
        let sig = sign("secret", "1591089508404", "POST", "/capi/v2/account/bills", "", body);
        assert_eq!(sig, "RgTjvmIg/f/AsDkBlf2R0PH/gdDpyVKFuA4hG6vnS1U=");
    }

    #[test]
    fn one_changed_body_byte_changes_the_signature() {
        let a = sign("secret", "1", "POST", "/p", "", b"{\"limit\":100}");
        let b = sign("secret", "1", "POST", "/p", "", b"{\"limit\":101}");
        assert_ne!(a, b);
    }

    proptest::proptest! {
        /// Any request: the text signed is its parts in the documented order, the signature a
        /// Base64 HMAC-SHA256 of it, and a change to one byte of any part signs differently.
        #[test]
        fn any_request_signs_its_parts_in_order(
            timestamp in "[0-9]{1,13}",
            method in "(get|GET|post|Post)",
            path in "/[a-z/]{0,30}",
            query in "([a-zA-Z]{1,8}=[0-9A-Za-z%]{0,12}(&[a-z]{1,5}=[0-9]{1,4}){0,3})?",
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            secret in "[ -~]{0,40}",
            changed in 0usize..4,
        ) {
            let separator = if query.is_empty() { "" } else { "?" };
            let mut expected = format!("{timestamp}{}{path}{separator}{query}", method.to_ascii_uppercase()).into_bytes();
            expected.extend_from_slice(&body);
            let text = prehash(&timestamp, &method, &path, &query, &body);
            proptest::prop_assert_eq!(&text, &expected);
            let signed = sign(&secret, &timestamp, &method, &path, &query, &body);
            let raw = base64::engine::general_purpose::STANDARD.decode(&signed).unwrap();
            proptest::prop_assert_eq!(raw.len(), 32);
            proptest::prop_assert_eq!(&signed, &signature(&secret, &expected));

            let (mut timestamp, mut path, mut query, mut body) = (timestamp, path, query, body);
            match changed {
                0 => timestamp.push('0'),
                1 => path.push('x'),
                2 => query.push('1'),
                _ => body.push(b' '),
            }
            proptest::prop_assert_ne!(signed, sign(&secret, &timestamp, &method, &path, &query, &body));
        }
    }
}
