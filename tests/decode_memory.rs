//! The memory the client takes to receive and read hostile answers of the largest size it
//! accepts (16 MiB): however an answer is sent and whatever its records hold, what is held beyond
//! the answer's own bytes stays within a bound. A test binary of its own, since it counts every allocation of the process,
//! and one test, so that nothing else allocates meanwhile.

use capi_exporter::api::client::{read_account_answer, read_bill_answer, MAX_ANSWER_BYTES};
use capi_exporter::api::{ApiError, Client, ClientSettings, Credentials, Secret};
use http::HeaderMap;
use peak_alloc::PeakAlloc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

/// The most a hostile answer may take beyond its own bytes, as much again: room for the records
/// an answer may hold (10,000 positions) and one record's members at a time, never all records'.
const BOUND_BYTES: usize = MAX_ANSWER_BYTES;

/// `{"a":0,"a":0,…}` with `members` members.
fn record(members: usize) -> String {
    format!("{{{}}}", vec![r#""a":0"#; members].join(","))
}

/// An array of `count` copies of `item`, or as many as fit in `bytes`.
fn array_of(item: &str, count: usize, bytes: usize) -> String {
    let count = count.min(bytes / (item.len() + 1));
    format!("[{}]", vec![item; count].join(","))
}

/// An answer with `field` holding an array of records of `members` members each, filling 16 MiB
/// or holding `count` records.
fn answer(field: &str, members: usize, count: usize) -> String {
    let room = MAX_ANSWER_BYTES - 100;
    format!(r#"{{"hasNextPage":false,"{field}":{}}}"#, array_of(&record(members), count, room))
}

type Read = fn(&[u8]) -> Result<usize, ApiError>;

fn account(body: &[u8]) -> Result<usize, ApiError> {
    let info = read_account_answer(200, &HeaderMap::new(), body)?.value;
    Ok(info.collateral.len() + info.positions.len())
}

fn bills(body: &[u8]) -> Result<usize, ApiError> {
    Ok(read_bill_answer(200, &HeaderMap::new(), body)?.value.items.len())
}

/// The answer `body`, as the client receives it from an exchange of the test's own that sends it
/// in chunks of one byte each, and the most memory the client took to receive and read it (the
/// answer's own bytes included: they arrive while it is measured).
fn received_in_one_byte_chunks(body: &[u8]) -> (Result<usize, ApiError>, usize) {
    let mut wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for byte in body {
        wire.extend_from_slice(&[b'1', b'\r', b'\n', *byte, b'\r', b'\n']);
    }
    wire.extend_from_slice(b"0\r\n\r\n");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let (mut request, mut buffer) = (Vec::new(), [0; 4096]);
            while !request.windows(4).any(|end| end == b"\r\n\r\n") {
                let read = stream.read(&mut buffer).await.unwrap();
                assert!(read > 0, "the request ended early");
                request.extend_from_slice(&buffer[..read]);
            }
            stream.write_all(&wire).await.unwrap();
        });
        let settings = ClientSettings { base_url, timeout: Duration::from_secs(120), locale: "en-US".into() };
        let credentials =
            Credentials { api_key: Secret::new("key"), secret: Secret::new("secret"), passphrase: Secret::new("pass") };
        let client =
            Client::new(Client::http_pool(settings.timeout), settings, credentials, Default::default()).unwrap();
        HEAP.reset_peak_usage();
        let before = HEAP.current_usage();
        let records = client.account(2).await.map(|answer| answer.value.collateral.len());
        (records, HEAP.peak_usage() - before)
    })
}

#[test]
fn hostile_answers_are_read_in_bounded_memory() {
    // A million frames of one byte each, as hyper hands a chunked body on.
    let padded = format!(r#"{{"collateral":[{{}}],"pad":"{}"}}"#, "x".repeat(1 << 20));
    let (records, taken) = received_in_one_byte_chunks(padded.as_bytes());
    eprintln!("1 MiB in chunks of one byte: {records:?}, {:.1} MiB at peak", taken as f64 / 1048576.0);
    assert!(matches!(records, Ok(1)), "{records:?}");
    assert!(taken < 4 * padded.len(), "1 MiB in chunks of one byte: {taken} bytes at peak");

    // 16 MiB of a character that Rust's quoting escapes to three times its size, raw and as
    // JSON escapes.
    let escaped = format!(r#""{}""#, "\u{80}".repeat((MAX_ANSWER_BYTES - 40) / 2));
    let json_escaped = format!(r#""{}""#, r"\u0080".repeat((MAX_ANSWER_BYTES - 80) / 6));
    let cases: [(&str, String, Read); 12] = [
        ("collateral records of 10,001 members", answer("collateral", 10_001, usize::MAX), account),
        ("10,000 positions of 200 members", answer("position", 200, 10_000), account),
        (
            "10,000 empty records of each kind",
            format!(r#"{{"collateral":[{0}],"position":[{0}]}}"#, vec!["{}"; 10_000].join(",")),
            account,
        ),
        ("an answer that is a string", escaped.clone(), account),
        ("an account that is a string", format!(r#"{{"account":{escaped}}}"#), account),
        ("a bill that is a string", format!(r#"{{"items":[{escaped}]}}"#), bills),
        ("bills that are a string", format!(r#"{{"items":{escaped}}}"#), bills),
        ("a coin of escapes", format!(r#"{{"items":[{{"billId":1,"cTime":2,"coin":{json_escaped}}}]}}"#), bills),
        ("more positions than are read", answer("position", 1, usize::MAX), account),
        ("100 bills of 10,001 members", answer("items", 10_001, 100), bills),
        ("more bills than a page holds", answer("items", 100, usize::MAX), bills),
        ("8 million items", format!(r#"{{"items":{}}}"#, array_of("0", usize::MAX, MAX_ANSWER_BYTES - 20)), bills),
    ];
    for (case, body, read) in cases {
        assert!(body.len() <= MAX_ANSWER_BYTES, "{case}: {} bytes", body.len());
        HEAP.reset_peak_usage();
        let before = HEAP.current_usage();
        let records = read(body.as_bytes());
        let taken = HEAP.peak_usage() - before;
        eprintln!("{case}: {} bytes, {records:?}, {:.1} MiB at peak", body.len(), taken as f64 / 1048576.0);
        assert!(taken < BOUND_BYTES, "{case}: {taken} bytes at peak beyond the answer's {}", body.len());
    }
}
