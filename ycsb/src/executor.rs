//! A tiny single-thread executor: enough to run a thread's M operation loops.
//!
//! [`block_on`] polls one root future (the driver's [`join_all`] of the loops, which re-polls
//! every unfinished loop) until it is ready. When a poll makes no progress it calls the *idle
//! hook* with the earliest [`sleep_until`] deadline: the default [`park_idle`] parks the thread
//! until a waker fires or the deadline passes; a binding with a socket can instead use the hook to
//! flush its pipelined requests and read replies (see the redis binding), so its operation futures
//! need no wakers at all: the next poll round finds their replies.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Instant;

/// A future that runs on the thread that created it.
pub type LocalBoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

thread_local! {
    static NEXT_DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

struct Flag {
    woken: AtomicBool,
    thread: Thread,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// The default idle hook: park until woken or until the deadline.
pub fn park_idle(deadline: Option<Instant>) {
    match deadline {
        Some(d) => {
            let now = Instant::now();
            if d > now {
                std::thread::park_timeout(d - now);
            }
        }
        None => std::thread::park(),
    }
}

/// Run `fut` to completion on this thread; `idle` is called whenever a poll made no progress.
pub fn block_on<T>(fut: impl Future<Output = T>, idle: &mut dyn FnMut(Option<Instant>)) -> T {
    let mut fut = std::pin::pin!(fut);
    let flag = Arc::new(Flag {
        woken: AtomicBool::new(false),
        thread: std::thread::current(),
    });
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        flag.woken.store(false, Ordering::Release);
        NEXT_DEADLINE.with(|d| d.set(None));
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        if flag.woken.load(Ordering::Acquire) {
            continue;
        }
        let deadline = NEXT_DEADLINE.with(|d| d.get());
        if deadline.is_some_and(|d| d <= Instant::now()) {
            continue;
        }
        idle(deadline);
    }
}

/// Poll `fut` once and return, with the outcome, the earliest [`sleep_until`] deadline its
/// pending sleeps registered during the poll. A binding that runs the driver's loops on another
/// executor (one that only re-polls when woken) uses this to arm a timer of its own for that
/// deadline, so throttled loops and insertion retries wake up on time.
pub fn poll_with_deadline<F: Future + ?Sized>(
    fut: Pin<&mut F>,
    cx: &mut Context<'_>,
) -> (Poll<F::Output>, Option<Instant>) {
    let saved = NEXT_DEADLINE.with(|d| d.replace(None));
    let poll = fut.poll(cx);
    let deadline = NEXT_DEADLINE.with(|d| d.replace(saved));
    (poll, deadline)
}

/// A future that completes at `deadline` (under [`block_on`], or an executor that polls with
/// [`poll_with_deadline`] and honours the deadline).
pub fn sleep_until(deadline: Instant) -> SleepUntil {
    SleepUntil { deadline }
}

pub struct SleepUntil {
    deadline: Instant,
}

impl Future for SleepUntil {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        let d = self.deadline;
        NEXT_DEADLINE.with(|n| n.set(Some(n.get().map_or(d, |x| x.min(d)))));
        Poll::Pending
    }
}

/// Poll all `futs` each round until every one has finished.
pub fn join_all(futs: Vec<LocalBoxFuture<'_, ()>>) -> JoinAll<'_> {
    JoinAll {
        futs: futs.into_iter().map(Some).collect(),
    }
}

pub struct JoinAll<'a> {
    futs: Vec<Option<LocalBoxFuture<'a, ()>>>,
}

impl Future for JoinAll<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut pending = false;
        for slot in self.futs.iter_mut() {
            if let Some(f) = slot {
                if f.as_mut().poll(cx).is_ready() {
                    *slot = None;
                } else {
                    pending = true;
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn runs_loops_with_sleeps() {
        let start = Instant::now();
        let counter = Cell::new(0);
        let loops: Vec<LocalBoxFuture<'_, ()>> = (0..4)
            .map(|i| {
                let counter = &counter;
                Box::pin(async move {
                    for k in 0..3 {
                        sleep_until(start + Duration::from_millis(2 * (k + i))).await;
                        counter.set(counter.get() + 1);
                    }
                }) as LocalBoxFuture<'_, ()>
            })
            .collect();
        block_on(join_all(loops), &mut park_idle);
        assert_eq!(counter.get(), 12);
        assert!(start.elapsed() >= Duration::from_millis(10));
    }
}
