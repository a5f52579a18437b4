//! Randomized tests of the linearizability checker: histories generated from the
//! sequential model must be accepted, corrupted ones rejected, and on small
//! histories the checker must agree with brute force.

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::time::Instant;
use testbed::history::{History, Op, OpId, Outcome, Response, Value};
use testbed::lincheck::{Config, Verdict, check};

/// Apply `op` to the sequential model; returns the outcome.
fn apply(state: &mut Option<Value>, op: &Op) -> Outcome {
    match (op, state.is_some()) {
        (Op::Get, _) => state.clone().map_or(Outcome::NotFound, Outcome::Value),
        (Op::Put(v), _) => {
            *state = Some(v.clone());
            Outcome::Ok
        }
        (Op::Insert(_), true) => Outcome::AlreadyExists,
        (Op::Insert(v), false) | (Op::Update(v), true) => {
            *state = Some(v.clone());
            Outcome::Ok
        }
        (Op::Update(_), false) | (Op::Delete, false) => Outcome::NotFound,
        (Op::Delete, true) => {
            *state = None;
            Outcome::Ok
        }
    }
}

struct GenConfig {
    ops: usize,
    keys: usize,
    /// Half-width of an operation's interval around its linearization point, in
    /// units of the spacing between linearization points (about twice this many
    /// operations overlap).
    spread: u64,
    /// Probability that an operation gets no response.
    pending: f64,
    /// Values are unique per write (else drawn from a small pool).
    unique_values: bool,
}

/// Operations take effect at increasing linearization points; each one's
/// interval is stretched randomly around its point. Pending operations take
/// effect with probability one half.
fn generate(rng: &mut StdRng, g: &GenConfig) -> History {
    let mut h = History::new();
    let mut states: HashMap<Vec<u8>, Option<Value>> = HashMap::new();
    const SPACING: u64 = 10;
    for i in 0..g.ops {
        let key = format!("key{}", rng.random_range(0..g.keys)).into_bytes();
        let value = if g.unique_values {
            format!("v{i}").into_bytes()
        } else {
            format!("p{}", rng.random_range(0..3)).into_bytes()
        };
        let op = match rng.random_range(0..100) {
            0..40 => Op::Get,
            40..60 => Op::Put(value),
            60..75 => Op::Insert(value),
            75..90 => Op::Update(value),
            _ => Op::Delete,
        };
        let point = 1_000 + SPACING * i as u64;
        let before = rng.random_range(0..=g.spread * SPACING);
        let after = rng.random_range(0..=g.spread * SPACING);
        let state = states.entry(key.clone()).or_default();
        if rng.random_bool(g.pending) {
            if rng.random_bool(0.5) {
                apply(state, &op);
            }
            h.record(i as u64, key, op, point - before, None).unwrap();
        } else {
            let outcome = apply(state, &op);
            h.record(
                i as u64,
                key,
                op,
                point - before,
                Some((point + after, outcome)),
            )
            .unwrap();
        }
    }
    h
}

fn verdict(h: &History) -> Verdict {
    check(h, &Config::default()).unwrap().verdict
}

#[test]
fn random_histories_are_accepted() {
    for seed in 0..60 {
        let mut rng = StdRng::seed_from_u64(seed);
        let g = GenConfig {
            ops: 300,
            keys: 1 + (seed as usize % 4),
            spread: 1 + seed % 8,
            pending: if seed % 3 == 0 { 0.03 } else { 0.0 },
            unique_values: seed % 2 == 0,
        };
        let h = generate(&mut rng, &g);
        let v = verdict(&h);
        assert_eq!(v, Verdict::Linearizable, "seed {seed}");
    }
}

