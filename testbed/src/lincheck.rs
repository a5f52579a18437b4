//! A linearizability checker for key-value [histories](crate::history).
//!
//! **Decomposition.** Operations on different keys never interact, and
//! linearizability is compositional (P-compositionality), so each key's
//! sub-history is checked on its own; the history is linearizable iff every key's is.
//!
//! **Search** (Wing & Gong, with Lowe's memoization, as in Porcupine). The key's
//! invocations and responses are sorted by time into a doubly linked list (at equal
//! times invocations come first, so touching intervals count as concurrent and the
//! checker never reports a violation that depends on a timestamp tie). The search
//! walks the list: at an invocation it tries to linearize that operation next —
//! the sequential specification must allow the recorded outcome in the current
//! state — and if so removes the operation from the list and restarts from the
//! head; at a response it has hit an operation that had to be linearized already,
//! so it backtracks, undoing the last choice and trying the next candidate. Each
//! `(set of linearized operations, state)` pair is explored at most once: a
//! configuration seen before cannot lead anywhere new. Values are interned to
//! integers and the set is a bitset with an incremental Zobrist hash, so a step
//! costs O(n/64).
//!
//! **Forced observers.** An operation whose outcome says it changed nothing (a
//! `Get`, an `Insert` that found the key, an `Update` or `Delete` that did not) and
//! that matches the current state is linearized at once, before any branching: it
//! leaves the state as it was and nothing remaining has to precede it, so every
//! linearization of the rest can be rearranged to start with it. Backtracking
//! skips over such steps. Reads dominate most workloads, so this removes most of
//! the branching.
//!
//! **Pending operations** (no response) are given a response at +∞: they may be
//! linearized anywhere after their invocation, or never, and their outcome is
//! unconstrained. The search succeeds once every *completed* operation is
//! linearized. Pending `Get`s are dropped up front (they change nothing).
//!
//! **Bounds.** The problem is NP-complete in general. Each key's search is capped by
//! [`Config::max_steps`]; when the cap is hit the verdict is [`Verdict::Unknown`],
//! never a guess. Thousands of operations on a few hot keys with 16–24 operations
//! in flight check in milliseconds (optimised build); the expensive cases are many
//! concurrent writes of distinct values to one key (every write order is a
//! candidate until a read pins it) and many pending writes on one key (each may or
//! may not have happened).
//!
//! **Explanations.** For a violation the checker finds the shortest time prefix of
//! the key's history that is already not linearizable (by bisection: once a prefix
//! fails, every longer one does; operations still in flight at the cut count as
//! pending). The operation whose response ends that prefix is the one that cannot
//! be linearized; the report lists the prefix, the longest sequence the search
//! could linearize before getting stuck, and the state it reached.

use std::collections::HashMap;
use std::fmt;

use crate::history::{Bytes, History, HistoryError, Key, Op, OpId, Operation, Outcome, Value};

/// Limits of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Search steps allowed per key (and per bisection probe) before giving up with `Unknown`.
    pub max_steps: u64,
    /// Bisect a violation down to the shortest failing prefix.
    pub minimize: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_steps: 20_000_000,
            minimize: true,
        }
    }
}

/// The result of a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every key's sub-history has a linearization.
    Linearizable,
    /// Some key's sub-history has none.
    Violation(Box<Violation>),
    /// No violation was found, but the search budget ran out on some key.
    Unknown {
        /// The first key whose search was cut short.
        key: Key,
        /// Steps spent on it.
        steps: u64,
    },
}

/// A check's verdict and effort.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The verdict.
    pub verdict: Verdict,
    /// Keys checked.
    pub keys: usize,
    /// Search steps over all keys (including bisection).
    pub steps: u64,
}

impl Report {
    /// Whether the history was shown linearizable.
    pub fn is_linearizable(&self) -> bool {
        self.verdict == Verdict::Linearizable
    }

    /// Whether a violation was found.
    pub fn is_violation(&self) -> bool {
        matches!(self.verdict, Verdict::Violation(_))
    }
}

