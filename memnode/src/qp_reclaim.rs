//! Reclaiming the queue pairs of clients that went away: a background thread that
//! destroys every responder queue pair which received no request for the idle
//! timeout (`--qp-idle-timeout`), so that crashed clients' queue pairs do not fill
//! the node up to `--max-qps`.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::metrics::Metrics;
use crate::qps::QpTable;

/// Shortest pause between two sweeps.
const MIN_SWEEP: Duration = Duration::from_millis(10);
/// Longest pause between two sweeps.
const MAX_SWEEP: Duration = Duration::from_secs(5);

/// The pause between sweeps for `timeout`: a quarter of it, from 10 ms to 5 s, so a
/// queue pair lives at most 1.25 timeouts after its last request.
pub fn sweep_interval(timeout: Duration) -> Duration {
    (timeout / 4).clamp(MIN_SWEEP, MAX_SWEEP)
}

/// The sweeping thread; stops when dropped or on [`IdleReclaimer::stop`].
#[derive(Debug)]
pub struct IdleReclaimer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl IdleReclaimer {
    /// Starts sweeping `qps` (which must have an idle timeout; without one nothing
    /// is started and `None` returned), counting reclaimed queue pairs in `metrics`.
    pub fn spawn(qps: Arc<QpTable>, metrics: Arc<Metrics>) -> std::io::Result<Option<Self>> {
        let Some(timeout) = qps.idle_timeout() else {
            return Ok(None);
        };
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = stop.clone();
        let interval = sweep_interval(timeout);
        let thread = std::thread::Builder::new()
            .name("memnode-qp-reclaim".into())
            .spawn(move || {
                loop {
                    let (lock, wake) = &*flag;
                    let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
                    let (guard, _) = wake
                        .wait_timeout_while(guard, interval, |stopped| !*stopped)
                        .unwrap_or_else(|p| p.into_inner());
                    if *guard {
                        return;
                    }
                    drop(guard);
                    sweep(&qps, &metrics, Instant::now());
                }
            })?;
        Ok(Some(IdleReclaimer {
            stop,
            thread: Some(thread),
        }))
    }

    /// Stops the thread and waits for it.
    pub fn stop(&mut self) {
        let (lock, wake) = &*self.stop;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for IdleReclaimer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One sweep as of `now`: destroys the idle queue pairs, counts and logs them;
/// returns how many.
pub fn sweep(qps: &QpTable, metrics: &Metrics, now: Instant) -> usize {
    let idle = qps.reclaim_idle(now);
    if idle.is_empty() {
        return 0;
    }
    metrics.on_qps_reclaimed(idle.len(), qps.len());
    for q in &idle {
        tracing::info!(
            qpn = format_args!("{:#x}", q.qpn),
            client = %q.client_addr,
            idle_ms = q.idle.as_millis() as u64,
            "idle queue pair reclaimed (its client sent nothing for the idle timeout)"
        );
    }
    idle.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CreateQpRequest;
    use std::net::{Ipv4Addr, SocketAddrV4};

    #[test]
    fn intervals_are_a_quarter_of_the_timeout_within_bounds() {
        assert_eq!(sweep_interval(Duration::from_secs(300)), MAX_SWEEP);
        assert_eq!(
            sweep_interval(Duration::from_secs(8)),
            Duration::from_secs(2)
        );
        assert_eq!(sweep_interval(Duration::from_millis(1)), MIN_SWEEP);
    }

    #[test]
    fn a_sweep_counts_what_it_reclaims() {
        let listen = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4791);
        let qps = QpTable::new(4).with_idle_timeout(Some(Duration::from_millis(50)));
        let req = CreateQpRequest {
            qpn: 9,
            psn: 0,
            addr: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 5000),
            pmtu: 1024,
            server_addr: None,
            coalesce: false,
        };
        qps.create(&req, listen).unwrap();
        let metrics = Metrics::new();
        assert_eq!(sweep(&qps, &metrics, Instant::now()), 0);
        let later = Instant::now() + Duration::from_secs(1);
        assert_eq!(sweep(&qps, &metrics, later), 1);
        let s = metrics.snapshot();
        assert_eq!((s.qps_reclaimed, s.qps), (1, 0));
        assert!(
            Metrics::new()
                .families()
                .iter()
                .any(|f| f.name() == "dmkv_memnode_queue_pairs_reclaimed_total")
        );
        assert!(
            IdleReclaimer::spawn(Arc::new(QpTable::new(1)), Arc::new(metrics))
                .unwrap()
                .is_none()
        );
    }
}
