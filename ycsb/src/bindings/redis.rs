//! `redis`: the peer users would pick instead of dmkv, over our own RESP2 client.
//!
//! Data model as YCSB's redis binding: a record is a hash at its key (`HSET key f v …`, read with
//! `HGETALL` or `HMGET`), the table name is ignored, and every insert also adds the key to the
//! sorted set `_indices` scored by Java's `String.hashCode` of the key, which is what scans walk
//! (`ZRANGEBYSCORE _indices hash(start) +inf LIMIT 0 count`, then one read per key) — so scans
//! return the records that follow the start key in that hash order, as YCSB's do. With
//! `redis.index=false` inserts skip the sorted set and scans are refused.
//!
//! Each driver thread has one connection. Its M operation loops queue their commands on it and
//! the thread's executor idle hook flushes them in one write and reads the replies, so up to M
//! operations are pipelined per thread. Redis has no transport counters worth reporting here.
//!
//! Properties: `redis.host` (localhost), `redis.port` (6379), `redis.password`, `redis.db`,
//! `redis.index` (true).
//!
//! A missing record reads as `NOT_FOUND` (YCSB's binding says `ERROR`).

use super::resp::{Conn, Value};
use crate::db::{Binding, Db, DbError, LocalBoxFuture, Record, Status};
use crate::executor;
use crate::generator::java_string_hash;
use crate::props::Properties;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

const INDEX_KEY: &[u8] = b"_indices";

/// The redis binding factory.
#[derive(Debug, Clone)]
pub struct RedisBinding {
    index: bool,
}

impl RedisBinding {
    pub fn new(props: &Properties) -> Self {
        RedisBinding {
            index: props.get_bool("redis.index", true),
        }
    }
}

impl Binding for RedisBinding {
    fn name(&self) -> &str {
        "redis"
    }

    fn supports_scan(&self) -> bool {
        self.index
    }

    fn create(&self, props: &Properties, _thread: usize) -> Result<Box<dyn Db>, DbError> {
        let host = props.get_or("redis.host", "localhost").to_string();
        let port: u16 = props
            .get_u64("redis.port", 6379)
            .map_err(|e| DbError::new(e.to_string()))?
            .try_into()
            .map_err(|_| DbError::new("redis.port must be below 65536"))?;
        let mut conn = Conn::connect(&host, port).map_err(|e| {
            DbError::new(format!(
                "cannot connect to redis at {host}:{port} (redis.host, redis.port): {e}"
            ))
        })?;
        let check = |r: Result<Value, String>, what: &str| match r {
            Ok(Value::Error(e)) | Err(e) => Err(DbError::new(format!("redis {what}: {e}"))),
            Ok(_) => Ok(()),
        };
        if let Some(pw) = props.get("redis.password") {
            check(conn.call(&[b"AUTH", pw.as_bytes()]), "AUTH")?;
        }
        if let Some(db) = props.get("redis.db") {
            check(conn.call(&[b"SELECT", db.as_bytes()]), "SELECT")?;
        }
        check(conn.call(&[b"PING"]), "PING")?;
        Ok(Box::new(RedisDb {
            conn: RefCell::new(conn),
            index: self.index,
        }))
    }
}

struct RedisDb {
    conn: RefCell<Conn>,
    index: bool,
}

/// Resolves when the reply of `ticket` has been read.
struct Reply<'a> {
    conn: &'a RefCell<Conn>,
    ticket: u64,
}

impl Future for Reply<'_> {
    type Output = Result<Value, String>;
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.conn.borrow_mut().take(self.ticket) {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }
}

fn score(key: &str) -> Vec<u8> {
    java_string_hash(key).to_string().into_bytes()
}

impl RedisDb {
    fn send(&self, args: &[&[u8]]) -> Reply<'_> {
        let ticket = self.conn.borrow_mut().send(args);
        Reply {
            conn: &self.conn,
            ticket,
        }
    }

    fn read_cmd(&self, key: &str, fields: Option<&[String]>) -> Reply<'_> {
        match fields {
            None => self.send(&[b"HGETALL", key.as_bytes()]),
            Some(fs) => {
                let mut args: Vec<&[u8]> = vec![b"HMGET", key.as_bytes()];
                args.extend(fs.iter().map(|f| f.as_bytes()));
                self.send(&args)
            }
        }
    }

    fn hset(&self, key: &str, values: &Record) -> Reply<'_> {
        let mut args: Vec<&[u8]> = vec![b"HSET", key.as_bytes()];
        for (f, v) in values {
            args.push(f.as_bytes());
            args.push(v);
        }
        self.send(&args)
    }
}

