//! What the tests of `acts serve` as a process share: starting it on a
//! free loopback port, and raw HTTP/1.1 requests with exactly the headers
//! a test names (a browser's `Origin`, a rebinding page's `Host`).

#![allow(dead_code)]

pub mod asks;
pub mod grpc;
pub mod nodes;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Starts `acts serve` on a free loopback port; returns the child and the
/// address it announced.
pub fn serve(store: &str) -> (Child, String) {
    serve_with(&["--store", store, "--listen", "127.0.0.1:0"])
}

/// Starts `acts serve ARGS`; returns the child and the address it
/// announced.
pub fn serve_with(args: &[&str]) -> (Child, String) {
    let (child, addr, _) = serve_logged(args);
    (child, addr)
}

/// What a server said on stderr: complete once the server has exited.
pub struct Log(std::thread::JoinHandle<String>);

impl Log {
    /// Everything the server wrote (call once it has exited).
    pub fn text(self) -> String {
        self.0.join().expect("the log reader")
    }
}

/// Starts `acts serve ARGS`; returns the child, the address it announced,
/// and everything it says on stderr (the first line included).
pub fn serve_logged(args: &[&str]) -> (Child, String, Log) {
    let (child, said, log) = serve_until(args, "http://");
    let line = said.lines().last().unwrap_or_default();
    let addr = address_in(line).unwrap_or_else(|| panic!("no address in: {line}"));
    (child, addr, log)
}

/// Starts `acts serve ARGS --grpc 127.0.0.1:0`; returns the child, the
/// HTTP and the gRPC address it announced, and what it says on stderr.
pub fn serve_grpc(args: &[&str]) -> (Child, String, String, Log) {
    let mut all = args.to_vec();
    all.extend(["--listen", "127.0.0.1:0", "--grpc", "127.0.0.1:0"]);
    let (child, said, log) = serve_until(&all, "gRPC protocol");
    let grpc = said
        .split("0.25 on ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no gRPC address in: {said}"))
        .to_owned();
    let http = said
        .split("listening on http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in: {said}"))
        .to_owned();
    (child, http, grpc, log)
}

/// Starts `acts serve ARGS` and reads what it says up to the first line
/// that contains `marker`; returns the child, what it said up to that
/// line (included), and everything it says (once it has exited).
fn serve_until(args: &[&str], marker: &str) -> (Child, String, Log) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .arg("serve")
        .args(args)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("acts serve starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut reader = BufReader::new(stderr);
    // Log lines may come first; the listening line names the address.
    let mut first = String::new();
    let mut line = String::new();
    while !line.contains(marker) {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .expect("acts serve says where it listens");
        assert!(n > 0, "acts serve ended before it listened: {first}");
        first.push_str(&line);
    }
    let said = first.clone();
    // The rest of what it says is read as it comes.
    let log = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = reader.read_to_string(&mut rest);
        first + &rest
    });
    (child, said, Log(log))
}

/// The `HOST:PORT` of the `http://` address a line of `acts serve` names.
pub fn address_in(line: &str) -> Option<String> {
    line.split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
}

/// Stops a server with SIGTERM and waits for it; its exit code.
pub fn stop(mut child: Child) -> Option<i32> {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    child.wait().expect("it stops").code()
}

/// One HTTP/1.1 request with a JSON body (or none); returns the status and
/// the body.
pub fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    request(
        addr,
        method,
        path,
        &[("Host", addr), ("Content-Type", "application/json")],
        body,
    )
}

/// One HTTP/1.1 request with `headers` (and a `Content-Length`) only;
/// returns the status and the body.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("a read timeout (hang guard)");
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    write!(
        s,
        "{head}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("sends");
    let mut response = String::new();
    s.read_to_string(&mut response).expect("a response");
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}
