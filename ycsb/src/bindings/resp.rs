//! A minimal RESP2 client connection with pipelining.
//!
//! Commands are appended to a write buffer and get a ticket; [`Conn::pump`] flushes the buffer
//! and reads replies, which arrive in command order, into a ticket → reply map. Many operations
//! of one thread can so have commands in flight on one connection at once.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;

/// A RESP2 reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Value>>),
}

/// Encode a command as a RESP array of bulk strings.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Parse one reply from `buf`; `Ok(None)` when incomplete, else the value and bytes used.
pub fn parse(buf: &[u8]) -> Result<Option<(Value, usize)>, String> {
    fn line(buf: &[u8]) -> Option<(&[u8], usize)> {
        let pos = buf.windows(2).position(|w| w == b"\r\n")?;
        Some((&buf[..pos], pos + 2))
    }
    fn int(b: &[u8]) -> Result<i64, String> {
        std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad RESP integer {:?}", String::from_utf8_lossy(b)))
    }
    if buf.is_empty() {
        return Ok(None);
    }
    let Some((l, used)) = line(&buf[1..]) else {
        return Ok(None);
    };
    let used = used + 1;
    match buf[0] {
        b'+' => Ok(Some((
            Value::Simple(String::from_utf8_lossy(l).into()),
            used,
        ))),
        b'-' => Ok(Some((
            Value::Error(String::from_utf8_lossy(l).into()),
            used,
        ))),
        b':' => Ok(Some((Value::Int(int(l)?), used))),
        b'$' => {
            let n = int(l)?;
            if n < 0 {
                return Ok(Some((Value::Bulk(None), used)));
            }
            let n = n as usize;
            if buf.len() < used + n + 2 {
                return Ok(None);
            }
            Ok(Some((
                Value::Bulk(Some(buf[used..used + n].to_vec())),
                used + n + 2,
            )))
        }
        b'*' => {
            let n = int(l)?;
            if n < 0 {
                return Ok(Some((Value::Array(None), used)));
            }
            let mut items = Vec::with_capacity(n as usize);
            let mut pos = used;
            for _ in 0..n {
                match parse(&buf[pos..])? {
                    None => return Ok(None),
                    Some((v, u)) => {
                        items.push(v);
                        pos += u;
                    }
                }
            }
            Ok(Some((Value::Array(Some(items)), pos)))
        }
        other => Err(format!("bad RESP type byte {other:#x}")),
    }
}

/// One pipelined connection.
pub struct Conn {
    stream: TcpStream,
    wbuf: Vec<u8>,
    rbuf: Vec<u8>,
    issued: u64,
    answered: u64,
    replies: HashMap<u64, Value>,
    broken: Option<String>,
}

impl Conn {
    pub fn connect(host: &str, port: u16) -> std::io::Result<Self> {
        let stream = TcpStream::connect((host, port))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            wbuf: Vec::with_capacity(64 * 1024),
            rbuf: Vec::with_capacity(64 * 1024),
            issued: 0,
            answered: 0,
            replies: HashMap::new(),
            broken: None,
        })
    }

    /// Queue a command; returns its ticket.
    pub fn send(&mut self, args: &[&[u8]]) -> u64 {
        encode(&mut self.wbuf, args);
        self.issued += 1;
        self.issued - 1
    }

    /// Commands sent whose replies have not been read.
    pub fn outstanding(&self) -> u64 {
        self.issued - self.answered
    }

    /// The reply of `ticket`, if read; an error once the connection broke.
    pub fn take(&mut self, ticket: u64) -> Option<Result<Value, String>> {
        if let Some(v) = self.replies.remove(&ticket) {
            return Some(Ok(v));
        }
        self.broken.as_ref().map(|e| Err(e.clone()))
    }

    /// Flush queued commands and read at least one reply if any is outstanding.
    pub fn pump(&mut self) {
        if self.broken.is_some() {
            return;
        }
        if let Err(e) = self.pump_inner() {
            self.broken = Some(format!("redis connection failed: {e}"));
        }
    }

    fn pump_inner(&mut self) -> Result<(), String> {
        if !self.wbuf.is_empty() {
            self.stream
                .write_all(&self.wbuf)
                .map_err(|e| e.to_string())?;
            self.wbuf.clear();
        }
        if self.outstanding() == 0 {
            return Ok(());
        }
        let mut got_one = false;
        let mut chunk = [0u8; 64 * 1024];
        while !got_one {
            let n = self.stream.read(&mut chunk).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("server closed the connection".into());
            }
            self.rbuf.extend_from_slice(&chunk[..n]);
            let mut pos = 0;
            while let Some((v, used)) = parse(&self.rbuf[pos..])? {
                pos += used;
                self.replies.insert(self.answered, v);
                self.answered += 1;
                got_one = true;
            }
            self.rbuf.drain(..pos);
        }
        Ok(())
    }

    /// Send one command and wait for its reply (for setup, outside the executor).
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Value, String> {
        let t = self.send(args);
        loop {
            if let Some(r) = self.take(t) {
                return r;
            }
            self.pump();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_replies_and_partial_input() {
        let buf = b"*3\r\n$3\r\nfoo\r\n$-1\r\n:42\r\n+OK\r\n-ERR x\r\n";
        let (v, used) = parse(buf).unwrap().unwrap();
        assert_eq!(
            v,
            Value::Array(Some(vec![
                Value::Bulk(Some(b"foo".to_vec())),
                Value::Bulk(None),
                Value::Int(42)
            ]))
        );
        let (v, u2) = parse(&buf[used..]).unwrap().unwrap();
        assert_eq!(v, Value::Simple("OK".into()));
        assert_eq!(
            parse(&buf[used + u2..]).unwrap().unwrap().0,
            Value::Error("ERR x".into())
        );
        for cut in 0..used {
            assert_eq!(parse(&buf[..cut]).unwrap(), None, "cut at {cut}");
        }
        let mut out = Vec::new();
        encode(&mut out, &[b"GET", b"k"]);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    }
}
