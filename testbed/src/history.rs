//! Histories of key-value operations, as observed by clients, for linearizability checking.
//!
//! Each operation records the key, what was asked ([`Op`]), when it was invoked and,
//! if it completed, when it returned and what it returned ([`Outcome`]). Timestamps
//! are nanoseconds on one clock shared by every client of the test. An operation
//! without a response is *pending*: the client crashed or gave up (a timeout, an
//! `Unavailable` error), so it may or may not have taken effect, at any time after
//! its invocation.
//!
//! The sequential specification the checker holds the history to, per key (state:
//! absent or a value):
//!
//! | op            | key absent                | key holds `x`               |
//! |---------------|---------------------------|-----------------------------|
//! | `Get`         | `NotFound`                | `Value(x)`                  |
//! | `Put(v)`      | `Ok`, now `v`             | `Ok`, now `v`               |
//! | `Insert(v)`   | `Ok`, now `v`             | `AlreadyExists`, unchanged  |
//! | `Update(v)`   | `NotFound`, unchanged     | `Ok`, now `v`               |
//! | `Delete`      | `NotFound`, unchanged     | `Ok`, now absent            |

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

/// A key.
pub type Key = Vec<u8>;
/// A value.
pub type Value = Vec<u8>;

/// What an operation asked for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Op {
    /// Read the value.
    Get,
    /// Upsert.
    Put(Value),
    /// Create; fails with `AlreadyExists` when present.
    Insert(Value),
    /// Overwrite; fails with `NotFound` when absent.
    Update(Value),
    /// Remove; fails with `NotFound` when absent.
    Delete,
}

/// What a completed operation returned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// A `Get` found this value.
    Value(Value),
    /// The key was absent.
    NotFound,
    /// An `Insert` found the key present.
    AlreadyExists,
    /// A write took effect.
    Ok,
}

impl Op {
    /// Whether `outcome` is one this kind of operation can return at all.
    pub fn admits(&self, outcome: &Outcome) -> bool {
        matches!(
            (self, outcome),
            (Op::Get, Outcome::Value(_) | Outcome::NotFound)
                | (Op::Put(_), Outcome::Ok)
                | (Op::Insert(_), Outcome::Ok | Outcome::AlreadyExists)
                | (Op::Update(_), Outcome::Ok | Outcome::NotFound)
                | (Op::Delete, Outcome::Ok | Outcome::NotFound)
        )
    }

    /// Whether the operation never changes the state.
    pub fn is_read_only(&self) -> bool {
        matches!(self, Op::Get)
    }
}

/// Identifies an operation within its [`History`] (its position).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub usize);

/// The response of a completed operation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Response {
    /// When the client saw the response.
    pub at: u64,
    /// What was returned.
    pub outcome: Outcome,
}

/// One operation of a history.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Operation {
    /// Its identifier.
    pub id: OpId,
    /// The client (thread, session) that issued it; informational.
    pub client: u64,
    /// The key.
    pub key: Key,
    /// What was asked.
    pub op: Op,
    /// When it was invoked.
    pub invoke: u64,
    /// Its response, or `None` while pending (crashed, timed out).
    pub response: Option<Response>,
}

impl Operation {
    /// Whether the operation has no response.
    pub fn is_pending(&self) -> bool {
        self.response.is_none()
    }
}

/// Why a history is malformed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HistoryError {
    /// No operation has this id.
    #[error("no operation {0:?}")]
    NoSuchOp(OpId),
    /// The operation already has a response.
    #[error("operation {0:?} already responded")]
    AlreadyResponded(OpId),
    /// The response precedes the invocation.
    #[error("operation {id:?} responds at {response} before its invocation at {invoke}")]
    ResponseBeforeInvoke {
        /// The operation.
        id: OpId,
        /// Its invocation time.
        invoke: u64,
        /// Its response time.
        response: u64,
    },
    /// The outcome cannot come from this kind of operation (e.g. a `Put` returning `NotFound`).
    #[error("operation {id:?} ({op}) cannot return {outcome}")]
    ImpossibleOutcome {
        /// The operation.
        id: OpId,
        /// What it asked.
        op: String,
        /// What it claims to have returned.
        outcome: String,
    },
}

