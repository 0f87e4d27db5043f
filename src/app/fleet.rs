//! The account pollers that run, on a thread of their own with a single-threaded runtime (so that
//! thousands of small request tasks never wake or migrate between the server's threads). A reload
//! hands over the accounts wanted now: an account whose settings are unchanged keeps its poller;
//! one whose credentials, coins or poll settings changed gets a new poller that continues from
//! the old one's last complete poll, in the same slot, so its counters go on; a new account starts
//! (from the state file if it has the account); an account no longer wanted stops.

use crate::api::ApiError;
use crate::config::AccountConfig;
use crate::poller::supervisor::supervise;
use crate::poller::{start_delay, Checkpoint, PollSettings, PollerSetup};
use crate::snapshot::AccountSlot;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::runtime::Handle;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{error, info};

/// An account to poll, and how: what a reload compares to tell whether its poller goes on.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Wanted {
    pub account: AccountConfig,
    pub settings: PollSettings,
}

/// Makes what a poller of a wanted account needs, with the slot it publishes to.
pub(super) type MakeSetup<'a> = &'a (dyn Fn(&Wanted, Arc<AccountSlot>) -> Result<PollerSetup, ApiError> + Sync);

pub(super) struct Fleet {
    /// The pollers' runtime, driven by their thread until `_end` is dropped with the fleet.
    pollers: Handle,
    _end: oneshot::Sender<()>,
    /// In the order of the configuration.
    running: Vec<Running>,
}

/// One account's supervisor, running.
struct Running {
    wanted: Wanted,
    slot: Arc<AccountSlot>,
    checkpoint: Arc<Mutex<Checkpoint>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Fleet {
    /// Starts the pollers' thread, with no poller yet.
    pub fn new() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let pollers = runtime.handle().clone();
        let (end, ended) = oneshot::channel::<()>();
        std::thread::Builder::new().name("poller".into()).spawn(move || {
            runtime.block_on(async {
                let _ = ended.await;
            });
        })?;
        Ok(Self { pollers, _end: end, running: Vec::new() })
    }

    /// The slots of the accounts polled, in the order of the configuration.
    pub fn slots(&self) -> Vec<Arc<AccountSlot>> {
        self.running.iter().map(|running| running.slot.clone()).collect()
    }

    /// Makes the pollers those of `wanted`. Every new setup is made first: if one fails,
    /// nothing changes. A changed account's old poller has ended before its new one starts, so
    /// that no bill is counted by both.
    pub async fn apply(&mut self, wanted: Vec<Wanted>, make_setup: MakeSetup<'_>) -> Result<(), ApiError> {
        let setups = wanted
            .iter()
            .map(|wanted| match self.running.iter().find(|r| r.wanted.account.name == wanted.account.name) {
                Some(running) if running.wanted == *wanted => Ok(None),
                Some(running) => make_setup(wanted, running.slot.clone()).map(Some),
                None => make_setup(wanted, AccountSlot::new(wanted.account.name.clone())).map(Some),
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Names are unique, so a poller is unchanged exactly when its account is wanted as it is.
        let (kept, ending): (Vec<Running>, Vec<Running>) =
            self.running.drain(..).partition(|running| wanted.contains(&running.wanted));
        let mut kept: BTreeMap<String, Running> =
            kept.into_iter().map(|running| (running.wanted.account.name.clone(), running)).collect();
        let mut checkpoints = end(ending).await;
        let count = wanted.len();
        for (index, (wanted, setup)) in wanted.into_iter().zip(setups).enumerate() {
            let name = wanted.account.name.clone();
            let running = match setup {
                None => kept.remove(&name),
                Some(setup) => {
                    let checkpoint = checkpoints.remove(&name).unwrap_or_else(|| Checkpoint::restore(&setup));
                    let delay = start_delay(index, count, wanted.settings.interval);
                    Some(self.spawn(wanted, setup, checkpoint, delay))
                }
            };
            self.running.extend(running);
        }
        for name in checkpoints.keys() {
            info!(account = name, "the account is no longer configured; its polling stopped");
        }
        Ok(())
    }

    fn spawn(
        &self,
        wanted: Wanted,
        setup: PollerSetup,
        checkpoint: Arc<Mutex<Checkpoint>>,
        delay: std::time::Duration,
    ) -> Running {
        let (stop, stopped) = watch::channel(false);
        let (account, slot) = (wanted.account.name.clone(), setup.slot.clone());
        let supervisor = self.pollers.spawn(supervise(setup, checkpoint.clone(), delay, stopped));
        let task = self.pollers.spawn(async move {
            // A supervisor only ends when stopped; one that panicked left its account unpolled.
            if let Err(death) = supervisor.await {
                error!(account, error = %death, "the account's poller supervisor stopped unexpectedly; its account is no longer polled");
            }
        });
        Running { wanted, slot, checkpoint, stop, task }
    }

    /// Stops every poller (a poll in progress is abandoned: the state file holds the last
    /// complete one), then the pollers' thread.
    pub async fn stop(mut self) {
        end(std::mem::take(&mut self.running)).await;
    }
}

/// Stops these pollers, all at once, and waits for each to end; returns where each had got to,
/// by account.
async fn end(pollers: Vec<Running>) -> BTreeMap<String, Arc<Mutex<Checkpoint>>> {
    for poller in &pollers {
        let _ = poller.stop.send(true);
    }
    let mut checkpoints = BTreeMap::new();
    for poller in pollers {
        let _ = poller.task.await;
        checkpoints.insert(poller.wanted.account.name, poller.checkpoint);
    }
    checkpoints
}