/// A key whose sub-history cannot be linearized, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The key.
    pub key: Key,
    /// The shortest failing prefix ends at this time: `culprit`'s response.
    pub prefix_end: u64,
    /// The operation whose response cannot be explained.
    pub culprit: Operation,
    /// The key's operations invoked up to `prefix_end`, as they stood then
    /// (operations still in flight are shown pending).
    pub prefix: Vec<Operation>,
    /// The longest sequence the search linearized before getting stuck.
    pub linearized: Vec<OpId>,
    /// The key's value after `linearized`.
    pub state: Option<Value>,
    /// The operation the search was stuck on: its response came before it could be linearized.
    pub stuck_on: OpId,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "key {} is not linearizable: operation #{} ({} -> {}) cannot be linearized.",
            Bytes(&self.key),
            self.culprit.id.0,
            self.culprit.op,
            self.culprit
                .response
                .as_ref()
                .map_or("pending".to_string(), |r| r.outcome.to_string()),
        )?;
        writeln!(
            f,
            "The shortest failing prefix ends at t={} and holds {} operation(s) on this key:",
            self.prefix_end,
            self.prefix.len()
        )?;
        for o in &self.prefix {
            writeln!(f, "  {o}")?;
        }
        let find = |id: OpId| self.prefix.iter().find(|o| o.id == id);
        write!(f, "Longest linearization found:")?;
        if self.linearized.is_empty() {
            write!(f, " (none)")?;
        }
        for id in &self.linearized {
            match find(*id) {
                Some(o) => write!(f, " #{} {};", id.0, o.op)?,
                None => write!(f, " #{};", id.0)?,
            }
        }
        writeln!(
            f,
            "\nafter which the key is {}, and #{} responded before it could be placed.",
            self.state
                .as_ref()
                .map_or("absent".to_string(), |v| format!("{}", Bytes(v))),
            self.stuck_on.0
        )
    }
}

/// Check `history` for linearizability under the key-value specification of
/// [`crate::history`].
pub fn check(history: &History, config: &Config) -> Result<Report, HistoryError> {
    history.validate()?;
    let mut steps = 0u64;
    let mut unknown = None;
    let by_key = history.by_key();
    for (key, ids) in &by_key {
        let ops: Vec<&Operation> = ids.iter().filter_map(|&id| history.op(id)).collect();
        let initial = history.initial(key).cloned();
        let problem = KeyProblem::new(&ops, initial.as_ref(), None);
        let (result, spent) = problem.search(config.max_steps);
        steps += spent;
        match result {
            Search::Linearizable => {}
            Search::Exhausted => {
                if unknown.is_none() {
                    unknown = Some((key.to_vec(), spent));
                }
            }
            Search::Stuck(stuck) => {
                let (violation, more) = explain(key, &ops, initial.as_ref(), stuck, config);
                return Ok(Report {
                    verdict: Verdict::Violation(Box::new(violation)),
                    keys: by_key.len(),
                    steps: steps + more,
                });
            }
        }
    }
    let verdict = match unknown {
        Some((key, steps)) => Verdict::Unknown { key, steps },
        None => Verdict::Linearizable,
    };
    Ok(Report {
        verdict,
        keys: by_key.len(),
        steps,
    })
}

