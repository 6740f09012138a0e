//! `omtl serve` from Rust: a per-user spam filter as a durable service. Starts a server on a
//! free loopback port over a fresh state directory, learns and predicts over HTTP (a few lines
//! of plain HTTP/1.1 on a TCP stream: any client will do), remembers a message for a label that
//! comes later, stops it (a last snapshot), starts it again on the same directory, and checks
//! that it kept what it learned.
//!
//! Run with `cargo run --release --features serve --example serve`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use omtl::model::{Estimator, Model};
use omtl::serve::{Options, Server};

/// One request, one answer (`Connection: close`): the status and the body.
fn call(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("receive");
    let status = answer[9..12].parse().expect("a status code");
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, body)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("omtl-serve-example-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let model = Model::new(Estimator::from_text("MTLinear", &[("n_features", "1024")])?);
    let mut options = Options::new(&dir, Some(model));
    options.addr = "127.0.0.1:0".parse()?;

    let server = Server::start(options.clone())?;
    let addr = server.addr();
    println!("serving on http://{addr}");
    let mail = [
        (r#"{"cheap": 1, "pills": 1}"#, "spam"),
        (r#"{"meeting": 1, "tomorrow": 1}"#, "ham"),
        (r#"{"cheap": 1, "watches": 1}"#, "spam"),
        (r#"{"lunch": 1, "tomorrow": 1}"#, "ham"),
    ];
    for user in ["alice", "bob"] {
        let events: Vec<String> = mail
            .iter()
            .map(|(f, y)| format!(r#"{{"task": "{user}", "features": {f}, "label": "{y}"}}"#))
            .collect();
        let (status, body) = call(
            addr,
            "POST",
            "/v1/learn",
            &format!(r#"{{"events": [{}]}}"#, events.join(",")),
        );
        assert_eq!(status, 200, "{body}");
        println!("learn {user}: {body}");
    }
    let question = r#"{"events": [{"task": "alice", "features": {"cheap": 1, "pills": 1}, "remember": "msg-17"}]}"#;
    let (status, before) = call(addr, "POST", "/v1/predict", question);
    assert_eq!(status, 200, "{before}");
    println!("predict (remembered as msg-17): {before}");
    let (status, body) = call(
        addr,
        "POST",
        "/v1/label",
        r#"{"labels": [{"id": "msg-17", "label": "spam"}]}"#,
    );
    assert_eq!(status, 200, "{body}");
    println!("label msg-17: {body}");
    let (status, body) = call(
        addr,
        "POST",
        "/v1/learn",
        r#"{"events": [{"task": "alice", "features": {"cheap": "x"}}]}"#,
    );
    println!("a bad request: {status} {body}");
    assert_eq!(status, 400);
    let (_, info) = call(addr, "GET", "/v1/model", "");
    server.shutdown()?;

    // The same directory: the snapshot written at shutdown, and the same answers.
    let server = Server::start(options)?;
    let (_, again) = call(server.addr(), "GET", "/v1/model", "");
    let seen = |info: &str| -> u64 {
        let v: serde_json::Value = serde_json::from_str(info).expect("JSON");
        v["n_seen"].as_u64().expect("n_seen")
    };
    assert_eq!(seen(&info), 9);
    assert_eq!(seen(&again), 9, "a restart keeps every acknowledged event");
    let (_, after) = call(
        server.addr(),
        "POST",
        "/v1/predict",
        &question.replace(r#", "remember": "msg-17""#, ""),
    );
    println!("after a restart: {after}");
    server.shutdown()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
