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

    /// The replica `index` of `count`, polling its share of the accounts.
    fn replica(&self, index: u32, count: u32) -> Exporter {
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
        let exporter = fleet.replica(index, 3);
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
    let owner = (0..4).find(|&i| capi_exporter::config::shard::Shard { index: i, count: 4 }.owns("only")).unwrap();
    let exporter = Fleet::new(&exchange, &["only".to_owned()]).replica((owner + 1) % 4, 4);
    exporter.wait_logged("this shard owns none of the configured accounts", 1);
    let line = exporter.log().lines().find(|l| l.contains("owns none")).unwrap().to_owned();
    assert!(line.contains("level=warn") && line.contains("configured=1") && line.contains("--shard.count"), "{line}");
}