/// Bisect to the shortest failing prefix and describe it.
fn explain(
    key: &[u8],
    ops: &[&Operation],
    initial: Option<&Value>,
    full: Stuck,
    config: &Config,
) -> (Violation, u64) {
    let mut steps = 0;
    // Candidate cut times: responses (a new invocation never breaks linearizability).
    let mut cuts: Vec<u64> = ops
        .iter()
        .filter_map(|o| o.response.as_ref().map(|r| r.at))
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut best: Option<(u64, Stuck)> = None;
    if config.minimize {
        // Invariant: the prefix ending at cuts[hi] fails (the full history does).
        let (mut lo, mut hi) = (0usize, cuts.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let Some(&cut) = cuts.get(mid) else { break };
            let (result, spent) = KeyProblem::new(ops, initial, Some(cut)).search(config.max_steps);
            steps += spent;
            if let Search::Stuck(s) = result {
                best = Some((cut, s));
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
    }
    let (prefix_end, stuck) = match best {
        Some(b) => b,
        None => (cuts.last().copied().unwrap_or(0), full),
    };
    let prefix: Vec<Operation> = ops
        .iter()
        .filter(|o| o.invoke <= prefix_end)
        .map(|o| {
            let mut o = (*o).clone();
            if o.response.as_ref().is_some_and(|r| r.at > prefix_end) {
                o.response = None;
            }
            o
        })
        .collect();
    // The culprit responds exactly at the cut; prefer the one the search was stuck on.
    let at_cut = |o: &&Operation| o.response.as_ref().is_some_and(|r| r.at == prefix_end);
    let culprit = prefix
        .iter()
        .filter(at_cut)
        .max_by_key(|o| o.id == stuck.stuck_on)
        .or_else(|| prefix.iter().find(|o| o.id == stuck.stuck_on))
        .cloned()
        .unwrap_or_else(|| Operation {
            id: stuck.stuck_on,
            client: 0,
            key: key.to_vec(),
            op: Op::Get,
            invoke: prefix_end,
            response: None,
        });
    (
        Violation {
            key: key.to_vec(),
            prefix_end,
            culprit,
            prefix,
            linearized: stuck.linearized,
            state: stuck.state,
            stuck_on: stuck.stuck_on,
        },
        steps,
    )
}

/// An operation's effect, with values interned (0 = absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Get,
    Put(u32),
    Insert(u32),
    Update(u32),
    Delete,
}

/// A recorded outcome, interned; `None` for a pending operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Value(u32),
    NotFound,
    AlreadyExists,
    Ok,
}

/// The sequential specification: the state after `kind` in `state`, if `expect` is allowed.
fn step(state: u32, kind: Kind, expect: Option<Expect>) -> Option<u32> {
    use Expect as E;
    let allow = |want: E, next: u32| match expect {
        None => Some(next),
        Some(e) if e == want => Some(next),
        Some(_) => None,
    };
    let present = state != 0;
    match kind {
        Kind::Get if present => allow(E::Value(state), state),
        Kind::Get => allow(E::NotFound, state),
        Kind::Put(v) => allow(E::Ok, v),
        Kind::Insert(_) if present => allow(E::AlreadyExists, state),
        Kind::Insert(v) => allow(E::Ok, v),
        Kind::Update(v) if present => allow(E::Ok, v),
        Kind::Update(_) => allow(E::NotFound, state),
        Kind::Delete if present => allow(E::Ok, 0),
        Kind::Delete => allow(E::NotFound, state),
    }
}

struct KOp {
    id: OpId,
    kind: Kind,
    expect: Option<Expect>,
}

/// One key's sub-history, prepared for the search.
struct KeyProblem {
    ops: Vec<KOp>,
    /// Events in time order: (op index, is_call).
    events: Vec<(usize, bool)>,
    initial: u32,
    values: Vec<Value>,
}

/// Where a failed search got stuck (deepest point).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stuck {
    linearized: Vec<OpId>,
    state: Option<Value>,
    stuck_on: OpId,
}

enum Search {
    Linearizable,
    Stuck(Stuck),
    Exhausted,
}

#[derive(Default)]
struct Interner {
    ids: HashMap<Value, u32>,
    values: Vec<Value>,
}

impl Interner {
    fn id(&mut self, v: &Value) -> u32 {
        if let Some(&id) = self.ids.get(v) {
            return id;
        }
        self.values.push(v.clone());
        let id = u32::try_from(self.values.len()).unwrap_or(u32::MAX);
        self.ids.insert(v.clone(), id);
        id
    }
}