/// A history: operations in invocation-recording order, plus initial values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    ops: Vec<Operation>,
    initial: BTreeMap<Key, Value>,
}

impl History {
    /// An empty history; every key starts absent.
    pub fn new() -> History {
        History::default()
    }

    /// Let `key` hold `value` before the first operation.
    pub fn set_initial(&mut self, key: impl Into<Key>, value: impl Into<Value>) {
        self.initial.insert(key.into(), value.into());
    }

    /// The value `key` holds before the first operation.
    pub fn initial(&self, key: &[u8]) -> Option<&Value> {
        self.initial.get(key)
    }

    /// Record an invocation; returns the id to respond to.
    pub fn invoke(&mut self, client: u64, key: impl Into<Key>, op: Op, at: u64) -> OpId {
        let id = OpId(self.ops.len());
        self.ops.push(Operation {
            id,
            client,
            key: key.into(),
            op,
            invoke: at,
            response: None,
        });
        id
    }

    /// Record the response of operation `id`.
    pub fn respond(&mut self, id: OpId, at: u64, outcome: Outcome) -> Result<(), HistoryError> {
        let o = self.ops.get_mut(id.0).ok_or(HistoryError::NoSuchOp(id))?;
        if o.response.is_some() {
            return Err(HistoryError::AlreadyResponded(id));
        }
        if at < o.invoke {
            return Err(HistoryError::ResponseBeforeInvoke {
                id,
                invoke: o.invoke,
                response: at,
            });
        }
        if !o.op.admits(&outcome) {
            return Err(HistoryError::ImpossibleOutcome {
                id,
                op: o.op.to_string(),
                outcome: outcome.to_string(),
            });
        }
        o.response = Some(Response { at, outcome });
        Ok(())
    }

    /// Record a whole operation at once (`response: None` for a pending one).
    pub fn record(
        &mut self,
        client: u64,
        key: impl Into<Key>,
        op: Op,
        invoke: u64,
        response: Option<(u64, Outcome)>,
    ) -> Result<OpId, HistoryError> {
        let id = self.invoke(client, key, op, invoke);
        if let Some((at, outcome)) = response {
            self.respond(id, at, outcome)?;
        }
        Ok(id)
    }

    /// All operations, by id.
    pub fn ops(&self) -> &[Operation] {
        &self.ops
    }

