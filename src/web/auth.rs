//! Basic auth against exporter-toolkit's `basic_auth_users` (bcrypt hashes).
//!
//! bcrypt is slow by design, and Prometheus sends the same credentials every scrape, so checks
//! are remembered: as an HMAC-SHA-256 of user and password under a key drawn at start, which
//! cannot be turned back into the password and, unlike a plain hash, cannot be brute-forced
//! offline if memory leaks. Successes are remembered so that a scrape costs no bcrypt; failures,
//! so that a scraper hammering with a wrong password costs one check, not one per request (a
//! guesser learns nothing it did not know). New credentials are checked one at a time, on a
//! blocking thread, so guessing cannot take every core; at most [`MAX_WAITING_CHECKS`] wait for
//! their turn, and beyond that new credentials are turned away at once (429) rather than queued,
//! so that no request waits behind a flood of guesses. Hashes costlier than [`MAX_BCRYPT_COST`]
//! are refused at start: one check would pin a core for seconds.

use axum::http::{header, HeaderMap};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex};
use subtle::ConstantTimeEq;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The costliest bcrypt hash accepted: each check of a hash of cost 12 takes about a quarter of
/// a second of a core, and every further step doubles it (exporter-toolkit's examples use 10).
pub const MAX_BCRYPT_COST: u32 = 12;

/// A bcrypt hash from the web config: a secret, so it shows in no Debug output.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct PasswordHash(String);

impl PasswordHash {
    /// Accepts `$2a$`, `$2b$` and `$2y$` hashes of cost 4 to [`MAX_BCRYPT_COST`]; the error says
    /// what is wrong without the hash itself.
    pub(crate) fn parse(text: String) -> Result<PasswordHash, String> {
        let prefix_allowed = ["$2a$", "$2b$", "$2y$"].iter().any(|prefix| text.starts_with(prefix));
        let parts = text.parse::<bcrypt::HashParts>().ok().filter(|_| prefix_allowed);
        match parts.map(|parts| parts.get_cost()) {
            None => Err("is not a bcrypt hash ($2a$, $2b$ or $2y$)".into()),
            Some(cost) if cost < 4 => Err(format!("has cost {cost}; bcrypt needs at least 4")),
            Some(cost) if cost > MAX_BCRYPT_COST => Err(format!(
                "has cost {cost}, above the {MAX_BCRYPT_COST} accepted: each login check would take seconds of CPU; hash it again with a cost of 10 (htpasswd -nBC 10 USER)"
            )),
            Some(_) => Ok(PasswordHash(text)),
        }
    }

    /// The bcrypt cost, which sets how long a check takes.
    pub(crate) fn cost(&self) -> u32 {
        self.0.parse::<bcrypt::HashParts>().map_or(0, |parts| parts.get_cost())
    }
}

impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordHash(<redacted>)")
    }
}

/// How many successful (user, password) pairs are remembered; more than any real setup needs.
const REMEMBERED_LOGINS: usize = 64;
/// How many failed pairs are remembered, the oldest forgotten first.
const REMEMBERED_FAILURES: usize = 256;
/// How many checks of new credentials may wait for their turn, besides the one running.
pub const MAX_WAITING_CHECKS: usize = 8;

/// What a request's credentials are worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allowed,
    Refused,
    /// New credentials arrived while too many checks were waiting: try again later.
    Busy,
    /// The server is shutting down: checks that had not started never will.
    Closing,
}

type CacheMac = Hmac<Sha256>;

/// Checks `Authorization: Basic` headers against the configured users.
pub(crate) struct BasicAuth {
    users: BTreeMap<String, PasswordHash>,
    /// Checked instead of a user's hash for an unknown user, so the answer takes as long as for
    /// a known one and does not tell which users exist: the costliest of the users' hashes (users
    /// of lower costs still answer sooner, which the web config's warnings say).
    decoy: PasswordHash,
    /// `None` if the system had no randomness to give: then nothing is remembered.
    cache_key: Option<[u8; 32]>,
    remembered: Remembered,
    refused: Remembered,
    bcrypt_turn: Arc<Semaphore>,
    /// A place for each check waiting for its turn or running.
    checks: Semaphore,
}

impl BasicAuth {
    /// The checks for `users`: those of `before` (a reload's stack before), with the logins they
    /// remember, when it has the same users, else new ones. A reload that forgot them would make
    /// every scraping user wait for bcrypt again, and more than nine of them get 429 at once.
    /// `None` when there are no users, which means no authentication.
    pub(crate) fn for_users(
        users: &BTreeMap<String, PasswordHash>,
        before: Option<&Arc<BasicAuth>>,
    ) -> Option<Arc<BasicAuth>> {
        match before {
            Some(before) if before.users == *users => Some(before.clone()),
            _ => Self::new(users).map(Arc::new),
        }
    }

