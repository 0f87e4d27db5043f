//! The `capi_sim` binary as the load test runs it: it writes the account files, serves the API
//! on the address it prints, and stops cleanly on SIGTERM.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(60);

#[test]
fn writes_the_account_files_serves_and_stops_on_sigterm() {
    let out = std::env::temp_dir().join(format!("capi-sim-binary-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut sim = Command::new(env!("CARGO_BIN_EXE_capi_sim"))
        .args(["--accounts", "3", "--coin-ids", "1,2", "--positions", "2", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(sim.stdout.take().unwrap());
    let (lines, printed) = mpsc::channel();
    std::thread::spawn(move || stdout.lines().map_while(Result::ok).for_each(|line| drop(lines.send(line))));
    let first = printed.recv_timeout(DEADLINE).expect("capi_sim printed no address");
    let address = first
        .strip_prefix("capi_sim listening on http://")
        .and_then(|rest| rest.strip_suffix(" accounts=3"))
        .unwrap_or_else(|| panic!("unexpected first line: {first}"));

    let yaml = std::fs::read_to_string(out.join("accounts.yml")).unwrap();
    let names: Vec<&str> = yaml.lines().filter_map(|l| l.trim().strip_prefix("- name: ")).collect();
    assert_eq!(names, ["acct-0001", "acct-0002", "acct-0003"]);
    assert_eq!(yaml.matches("coin_ids: [1, 2]").count(), 3);
    let credentials: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("credentials.json")).unwrap()).unwrap();
    assert_eq!(credentials.as_array().map(Vec::len), Some(3));

    // An unsigned request gets the exchange's documented answer for a missing key.
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    write!(stream, "GET /capi/v2/account/account?coinId=2 HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains(r#""code":"40001""#), "{answer}");

    let killed = Command::new("kill").args(["-TERM", &sim.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = sim.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < DEADLINE, "capi_sim did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    std::fs::remove_dir_all(&out).unwrap();
}
