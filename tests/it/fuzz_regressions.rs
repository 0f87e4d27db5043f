//! Replays every committed fuzz input through the same function the fuzz target runs
//! (`fuzz/src/entries.rs`), on stable Rust without libFuzzer: the seed corpus
//! (`fuzz/corpus/<target>/`) and every crash once found (`fuzz/regressions/<target>/`).
//! See fuzz/README.md for how to fuzz and how to commit a new crash.

#[path = "../../fuzz/src/entries.rs"]
mod entries;

use capi_exporter::api::json::JsonObject;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

type Entry = fn(&[u8]);

/// The inputs of one folder, sorted; notes (`README*`, dot files) are not inputs.
fn inputs(folder: &Path) -> Vec<PathBuf> {
    let Ok(listing) = std::fs::read_dir(folder) else { return Vec::new() };
    let mut files: Vec<PathBuf> = listing
        .map(|entry| entry.expect("readable folder entry").path())
        .filter(|path| path.is_file())
        .filter(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            !name.starts_with('.') && !name.starts_with("README")
        })
        .collect();
    files.sort();
    files
}

/// Runs every input of `fuzz/<kind>/<target>/` and fails naming each input that panicked.
fn replay(kind: &str, target: &str, entry: Entry) -> usize {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz").join(kind).join(target);
    let files = inputs(&folder);
    let mut failures = Vec::new();
    for path in &files {
        let data = std::fs::read(path).expect("readable input");
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| entry(&data))) {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            failures.push(format!("{}: {message}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{target}: {} input(s) failed:\n{}", failures.len(), failures.join("\n"));
    files.len()
}

fn replay_target(target: &str, entry: Entry) {
    let seeds = replay("corpus", target, entry);
    assert!(seeds > 0, "fuzz/corpus/{target}/ has no seed input");
    replay("regressions", target, entry);
}

#[test]
fn bill_page() {
    replay_target("bill_page", entries::bill_page);
}

#[test]
fn account_info() {
    replay_target("account_info", entries::account_info);
}

#[test]
fn accounts_yaml() {
    replay_target("accounts_yaml", entries::accounts_yaml);
}

#[test]
fn poll() {
    replay_target("poll", entries::poll);
}

#[test]
fn state_file() {
    replay_target("state_file", entries::state_file);
}

#[test]
fn web_config() {
    replay_target("web_config", entries::web_config);
}

/// The seeds are valid inputs, so that fuzzing starts from the paths past the parsers.
#[test]
fn seeds_reach_past_the_parsers() {
    let seeds = |target: &str| inputs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target));
    for path in seeds("bill_page") {
        let bytes = std::fs::read(&path).unwrap();
        let object = JsonObject::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let page = capi_exporter::api::model::decode_bill_page(&object, &mut Vec::new());
        assert!(page.is_ok(), "{}", path.display());
    }
    for path in seeds("account_info") {
        let bytes = std::fs::read(&path).unwrap();
        let object = JsonObject::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // Any object of a sane size decodes; the seeds are there to reach the records.
        let info = capi_exporter::api::model::decode_account_info(&object, &mut Vec::new()).unwrap();
        assert!(info.account.is_some() || path.ends_with("empty.json"), "{}", path.display());
    }
    let documented =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/accounts_yaml/documented.yml"))
            .unwrap();
    let accounts =
        capi_exporter::config::parse_accounts(Path::new("a.yml"), &documented, &[2], &|name| Some(name.into()));
    assert_eq!(accounts.unwrap_or_else(|e| panic!("{e}")).accounts.len(), 2);
    for path in seeds("state_file") {
        let store = capi_exporter::poller::state::StateStore::from_bytes(&path, &std::fs::read(&path).unwrap());
        let store = store.unwrap_or_else(|e| panic!("{e}"));
        assert!(
            store.accounts().iter().any(|name| matches!(store.restore(name), Ok(Some(_))))
                || store.accounts().is_empty()
        );
    }
}
