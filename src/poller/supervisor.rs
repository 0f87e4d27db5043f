//! Keeps an account's poller alive. A poller only ends at shutdown; if it ends any other way (a
//! panic: a bug, since nothing from the network should panic), its account would stop being
//! polled while `/metrics` kept serving its last figures. The supervisor logs it at error level,
//! counts it in `capi_poller_restarts_total`, shows the account down (`capi_up` 0) and starts a
//! new poller after a pause (1 s, doubling up to a minute while it keeps dying). The new poller
//! continues from the cursor and counters recorded at the end of the last complete poll, so a
//! poll cut short by the panic is done again: nothing is lost or counted twice.

use super::{AccountPoller, Checkpoint, PollerSetup};
use crate::snapshot::{AccountSlot, AccountSnapshot};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{error, info};

const FIRST_PAUSE: Duration = Duration::from_secs(1);
const MAX_PAUSE: Duration = Duration::from_secs(60);
/// A poller that ran this long before dying starts the pauses afresh.
const HEALTHY_RUN: Duration = Duration::from_secs(300);

/// Runs the account's pollers one after the other, each continuing from `checkpoint` (where the
/// one before recorded its last complete poll), from `start_delay` until `shutdown` turns true.
pub async fn supervise(
    setup: PollerSetup,
    checkpoint: Arc<Mutex<Checkpoint>>,
    start_delay: Duration,
    shutdown: watch::Receiver<bool>,
) {
    let account = setup.slot.name().to_owned();
    let (mut delay, mut deaths_in_a_row) = (start_delay, 0u32);
    loop {
        let poller = Box::new(AccountPoller::new(setup.clone(), checkpoint.clone()));
        let started = Instant::now();
        let ended = tokio::spawn(poller.run(delay, shutdown.clone())).await;
        let Err(death) = ended else { return }; // shut down
        if *shutdown.borrow() {
            return;
        }
        deaths_in_a_row = if started.elapsed() >= HEALTHY_RUN { 1 } else { deaths_in_a_row.saturating_add(1) };
        delay = pause_before_restart(deaths_in_a_row);
        error!(account, error = %reason(death), restart_in_seconds = delay.as_secs_f64(),
            "the account's poller stopped unexpectedly; it restarts from its last complete poll (capi_poller_restarts_total)");
        show_down(&setup.slot);
        info!(account, "restarting the account's poller");
    }
}

/// Republishes the last snapshot with the account down and the restart counted, until a new
/// poller's poll succeeds.
fn show_down(slot: &AccountSlot) {
    let last = slot.latest().unwrap_or_default();
    let mut stats = (*last.stats).clone();
    stats.poller_restarts = stats.poller_restarts.saturating_add(1);
    slot.publish(AccountSnapshot { up: false, stats: Arc::new(stats), ..(*last).clone() });
}

/// The pause before the next poller after this many deaths in a row: 1 s, doubling up to a
/// minute.
fn pause_before_restart(deaths_in_a_row: u32) -> Duration {
    let doublings = deaths_in_a_row.saturating_sub(1).min(6);
    FIRST_PAUSE.saturating_mul(1 << doublings).min(MAX_PAUSE)
}

/// What a dead poller's task says about its end.
fn reason(death: tokio::task::JoinError) -> String {
    if !death.is_panic() {
        return death.to_string();
    }
    let payload = death.into_panic();
    let message =
        payload.downcast_ref::<&str>().map(|s| (*s).to_owned()).or_else(|| payload.downcast_ref::<String>().cloned());
    format!("panic: {}", message.unwrap_or_else(|| "(no message)".into()))
}

/// Test-only, absent from release builds: `CAPI_TEST_PANIC=<account>:<n>` makes that account's
/// poller panic in its next `n` polls after the first, after counting bills and before saving
/// them, so that tests can watch a poller die and come back with exact counts.
#[cfg(debug_assertions)]
pub(super) fn panic_if_asked(account: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    /// The account, how many polls panic, and how many polls it has made so far.
    static ASKED: OnceLock<Option<(String, u64, AtomicU64)>> = OnceLock::new();
    let asked = ASKED.get_or_init(|| {
        let value = std::env::var("CAPI_TEST_PANIC").ok()?;
        let (name, polls) = value.rsplit_once(':')?;
        Some((name.to_owned(), polls.parse().ok()?, AtomicU64::new(0)))
    });
    if let Some((name, panics, polls)) = asked {
        if name == account {
            let poll = polls.fetch_add(1, Ordering::SeqCst) + 1;
            if (2..=panics.saturating_add(1)).contains(&poll) {
                panic!("CAPI_TEST_PANIC asked poll {poll} of this account to panic");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_from_a_second_up_to_a_minute() {
        let pauses: Vec<u64> = (1..=9).map(|deaths| pause_before_restart(deaths).as_secs()).collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(pause_before_restart(u32::MAX), MAX_PAUSE);
    }

    #[tokio::test]
    async fn a_panic_is_told_with_its_message() {
        let death = tokio::spawn(async { panic!("the poller's bug") }).await.unwrap_err();
        assert_eq!(reason(death), "panic: the poller's bug");
        let death = tokio::spawn(async { std::panic::panic_any(7_u8) }).await.unwrap_err();
        assert_eq!(reason(death), "panic: (no message)");
    }
}
