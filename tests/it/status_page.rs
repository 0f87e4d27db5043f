//! The status page as a person sees it: loaded in Debian's headless Chromium, its DOM read back.
//! One account polls well and has counted bills; the other's key is refused. Needs `chromium`
//! (`apt-get install chromium`; `scripts/test.sh` installs it).

use crate::common;

use capi_sim::{NewBill, SimOptions};
use common::{Exchange, Exporter};
use rust_decimal::Decimal;
use std::process::Command;
use std::time::Duration;

/// The page's DOM after Chromium loaded and rendered it.
fn rendered(url: &str) -> String {
    let profile = std::env::temp_dir().join(format!("capi-chromium-{}-{}", std::process::id(), fastrand::u64(..)));
    let output = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .output()
        .unwrap_or_else(|e| panic!("cannot run chromium ({e}): install Debian's chromium, as scripts/test.sh does"));
    let _ = std::fs::remove_dir_all(&profile);
    assert!(output.status.success(), "chromium: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// The cells of the table row whose first cell is `account`, as text, and the row's class.
fn row(dom: &str, account: &str) -> (String, Vec<String>) {
    let start = dom.find(&format!("<td>{account}</td>")).unwrap_or_else(|| panic!("no row for {account}: {dom}"));
    let opening = dom[..start].rfind("<tr").unwrap();
    let end = start + dom[start..].find("</tr>").unwrap();
    let class = dom[opening..].split('"').nth(1).unwrap_or_default().to_owned();
    let cells =
        dom[start..end].split("<td>").skip(1).map(|cell| cell.split("</td>").next().unwrap().to_owned()).collect();
    (class, cells)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_status_page_shows_each_accounts_state_in_a_real_browser() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let names = ["good".to_owned(), "refused".to_owned()];
    let (config, mut env, keys) = exchange.accounts_file(&names);
    let secret = env.iter_mut().find(|(var, _)| var == "REFUSED_SECRET").unwrap();
    secret.1 = "not-the-secret".into();
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    for i in 0..3 {
        exchange.sim.add_bill(
            &keys[0],
            NewBill {
                coin: "USDT".into(),
                symbol: String::new(),
                business_type: "deposit".into(),
                amount: Decimal::from(10 + i),
                fill_fee: Decimal::ZERO,
                ctime_ms: Some(now_ms + 2_000),
                visible_after: Duration::ZERO,
            },
        );
    }
    let mut command = Exporter::command(&["--config.file", config.to_str().unwrap(), "--api.base-url", &exchange.url]);
    command.envs(env.iter().map(|(k, v)| (k, v)));
    let exporter = Exporter::spawn(command);
    exporter
        .wait_for("the bills counted and the key refused", |s| {
            s.sum("capi_bills_total", &[("account", "good")]) == 3.0
                && s.sum("capi_api_requests_total", &[("account", "refused"), ("outcome", "auth_error")]) > 0.0
        })
        .await;

    let dom = rendered(&format!("{}/", exporter.url));
    let (class, cells) = row(&dom, "good");
    assert_eq!((class.as_str(), cells[1].as_str(), cells[4].as_str()), ("up", "up", "3"), "{cells:?}");
    assert!(cells[2].ends_with(" s ago") && cells[3].ends_with(" s"), "{cells:?}");
    assert_eq!((cells[5].as_str(), cells[6].as_str()), ("none", "none"), "{cells:?}");
    let (class, cells) = row(&dom, "refused");
    assert_eq!((class.as_str(), cells[1].as_str(), cells[2].as_str()), ("down", "down", "never"), "{cells:?}");
    assert!(cells[6].starts_with("auth_error on account, "), "{cells:?}");
    assert!(cells[6].contains("code 40009") && cells[6].contains("signature"), "the code and its meaning: {cells:?}");
    assert_eq!(cells[7], "<a href=\"/debug/polls?account=refused\">log</a>");

    // The link leads to the account's recent polls, which never show a credential.
    let log = rendered(&format!("{}/debug/polls?account=refused", exporter.url));
    assert!(log.contains("account request failed in ") && log.contains("auth_error"), "{log}");
    for (_, credential) in &env {
        assert!(!log.contains(credential.as_str()), "a credential in the poll log");
    }
    let log = rendered(&format!("{}/debug/polls?account=good", exporter.url));
    // Its last 4 KiB are a second of polls here: the one that found the bills new may be gone.
    assert!(log.contains("bills request answered in ") && log.contains(": 3 bills, "), "{log}");
    for (query, status, answer) in [
        ("", 400, "name the account: /debug/polls?account=NAME (the status page links each)\n"),
        ("?account=gone", 404, "no account \"gone\" is polled here\n"),
    ] {
        let response = exporter.get(&format!("/debug/polls{query}")).await;
        assert_eq!(response.status().as_u16(), status, "{query}");
        assert_eq!(response.text().await.unwrap(), answer, "{query}");
    }
}
