//! Records what `--version` and `capi_exporter_build_info` tell: the git revision and branch,
//! the build date, the compiler's version and the platform.

use std::process::Command;

/// The first line a command prints, or `unknown`.
fn output_of(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.lines().next().map(|line| line.trim().to_string()))
        .filter(|line| !line.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    // `rustc 1.95.0 (59807616e 2026-04-14)` -> `1.95.0`
    let rust_version = output_of(&rustc, &["--version"]).split(' ').nth(1).unwrap_or("unknown").to_string();
    let platform = format!(
        "{}/{}",
        std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default(),
        std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default()
    );
    // As Prometheus's Go exporters write it: 20060102-15:04:05, UTC.
    let build_date = output_of("date", &["-u", "+%Y%m%d-%H:%M:%S"]);
    println!("cargo:rustc-env=CAPI_REVISION={}", output_of("git", &["rev-parse", "--short=12", "HEAD"]));
    println!("cargo:rustc-env=CAPI_BRANCH={}", output_of("git", &["rev-parse", "--abbrev-ref", "HEAD"]));
    println!("cargo:rustc-env=CAPI_BUILD_DATE={build_date}");
    println!("cargo:rustc-env=CAPI_RUST_VERSION={rust_version}");
    println!("cargo:rustc-env=CAPI_PLATFORM={platform}");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
}
