//! Basic auth against exporter-toolkit's `basic_auth_users` (bcrypt hashes).
//!
//! bcrypt is slow by design, and Prometheus sends the same credentials every scrape, so successful
//! checks are remembered: as an HMAC-SHA-256 of user and password under a key drawn at start,
//! which cannot be turned back into the password and, unlike a plain hash, cannot be brute-forced
//! offline if memory leaks. Failed checks are not remembered, so guessing stays bcrypt-slow; and
//! only one bcrypt check runs at a time, on a blocking thread, so guessing cannot take every core.

use axum::http::{header, HeaderMap};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

/// A bcrypt hash from the web config: a secret, so it shows in no Debug output.
#[derive(Clone)]
pub(crate) struct PasswordHash(String);

impl PasswordHash {
    /// Accepts `$2a$`, `$2b$` and `$2y$` hashes with a cost bcrypt can compute.
    pub(crate) fn parse(text: String) -> Option<PasswordHash> {
        let prefix_allowed = ["$2a$", "$2b$", "$2y$"].iter().any(|prefix| text.starts_with(prefix));
        let parts = text.parse::<bcrypt::HashParts>().ok()?;
        (prefix_allowed && (4..=31).contains(&parts.get_cost())).then_some(PasswordHash(text))
    }
}

impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordHash(<redacted>)")
    }
}

/// How many successful (user, password) pairs are remembered; more than any real setup needs.
const REMEMBERED_LOGINS: usize = 64;

type CacheMac = Hmac<Sha256>;

/// Checks `Authorization: Basic` headers against the configured users.
pub(crate) struct BasicAuth {
    users: BTreeMap<String, PasswordHash>,
    /// Checked instead of a user's hash for an unknown user, so the answer takes as long as for
    /// a known one and does not tell which users exist.
    decoy: PasswordHash,
    /// `None` if the system had no randomness to give: then nothing is remembered.
    cache_key: Option<[u8; 32]>,
    remembered: Mutex<Vec<[u8; 32]>>,
    bcrypt_turn: Arc<Semaphore>,
}

impl BasicAuth {
    /// `None` when there are no users, which means no authentication.
    pub(crate) fn new(users: &BTreeMap<String, PasswordHash>) -> Option<BasicAuth> {
        let decoy = users.values().next()?.clone();
        Some(BasicAuth {
            users: users.clone(),
            decoy,
            cache_key: random_key(),
            remembered: Mutex::new(Vec::new()),
            bcrypt_turn: Arc::new(Semaphore::new(1)),
        })
    }

    /// Whether the request's headers carry the user and password of a configured user.
    pub(crate) async fn allows(&self, headers: &HeaderMap) -> bool {
        let Some(credentials) = Credentials::from_headers(headers) else { return false };
        let fingerprint = self.fingerprint(&credentials);
        if fingerprint.as_ref().is_some_and(|fingerprint| self.remembers(fingerprint)) {
            return true;
        }
        let known_hash = self.users.get(&credentials.user).cloned();
        let is_known = known_hash.is_some();
        let hash = known_hash.unwrap_or_else(|| self.decoy.clone());
        let matches = self.verify(credentials.password, hash).await;
        let allowed = matches && is_known;
        if let (true, Some(fingerprint)) = (allowed, fingerprint) {
            self.remember(fingerprint);
        }
        allowed
    }

    /// Runs bcrypt on a blocking thread, one check at a time. The turn travels into the thread:
    /// a request that times out does not let a second check start while the first still runs.
    async fn verify(&self, password: Vec<u8>, hash: PasswordHash) -> bool {
        let Ok(turn) = self.bcrypt_turn.clone().acquire_owned().await else { return false };
        let check = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            bcrypt::verify(password, &hash.0).unwrap_or(false)
        });
        check.await.unwrap_or(false)
    }

    fn fingerprint(&self, credentials: &Credentials) -> Option<[u8; 32]> {
        let mut mac = CacheMac::new_from_slice(self.cache_key.as_ref()?).ok()?;
        // The user's length first, so ("ab", "c") and ("a", "bc") differ.
        mac.update(&(credentials.user.len() as u64).to_be_bytes());
        mac.update(credentials.user.as_bytes());
        mac.update(&credentials.password);
        Some(mac.finalize().into_bytes().into())
    }

    /// Looks through every entry, without stopping at a match, comparing in constant time.
    fn remembers(&self, fingerprint: &[u8; 32]) -> bool {
        let remembered = self.remembered.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        remembered.iter().fold(subtle::Choice::from(0), |found, entry| found | entry[..].ct_eq(&fingerprint[..])).into()
    }

    fn remember(&self, fingerprint: [u8; 32]) {
        let mut remembered = self.remembered.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if remembered.len() >= REMEMBERED_LOGINS {
            remembered.remove(0);
        }
        remembered.push(fingerprint);
    }
}

/// Shows the user names only.
impl fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BasicAuth").field("users", &self.users.keys().collect::<Vec<_>>()).finish_non_exhaustive()
    }
}

fn random_key() -> Option<[u8; 32]> {
    let mut key = [0u8; 32];
    rustls::crypto::ring::default_provider().secure_random.fill(&mut key).ok()?;
    Some(key)
}

/// The user and password of an `Authorization: Basic` header; no Debug, as it holds a password.
struct Credentials {
    user: String,
    password: Vec<u8>,
}

impl Credentials {
    /// `None` for a missing or malformed header, as Go's `Request.BasicAuth` reads it: the scheme
    /// in any case, standard base64, the user up to the first colon.
    fn from_headers(headers: &HeaderMap) -> Option<Credentials> {
        let value = headers.get(header::AUTHORIZATION)?.as_bytes();
        let scheme = value.get(..6)?;
        if !scheme.eq_ignore_ascii_case(b"basic ") {
            return None;
        }
        let decoded = base64::engine::general_purpose::STANDARD.decode(value.get(6..)?).ok()?;
        let colon = decoded.iter().position(|byte| *byte == b':')?;
        let user = std::str::from_utf8(decoded.get(..colon)?).ok()?.to_string();
        let password = decoded.get(colon + 1..)?.to_vec();
        Some(Credentials { user, password })
    }
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
