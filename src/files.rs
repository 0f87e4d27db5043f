//! Reading a file the operator names (configuration, credentials, certificates, the state file):
//! only a regular file, and at most a bound, so that a FIFO, a device or a huge file named by
//! mistake can neither stall the exporter nor fill its memory.

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// The bound of a configuration, credential or certificate file: far above any real one (an
/// accounts file of 1,000 accounts is about 330 KB). YAML's parser holds up to about 55 times a
/// file's size while it reads one (880 MB for a 16 MiB list of numbers, measured).
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{}", describe_io_error(.0))]
    Io(#[from] std::io::Error),
    #[error("it is {0}, not a regular file")]
    NotAFile(&'static str),
    #[error("it is larger than {} MiB", .0 >> 20)]
    TooLarge(u64),
    #[error("it is not UTF-8 text")]
    NotText,
}

/// The content of the regular file at `path`, if it holds at most `max_bytes`. The type is that
/// of the file opened (without blocking, as a FIFO's open would), not of the path before.
pub fn read_bounded(path: &Path, max_bytes: u64) -> Result<Vec<u8>, FileError> {
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(FileError::NotAFile(if metadata.is_dir() {
            "a directory"
        } else {
            "a special file (a FIFO, socket or device)"
        }));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(FileError::TooLarge(max_bytes));
    }
    Ok(bytes)
}

/// The text of a configuration or credential file, without the byte-order mark an editor (such
/// as Notepad) may write first: YAML would read it as text, and a credential would hold it.
pub fn read_config_text(path: &Path) -> Result<String, FileError> {
    let text = String::from_utf8(read_bounded(path, MAX_CONFIG_BYTES)?).map_err(|_| FileError::NotText)?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_owned(),
        None => text,
    })
}

/// The deepest a YAML file's flow collections (`[...]`, `{...}`) may nest. YAML's parser takes
/// time in the square of that depth: a 200 KB file nested 100,000 deep held a start or a reload
/// for 40 s. A configuration nests a few levels.
const MAX_YAML_FLOW_DEPTH: usize = 1_000;

/// Refuses YAML text that nests flow collections deeper than `MAX_YAML_FLOW_DEPTH`, before it
/// is parsed. Brackets are counted wherever they are (in quoted text too): a rough count, far
/// from any real configuration either way.
pub fn check_yaml_nesting(text: &str) -> Result<(), String> {
    let mut depth = 0usize;
    for byte in text.bytes() {
        match byte {
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => continue,
        }
        if depth > MAX_YAML_FLOW_DEPTH {
            return Err(format!("it nests [ and {{ over {MAX_YAML_FLOW_DEPTH} deep, which no configuration does"));
        }
    }
    Ok(())
}

/// A parse error's message without the value it quotes. serde writes `invalid type: string
/// "<the value>", expected ...`: a file named by mistake (a private key, an htpasswd line, a
/// credential) would go whole into the error, the log and a reload's answer. The kind of the
/// value and everything else stay, so the message still says what is wrong and where.
pub fn without_quoted_value(error: impl std::fmt::Display) -> String {
    without_quoted(error.to_string(), &QUOTED_VALUES)
}

/// [`without_quoted_value`], and without the name of a key that is no field or is repeated, for
/// files that name credentials: `secret: {<the secret>}` is a map with one unknown key. The line
/// and column still say where it is.
pub fn without_quoted_value_or_key(error: impl std::fmt::Display) -> String {
    without_quoted(error.to_string(), &[QUOTED_VALUES.as_slice(), &QUOTED_KEYS].concat())
}