    /// Operation `id`.
    pub fn op(&self, id: OpId) -> Option<&Operation> {
        self.ops.get(id.0)
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether there are no operations.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Operation ids grouped by key, keys in ascending order.
    pub fn by_key(&self) -> BTreeMap<&[u8], Vec<OpId>> {
        let mut out: BTreeMap<&[u8], Vec<OpId>> = BTreeMap::new();
        for o in &self.ops {
            out.entry(o.key.as_slice()).or_default().push(o.id);
        }
        out
    }

    /// Check well-formedness (operations built field by field bypass [`History::respond`]).
    pub fn validate(&self) -> Result<(), HistoryError> {
        for (i, o) in self.ops.iter().enumerate() {
            if o.id != OpId(i) {
                return Err(HistoryError::NoSuchOp(o.id));
            }
            if let Some(r) = &o.response {
                if r.at < o.invoke {
                    return Err(HistoryError::ResponseBeforeInvoke {
                        id: o.id,
                        invoke: o.invoke,
                        response: r.at,
                    });
                }
                if !o.op.admits(&r.outcome) {
                    return Err(HistoryError::ImpossibleOutcome {
                        id: o.id,
                        op: o.op.to_string(),
                        outcome: r.outcome.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Replace the response of operation `id` (tests use this to corrupt histories).
    pub fn set_response(
        &mut self,
        id: OpId,
        response: Option<Response>,
    ) -> Result<(), HistoryError> {
        let o = self.ops.get_mut(id.0).ok_or(HistoryError::NoSuchOp(id))?;
        o.response = response;
        Ok(())
    }
}

/// Show bytes compactly: quoted text when printable, hex otherwise, cut at 32 bytes.
pub struct Bytes<'a>(pub &'a [u8]);

impl fmt::Display for Bytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 32;
        let (head, cut) = match self.0.get(..SHOWN) {
            Some(h) if self.0.len() > SHOWN => (h, true),
            _ => (self.0, false),
        };
        match std::str::from_utf8(head) {
            Ok(s) if s.chars().all(|c| !c.is_control()) => write!(f, "{s:?}")?,
            _ => {
                write!(f, "0x")?;
                for b in head {
                    write!(f, "{b:02x}")?;
                }
            }
        }
        if cut {
            write!(f, "…({} bytes)", self.0.len())?;
        }
        Ok(())
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Get => write!(f, "get"),
            Op::Put(v) => write!(f, "put({})", Bytes(v)),
            Op::Insert(v) => write!(f, "insert({})", Bytes(v)),
            Op::Update(v) => write!(f, "update({})", Bytes(v)),
            Op::Delete => write!(f, "delete"),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Value(v) => write!(f, "{}", Bytes(v)),
            Outcome::NotFound => write!(f, "NotFound"),
            Outcome::AlreadyExists => write!(f, "AlreadyExists"),
            Outcome::Ok => write!(f, "Ok"),
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} client {} {} ", self.id.0, self.client, self.op)?;
        match &self.response {
            Some(r) => write!(f, "[{}, {}] -> {}", self.invoke, r.at, r.outcome),
            None => write!(f, "[{}, pending]", self.invoke),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn building_and_validation() {
        let mut h = History::new();
        let a = h.invoke(1, "k", Op::Put(b"v".to_vec()), 10);
        assert_eq!(
            h.respond(a, 5, Outcome::Ok),
            Err(HistoryError::ResponseBeforeInvoke {
                id: a,
                invoke: 10,
                response: 5
            })
        );
        assert!(matches!(
            h.respond(a, 20, Outcome::NotFound),
            Err(HistoryError::ImpossibleOutcome { .. })
        ));
        h.respond(a, 20, Outcome::Ok).unwrap();
        assert_eq!(
            h.respond(a, 30, Outcome::Ok),
            Err(HistoryError::AlreadyResponded(a))
        );
        assert_eq!(
            h.respond(OpId(9), 30, Outcome::Ok),
            Err(HistoryError::NoSuchOp(OpId(9)))
        );
        let b = h.record(2, "j", Op::Get, 15, None).unwrap();
        assert!(h.op(b).unwrap().is_pending());
        assert_eq!(h.validate(), Ok(()));
        let keys: Vec<&[u8]> = h.by_key().keys().copied().collect();
        assert_eq!(keys, vec![&b"j"[..], &b"k"[..]]);
        h.set_response(
            a,
            Some(Response {
                at: 20,
                outcome: Outcome::AlreadyExists,
            }),
        )
        .unwrap();
        assert!(h.validate().is_err());
    }

    #[test]
    fn display() {
        let mut h = History::new();
        let a = h
            .record(
                3,
                "k",
                Op::Insert(b"abc".to_vec()),
                1,
                Some((2, Outcome::AlreadyExists)),
            )
            .unwrap();
        assert_eq!(
            h.op(a).unwrap().to_string(),
            "#0 client 3 insert(\"abc\") [1, 2] -> AlreadyExists"
        );
        let b = h
            .record(4, "k", Op::Put(vec![0, 1, 0xff]), 5, None)
            .unwrap();
        assert_eq!(
            h.op(b).unwrap().to_string(),
            "#1 client 4 put(0x0001ff) [5, pending]"
        );
        assert_eq!(
            Bytes(&[b'a'; 40]).to_string(),
            format!("\"{}\"…(40 bytes)", "a".repeat(32))
        );
    }
}