impl KeyProblem {
    /// Prepare `ops`; with `cut`, only what was visible at that time (later
    /// invocations dropped, later responses turned pending).
    fn new(ops: &[&Operation], initial: Option<&Value>, cut: Option<u64>) -> KeyProblem {
        let mut interner = Interner::default();
        let initial = initial.map_or(0, |v| interner.id(v));
        let mut kops = Vec::new();
        let mut times = Vec::new();
        for o in ops {
            let limit = cut.unwrap_or(u64::MAX);
            if o.invoke > limit {
                continue;
            }
            let response = o.response.as_ref().filter(|r| r.at <= limit);
            if response.is_none() && o.op.is_read_only() {
                continue;
            }
            let kind = match &o.op {
                Op::Get => Kind::Get,
                Op::Put(v) => Kind::Put(interner.id(v)),
                Op::Insert(v) => Kind::Insert(interner.id(v)),
                Op::Update(v) => Kind::Update(interner.id(v)),
                Op::Delete => Kind::Delete,
            };
            let expect = response.map(|r| match &r.outcome {
                Outcome::Value(v) => Expect::Value(interner.id(v)),
                Outcome::NotFound => Expect::NotFound,
                Outcome::AlreadyExists => Expect::AlreadyExists,
                Outcome::Ok => Expect::Ok,
            });
            times.push((o.invoke, response.map_or(u64::MAX, |r| r.at)));
            kops.push(KOp {
                id: o.id,
                kind,
                expect,
            });
        }
        // Sort events by time; calls before returns at equal times (ties overlap).
        let mut keyed: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * kops.len());
        for (i, &(inv, ret)) in times.iter().enumerate() {
            keyed.push((inv, false, i));
            keyed.push((ret, true, i));
        }
        keyed.sort_unstable();
        KeyProblem {
            ops: kops,
            events: keyed.into_iter().map(|(_, ret, i)| (i, !ret)).collect(),
            initial,
            values: interner.values,
        }
    }

    fn value(&self, state: u32) -> Option<Value> {
        state
            .checked_sub(1)
            .and_then(|i| self.values.get(i as usize))
            .cloned()
    }

    /// Whether `op`'s recorded outcome implies it changed nothing (a read, a failed
    /// insert, update or delete).
    fn is_observer(op: &KOp) -> bool {
        matches!(
            (op.kind, op.expect),
            (Kind::Get, Some(_))
                | (Kind::Insert(_), Some(Expect::AlreadyExists))
                | (Kind::Update(_), Some(Expect::NotFound))
                | (Kind::Delete, Some(Expect::NotFound))
        )
    }

    /// A candidate observer whose outcome matches `state`, if any.
    ///
    /// Linearizing it next loses nothing: it changes no state, and nothing remaining
    /// must precede it (it is a candidate), so any linearization of the rest can be
    /// rearranged to put it first. The search takes it without branching.
    fn forced(&self, list: &List, state: u32) -> Option<usize> {
        let mut node = list.first();
        while let Some(e) = node {
            let (op_index, is_call) = list.event(e);
            if !is_call {
                return None;
            }
            let op = self.ops.get(op_index)?;
            if KeyProblem::is_observer(op) && step(state, op.kind, op.expect) == Some(state) {
                return Some(e);
            }
            node = list.next(e);
        }
        None
    }

    /// Run the search with at most `max_steps` steps; returns the result and steps used.
    fn search(&self, max_steps: u64) -> (Search, u64) {
        let n = self.ops.len();
        let mut remaining = self.ops.iter().filter(|o| o.expect.is_some()).count();
        if remaining == 0 {
            return (Search::Linearizable, 0);
        }
        let mut list = List::new(&self.events, n);
        let mut lin = Linearized::new(n);
        let mut calls: Vec<Frame> = Vec::new();
        let mut state = self.initial;
        let mut deepest: Option<(usize, Stuck)> = None;
        let mut steps = 0u64;
        let mut entry = list.first();
        // A configuration reached for the first time: take forced observers first.
        let mut fresh = true;
        loop {
            steps += 1;
            if steps > max_steps {
                return (Search::Exhausted, steps);
            }
            let mut failed = false;
            if fresh {
                fresh = false;
                if let Some(node) = self.forced(&list, state) {
                    let op_index = list.event(node).0;
                    if lin.enter(op_index, state) {
                        calls.push(Frame {
                            node,
                            previous: state,
                            forced: true,
                        });
                        list.lift(node);
                        remaining -= 1;
                        if remaining == 0 {
                            return (Search::Linearizable, steps);
                        }
                        fresh = true;
                        entry = list.first();
                        continue;
                    }
                    // Explored before and failed; so does this configuration.
                    failed = true;
                }
            }
            if !failed {
                let Some(e) = entry else {
                    // Only pending operations are left in the list; unreachable while
                    // completed operations remain, but a sound answer either way.
                    return if remaining == 0 {
                        (Search::Linearizable, steps)
                    } else {
                        (Search::Exhausted, steps)
                    };
                };
                let (op_index, is_call) = list.event(e);
                let Some(op) = self.ops.get(op_index) else {
                    return (Search::Exhausted, steps);
                };
                if is_call {
                    if let Some(next_state) = step(state, op.kind, op.expect)
                        && lin.enter(op_index, next_state)
                    {
                        calls.push(Frame {
                            node: e,
                            previous: state,
                            forced: false,
                        });
                        state = next_state;
                        list.lift(e);
                        if op.expect.is_some() {
                            remaining -= 1;
                            if remaining == 0 {
                                return (Search::Linearizable, steps);
                            }
                        }
                        fresh = true;
                        entry = list.first();
                    } else {
                        entry = list.next(e);
                    }
                    continue;
                }
                // A response: its operation had to be linearized by now.
                if deepest.as_ref().is_none_or(|(d, _)| calls.len() > *d) {
                    let linearized = calls
                        .iter()
                        .filter_map(|f| self.ops.get(list.event(f.node).0).map(|o| o.id))
                        .collect();
                    deepest = Some((
                        calls.len(),
                        Stuck {
                            linearized,
                            state: self.value(state),
                            stuck_on: op.id,
                        },
                    ));
                }
            }
            // Backtrack: undo forced steps and the last real choice, then try the
            // candidates after that choice.
            loop {
                let Some(frame) = calls.pop() else {
                    let stuck = deepest.map(|(_, s)| s).unwrap_or(Stuck {
                        linearized: Vec::new(),
                        state: self.value(self.initial),
                        stuck_on: self.ops.first().map_or(OpId(0), |o| o.id),
                    });
                    return (Search::Stuck(stuck), steps);
                };
                let undone = list.event(frame.node).0;
                lin.leave(undone);
                if self.ops.get(undone).is_some_and(|o| o.expect.is_some()) {
                    remaining += 1;
                }
                state = frame.previous;
                list.unlift(frame.node);
                if !frame.forced {
                    entry = list.next(frame.node);
                    break;
                }
            }
        }
    }
}