/// What serde writes before a value it quotes, and what it may write after the value (the last
/// one found: the value may itself hold it); without either, the value runs to the end.
type Quoting = (&'static str, &'static [&'static str]);
const QUOTED_VALUES: [Quoting; 3] =
    [("invalid type:", &[", expected "]), ("invalid value:", &[", expected "]), ("unknown variant", &[", expected "])];
const QUOTED_KEYS: [Quoting; 2] =
    [("unknown field", &[", expected ", ", there are no fields"]), ("duplicate entry with key", &[" at line "])];

fn without_quoted(message: String, quotings: &[Quoting]) -> String {
    for (marker, ends) in quotings {
        let Some(start) = message.find(marker).map(|index| index + marker.len()) else { continue };
        let end = ends.iter().find_map(|end| message.rfind(end)).filter(|&end| end >= start).unwrap_or(message.len());
        let kind = message[start..end].split(['"', '`', '\'']).next().unwrap_or_default().trim_end();
        return format!("{}{kind}{}", &message[..start], &message[end..]);
    }
    message
}

/// An I/O error as a person reads it: without Rust's " (os error N)".
pub(crate) fn describe_io_error(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(index) if text.ends_with(')') => text[..index].to_string(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_parse_error_keeps_what_is_wrong_and_where_but_not_the_value() {
        let key = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n";
        let error = serde_yaml_ng::from_str::<std::collections::BTreeMap<String, String>>(key).unwrap_err();
        assert!(error.to_string().contains("MIGHAgEA"), "serde quotes the value: {error}");
        assert_eq!(without_quoted_value(error), "invalid type: string, expected a map");
        let error = serde_json::from_str::<u64>("\"alice:$2y$10$abc\"").unwrap_err();
        assert_eq!(without_quoted_value(error), "invalid type: string, expected u64 at line 1 column 18");
        let error = serde_yaml_ng::from_str::<bool>("1234567").unwrap_err();
        assert_eq!(without_quoted_value(error), "invalid type: integer, expected a boolean");
        #[derive(Debug, serde::Deserialize)]
        enum Auth {
            #[allow(dead_code)]
            NoClientCert,
        }
        let error = serde_yaml_ng::from_str::<Auth>("SecretPastedHere").unwrap_err();
        assert_eq!(without_quoted_value(error), "unknown variant, expected `NoClientCert`");
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Source {
            #[allow(dead_code)]
            env: Option<String>,
        }
        let error = serde_yaml_ng::from_str::<Source>("{SecretPastedHere}").unwrap_err();
        assert!(error.to_string().contains("SecretPastedHere"), "serde quotes the key: {error}");
        assert_eq!(without_quoted_value_or_key(error), "unknown field, expected `env` at line 1 column 2");
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Empty {}
        let error = serde_yaml_ng::from_str::<Empty>("{SecretPastedHere: 1}").unwrap_err();
        assert!(!without_quoted_value_or_key(&error).contains("Secret"), "{error}");
        let error = serde_yaml_ng::from_str::<serde_yaml_ng::Value>("env:\n  SecretPastedHere:\n  SecretPastedHere:\n")
            .unwrap_err();
        assert!(error.to_string().contains("SecretPastedHere"), "serde quotes the key: {error}");
        assert_eq!(without_quoted_value_or_key(error), "env: duplicate entry with key at line 2 column 3");
        let syntax = "did not find expected key at line 2 column 1";
        assert_eq!(without_quoted_value(syntax), syntax);
    }

    proptest! {
        #[test]
        fn no_string_value_survives_in_a_type_error(value in "[ -~]{8,40}") {
            let yaml = serde_yaml_ng::to_string(&value).unwrap();
            let error = serde_yaml_ng::from_str::<std::collections::BTreeMap<String, u8>>(&yaml).unwrap_err();
            prop_assert!(!without_quoted_value(&error).contains(value.trim()), "{error}");
            let error = serde_json::from_str::<u64>(&serde_json::to_string(&value).unwrap()).unwrap_err();
            prop_assert!(!without_quoted_value(&error).contains(value.trim()), "{error}");
        }
    }

    #[test]
    fn yaml_nested_too_deep_is_refused_before_it_is_parsed() {
        let nested = |depth: usize| format!("a: {}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(check_yaml_nesting(&nested(MAX_YAML_FLOW_DEPTH)), Ok(()));
        let error = check_yaml_nesting(&nested(MAX_YAML_FLOW_DEPTH + 1)).unwrap_err();
        assert_eq!(error, "it nests [ and { over 1000 deep, which no configuration does");
        assert_eq!(check_yaml_nesting(&"{a: [1, 2]}\n".repeat(100_000)), Ok(()), "wide is not deep");
    }

    #[test]
    fn only_a_regular_file_within_the_bound_is_read() {
        let dir = std::env::temp_dir().join(format!("capi-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("small");
        std::fs::write(&file, "four").unwrap();
        assert_eq!(read_bounded(&file, 4).unwrap(), b"four");
        assert_eq!(read_bounded(&file, 3).unwrap_err().to_string(), "it is larger than 0 MiB");
        assert_eq!(read_bounded(&dir, 4).unwrap_err().to_string(), "it is a directory, not a regular file");
        let fifo = dir.join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let error = read_config_text(&fifo).unwrap_err().to_string();
        assert_eq!(error, "it is a special file (a FIFO, socket or device), not a regular file");
        let error = read_config_text(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(error.contains("special file"), "{error}");
        let missing = read_config_text(&dir.join("missing")).unwrap_err().to_string();
        assert_eq!(missing, "No such file or directory");
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert_eq!(read_config_text(&file).unwrap_err().to_string(), "it is not UTF-8 text");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
