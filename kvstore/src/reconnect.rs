//! Replacing a session's queue pair to one memory node: when it failed (retry
//! counter exceeded, error state), when it idled long enough for the node to reclaim
//! it, or when the node could not be reached when the session opened.
//!
//! An attempt looks the node up in the metadata service first (a node that
//! restarted may have a new address or region), creates a queue pair the way the
//! session did when it opened (directly, through the relay or through the switch
//! accelerator), routes the session's handle for the node over it
//! ([`crate::fabric`]), and destroys the old responder on a best-effort basis.
//!
//! Attempts are rate-limited per memory node: after a failed one, the next waits
//! twice as long as the previous wait, from 1/64 of
//! [`ReconnectOptions::interval`](crate::ReconnectOptions::interval) up to the
//! interval itself; a node the session could not reach when it opened is tried at
//! most once per interval.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use verbs::transport::QpHandle;

use crate::connect::{Connector, NewQp, RegionRef, RemoteQp};
use crate::error::KvError;
use crate::fabric::SharedRoutes;
use crate::grants::QpGrants;

/// The failures after which attempts are [`ReconnectOptions::interval`] apart.
const SLOWEST_AFTER: u32 = 7;

/// What the session knows of its connection to one memory node.
#[derive(Debug, Default)]
struct Peer {
    /// The session's route to it, once it had a queue pair.
    route: Option<QpHandle>,
    /// Its current responder, to destroy when replaced or when the session ends.
    remote: Option<RemoteQp>,
    /// Attempts that failed in a row.
    failures: u32,
    /// No attempt before this.
    next_attempt: Option<Instant>,
    /// Why the last attempt (or the connection when the session opened) failed.
    last_error: Option<String>,
}

/// A queue pair to a memory node, just (re)made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fresh {
    /// The session's route (queue-pair handle) for the node.
    pub route: QpHandle,
    /// The node's region.
    pub region: RegionRef,
}

/// Makes and replaces a session's queue pairs, one memory node at a time.
pub(crate) struct Reconnector {
    connector: Connector,
    interval: Duration,
    peers: RefCell<HashMap<u64, Peer>>,
    reconnects: Cell<u64>,
}

/// How long to wait after `failures` failed attempts in a row.
pub(crate) fn backoff(failures: u32, interval: Duration) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let shift = failures.min(SLOWEST_AFTER) - 1;
    (interval / 64).saturating_mul(1 << shift).min(interval)
}

impl Reconnector {
    /// A reconnector making queue pairs with `connector`, attempts at most
    /// `interval` apart once they keep failing.
    pub(crate) fn new(connector: Connector, interval: Duration) -> Reconnector {
        Reconnector {
            connector,
            interval,
            peers: RefCell::new(HashMap::new()),
            reconnects: Cell::new(0),
        }
    }

    /// Gives the queue pairs created with grants fresh ones (for every table, new ones
    /// included) when theirs are half way to expiry, or now with `force` (the session
    /// leased memory: a table grew). A failure is logged and tried again a second
    /// later; the queue pair keeps serving its current grants until they expire.
    pub(crate) fn refresh_grants(&self, force: bool, now: Instant) {
        self.refresh_grants_unless(|held| !force && now < held.refresh_at, now);
    }

    /// Whether any queue pair of the session was created with grants.
    pub(crate) fn holds_grants(&self) -> bool {
        self.peers
            .borrow()
            .values()
            .any(|p| p.remote.as_ref().is_some_and(|r| r.grants.is_some()))
    }

    /// Gives the queue pairs whose grants do not cover table `table` fresh ones.
    pub(crate) fn grant_table(&self, table: &str, now: Instant) {
        self.refresh_grants_unless(|held| held.tables.iter().any(|t| t == table), now);
    }