/// One linearized operation on the search stack.
struct Frame {
    /// The list node of its call.
    node: usize,
    /// The state before it.
    previous: u32,
    /// Taken without branching (a matching observer).
    forced: bool,
}

/// The set of linearized operations (bitset with a Zobrist hash) and the memo of
/// `(set, state)` configurations already explored.
struct Linearized {
    set: Vec<u64>,
    hash: u64,
    zobrist: Vec<u64>,
    seen: HashMap<(u64, u32), Vec<Box<[u64]>>>,
}

impl Linearized {
    fn new(n: usize) -> Linearized {
        Linearized {
            set: vec![0; n.div_ceil(64)],
            hash: 0,
            zobrist: (0..n as u64).map(splitmix64).collect(),
            seen: HashMap::new(),
        }
    }

    fn toggle(&mut self, op: usize) {
        if let Some(w) = self.set.get_mut(op / 64) {
            *w ^= 1 << (op % 64);
        }
        self.hash ^= self.zobrist.get(op).copied().unwrap_or(0);
    }

    /// Add `op`, reaching `state`; true if that configuration is new (and now
    /// recorded), false (and `op` removed again) if it was explored before.
    fn enter(&mut self, op: usize, state: u32) -> bool {
        self.toggle(op);
        let bucket = self.seen.entry((self.hash, state)).or_default();
        if bucket.iter().any(|s| **s == *self.set) {
            self.toggle(op);
            return false;
        }
        bucket.push(self.set.clone().into_boxed_slice());
        true
    }

    /// Remove `op` (backtracking).
    fn leave(&mut self, op: usize) {
        self.toggle(op);
    }
}

