//! A usage error (a flag or value clap refuses) as the one line a user reads.

use super::Cli;
use clap::error::{ContextKind, ContextValue};
use clap::CommandFactory as _;

/// clap's message on one line: its hints kept (the possible values, a similar flag), its usage
/// block left to `--help`, and the environment variable named when the value refused came from
/// one (an operator looks for it on a command line that does not have it).
pub fn usage_error_line(error: &clap::Error, args: &[String], env: impl Fn(&str) -> bool) -> String {
    let text = error.render().to_string();
    let said: Vec<&str> = text
        .lines()
        .take_while(|line| !line.starts_with("Usage:"))
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("For more information"))
        .collect();
    let mut line = said.join("; ").trim_start_matches("error: ").to_owned();
    if let Some(variable) = environment_source(error, args, env) {
        line.push_str(&format!("; the value is {variable}'s, from the environment"));
    }
    format!("{line} (see --help)")
}

/// The variable the refused flag's value came from: set, while the flag is not on the command
/// line.
fn environment_source(error: &clap::Error, args: &[String], env: impl Fn(&str) -> bool) -> Option<String> {
    let Some(ContextValue::String(refused)) = error.get(ContextKind::InvalidArg) else { return None };
    let long = refused.split_whitespace().next()?.strip_prefix("--")?;
    let flag = format!("--{long}");
    if args.iter().any(|arg| arg == &flag || arg.starts_with(&format!("{flag}="))) {
        return None;
    }
    let command = Cli::command();
    let variable = command.get_arguments().find(|arg| arg.get_long() == Some(long))?.get_env()?;
    let variable = variable.to_str()?;
    env(variable).then(|| variable.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn line(args: &[&str], set: &[&str]) -> String {
        let argv: Vec<String> =
            std::iter::once("capi_exporter").chain(args.iter().copied()).map(String::from).collect();
        let error = Cli::try_parse_from(&argv).unwrap_err();
        usage_error_line(&error, &argv, |name| set.contains(&name))
    }

    #[test]
    fn the_hints_stay_and_the_usage_block_goes() {
        assert_eq!(
            line(&["--log.level", "trace"], &[]),
            "invalid value 'trace' for '--log.level <LOG_LEVEL>'; [possible values: error, warn, info, debug] (see --help)"
        );
        assert_eq!(
            line(&["--api.coin-ids", "2,x"], &[]),
            "invalid value 'x' for '--api.coin-ids <API_COIN_IDS>': a coin id is a whole number, like 2 for USDT (see --help)"
        );
        let similar = line(&["--poll-interval", "15s"], &[]);
        assert!(similar.contains("tip: a similar argument exists: '--poll.interval'"), "{similar}");
        assert!(!similar.contains("Usage") && !similar.contains('\n'), "{similar}");
    }

    #[test]
    fn the_demo_does_not_take_an_accounts_file() {
        let line = line(&["--demo", "--config.file", "accounts.yml"], &[]);
        assert!(line.starts_with("the argument '--demo' cannot be used with '--config.file"), "{line}");
    }

    #[test]
    fn a_value_from_the_environment_names_its_variable() {
        // clap reads the real environment; a flag given on the command line is never the
        // variable's, whether or not one is set.
        let error = Cli::try_parse_from(["capi_exporter", "--poll.interval", "15"]).unwrap_err();
        let args = ["capi_exporter".to_owned(), "--poll.interval".to_owned(), "15".to_owned()];
        assert!(!usage_error_line(&error, &args, |_| true).contains("CAPI_POLL_INTERVAL"));
        let line = usage_error_line(&error, &args[..1], |name| name == "CAPI_POLL_INTERVAL");
        assert!(line.contains("; the value is CAPI_POLL_INTERVAL's, from the environment (see --help)"), "{line}");
    }
}
