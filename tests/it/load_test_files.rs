//! The files `capi_sim` writes for the load test are an accounts file the exporter reads as it
//! is: every account, its coins and its own key.

use capi_exporter::config::parse_accounts;
use capi_sim::scale::{populate, write_account_files, ScaleSpec};
use capi_sim::{SimExchange, SimOptions};

#[test]
fn the_exporter_reads_the_accounts_file_capi_sim_writes() {
    let exchange = SimExchange::new(SimOptions::default());
    let spec = ScaleSpec { accounts: 3, coin_ids: vec![1, 2], positions: 5, seed: 7 };
    let accounts = populate(&exchange, &spec);
    let dir = std::env::temp_dir().join(format!("capi-load-files-{}", std::process::id()));
    write_account_files(&dir, &accounts).unwrap();

    let path = dir.join("accounts.yml");
    let parsed = parse_accounts(&path, &std::fs::read_to_string(&path).unwrap(), &[2], &|_| None).unwrap().accounts;
    let names: Vec<_> = parsed.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["acct-0001", "acct-0002", "acct-0003"]);
    assert_eq!(parsed[2].coin_ids, [1, 2]);
    assert_eq!(parsed[2].credentials.api_key.expose(), accounts[2].credentials.api_key);
    std::fs::remove_dir_all(dir).unwrap();
}
