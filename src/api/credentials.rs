//! API credentials, which never reach logs, errors, `Debug` output or metrics.

use std::fmt;

/// A secret string: `Debug` prints a placeholder and there is no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself, for the one place that must use it (signing, headers).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// What signs requests for one account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub api_key: Secret,
    pub secret: Secret,
    pub passphrase: Secret,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_every_part() {
        let credentials = Credentials {
            api_key: Secret::new("key-123"),
            secret: Secret::new("sec-456"),
            passphrase: Secret::new("pass-789"),
        };
        let printed = format!("{credentials:?} {credentials:#?}");
        for hidden in ["key-123", "sec-456", "pass-789"] {
            assert!(!printed.contains(hidden), "{printed}");
        }
    }
}
