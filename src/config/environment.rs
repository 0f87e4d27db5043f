//! The `CAPI_*` variables set that no setting reads. Each setting falls back to its variable, so
//! a misspelt one (`CAPI_STATE_FLIE`) leaves its setting at the default with nothing said: a
//! state file never written, bills counted afresh at every restart. Such a variable is warned of,
//! with the closest known name.

use super::{Cli, CREDENTIAL_VARIABLES};
use clap::CommandFactory as _;
use std::collections::BTreeSet;

/// A variable set with the exporter's prefix that nothing reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownVariable {
    pub name: String,
    /// The variable of the exporter it most likely misspells.
    pub closest: Option<String>,
}

impl std::fmt::Display for UnknownVariable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is set, but no setting reads it, so it changes nothing", self.name)?;
        match &self.closest {
            Some(closest) => write!(f, "; did you mean {closest}?"),
            None => write!(f, "; the variables are listed in --help"),
        }
    }
}

/// The prefix of the exporter's variables.
const PREFIX: &str = "CAPI_";
/// Read by debug builds' tests only (`poller::supervisor`): unread, and so warned of, in release.
const TEST_VARIABLES: &[&str] = if cfg!(debug_assertions) { &["CAPI_TEST_PANIC"] } else { &[] };
/// A name further than this many edits from every known one is not taken for a misspelling.
const MAX_EDITS: usize = 3;

/// The variables of `set` with the exporter's prefix that are neither a setting's nor `read` (the
/// credentials the accounts file names, which may have any name), sorted.
pub fn unknown(set: impl IntoIterator<Item = String>, read: &BTreeSet<String>) -> Vec<UnknownVariable> {
    let known = known_variables();
    let mut unknown: Vec<UnknownVariable> = set
        .into_iter()
        .filter(|name| name.starts_with(PREFIX) && !known.contains(name) && !read.contains(name))
        .map(|name| {
            let closest = closest(&name, &known);
            UnknownVariable { name, closest }
        })
        .collect();
    unknown.sort_by(|a, b| a.name.cmp(&b.name));
    unknown
}

/// Every variable a setting falls back to, and the credentials' with their `_FILE` forms.
fn known_variables() -> BTreeSet<String> {
    let command = Cli::command();
    let settings = command.get_arguments().filter_map(|arg| arg.get_env()?.to_str().map(str::to_owned));
    let credentials = CREDENTIAL_VARIABLES.iter().flat_map(|var| [var.to_string(), format!("{var}_FILE")]);
    let tests = TEST_VARIABLES.iter().map(|var| var.to_string());
    settings.chain(credentials).chain(tests).collect()
}

fn closest(name: &str, known: &BTreeSet<String>) -> Option<String> {
    let by_edits = known.iter().map(|candidate| (strsim::levenshtein(name, candidate), candidate));
    by_edits.filter(|(edits, _)| *edits <= MAX_EDITS).min().map(|(_, candidate)| candidate.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(of: &[&str]) -> Vec<String> {
        of.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn a_misspelt_variable_is_named_with_the_one_it_misspells() {
        let set = names(&["CAPI_STATE_FLIE", "CAPI_POLL_INTERVAL", "PATH", "CAPI_API_SECRET_FILE", "CAPI_ZZZ"]);
        let unknown = unknown(set, &BTreeSet::new());
        let misspelt = UnknownVariable { name: "CAPI_STATE_FLIE".into(), closest: Some("CAPI_STATE_FILE".into()) };
        let far = UnknownVariable { name: "CAPI_ZZZ".into(), closest: None };
        assert_eq!(unknown, [misspelt, far]);
    }

    #[test]
    fn a_variable_the_accounts_file_reads_is_not_unknown() {
        let set = names(&["CAPI_MAIN_SECRET", "CAPI_API_SECRET2"]);
        let read: BTreeSet<String> = set.iter().cloned().collect();
        assert_eq!(unknown(set.clone(), &read), []);
        assert_eq!(unknown(set, &BTreeSet::new()).len(), 2);
    }
}
