//! Finishing an operation whose queue pair failed under it.
//!
//! Every table operation runs as attempts. While an attempt is polled its
//! [`OpJournal`] is installed in the session's routes, which record the memory nodes
//! it posted to (or needed) and whether it posted anything but READs. When an
//! attempt fails and a memory node it used has no usable queue pair any more
//! (failed, idle-reclaimed, or never reached), the operation:
//!
//! - **is retried** once that node has a new queue pair, if that is safe: reads
//!   always, writes when the attempt posted no WRITE, CAS or FAA (nothing it did
//!   can have taken effect);
//! - otherwise fails with [`KvError::OutcomeUnknown`]: a write was sent and its
//!   queue pair failed before it was acknowledged.
//!
//! Reconnection is bounded by [`ReconnectOptions::timeout`](crate::ReconnectOptions)
//! from the first failure; past it the operation fails with `Unavailable`
//! (nothing happened) or `OutcomeUnknown`.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;

use verbs::wr::CompletionError;

use crate::error::{Cause, KvError};
use crate::fabric::{OpJournal, SharedRoutes};
use crate::session::SessionCore;

/// Most attempts of one operation (each after a queue pair it used was replaced).
const MAX_ATTEMPTS: u32 = 16;
/// How often an operation on a replicated table that lost a memnode asks whether
/// the table failed over (or the node came back).
const FOLLOW_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// What repeating an operation's attempt may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replay {
    /// A read: repeating it is always safe.
    Read,
    /// A write (`put`, `insert`, …): repeating it is safe only if the failed attempt
    /// sent nothing but READs.
    Write(&'static str),
}

/// A future polled with its operation's journal installed in the session's routes.
struct Journaled<F> {
    routes: SharedRoutes,
    journal: Rc<OpJournal>,
    inner: Pin<Box<F>>,
}

impl<F: Future> Future for Journaled<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let outer = this.routes.borrow_mut().enter(Some(this.journal.clone()));
        let r = this.inner.as_mut().poll(cx);
        this.routes.borrow_mut().enter(outer);
        r
    }
}

/// Whether `e` answers the operation whatever happened to the queue pairs.
fn definite(e: &KvError) -> bool {
    !matches!(
        e,
        KvError::Unavailable(_) | KvError::Corrupt(_) | KvError::NotFound
    )
}