fn splitmix64(i: u64) -> u64 {
    let mut z = i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The doubly linked list of events the search lifts operations out of.
///
/// Node 0 is the head sentinel; node `k + 1` is event `k`. `NIL` ends the list.
/// Node numbers only ever come from the list itself, so indexing by them is in bounds.
struct List {
    prev: Vec<usize>,
    next: Vec<usize>,
    /// (op index, is_call) per node (the head's entry is unused).
    event: Vec<(usize, bool)>,
    /// For a call node, the node of its return.
    partner: Vec<usize>,
}

const NIL: usize = usize::MAX;

impl List {
    fn new(events: &[(usize, bool)], ops: usize) -> List {
        let len = events.len() + 1;
        let mut ret_node = vec![NIL; ops];
        for (k, &(op, is_call)) in events.iter().enumerate() {
            if !is_call && let Some(r) = ret_node.get_mut(op) {
                *r = k + 1;
            }
        }
        let partner = std::iter::once(NIL)
            .chain(events.iter().map(|&(op, is_call)| {
                if is_call {
                    ret_node.get(op).copied().unwrap_or(NIL)
                } else {
                    NIL
                }
            }))
            .collect();
        List {
            prev: (0..len).map(|i| i.checked_sub(1).unwrap_or(NIL)).collect(),
            next: (0..len)
                .map(|i| if i + 1 < len { i + 1 } else { NIL })
                .collect(),
            event: std::iter::once((NIL, false))
                .chain(events.iter().copied())
                .collect(),
            partner,
        }
    }

    fn first(&self) -> Option<usize> {
        self.next(0)
    }

    fn next(&self, node: usize) -> Option<usize> {
        self.next.get(node).copied().filter(|&n| n != NIL)
    }

    fn event(&self, node: usize) -> (usize, bool) {
        self.event.get(node).copied().unwrap_or((NIL, false))
    }

    fn unlink(&mut self, node: usize) {
        let (p, n) = (self.prev[node], self.next[node]);
        self.next[p] = n;
        if n != NIL {
            self.prev[n] = p;
        }
    }

    fn relink(&mut self, node: usize) {
        let (p, n) = (self.prev[node], self.next[node]);
        self.next[p] = node;
        if n != NIL {
            self.prev[n] = node;
        }
    }

    /// Remove a call and its return.
    fn lift(&mut self, call: usize) {
        self.unlink(call);
        let ret = self.partner[call];
        self.unlink(ret);
    }

    /// Put back a call and its return (reverse order of [`List::lift`]).
    fn unlift(&mut self, call: usize) {
        let ret = self.partner[call];
        self.relink(ret);
        self.relink(call);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Response;

    fn v(s: &str) -> Value {
        s.as_bytes().to_vec()
    }

    /// One operation of a test history: (client, op, invoke, response).
    type Spec = (u64, Op, u64, Option<(u64, Outcome)>);

    fn hist(ops: &[Spec]) -> History {
        let mut h = History::new();
        for (client, op, inv, resp) in ops {
            h.record(*client, "k", op.clone(), *inv, resp.clone())
                .unwrap();
        }
        h
    }

    fn verdict(h: &History) -> Report {
        check(h, &Config::default()).unwrap()
    }

    fn violation(h: &History) -> Violation {
        match verdict(h).verdict {
            Verdict::Violation(v) => *v,
            other => panic!("expected a violation, got {other:?}"),
        }
    }

    use Op::{Delete, Get, Insert, Put, Update};
    use Outcome::{AlreadyExists, NotFound, Ok as Done, Value as Val};

    #[test]
    fn empty_and_trivial_histories() {
        assert!(verdict(&History::new()).is_linearizable());
        let h = hist(&[(0, Get, 0, Some((1, NotFound)))]);
        assert!(verdict(&h).is_linearizable());
        let h = hist(&[(0, Get, 0, Some((1, Val(v("x")))))]);
        assert!(verdict(&h).is_violation());
    }

    #[test]
    fn stale_read_after_completed_write() {
        let h = hist(&[
            (0, Put(v("a")), 0, Some((10, Done))),
            (1, Get, 20, Some((30, NotFound))),
        ]);
        let x = violation(&h);
        assert_eq!(x.culprit.id, OpId(1));
        assert_eq!(x.prefix_end, 30);
        assert_eq!(x.linearized, vec![OpId(0)]);
        assert_eq!(x.state, Some(v("a")));
        let text = x.to_string();
        assert!(
            text.contains("operation #1 (get -> NotFound) cannot be linearized"),
            "{text}"
        );

        let h = hist(&[
            (0, Put(v("a")), 0, Some((10, Done))),
            (0, Put(v("b")), 20, Some((30, Done))),
            (1, Get, 40, Some((50, Val(v("a"))))),
        ]);
        assert_eq!(violation(&h).culprit.id, OpId(2));
    }

    #[test]
    fn lost_update() {
        // Both updates completed, yet a later read sees neither.
        let h = hist(&[
            (0, Put(v("a")), 0, Some((10, Done))),
            (1, Update(v("b")), 20, Some((30, Done))),
            (2, Update(v("c")), 25, Some((35, Done))),
            (3, Get, 40, Some((50, Val(v("a"))))),
        ]);
        assert_eq!(violation(&h).culprit.id, OpId(3));
        // Reads flip between the two updates with no write in between: one was lost and came back.
        let h = hist(&[
            (0, Put(v("a")), 0, Some((10, Done))),
            (1, Update(v("b")), 20, Some((30, Done))),
            (2, Update(v("c")), 25, Some((35, Done))),
            (3, Get, 40, Some((50, Val(v("b"))))),
            (3, Get, 60, Some((70, Val(v("c"))))),
        ]);
        let x = violation(&h);
        assert_eq!(x.culprit.id, OpId(4));
        assert_eq!(x.prefix_end, 70);
        println!("{x}");
    }

    #[test]
    fn read_of_a_value_never_written() {
        let h = hist(&[
            (0, Put(v("a")), 0, Some((10, Done))),
            (1, Get, 5, Some((15, Val(v("zzz"))))),
        ]);
        let x = violation(&h);
        assert_eq!(x.culprit.id, OpId(1));
        assert_eq!(x.prefix_end, 15);
    }

    #[test]
    fn insert_succeeding_twice() {
        let h = hist(&[
            (0, Insert(v("a")), 0, Some((10, Done))),
            (1, Insert(v("b")), 20, Some((30, Done))),
        ]);
        assert_eq!(violation(&h).culprit.id, OpId(1));
        // Even when concurrent, only one insert can win.
        let h = hist(&[
            (0, Insert(v("a")), 0, Some((10, Done))),
            (1, Insert(v("b")), 5, Some((15, Done))),
        ]);
        assert!(verdict(&h).is_violation());
        // With a delete in between, both can.
        let h = hist(&[
            (0, Insert(v("a")), 0, Some((10, Done))),
            (2, Delete, 12, Some((14, Done))),
            (1, Insert(v("b")), 20, Some((30, Done))),
            (1, Insert(v("c")), 40, Some((50, AlreadyExists))),
            (1, Get, 60, Some((70, Val(v("b"))))),
        ]);
        assert!(verdict(&h).is_linearizable());
    }

    #[test]
    fn concurrent_overlapping_ops_that_are_fine() {
        // A slow put overlaps reads that see the old then the new value.
        let h = hist(&[
            (0, Put(v("a")), 0, Some((100, Done))),
            (1, Get, 10, Some((20, NotFound))),
            (2, Get, 30, Some((40, Val(v("a"))))),
            (1, Get, 50, Some((60, Val(v("a"))))),
        ]);
        assert!(verdict(&h).is_linearizable());
        // Racing inserts: one wins, the loser sees it, reads agree with the winner.
        let h = hist(&[
            (0, Insert(v("a")), 0, Some((50, AlreadyExists))),
            (1, Insert(v("b")), 10, Some((40, Done))),
            (2, Get, 20, Some((30, Val(v("b"))))),
            (2, Update(v("c")), 45, Some((55, Done))),
            (3, Get, 41, Some((60, Val(v("b"))))),
            (0, Delete, 70, Some((80, Done))),
            (1, Delete, 75, Some((85, NotFound))),
        ]);
        assert!(verdict(&h).is_linearizable());
    }

    #[test]
    fn new_old_inversion_is_rejected() {
        let h = hist(&[
            (0, Put(v("a")), 0, Some((100, Done))),
            (2, Get, 30, Some((40, Val(v("a"))))),
            (1, Get, 50, Some((60, NotFound))),
        ]);
        assert_eq!(violation(&h).culprit.id, OpId(2));
    }

    #[test]
    fn touching_intervals_count_as_concurrent() {
        let h = hist(&[
            (0, Put(v("a")), 0, Some((10, Done))),
            (1, Get, 10, Some((20, NotFound))),
        ]);
        assert!(verdict(&h).is_linearizable());
    }

    #[test]
    fn pending_operations_may_or_may_not_take_effect() {
        // Took effect (seen later).
        let h = hist(&[
            (0, Put(v("a")), 0, None),
            (1, Get, 10, Some((20, NotFound))),
            (1, Get, 30, Some((40, Val(v("a"))))),
        ]);
        assert!(verdict(&h).is_linearizable());
        // Never took effect.
        let h = hist(&[
            (0, Put(v("a")), 0, None),
            (1, Get, 100, Some((110, NotFound))),
        ]);
        assert!(verdict(&h).is_linearizable());
        // But once seen, it cannot be undone.
        let h = hist(&[
            (0, Put(v("a")), 0, None),
            (1, Get, 10, Some((20, Val(v("a"))))),
            (1, Get, 30, Some((40, NotFound))),
        ]);
        assert_eq!(violation(&h).culprit.id, OpId(2));
        // A pending op cannot take effect before it was invoked.
        let h = hist(&[
            (1, Get, 10, Some((20, Val(v("a"))))),
            (0, Put(v("a")), 30, None),
        ]);
        assert!(verdict(&h).is_violation());
    }

    #[test]
    fn initial_values() {
        let mut h = hist(&[(0, Get, 0, Some((1, Val(v("x")))))]);
        h.set_initial("k", "x");
        assert!(verdict(&h).is_linearizable());
        let mut h = hist(&[(0, Insert(v("y")), 0, Some((1, Done)))]);
        h.set_initial("k", "x");
        assert!(verdict(&h).is_violation());
    }

    #[test]
    fn keys_are_checked_separately() {
        let mut h = History::new();
        h.record(0, "a", Put(v("1")), 0, Some((10, Done))).unwrap();
        h.record(0, "b", Put(v("1")), 0, Some((10, Done))).unwrap();
        h.record(1, "a", Get, 20, Some((30, Val(v("1"))))).unwrap();
        h.record(1, "b", Get, 20, Some((30, NotFound))).unwrap();
        let r = check(&h, &Config::default()).unwrap();
        assert_eq!(r.keys, 2);
        match r.verdict {
            Verdict::Violation(x) => assert_eq!(x.key, v("b")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn minimal_prefix_ends_at_the_first_unexplainable_response() {
        let mut ops = vec![
            (0, Put(v("a")), 0, Some((10, Done))),
            (1, Get, 20, Some((30, NotFound))),
        ];
        for i in 0..50u64 {
            ops.push((
                2,
                Put(v(&format!("x{i}"))),
                100 + 20 * i,
                Some((110 + 20 * i, Done)),
            ));
        }
        let x = violation(&hist(&ops));
        assert_eq!(x.prefix_end, 30);
        assert_eq!(x.prefix.len(), 2);
        // Without bisection the whole history is the prefix.
        let r = check(
            &hist(&ops),
            &Config {
                minimize: false,
                ..Config::default()
            },
        )
        .unwrap();
        match r.verdict {
            Verdict::Violation(x) => assert_eq!(x.prefix.len(), 52),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn budget_exhaustion_is_unknown() {
        let mut ops = Vec::new();
        for i in 0..20u64 {
            ops.push((i, Put(v(&format!("{i}"))), 0, Some((100, Done))));
        }
        ops.push((99, Get, 200, Some((210, Val(v("7"))))));
        let h = hist(&ops);
        let r = check(
            &h,
            &Config {
                max_steps: 5,
                minimize: true,
            },
        )
        .unwrap();
        assert!(
            matches!(r.verdict, Verdict::Unknown { ref key, .. } if key == b"k"),
            "{r:?}"
        );
        assert!(verdict(&h).is_linearizable());
    }

    #[test]
    fn malformed_histories_are_errors() {
        let mut h = hist(&[(0, Put(v("a")), 10, Some((20, Done)))]);
        h.set_response(
            OpId(0),
            Some(Response {
                at: 5,
                outcome: Done,
            }),
        )
        .unwrap();
        assert!(check(&h, &Config::default()).is_err());
    }
}