    fn refresh_grants_unless(&self, fresh_enough: impl Fn(&QpGrants) -> bool, now: Instant) {
        let client = self.connector.client();
        let mut peers = self.peers.borrow_mut();
        for (&id, peer) in peers.iter_mut() {
            let Some(remote) = peer.remote.as_mut() else {
                continue;
            };
            let Some(held) = &remote.grants else {
                continue;
            };
            if remote.rdma {
                // Its NIC keys are fixed: the route replaces the queue pair when its
                // grants are due, or when it needs memory they do not reach.
                continue;
            }
            if fresh_enough(held) {
                continue;
            }
            match crate::grants::refresh(client, id, remote.grant_target()) {
                Ok(Some(fresh)) => remote.grants = Some(fresh),
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(memnode = id, %error, "could not refresh the queue pair's grants; trying again shortly");
                    if let Some(g) = remote.grants.as_mut() {
                        g.refresh_at = now + Duration::from_secs(1);
                    }
                }
            }
        }
    }

    /// Memory node `id` is reached through route `route`, made when the session opened.
    pub(crate) fn opened(&self, id: u64, route: QpHandle, qp: &NewQp) {
        self.peers.borrow_mut().insert(
            id,
            Peer {
                route: Some(route),
                remote: qp.remote.clone(),
                ..Peer::default()
            },
        );
    }

    /// Memory node `id` could not be reached when the session opened (at `now`),
    /// because of `why`: try again one interval later at the earliest.
    pub(crate) fn unreachable(&self, id: u64, why: String, now: Instant) {
        self.peers.borrow_mut().insert(
            id,
            Peer {
                failures: SLOWEST_AFTER,
                next_attempt: Some(now + self.interval),
                last_error: Some(why),
                ..Peer::default()
            },
        );
    }

    /// Queue pairs replaced or added since the session opened.
    pub(crate) fn reconnects(&self) -> u64 {
        self.reconnects.get()
    }

    /// Why memory node `id` has no usable queue pair, as far as known.
    pub(crate) fn last_error(&self, id: u64) -> Option<String> {
        self.peers
            .borrow()
            .get(&id)
            .and_then(|p| p.last_error.clone())
    }

    /// Attempts for memory node `id` that failed in a row.
    fn failures(&self, id: u64) -> u32 {
        self.peers.borrow().get(&id).map_or(0, |p| p.failures)
    }

    /// When the next attempt for memory node `id` may be made (`None`: now).
    pub(crate) fn next_attempt(&self, id: u64) -> Option<Instant> {
        self.peers.borrow().get(&id).and_then(|p| p.next_attempt)
    }

    /// Give memory node `id` a new queue pair because of `why`, unless an attempt is
    /// not due yet at `now` (`forced` skips that check while no attempt failed:
    /// replacing an idle queue pair is no failure).
    pub(crate) fn attempt(
        &self,
        id: u64,
        why: &str,
        forced: bool,
        routes: &SharedRoutes,
        now: Instant,
    ) -> Result<Fresh, KvError> {
        // Replacing an idle queue pair is no failure, unless replacing it failed.
        let forced = forced && self.failures(id) == 0;
        if !forced && let Some(at) = self.next_attempt(id).filter(|at| *at > now) {
            let last = self
                .last_error(id)
                .unwrap_or_else(|| "not connected".to_owned());
            return Err(KvError::unavailable(format!(
                "memnode {id} is not connected to this session ({last}); next attempt in {} ms",
                at.saturating_duration_since(now).as_millis()
            )));
        }
        match self.try_connect(id, routes, now) {
            Ok(fresh) => {
                self.reconnects.set(self.reconnects.get() + 1);
                tracing::info!(memnode = id, reason = %why, "connected a new queue pair to the memory node");
                Ok(fresh)
            }
            Err(error) => {
                let mut peers = self.peers.borrow_mut();
                let peer = peers.entry(id).or_default();
                peer.failures = peer.failures.saturating_add(1);
                let wait = backoff(peer.failures, self.interval);
                peer.next_attempt = Some(now + wait);
                peer.last_error = Some(error.to_string());
                tracing::warn!(
                    memnode = id,
                    reason = %why,
                    %error,
                    retry_in_ms = wait.as_millis() as u64,
                    "could not connect a new queue pair to the memory node"
                );
                Err(error)
            }
        }
    }

    fn try_connect(&self, id: u64, routes: &SharedRoutes, now: Instant) -> Result<Fresh, KvError> {
        let node = self.connector.lookup(id)?;
        let qp = {
            let mut r = routes.borrow_mut();
            self.connector.connect(r.fabric_mut(), &node)?
        };
        let old = {
            let mut peers = self.peers.borrow_mut();
            let peer = peers.entry(id).or_default();
            let route = match peer.route {
                Some(route) => {
                    routes
                        .borrow_mut()
                        .replace(route, qp.handle, qp.idle_timeout, now);
                    routes.borrow_mut().set_address_map(
                        route,
                        qp.address_map.clone(),
                        qp.replace_at,
                    );
                    routes.borrow_mut().set_rpc(route, qp.rpc.clone());
                    route
                }
                None => {
                    let route = routes.borrow_mut().add(id, qp.handle, qp.idle_timeout, now);
                    routes.borrow_mut().set_address_map(
                        route,
                        qp.address_map.clone(),
                        qp.replace_at,
                    );
                    routes.borrow_mut().set_rpc(route, qp.rpc.clone());
                    peer.route = Some(route);
                    route
                }
            };
            peer.failures = 0;
            peer.next_attempt = None;
            peer.last_error = None;
            let old = std::mem::replace(&mut peer.remote, qp.remote.clone());
            (old, route)
        };
        if let Some(old) = old.0 {
            old.destroy_if_ours();
        }
        Ok(Fresh {
            route: old.1,
            region: qp.region,
        })
    }

    /// Destroy every responder of the session (it ends).
    pub(crate) fn destroy_all(&self) {
        for peer in self.peers.borrow().values() {
            if let Some(remote) = &peer.remote {
                remote.destroy();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_interval() {
        let second = Duration::from_secs(1);
        assert_eq!(backoff(0, second), Duration::ZERO);
        assert_eq!(backoff(1, second), Duration::from_micros(15_625));
        assert_eq!(backoff(2, second), Duration::from_micros(31_250));
        assert_eq!(backoff(6, second), Duration::from_millis(500));
        assert_eq!(backoff(7, second), second);
        assert_eq!(backoff(u32::MAX, second), second);
    }
}