#[test]
fn corrupted_reads_are_rejected() {
    let mut rejected = 0;
    for seed in 0..60 {
        let mut rng = StdRng::seed_from_u64(1000 + seed);
        let g = GenConfig {
            ops: 200,
            keys: 2,
            spread: 1 + seed % 6,
            pending: if seed % 3 == 0 { 0.03 } else { 0.0 },
            unique_values: true,
        };
        let mut h = generate(&mut rng, &g);
        let gets: Vec<OpId> = h
            .ops()
            .iter()
            .filter(|o| o.op == Op::Get && !o.is_pending())
            .map(|o| o.id)
            .collect();
        let victim = gets[rng.random_range(0..gets.len())];
        let original = h.op(victim).unwrap().clone();
        let at = original.response.as_ref().unwrap().at;

        // A value nobody wrote.
        h.set_response(
            victim,
            Some(Response {
                at,
                outcome: Outcome::Value(b"never".to_vec()),
            }),
        )
        .unwrap();
        match verdict(&h) {
            Verdict::Violation(x) => {
                assert_eq!(x.key, original.key, "seed {seed}");
                assert_eq!(x.culprit.id, victim, "seed {seed}: {x}");
            }
            other => panic!("seed {seed}: never-written value accepted: {other:?}"),
        }

        // A value from the future: written by an operation invoked after the read returned.
        let future = h.ops().iter().find(|o| {
            o.key == original.key
                && o.invoke > at
                && matches!(o.op, Op::Put(_) | Op::Insert(_) | Op::Update(_))
        });
        if let Some(w) = future {
            let value = match &w.op {
                Op::Put(v) | Op::Insert(v) | Op::Update(v) => v.clone(),
                _ => unreachable!(),
            };
            h.set_response(
                victim,
                Some(Response {
                    at,
                    outcome: Outcome::Value(value),
                }),
            )
            .unwrap();
            assert!(
                matches!(verdict(&h), Verdict::Violation(_)),
                "seed {seed}: read from the future accepted"
            );
            rejected += 1;
        }
    }
    assert!(rejected > 30, "too few future-read cases: {rejected}");
}

/// All orders of the completed operations plus any subset of the pending ones that
/// respect real time (an operation that returned before another was invoked comes
/// first; equal times overlap) and the sequential specification.
fn brute_force(h: &History) -> bool {
    let ops = h.ops();
    let n = ops.len();
    fn go(h: &History, done: &mut Vec<bool>, state: Option<Value>, left_completed: usize) -> bool {
        if left_completed == 0 {
            return true;
        }
        let ops = h.ops();
        for (i, o) in ops.iter().enumerate() {
            if done[i] {
                continue;
            }
            // o may go next only if no other remaining op returned before o was invoked.
            let blocked = ops.iter().enumerate().any(|(j, p)| {
                j != i && !done[j] && p.response.as_ref().is_some_and(|r| r.at < o.invoke)
            });
            if blocked {
                continue;
            }
            let mut next = state.clone();
            let outcome = apply(&mut next, &o.op);
            if o.response.as_ref().is_some_and(|r| r.outcome != outcome) {
                continue;
            }
            done[i] = true;
            let left = left_completed - usize::from(o.response.is_some());
            let ok = go(h, done, next, left);
            done[i] = false;
            if ok {
                return true;
            }
        }
        false
    }
    let completed = ops.iter().filter(|o| o.response.is_some()).count();
    go(h, &mut vec![false; n], h.initial(b"k").cloned(), completed)
}

