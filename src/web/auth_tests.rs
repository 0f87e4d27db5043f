use super::*;
use crate::web::test_support::cheap_hash;
use axum::http::HeaderValue;

fn auth_for(users: &[(&str, &str)]) -> BasicAuth {
    let users = users
        .iter()
        .map(|(user, password)| (user.to_string(), PasswordHash::parse(cheap_hash(password)).expect("hash")))
        .collect();
    BasicAuth::new(&users).expect("users")
}

fn basic(user: &str, password: &str) -> HeaderMap {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    authorization(&format!("Basic {encoded}"))
}

fn authorization(value: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).expect("header value"));
    headers
}

#[tokio::test]
async fn the_right_user_and_password_pass() {
    let auth = auth_for(&[("alice", "wonderland"), ("bob", "pa:ss")]);
    assert!(auth.allows(&basic("alice", "wonderland")).await);
    assert!(auth.allows(&basic("bob", "pa:ss")).await, "the password may hold a colon");
}

#[tokio::test]
async fn a_wrong_user_or_password_fails() {
    let auth = auth_for(&[("alice", "wonderland"), ("bob", "builder")]);
    assert!(!auth.allows(&basic("alice", "builder")).await, "another user's password");
    assert!(!auth.allows(&basic("alice", "Wonderland")).await);
    assert!(!auth.allows(&basic("alice", "")).await);
    assert!(!auth.allows(&basic("carol", "wonderland")).await);
    assert!(!auth.allows(&basic("Alice", "wonderland")).await, "user names are case-sensitive");
}

#[tokio::test]
async fn a_missing_or_malformed_header_fails() {
    let auth = auth_for(&[("alice", "wonderland")]);
    let encoded = base64::engine::general_purpose::STANDARD.encode("alice:wonderland");
    assert!(!auth.allows(&HeaderMap::new()).await);
    for value in [
        "Bearer abc".to_string(),
        format!("Digest {encoded}"),
        "Basic".to_string(),
        "Basic ".to_string(),
        "Basic !!!not-base64!!!".to_string(),
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("alice-wonderland")),
        format!("Basic  {encoded}"),
        format!("Basic {}", &encoded[..encoded.len() - 2]),
    ] {
        assert!(!auth.allows(&authorization(&value)).await, "{value}");
    }
    let mut non_utf8_user = b"\xffalice:wonderland".to_vec();
    non_utf8_user = base64::engine::general_purpose::STANDARD.encode(&non_utf8_user).into_bytes();
    let value = format!("Basic {}", String::from_utf8(non_utf8_user).unwrap());
    assert!(!auth.allows(&authorization(&value)).await);
}

#[tokio::test]
async fn the_scheme_is_case_insensitive() {
    let auth = auth_for(&[("alice", "wonderland")]);
    let encoded = base64::engine::general_purpose::STANDARD.encode("alice:wonderland");
    assert!(auth.allows(&authorization(&format!("basic {encoded}"))).await);
    assert!(auth.allows(&authorization(&format!("BASIC {encoded}"))).await);
}

#[tokio::test]
async fn successes_are_remembered_and_failures_are_not() {
    let auth = auth_for(&[("alice", "wonderland")]);
    let good = Credentials::from_headers(&basic("alice", "wonderland")).unwrap();
    let bad = Credentials::from_headers(&basic("alice", "guess")).unwrap();
    let (good, bad) = (auth.fingerprint(&good).unwrap(), auth.fingerprint(&bad).unwrap());
    assert!(!auth.remembers(&good));
    assert!(auth.allows(&basic("alice", "wonderland")).await);
    assert!(auth.remembers(&good));
    assert!(!auth.allows(&basic("alice", "guess")).await);
    assert!(!auth.remembers(&bad));
}

#[tokio::test]
async fn a_remembered_login_skips_bcrypt() {
    let auth = auth_for(&[("alice", "wonderland")]);
    assert!(auth.allows(&basic("alice", "wonderland")).await);
    // With bcrypt's only turn taken, only the memory can answer.
    let _turn = auth.bcrypt_turn.clone().try_acquire_owned().unwrap();
    let headers = basic("alice", "wonderland");
    let answer = tokio::time::timeout(std::time::Duration::from_secs(5), auth.allows(&headers));
    assert!(answer.await.expect("answered without bcrypt"));
}

#[test]
fn fingerprints_keep_user_and_password_apart() {
    let auth = auth_for(&[("ab", "c")]);
    let split = |user: &str, password: &str| {
        auth.fingerprint(&Credentials { user: user.into(), password: password.as_bytes().to_vec() }).unwrap()
    };
    assert_ne!(split("ab", "c"), split("a", "bc"));
}

#[test]
fn the_memory_is_bounded() {
    let auth = auth_for(&[("alice", "wonderland")]);
    for index in 0..(REMEMBERED_LOGINS + 10) {
        auth.remember([index as u8; 32]);
    }
    assert_eq!(auth.remembered.lock().unwrap().len(), REMEMBERED_LOGINS);
    assert!(!auth.remembers(&[0u8; 32]), "the oldest entries go first");
    assert!(auth.remembers(&[(REMEMBERED_LOGINS + 9) as u8; 32]));
}

#[test]
fn debug_output_shows_users_but_no_hash() {
    let hash = cheap_hash("wonderland");
    let users = [("alice".to_string(), PasswordHash::parse(hash.clone()).unwrap())].into_iter().collect();
    let debug = format!("{:?}", BasicAuth::new(&users).unwrap());
    assert!(debug.contains("alice") && !debug.contains(&hash[7..]), "{debug}");
    assert_eq!(format!("{:?}", PasswordHash::parse(hash).unwrap()), "PasswordHash(<redacted>)");
}

#[test]
fn no_users_means_no_authentication() {
    assert!(BasicAuth::new(&BTreeMap::new()).is_none());
}
