//! Replicas with `--shard.index`/`--shard.count` split the configured accounts between them:
//! together they poll every account, and no two poll the same one.

use crate::common;

use capi_sim::SimOptions;
use common::{Exchange, Exporter};
use std::collections::BTreeSet;

/// An accounts file of `names` on `exchange`, and what replicas of it need.
struct Fleet<'a> {
    exchange: &'a Exchange,
    config: std::path::PathBuf,
    env: Vec<(String, String)>,
}

impl<'a> Fleet<'a> {
    fn new(exchange: &'a Exchange, names: &[String]) -> Self {
        let (config, env, _) = exchange.accounts_file(names);
        Self { exchange, config, env }
    }

    /// The replica `index` of `count`, polling its share of the accounts, with flags `extra`.
    fn replica(&self, index: u32, count: u32, extra: &[&str]) -> Exporter {
        let (index, count) = (index.to_string(), count.to_string());
        let mut command = Exporter::command(&[
            "--config.file",
            self.config.to_str().unwrap(),
            "--api.base-url",
            &self.exchange.url,
            "--shard.index",
            &index,
            "--shard.count",
            &count,
        ]);
        command.args(extra);
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        Exporter::spawn(command)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_poll_every_account_exactly_once() {
    let exchange = Exchange::start(SimOptions { weight_per_10s: None, ..SimOptions::default() }).await;
    let names: Vec<String> = (0..7).map(|i| format!("sub-{i}")).collect();
    let fleet = Fleet::new(&exchange, &names);
    let mut polled: Vec<BTreeSet<String>> = Vec::new();
    for index in 0..3 {
        let exporter = fleet.replica(index, 3, &[]);
        let scrape = exporter.wait_up().await;
        let accounts: BTreeSet<String> = scrape.series("capi_up").iter().map(|s| s.labels["account"].clone()).collect();
        assert!(!accounts.is_empty(), "shard {index} polls nothing");
        polled.push(accounts);
    }
    let all: BTreeSet<String> = polled.iter().flatten().cloned().collect();
    assert_eq!(all, names.into_iter().collect(), "no gap");
    assert_eq!(polled.iter().map(BTreeSet::len).sum::<usize>(), 7, "no overlap: {polled:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shard_that_owns_no_account_says_so() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let owner = owner_of("only", 4);
    let exporter = Fleet::new(&exchange, &["only".to_owned()]).replica((owner + 1) % 4, 4, &[]);
    exporter.wait_logged("this shard owns none of the configured accounts", 1);
    let line = exporter.log().lines().find(|l| l.contains("owns none")).unwrap().to_owned();
    assert!(line.contains("level=warn") && line.contains("configured=1") && line.contains("--shard.count"), "{line}");
}

/// The shard of `count` that owns `account`.
fn owner_of(account: &str, count: u32) -> u32 {
    (0..count).find(|&index| capi_exporter::config::shard::Shard { index, count }.owns(account)).unwrap()
}

/// Scaled out to two replicas and back to one: the replica that owns none of the accounts drops
/// their saved state from the file at its start, not at a later save it never makes. Kept there,
/// the account would resume from that old cursor when back on one replica, and count again the
/// bills the other replica counted meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn the_state_a_replica_drops_at_its_start_stays_dropped() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let fleet = Fleet::new(&exchange, &["only".to_owned()]);
    let dir = std::env::temp_dir().join(format!("capi-shards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("state.json");
    let _ = std::fs::remove_file(&state);
    let flags = ["--state.file", state.to_str().unwrap()];
    let mut alone = fleet.replica(0, 1, &flags);
    let first = alone.wait_up().await;
    let began = first.value("capi_bill_counting_start_timestamp_seconds", &[("account", "only")]).unwrap();
    assert!(alone.terminate().success());

    let mut idle = fleet.replica((owner_of("only", 2) + 1) % 2, 2, &flags);
    idle.wait_logged("their saved state is dropped", 1);
    assert!(idle.terminate().success());
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert!(saved["accounts"]["only"].is_null(), "still in the state file: {saved}");

    let back = fleet.replica(0, 1, &flags).wait_up().await;
    let begins = back.value("capi_bill_counting_start_timestamp_seconds", &[("account", "only")]).unwrap();
    assert!(begins > began, "counting begins afresh: {begins} against {began}");
    let _ = std::fs::remove_dir_all(&dir);
}