fn small_history() -> impl Strategy<Value = History> {
    let op = prop_oneof![
        Just(Op::Get),
        (0u8..2).prop_map(|v| Op::Put(vec![b'a' + v])),
        (0u8..2).prop_map(|v| Op::Insert(vec![b'a' + v])),
        (0u8..2).prop_map(|v| Op::Update(vec![b'a' + v])),
        Just(Op::Delete),
    ];
    let outcome_pick = 0u8..4;
    let one = (op, 0u64..40, 0u64..20, outcome_pick, 0u8..8);
    proptest::collection::vec(one, 1..9).prop_map(|specs| {
        let mut h = History::new();
        for (i, (op, inv, len, pick, pend)) in specs.into_iter().enumerate() {
            let choices: Vec<Outcome> = match &op {
                Op::Get => vec![
                    Outcome::NotFound,
                    Outcome::Value(b"a".to_vec()),
                    Outcome::Value(b"b".to_vec()),
                ],
                Op::Put(_) => vec![Outcome::Ok],
                Op::Insert(_) => vec![Outcome::Ok, Outcome::AlreadyExists],
                Op::Update(_) | Op::Delete => vec![Outcome::Ok, Outcome::NotFound],
            };
            let outcome = choices[usize::from(pick) % choices.len()].clone();
            let response = (pend != 0).then_some((inv + len, outcome));
            h.record(i as u64, "k", op, inv, response).unwrap();
        }
        h
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// On small random histories (mostly not linearizable) the checker agrees with brute force.
    #[test]
    fn agrees_with_brute_force(h in small_history()) {
        let expected = brute_force(&h);
        let got = verdict(&h);
        match got {
            Verdict::Linearizable => prop_assert!(expected, "accepted a non-linearizable history: {h:#?}"),
            Verdict::Violation(ref x) => prop_assert!(!expected, "rejected a linearizable history:\n{x}"),
            Verdict::Unknown { .. } => prop_assert!(false, "budget exhausted on {} ops", h.len()),
        }
    }
}

fn sequential_ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        Just(Op::Get),
        (0u8..3).prop_map(|v| Op::Put(vec![v])),
        (0u8..3).prop_map(|v| Op::Insert(vec![v])),
        (0u8..3).prop_map(|v| Op::Update(vec![v])),
        Just(Op::Delete),
    ];
    proptest::collection::vec(op, 1..60)
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// Sequential histories from the model are accepted; changing any one outcome
    /// to another the operation could return is rejected (without overlap there is
    /// only one candidate order).
    #[test]
    fn sequential_histories(ops in sequential_ops(), victim: prop::sample::Index, pick: u8) {
        let mut h = History::new();
        let mut state = None;
        for (i, op) in ops.iter().enumerate() {
            let outcome = apply(&mut state, op);
            let t = 10 * i as u64;
            h.record(0, "k", op.clone(), t, Some((t + 5, outcome))).unwrap();
        }
        prop_assert_eq!(verdict(&h), Verdict::Linearizable);

        let id = OpId(victim.index(h.len()));
        let o = h.op(id).unwrap().clone();
        let r = o.response.clone().unwrap();
        let alternatives: Vec<Outcome> = [
            Outcome::Ok,
            Outcome::NotFound,
            Outcome::AlreadyExists,
            Outcome::Value(vec![0]),
            Outcome::Value(vec![1]),
            Outcome::Value(vec![2]),
        ]
        .into_iter()
        .filter(|c| o.op.admits(c) && *c != r.outcome)
        .collect();
        if !alternatives.is_empty() {
            let outcome = alternatives[usize::from(pick) % alternatives.len()].clone();
            h.set_response(id, Some(Response { at: r.at, outcome })).unwrap();
            match verdict(&h) {
                Verdict::Violation(x) => prop_assert_eq!(x.culprit.id, id),
                other => prop_assert!(false, "corrupted sequential history not rejected: {:?}", other),
            }
        }
    }
}

/// Thousands of operations on a few hot keys with up to ~16 in flight check quickly.
#[test]
fn thousands_of_ops_on_hot_keys() {
    for (seed, pending) in [(7u64, 0.0), (8, 0.005), (9, 0.01)] {
        let mut rng = StdRng::seed_from_u64(seed);
        let g = GenConfig {
            ops: 6000,
            keys: 3,
            spread: 8,
            pending,
            unique_values: seed % 2 == 0,
        };
        let h = generate(&mut rng, &g);
        let start = Instant::now();
        let report = check(&h, &Config::default()).unwrap();
        let took = start.elapsed();
        println!(
            "seed {seed}: {} ops, pending rate {pending}: {:?}, {} steps, {took:?}",
            h.len(),
            report.verdict,
            report.steps
        );
        assert_eq!(report.verdict, Verdict::Linearizable, "seed {seed}");
    }
}

/// The same, with a stale read planted near the end: found and explained.
#[test]
fn thousands_of_ops_with_one_stale_read() {
    let mut rng = StdRng::seed_from_u64(11);
    let g = GenConfig {
        ops: 6000,
        keys: 3,
        spread: 8,
        pending: 0.0,
        unique_values: true,
    };
    let mut h = generate(&mut rng, &g);
    // The last completed get of some key: make it return a value overwritten long ago.
    let victim = h
        .ops()
        .iter()
        .rev()
        .find(|o| o.op == Op::Get)
        .unwrap()
        .clone();
    let old = h
        .ops()
        .iter()
        .find(|o| o.key == victim.key && matches!(o.op, Op::Put(_)))
        .and_then(|o| match &o.op {
            Op::Put(v) => Some(v.clone()),
            _ => None,
        })
        .unwrap();
    let at = victim.response.as_ref().unwrap().at;
    h.set_response(
        victim.id,
        Some(Response {
            at,
            outcome: Outcome::Value(old),
        }),
    )
    .unwrap();
    let start = Instant::now();
    let report = check(&h, &Config::default()).unwrap();
    println!("{} steps in {:?}", report.steps, start.elapsed());
    match report.verdict {
        Verdict::Violation(x) => {
            assert_eq!(x.culprit.id, victim.id);
            assert!(x.prefix.len() > 100);
        }
        other => panic!("stale read not found: {other:?}"),
    }
}