    /// `None` when there are no users, which means no authentication.
    pub(crate) fn new(users: &BTreeMap<String, PasswordHash>) -> Option<BasicAuth> {
        let decoy = users.values().max_by_key(|hash| hash.cost())?.clone();
        Some(BasicAuth {
            users: users.clone(),
            decoy,
            cache_key: random_key(),
            remembered: Remembered::new(REMEMBERED_LOGINS),
            refused: Remembered::new(REMEMBERED_FAILURES),
            bcrypt_turn: Arc::new(Semaphore::new(1)),
            checks: Semaphore::new(MAX_WAITING_CHECKS + 1),
        })
    }

    /// Whether the request's headers carry the user and password of a configured user.
    pub(crate) async fn allows(&self, headers: &HeaderMap) -> Verdict {
        let Some(credentials) = Credentials::from_headers(headers) else { return Verdict::Refused };
        let fingerprint = self.fingerprint(&credentials);
        if let Some(known) = fingerprint.as_ref().and_then(|f| self.remembered_verdict(f)) {
            return known;
        }
        let Ok(_place) = self.checks.try_acquire() else { return Verdict::Busy };
        let Ok(turn) = self.bcrypt_turn.clone().acquire_owned().await else { return Verdict::Closing };
        // The same credentials may have been checked while these waited.
        if let Some(known) = fingerprint.as_ref().and_then(|f| self.remembered_verdict(f)) {
            return known;
        }
        let known_hash = self.users.get(&credentials.user).cloned();
        let is_known = known_hash.is_some();
        let hash = known_hash.unwrap_or_else(|| self.decoy.clone());
        let allowed = verify(turn, credentials.password, hash).await && is_known;
        if let Some(fingerprint) = fingerprint {
            let memory = if allowed { &self.remembered } else { &self.refused };
            memory.add(fingerprint);
        }
        if allowed {
            Verdict::Allowed
        } else {
            Verdict::Refused
        }
    }

    /// At shutdown: the checks waiting for their turn end at once, so that stopping never
    /// waits on a queue of bcrypt hashes (the one running, at most cost 12, finishes).
    pub(crate) fn close(&self) {
        self.bcrypt_turn.close();
    }

    fn remembered_verdict(&self, fingerprint: &[u8; 32]) -> Option<Verdict> {
        if self.remembered.holds(fingerprint) {
            Some(Verdict::Allowed)
        } else if self.refused.holds(fingerprint) {
            Some(Verdict::Refused)
        } else {
            None
        }
    }

    fn fingerprint(&self, credentials: &Credentials) -> Option<[u8; 32]> {
        let mut mac = CacheMac::new_from_slice(self.cache_key.as_ref()?).ok()?;
        // The user's length first, so ("ab", "c") and ("a", "bc") differ.
        mac.update(&(credentials.user.len() as u64).to_be_bytes());
        mac.update(credentials.user.as_bytes());
        mac.update(&credentials.password);
        Some(mac.finalize().into_bytes().into())
    }
}

/// Runs bcrypt on a blocking thread. The turn travels into the thread: a request that times out
/// does not let a second check start while the first still runs.
async fn verify(turn: OwnedSemaphorePermit, password: Vec<u8>, hash: PasswordHash) -> bool {
    let check = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        bcrypt::verify(password, &hash.0).unwrap_or(false)
    });
    check.await.unwrap_or(false)
}

/// Fingerprints of credentials, the oldest forgotten first.
struct Remembered {
    max: usize,
    fingerprints: Mutex<VecDeque<[u8; 32]>>,
}

impl Remembered {
    fn new(max: usize) -> Self {
        Self { max, fingerprints: Mutex::new(VecDeque::new()) }
    }

    /// Looks through every entry, without stopping at a match, comparing in constant time.
    fn holds(&self, fingerprint: &[u8; 32]) -> bool {
        let fingerprints = self.fingerprints.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        fingerprints
            .iter()
            .fold(subtle::Choice::from(0), |found, entry| found | entry[..].ct_eq(&fingerprint[..]))
            .into()
    }

    fn add(&self, fingerprint: [u8; 32]) {
        let mut fingerprints = self.fingerprints.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if fingerprints.len() >= self.max {
            fingerprints.pop_front();
        }
        fingerprints.push_back(fingerprint);
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
mod tests;