/// Run `attempt` until it succeeds, fails for a reason other than a lost queue
/// pair, or may not be repeated (see the [module documentation](self)). `key`
/// names the operation's key in errors.
///
/// `follow` is for replicated tables: it asks the metadata service whether the
/// table's replica sets changed (a failed memnode was taken out of them) and
/// answers `true` when they did; then the operation is repeated at once on the new
/// members instead of waiting for the lost node to come back.
pub(crate) async fn recover<T, F, Fut>(
    core: &SessionCore,
    replay: Replay,
    key: &[u8],
    follow: Option<&dyn Fn() -> bool>,
    mut attempt: F,
) -> Result<T, KvError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, KvError>>,
{
    let mut deadline = None;
    let mut attempts = 0u32;
    let mut regranted = false;
    loop {
        attempts += 1;
        let reconnects_before = core.links.reconnector().reconnects();
        let journal = Rc::new(OpJournal::default());
        let result = Journaled {
            routes: core.links.routes().clone(),
            journal: journal.clone(),
            inner: Box::pin(attempt()),
        }
        .await;
        let error = match result {
            Ok(v) => return Ok(v),
            Err(e) if definite(&e) => return Err(e),
            Err(e) => e,
        };
        // A write refused because its queue pair was made after the attempt
        // confirmed the table's configuration (see `Routes::limit_writes`): repeat
        // it, asking for the configuration again, unless part of it was sent.
        if journal.refused() {
            if let Replay::Write(op) = replay
                && journal.wrote()
            {
                let message = format!(
                    "the {op} of key \"{}\" may or may not have taken effect: a queue pair \
                     it used was replaced while it ran ({error})",
                    key.escape_ascii()
                );
                return Err(KvError::OutcomeUnknown(Cause::caused_by(message, error)));
            }
            if attempts < MAX_ATTEMPTS {
                continue;
            }
            return Err(error);
        }
        // Memory another session leased for a table since this session's queue pairs
        // got their grants is refused (remote access error) until fresh grants cover
        // it: fetch them and repeat the attempt once, if repeating it is safe.
        if !regranted
            && refused_by_scope(&error)
            && core.links.reconnector().holds_grants()
            && !(matches!(replay, Replay::Write(_)) && journal.wrote())
        {
            regranted = true;
            core.links
                .reconnector()
                .refresh_grants(true, Instant::now());
            continue;
        }
        // A queue pair replaced while the attempt ran (by another operation of this
        // session) serves the node's current memory: requests the attempt had resolved
        // under the region of the queue pair before it — a node that restarted with new
        // memory has new keys — are refused with a remote access error. Nothing failed
        // but the attempt's view: repeat it if that is safe.
        if refused_by_scope(&error) && core.links.reconnector().reconnects() != reconnects_before {
            if let Replay::Write(op) = replay
                && journal.wrote()
            {
                let message = format!(
                    "the {op} of key \"{}\" may or may not have taken effect: part of it was \
                     refused under the keys of a queue pair replaced meanwhile ({error})",
                    key.escape_ascii()
                );
                return Err(KvError::OutcomeUnknown(Cause::caused_by(message, error)));
            }
            if attempts < MAX_ATTEMPTS {
                tracing::debug!(
                    attempt = attempts + 1,
                    "repeating an operation refused under the keys of a replaced queue pair"
                );
                continue;
            }
            return Err(error);
        }
        let lost = core.links.not_ready(&journal.touched());
        if lost.is_empty() {
            // A replicated table whose configuration changed under an attempt
            // that wrote nothing: repeat it on the new configuration.
            if let Some(changed) = follow
                && !journal.wrote()
                && attempts < MAX_ATTEMPTS
                && changed()
            {
                continue;
            }
            return Err(error);
        }
        if let Replay::Write(op) = replay
            && journal.wrote()
        {
            return Err(outcome_unknown(op, key, &lost, error));
        }
        if attempts >= MAX_ATTEMPTS {
            return Err(error);
        }
        let deadline = *deadline.get_or_insert_with(|| {
            Instant::now() + core.client.options.connection.reconnect.timeout
        });
        match follow {
            None => {
                for memnode in lost {
                    core.links.wait_ready(memnode, deadline).await?;
                }
            }
            Some(changed) => loop {
                if changed() || lost.iter().all(|&m| core.links.ready(m).is_ok()) {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(error);
                }
                core.worker.sleep(FOLLOW_POLL).await;
            },
        }
        tracing::debug!(
            attempt = attempts + 1,
            "repeating an operation after replacing a queue pair"
        );
    }
}

/// Whether `e` comes from a request the memory node refused as outside the queue
/// pair's scope (NAK remote access error).
fn refused_by_scope(e: &KvError) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.downcast_ref::<CompletionError>() == Some(&CompletionError::RemoteAccess) {
            return true;
        }
        cause = c.source();
    }
    false
}

fn outcome_unknown(op: &str, key: &[u8], lost: &[u64], error: KvError) -> KvError {
    let nodes = lost
        .iter()
        .map(|m| format!("memnode {m}"))
        .collect::<Vec<_>>()
        .join(", ");
    let message = format!(
        "the {op} of key \"{}\" may or may not have taken effect: {nodes}'s queue pair \
         failed after the write was sent ({error})",
        key.escape_ascii()
    );
    KvError::OutcomeUnknown(Cause::caused_by(message, error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_that_a_lost_queue_pair_can_explain_are_recovered() {
        assert!(definite(&KvError::AlreadyExists));
        assert!(definite(&KvError::Contended { attempts: 3 }));
        assert!(definite(&KvError::InvalidArgument("x".into())));
        assert!(!definite(&KvError::unavailable("x")));
        assert!(!definite(&KvError::corrupt("x")));
        // A node that could not be read looks like a missing key.
        assert!(!definite(&KvError::NotFound));
    }

    #[test]
    fn outcome_unknown_names_the_operation_key_and_node() {
        let e = outcome_unknown(
            "put",
            b"k\x01",
            &[2],
            KvError::unavailable("memory node: transport retry counter exceeded"),
        );
        assert_eq!(e.kind(), "outcome_unknown");
        let text = e.to_string();
        assert!(text.contains("the put of key \"k\\x01\" may or may not have taken effect"));
        assert!(text.contains("memnode 2's queue pair failed after the write was sent"));
        assert!(std::error::Error::source(&e).is_some());
    }
}
