//! Test harness: a simulated exchange in this process, the real exporter binary beside it,
//! scrapes parsed into samples, and waiting for conditions with a deadline.

use capi_sim::{Credentials, SimExchange, SimOptions, SimServer};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Long enough for a busy 2-core machine; conditions are polled, so a fast run is still fast.
pub const DEADLINE: Duration = Duration::from_secs(60);

pub struct Exchange {
    pub sim: SimExchange,
    pub url: String,
    pub credentials: Credentials,
    address: SocketAddr,
    server: Option<SimServer>,
}

impl Exchange {
    /// A simulated exchange on loopback with one account holding coin 2 (USDT).
    pub async fn start(options: SimOptions) -> Self {
        let sim = SimExchange::new(options);
        let credentials = Credentials::generate(7);
        sim.add_account(credentials.clone(), &[2]);
        let (address, server) = sim.start_stoppable(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await.unwrap();
        Self { sim, url: format!("http://{address}"), credentials, address, server: Some(server) }
    }

    pub fn key(&self) -> &str {
        &self.credentials.api_key
    }

    /// Adds another account and returns its credentials.
    pub fn add_account(&self, seed: u64) -> Credentials {
        let credentials = Credentials::generate(seed);
        self.sim.add_account(credentials.clone(), &[2]);
        credentials
    }

    /// Stops serving, as an outage would: connections close, new ones are refused.
    pub async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop().await;
        }
    }

    /// Serves again on the same address, with the same state, as after a restart.
    pub async fn restart(&mut self) {
        self.stop().await;
        let started = Instant::now();
        loop {
            match self.sim.start_stoppable(self.address).await {
                Ok((_, server)) => break self.server = Some(server),
                Err(error) => assert!(started.elapsed() < DEADLINE, "cannot serve on {} again: {error}", self.address),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `count` requests in all were answered with an injected fault; returns when
    /// that was seen (a few milliseconds late) and how many requests were answered by then.
    pub async fn faults_answered(&self, count: u64) -> (Instant, u64) {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let stats = self.sim.requests();
            if stats.by_outcome.get("fault").copied().unwrap_or(0) >= count {
                return (Instant::now(), stats.total);
            }
            assert!(Instant::now() < deadline, "{count} faults were never answered");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits for a request beyond the first `answered`; returns when it was seen.
    pub async fn request_after(&self, answered: u64) -> Instant {
        let deadline = Instant::now() + DEADLINE;
        while self.sim.requests().total == answered {
            assert!(Instant::now() < deadline, "no request after the first {answered}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Instant::now()
    }

    /// `count` more accounts (seeds from 100) in an accounts YAML file, and the environment
    /// that holds their credentials; returns the file, the environment and the account keys.
    pub fn accounts_file(&self, names: &[String]) -> (std::path::PathBuf, Vec<(String, String)>, Vec<String>) {
        let mut yaml = String::from("accounts:\n");
        let mut env = Vec::new();
        let mut keys = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let credentials = self.add_account(100 + i as u64);
            let var = name.replace(['-', '.'], "_").to_uppercase();
            yaml.push_str(&format!(
                "  - name: {name}\n    credentials:\n      api_key: {{env: {var}_KEY}}\n      secret: {{env: {var}_SECRET}}\n      passphrase: {{env: {var}_PASS}}\n"
            ));
            env.push((format!("{var}_KEY"), credentials.api_key.clone()));
            env.push((format!("{var}_SECRET"), credentials.secret));
            env.push((format!("{var}_PASS"), credentials.passphrase));
            keys.push(credentials.api_key);
        }
        let dir = std::env::temp_dir().join(format!("capi-accounts-{}-{}", std::process::id(), names.len()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("accounts-{}.yml", names.first().map(String::as_str).unwrap_or("none")));
        std::fs::write(&path, yaml).unwrap();
        (path, env, keys)
    }
}

/// The exporter binary, started as a user would, with its log captured.
pub struct Exporter {
    child: Child,
    pub url: String,
    log: Arc<Mutex<String>>,
}

impl Exporter {
    /// Starts the exporter with these credentials in its environment and these extra flags.
    pub fn start(exchange: &Exchange, extra: &[&str]) -> Self {
        Self::start_with(&exchange.url, &exchange.credentials, extra)
    }

    pub fn start_with(base_url: &str, credentials: &Credentials, extra: &[&str]) -> Self {
        Self::spawn(Self::command_with(base_url, credentials, extra))
    }

    /// [`Self::command`] for the exchange at `base_url`, with these credentials.
    pub fn command_with(base_url: &str, credentials: &Credentials, extra: &[&str]) -> Command {
        let mut command = Self::command(extra);
        command
            .args(["--api.base-url", base_url])
            .env("CAPI_API_KEY", &credentials.api_key)
            .env("CAPI_API_SECRET", &credentials.secret)
            .env("CAPI_API_PASSPHRASE", &credentials.passphrase);
        command
    }

    /// `command` run by `wrapper` (a program and its arguments, such as `prlimit ... --`), with
    /// the same environment.
    pub fn wrapped(command: &Command, wrapper: &[&str]) -> Command {
        let mut wrapped = Command::new(wrapper[0]);
        wrapped
            .args(&wrapper[1..])
            .arg(command.get_program())
            .args(command.get_args())
            .env_clear()
            .envs(command.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        wrapped
    }

    /// The binary with test defaults (any port, fast polls: set in the environment, so a flag can
    /// override them) and a clean environment.
    pub fn command(extra: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_capi_exporter"));
        command
            .env_clear()
            .env("CAPI_POLL_INTERVAL", "200ms")
            .env("CAPI_WEB_LISTEN_ADDRESS", "127.0.0.1:0")
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }

    /// Spawns and waits until the exporter logs the address it serves on.
    pub fn spawn(mut command: Command) -> Self {
        let mut child = command.spawn().expect("the exporter binary starts");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (found, address) = mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                // Into the log first, so that a test woken by the address finds the line there.
                {
                    let mut log = sink.lock().unwrap();
                    log.push_str(&line);
                    log.push('\n');
                }
                if line.contains("serving metrics") {
                    // The first address, when it listens on several.
                    let addresses = field(&line, "address").unwrap_or_default();
                    let _ = found.send(addresses.split(',').next().unwrap_or_default().to_string());
                }
            }
        });
        match address.recv_timeout(DEADLINE) {
            Ok(address) => Self { child, url: format!("http://{address}"), log },
            Err(_) => {
                let _ = child.kill();
                panic!("the exporter did not start serving; log:\n{}", log.lock().unwrap());
            }
        }
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits until the log holds `text` `times` times.
    pub fn wait_logged(&self, text: &str, times: usize) {
        let started = Instant::now();
        while self.log().matches(text).count() < times {
            assert!(started.elapsed() < DEADLINE, "no {text:?} in the log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        reqwest::get(format!("{}{path}", self.url)).await.expect("the exporter answers")
    }

    pub async fn scrape(&self) -> Scrape {
        Scrape::parse(&self.get("/metrics").await.text().await.unwrap())
    }

    /// Scrapes until `condition` holds, failing with the last scrape and the log at the deadline.
    pub async fn wait_for(&self, what: &str, condition: impl Fn(&Scrape) -> bool) -> Scrape {
        let started = Instant::now();
        loop {
            let scrape = self.scrape().await;
            if condition(&scrape) {
                return scrape;
            }
            if started.elapsed() > DEADLINE {
                panic!(
                    "timed out waiting for {what}\n--- last scrape ---\n{}\n--- log ---\n{}",
                    scrape.text,
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until every account had a successful poll.
    pub async fn wait_up(&self) -> Scrape {
        self.wait_for("capi_up 1", |s| {
            let up = s.series("capi_up");
            !up.is_empty() && up.iter().all(|sample| sample.value == 1.0)
        })
        .await
    }

    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Sends a signal by name (`USR1`, `TERM`...).
    pub fn signal(&self, name: &str) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args([&format!("-{name}"), &pid]).status().unwrap().success());
    }

    /// The CPU time the exporter has used so far (user and system), from `/proc`.
    pub fn cpu_time(&self) -> Duration {
        let pid = i32::try_from(self.child.id()).unwrap();
        let stat = procfs::process::Process::new(pid).and_then(|process| process.stat()).unwrap();
        Duration::from_secs_f64((stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64)
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal("TERM");
        wait_exit(&mut self.child)
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for a child to exit, with the deadline.
pub fn wait_exit(child: &mut Child) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(started.elapsed() < DEADLINE, "the process did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value of `key` in a logfmt or JSON log line.
pub fn field(line: &str, key: &str) -> Option<String> {
    if line.starts_with('{') {
        let json: serde_json::Value = serde_json::from_str(line).ok()?;
        return json.get(key)?.as_str().map(str::to_string);
    }
    let start = line.find(&format!(" {key}="))? + key.len() + 2;
    Some(line[start..].split(' ').next()?.to_string())
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// One parsed exposition.
#[derive(Debug, Clone)]
pub struct Scrape {
    pub text: String,
    pub samples: Vec<Sample>,
}

impl Scrape {
    pub fn parse(text: &str) -> Self {
        let samples = text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(parse_sample).collect();
        Self { text: text.to_string(), samples }
    }

    pub fn series(&self, name: &str) -> Vec<&Sample> {
        self.samples.iter().filter(|s| s.name == name).collect()
    }

    /// Samples of `name` whose labels include all of `labels`.
    pub fn matching(&self, name: &str, labels: &[(&str, &str)]) -> Vec<&Sample> {
        self.series(name)
            .into_iter()
            .filter(|s| labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
            .collect()
    }

    /// The one sample of `name` with `labels`, if there is exactly one.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        match self.matching(name, labels).as_slice() {
            [one] => Some(one.value),
            [] => None,
            many => panic!("{} samples of {name} match {labels:?}", many.len()),
        }
    }

    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).iter().map(|s| s.value).sum()
    }
}

fn parse_sample(line: &str) -> Sample {
    let name_end = line.find(['{', ' ']).expect("a sample line");
    let name = line[..name_end].to_string();
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices().peekable();
        let mut key = String::new();
        let mut end = 0;
        while let Some((i, c)) = chars.next() {
            match c {
                '}' => {
                    end = i + 1;
                    break;
                }
                ',' => {}
                '=' => {
                    chars.next(); // opening quote
                    let mut value = String::new();
                    while let Some((_, c)) = chars.next() {
                        match c {
                            '\\' => match chars.next().map(|(_, c)| c) {
                                Some('n') => value.push('\n'),
                                Some(other) => value.push(other),
                                None => {}
                            },
                            '"' => break,
                            c => value.push(c),
                        }
                    }
                    labels.insert(std::mem::take(&mut key), value);
                }
                c => key.push(c),
            }
        }
        rest = &inner[end..];
    }
    let value = rest.split_whitespace().next().expect("a value");
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
    };
    Sample { name, labels, value }
}

/// This machine's clock, in milliseconds since the epoch (the simulated exchange's, unless a test
/// sets it off).
/// `state.json` in an empty folder of its own for the test `name`.
pub fn state_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("capi-state-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("state.json")
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// A USDT bill on `cmt_btcusdt`, its amount and fee in hundredths.
pub fn usdt_bill(kind: &str, amount: i64, fee: i64) -> capi_sim::NewBill {
    capi_sim::NewBill {
        coin: "USDT".into(),
        symbol: "cmt_btcusdt".into(),
        business_type: kind.into(),
        amount: rust_decimal::Decimal::new(amount, 2),
        fill_fee: rust_decimal::Decimal::new(fee, 2),
        ..capi_sim::NewBill::default()
    }
}
