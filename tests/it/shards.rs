//! Replicas with `--shard.index`/`--shard.count` split the configured accounts between them:
//! together they poll every account, and no two poll the same one.

use crate::common;

use capi_sim::SimOptions;
use common::{Exchange, Exporter};
use std::collections::BTreeSet;

#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_poll_every_account_exactly_once() {
    let exchange = Exchange::start(SimOptions { weight_per_10s: None, ..SimOptions::default() }).await;
    let names: Vec<String> = (0..7).map(|i| format!("sub-{i}")).collect();
    let (config, env, _) = exchange.accounts_file(&names);
    let mut polled: Vec<BTreeSet<String>> = Vec::new();
    for index in 0..3 {
        let shard = index.to_string();
        let mut command = Exporter::command(&[
            "--config.file",
            config.to_str().unwrap(),
            "--api.base-url",
            &exchange.url,
            "--shard.index",
            &shard,
            "--shard.count",
            "3",
        ]);
        command.envs(env.iter().map(|(k, v)| (k, v)));
        let exporter = Exporter::spawn(command);
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
    let (config, env, _) = exchange.accounts_file(&["only".to_owned()]);
    let owner = (0..4).find(|&i| capi_exporter::config::shard::Shard { index: i, count: 4 }.owns("only")).unwrap();
    let idle = ((owner + 1) % 4).to_string();
    let mut command = Exporter::command(&[
        "--config.file",
        config.to_str().unwrap(),
        "--api.base-url",
        &exchange.url,
        "--shard.index",
        &idle,
        "--shard.count",
        "4",
    ]);
    command.envs(env.iter().map(|(k, v)| (k, v)));
    let exporter = Exporter::spawn(command);
    exporter.wait_logged("this shard owns none of the configured accounts", 1);
    let line = exporter.log().lines().find(|l| l.contains("owns none")).unwrap().to_owned();
    assert!(line.contains("level=warn") && line.contains("configured=1") && line.contains("--shard.count"), "{line}");
}
