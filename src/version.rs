//! What this binary is: its version and how it was built (recorded by `build.rs`), for
//! `--version`, `capi_exporter_build_info`, the landing page and the start-up log line.

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const REVISION: &str = env!("CAPI_REVISION");
pub const BRANCH: &str = env!("CAPI_BRANCH");
pub const RUST_VERSION: &str = env!("CAPI_RUST_VERSION");

/// What `--version` prints after the program's name, laid out as node_exporter's.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (branch: ",
    env!("CAPI_BRANCH"),
    ", revision: ",
    env!("CAPI_REVISION"),
    ")\n  build date:       ",
    env!("CAPI_BUILD_DATE"),
    "\n  rust version:     ",
    env!("CAPI_RUST_VERSION"),
    "\n  platform:         ",
    env!("CAPI_PLATFORM"),
);
