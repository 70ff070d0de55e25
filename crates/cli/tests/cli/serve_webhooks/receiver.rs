//! A webhook receiver on loopback, speaking just enough HTTP/1.1: it records
//! every request and answers as the test says — drop the connection, 500,
//! or 204 — so retries can be watched from the outside.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the receiver answers a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Close the connection without a response.
    Close,
    Status500,
    Ok,
}

/// One request as it arrived, with what it was answered.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: String,
    pub answer: Answer,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }

    pub fn event(&self) -> String {
        self.headers["x-agentd-event"].clone()
    }

    /// The signature header checked against our own HMAC of
    /// `timestamp + "." + body`.
    pub fn signed_with(&self, secret: &str) -> bool {
        let timestamp = &self.headers["x-agentd-timestamp"];
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{timestamp}.{}", self.body).as_bytes());
        let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        self.headers["x-agentd-signature"] == expected
    }
}

type Rule = Box<dyn Fn(&Received, &[Received]) -> Answer + Send>;

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    log: Arc<Mutex<Vec<Received>>>,
    rule: Arc<Mutex<Rule>>,
}

impl Receiver {
    /// Listening on a free loopback port; answers 204 until told otherwise.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let receiver = Receiver {
            url,
            log: Arc::default(),
            rule: Arc::new(Mutex::new(Box::new(|_, _| Answer::Ok))),
        };
        let serving = receiver.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let serving = serving.clone();
                tokio::spawn(async move { serving.serve(stream).await });
            }
        });
        receiver
    }

    /// Answer each request by `rule(request, earlier requests)`.
    pub fn answer_with(&self, rule: impl Fn(&Received, &[Received]) -> Answer + Send + 'static) {
        *self.rule.lock().unwrap() = Box::new(rule);
    }

    pub fn received(&self) -> Vec<Received> {
        self.log.lock().unwrap().clone()
    }

    /// Waits until `done(requests)` holds (60 s at most).
    pub async fn wait_for(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let start = Instant::now();
        loop {
            let received = self.received();
            if done(&received) {
                return received;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the receiver never got {what}; it got {:#?}",
                received
                    .iter()
                    .map(|r| (r.event(), r.answer))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn serve(&self, mut stream: TcpStream) {
        // Keep-alive: several requests may come on one connection.
        let mut buffer = Vec::new();
        loop {
            let Some(request) = read_request(&mut stream, &mut buffer).await else {
                return;
            };
            let answer = {
                let log = self.log.lock().unwrap();
                (self.rule.lock().unwrap())(&request, &log)
            };
            self.log
                .lock()
                .unwrap()
                .push(Received { answer, ..request });
            let response: &[u8] = match answer {
                Answer::Close => return,
                Answer::Status500 => {
                    b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\nboom"
                }
                Answer::Ok => b"HTTP/1.1 204 No Content\r\n\r\n",
            };
            if stream.write_all(response).await.is_err() {
                return;
            }
        }
    }
}

/// The next request on `stream` (`None` when it closes).
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Received> {
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers.get("content-length")?.parse().ok()?;
    let body_start = head_end + 4;
    while buffer.len() < body_start + length {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8(buffer[body_start..body_start + length].to_vec()).ok()?;
    buffer.drain(..body_start + length);
    Some(Received {
        path,
        headers,
        body,
        answer: Answer::Ok,
    })
}
