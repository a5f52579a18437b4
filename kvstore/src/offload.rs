//! Running a blocking call on another thread and awaiting its result, so a
//! session's other tasks keep running while one of them waits for the metadata
//! service.
//!
//! A session's tasks share one thread. The metadata client is a blocking HTTP
//! client; called inline it would stop every task of the session for a whole
//! HTTP exchange (a Clover table loading new keys with eight operations in flight
//! would create one key at a time). [`off_thread`] runs the call on a short-lived
//! thread and wakes the waiting task when the answer is in; the worker notices
//! the wake within its idle wait (at most a millisecond).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// The result slot shared by the calling task and the thread.
struct Slot<T> {
    result: Option<T>,
    waker: Option<Waker>,
}

/// The future returned by [`off_thread`].
pub(crate) struct OffThread<T> {
    slot: Arc<Mutex<Slot<T>>>,
}

impl<T> Future for OffThread<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut slot = match self.slot.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        match slot.result.take() {
            Some(v) => Poll::Ready(v),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Run `f` on a new thread named `name`, inside the caller's current span (so that
/// the metadata calls of an operation are traced as its children); the future
/// resolves to its result. When no thread can be started, `f` runs inline (the
/// caller's thread blocks, as it would have without offloading).
pub(crate) fn off_thread<T, F>(name: &str, f: F) -> OffThread<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let slot = Arc::new(Mutex::new(Slot {
        result: None,
        waker: None,
    }));
    let shared = slot.clone();
    // The closure is handed to the thread through a cell so that, if the thread
    // cannot be started, it can still be run here.
    let job = Arc::new(Mutex::new(Some(f)));
    let job_for_thread = job.clone();
    let span = tracing::Span::current();
    let spawned = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let f = match job_for_thread.lock() {
                Ok(mut j) => j.take(),
                Err(poisoned) => poisoned.into_inner().take(),
            };
            if let Some(f) = f {
                deliver(&shared, span.in_scope(f));
            }
        });
    if spawned.is_err() {
        let f = match job.lock() {
            Ok(mut j) => j.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(f) = f {
            deliver(&slot, f());
        }
    }
    OffThread { slot }
}

fn deliver<T>(slot: &Mutex<Slot<T>>, value: T) {
    let waker = {
        let mut s = match slot.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        s.result = Some(value);
        s.waker.take()
    };
    if let Some(w) = waker {
        w.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn other_tasks_run_while_a_call_blocks() {
        let worker = std::rc::Rc::new(verbs::worker::Worker::new(
            Box::new(verbs::transport::local::DirectTransport::local()),
            verbs::worker::WorkerConfig::default(),
        ));
        let ticks = std::rc::Rc::new(std::cell::Cell::new(0u32));
        let started = Instant::now();
        let w = worker.clone();
        let t = ticks.clone();
        let (answer, ticks_seen) = worker.block_on(async move {
            let (w2, t2) = (w.clone(), t.clone());
            w.spawn(async move {
                for _ in 0..20 {
                    t2.set(t2.get() + 1);
                    w2.sleep(Duration::from_millis(2)).await;
                }
            });
            let answer = off_thread("test-call", || {
                std::thread::sleep(Duration::from_millis(30));
                42
            })
            .await;
            (answer, t.get())
        });
        assert_eq!(answer, 42);
        assert!(
            ticks_seen >= 3,
            "the other task ran {ticks_seen} times while the call blocked"
        );
        assert!(started.elapsed() >= Duration::from_millis(30));
    }
}