/// Turn an HGETALL/HMGET reply into a record.
fn to_record(v: Value, fields: Option<&[String]>) -> (Status, Record) {
    let Value::Array(Some(items)) = v else {
        return (Status::Error, Vec::new());
    };
    let rec: Record = match fields {
        None => items
            .chunks(2)
            .filter_map(|p| match p {
                [Value::Bulk(Some(f)), Value::Bulk(Some(v))] => {
                    Some((String::from_utf8_lossy(f).into_owned(), v.clone()))
                }
                _ => None,
            })
            .collect(),
        Some(fs) => fs
            .iter()
            .zip(items)
            .filter_map(|(f, v)| match v {
                Value::Bulk(Some(v)) => Some((f.clone(), v)),
                _ => None,
            })
            .collect(),
    };
    if rec.is_empty() {
        (Status::NotFound, rec)
    } else {
        (Status::Ok, rec)
    }
}

fn ok(r: &Result<Value, String>) -> bool {
    matches!(r, Ok(v) if !matches!(v, Value::Error(_)))
}

impl Db for RedisDb {
    fn read<'a>(
        &'a self,
        _table: &'a str,
        key: &'a str,
        fields: Option<&'a [String]>,
    ) -> LocalBoxFuture<'a, (Status, Record)> {
        let reply = self.read_cmd(key, fields);
        Box::pin(async move {
            match reply.await {
                Ok(v) => to_record(v, fields),
                Err(_) => (Status::Error, Vec::new()),
            }
        })
    }

    fn scan<'a>(
        &'a self,
        _table: &'a str,
        start_key: &'a str,
        count: usize,
        fields: Option<&'a [String]>,
    ) -> LocalBoxFuture<'a, (Status, Vec<(String, Record)>)> {
        if !self.index {
            return Box::pin(std::future::ready((Status::NotImplemented, Vec::new())));
        }
        let min = score(start_key);
        let count = count.to_string();
        let keys = self.send(&[
            b"ZRANGEBYSCORE",
            INDEX_KEY,
            &min,
            b"+inf",
            b"LIMIT",
            b"0",
            count.as_bytes(),
        ]);
        Box::pin(async move {
            let keys = match keys.await {
                Ok(Value::Array(Some(items))) => items
                    .into_iter()
                    .filter_map(|v| match v {
                        Value::Bulk(Some(k)) => Some(String::from_utf8_lossy(&k).into_owned()),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
                _ => return (Status::Error, Vec::new()),
            };
            let replies: Vec<_> = keys.iter().map(|k| self.read_cmd(k, fields)).collect();
            let mut rows = Vec::with_capacity(keys.len());
            for (k, r) in keys.into_iter().zip(replies) {
                match r.await {
                    Ok(v) => rows.push((k, to_record(v, fields).1)),
                    Err(_) => return (Status::Error, rows),
                }
            }
            (Status::Ok, rows)
        })
    }

    fn update<'a>(
        &'a self,
        _table: &'a str,
        key: &'a str,
        values: &'a Record,
    ) -> LocalBoxFuture<'a, Status> {
        let reply = self.hset(key, values);
        Box::pin(async move {
            if ok(&reply.await) {
                Status::Ok
            } else {
                Status::Error
            }
        })
    }

    fn insert<'a>(
        &'a self,
        _table: &'a str,
        key: &'a str,
        values: &'a Record,
    ) -> LocalBoxFuture<'a, Status> {
        let set = self.hset(key, values);
        let idx = self
            .index
            .then(|| self.send(&[b"ZADD", INDEX_KEY, &score(key), key.as_bytes()]));
        Box::pin(async move {
            let mut good = ok(&set.await);
            if let Some(idx) = idx {
                good &= ok(&idx.await);
            }
            if good { Status::Ok } else { Status::Error }
        })
    }

    fn delete<'a>(&'a self, _table: &'a str, key: &'a str) -> LocalBoxFuture<'a, Status> {
        let del = self.send(&[b"DEL", key.as_bytes()]);
        let zrem = self
            .index
            .then(|| self.send(&[b"ZREM", INDEX_KEY, key.as_bytes()]));
        Box::pin(async move {
            let deleted = matches!(del.await, Ok(Value::Int(n)) if n > 0);
            let unindexed = match zrem {
                Some(z) => matches!(z.await, Ok(Value::Int(n)) if n > 0),
                None => false,
            };
            if deleted || unindexed {
                Status::Ok
            } else {
                Status::NotFound
            }
        })
    }

    fn run<'a>(&'a self, fut: LocalBoxFuture<'a, ()>) {
        executor::block_on(fut, &mut |deadline| {
            let mut conn = self.conn.borrow_mut();
            if conn.outstanding() > 0 {
                conn.pump();
            } else {
                drop(conn);
                executor::park_idle(Some(deadline.unwrap_or_else(|| {
                    std::time::Instant::now() + std::time::Duration::from_millis(10)
                })));
            }
        });
    }
}
