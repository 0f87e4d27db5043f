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
    assert_eq!(auth.allows(&basic("alice", "wonderland")).await, Verdict::Allowed);
    assert_eq!(auth.allows(&basic("bob", "pa:ss")).await, Verdict::Allowed, "the password may hold a colon");
}

#[tokio::test]
async fn a_wrong_user_or_password_fails() {
    let auth = auth_for(&[("alice", "wonderland"), ("bob", "builder")]);
    assert_eq!(auth.allows(&basic("alice", "builder")).await, Verdict::Refused, "another user's password");
    assert_eq!(auth.allows(&basic("alice", "Wonderland")).await, Verdict::Refused);
    assert_eq!(auth.allows(&basic("alice", "")).await, Verdict::Refused);
    assert_eq!(auth.allows(&basic("carol", "wonderland")).await, Verdict::Refused);
    assert_eq!(auth.allows(&basic("Alice", "wonderland")).await, Verdict::Refused, "user names are case-sensitive");
}

#[tokio::test]
async fn a_missing_or_malformed_header_fails() {
    let auth = auth_for(&[("alice", "wonderland")]);
    let encoded = base64::engine::general_purpose::STANDARD.encode("alice:wonderland");
    assert_eq!(auth.allows(&HeaderMap::new()).await, Verdict::Refused);
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
        assert_eq!(auth.allows(&authorization(&value)).await, Verdict::Refused, "{value}");
    }
    let mut non_utf8_user = b"\xffalice:wonderland".to_vec();
    non_utf8_user = base64::engine::general_purpose::STANDARD.encode(&non_utf8_user).into_bytes();
    let value = format!("Basic {}", String::from_utf8(non_utf8_user).unwrap());
    assert_eq!(auth.allows(&authorization(&value)).await, Verdict::Refused);
}

#[tokio::test]
async fn the_scheme_is_case_insensitive() {
    let auth = auth_for(&[("alice", "wonderland")]);
    let encoded = base64::engine::general_purpose::STANDARD.encode("alice:wonderland");
    assert_eq!(auth.allows(&authorization(&format!("basic {encoded}"))).await, Verdict::Allowed);
    assert_eq!(auth.allows(&authorization(&format!("BASIC {encoded}"))).await, Verdict::Allowed);
}

#[tokio::test]
async fn successes_and_failures_are_remembered() {
    let auth = auth_for(&[("alice", "wonderland")]);
    let good = Credentials::from_headers(&basic("alice", "wonderland")).unwrap();
    let bad = Credentials::from_headers(&basic("alice", "guess")).unwrap();
    let (good, bad) = (auth.fingerprint(&good).unwrap(), auth.fingerprint(&bad).unwrap());
    assert!(!auth.remembered.holds(&good));
    assert_eq!(auth.allows(&basic("alice", "wonderland")).await, Verdict::Allowed);
    assert!(auth.remembered.holds(&good) && !auth.refused.holds(&good));
    assert_eq!(auth.allows(&basic("alice", "guess")).await, Verdict::Refused);
    assert!(auth.refused.holds(&bad) && !auth.remembered.holds(&bad));
}

#[tokio::test]
async fn remembered_credentials_skip_bcrypt_either_way() {
    let auth = auth_for(&[("alice", "wonderland")]);
    assert_eq!(auth.allows(&basic("alice", "wonderland")).await, Verdict::Allowed);
    assert_eq!(auth.allows(&basic("alice", "guess")).await, Verdict::Refused);
    // With bcrypt's only turn taken, only the memory can answer.
    let _turn = auth.bcrypt_turn.clone().try_acquire_owned().unwrap();
    for (password, verdict) in [("wonderland", Verdict::Allowed), ("guess", Verdict::Refused)] {
        let headers = basic("alice", password);
        let answer = tokio::time::timeout(std::time::Duration::from_secs(5), auth.allows(&headers));
        assert_eq!(answer.await.expect("answered without bcrypt"), verdict);
    }
}

/// Waits, at most 10 s, until only `left` places for waiting checks are free.
async fn wait_for_places_left(auth: &BasicAuth, left: usize) {
    let taken = async {
        while auth.checks.available_permits() > left {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), taken).await.expect("the places taken");
}

#[tokio::test]
async fn past_the_waiting_checks_new_credentials_are_turned_away_at_once() {
    let auth = std::sync::Arc::new(auth_for(&[("alice", "wonderland")]));
    let turn = auth.bcrypt_turn.clone().try_acquire_owned().unwrap();
    let waiting: Vec<_> = (0..=MAX_WAITING_CHECKS)
        .map(|i| {
            let auth = auth.clone();
            tokio::spawn(async move { auth.allows(&basic("alice", &format!("guess-{i}"))).await })
        })
        .collect();
    wait_for_places_left(&auth, 0).await;
    assert_eq!(auth.allows(&basic("alice", "wonderland")).await, Verdict::Busy, "not queued");
    drop(turn);
    for check in waiting {
        assert_eq!(check.await.unwrap(), Verdict::Refused);
    }
    assert_eq!(auth.allows(&basic("alice", "wonderland")).await, Verdict::Allowed, "once the flood is checked");
}

#[tokio::test]
async fn at_shutdown_the_waiting_checks_end_at_once() {
    let auth = std::sync::Arc::new(auth_for(&[("alice", "wonderland")]));
    // The check running holds the turn, as a long hash would.
    let turn = auth.bcrypt_turn.clone().try_acquire_owned().unwrap();
    let waiting: Vec<_> = (0..MAX_WAITING_CHECKS)
        .map(|i| {
            let auth = auth.clone();
            tokio::spawn(async move { auth.allows(&basic("alice", &format!("guess-{i}"))).await })
        })
        .collect();
    // Every place but one is taken.
    wait_for_places_left(&auth, 1).await;
    auth.close();
    for check in waiting {
        assert_eq!(check.await.unwrap(), Verdict::Closing, "answered while the running check still holds its turn");
    }
    assert_eq!(auth.allows(&basic("alice", "wonderland")).await, Verdict::Closing);
    drop(turn);
}

#[test]
fn an_unknown_user_is_checked_against_the_costliest_hash() {
    let users: BTreeMap<String, PasswordHash> = [("alice", cheap_hash("x")), ("bob", bcrypt::hash("y", 5).unwrap())]
        .into_iter()
        .map(|(user, hash)| (user.to_string(), PasswordHash::parse(hash).unwrap()))
        .collect();
    let auth = BasicAuth::new(&users).unwrap();
    assert_eq!(auth.decoy.cost(), 5, "alice comes first, and costs less");
}

#[test]
fn costly_hashes_are_refused_with_the_reason() {
    assert!(PasswordHash::parse(bcrypt::hash("x", MAX_BCRYPT_COST).unwrap()).is_ok());
    let costly = cheap_hash("x").replacen("$04$", "$31$", 1);
    let error = PasswordHash::parse(costly.clone()).map(drop).unwrap_err();
    assert!(error.contains("cost 31") && !error.contains(&costly[7..]), "{error}");
    assert!(PasswordHash::parse("plain".into()).map(drop).unwrap_err().contains("not a bcrypt hash"));
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
    let remembered = Remembered::new(REMEMBERED_LOGINS);
    for index in 0..(REMEMBERED_LOGINS + 10) {
        remembered.add([index as u8; 32]);
    }
    assert_eq!(remembered.fingerprints.lock().unwrap().len(), REMEMBERED_LOGINS);
    assert!(!remembered.holds(&[0u8; 32]), "the oldest entries go first");
    assert!(remembered.holds(&[(REMEMBERED_LOGINS + 9) as u8; 32]));
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
