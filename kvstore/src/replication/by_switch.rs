//! Switch replication of writes: a replicated table's data WRITE (a Clover node, a
//! RACE KV block) sent once, to the primary, for the switch accelerator to copy to
//! the backups (`accel-p4`'s `MirrorWrite`, docs/zero-sided.md).
//!
//! The operator installs a table's replica sets on the switch (`POST /v1/mirrors`);
//! the session reads them (`GET /v1/mirrors`) and, for a set whose members are
//! exactly the table's (primary first), WRITEs to the primary under the set's alias
//! key. The switch sends the WRITE on under the primary's key, WRITEs the same bytes
//! to every backup on queue pairs of its own, and holds the primary's acknowledgement
//! until every backup acknowledged: the WRITE completes only once every member holds
//! it, as when the client wrote each member itself. Any set the switch does not know
//! (not installed, members changed by a failover, a WRITE longer than one packet, a
//! queue pair that translates keys) is written by the client to every member as
//! before.
//!
//! The switch tracks one such WRITE per connection, so a session sends them to a
//! memory node one at a time ([`SwitchMirrors::enter`]).
//!
//! Load-balanced READs use the same sets: for a set installed with `balance_reads`,
//! a single-packet READ of immutable replicated bytes (a RACE KV block) goes to the
//! primary under the set's read alias key, and the switch serves it from any member
//! that serves ([`SwitchMirrors::read_alias`]).

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::time::{Duration, Instant};

use dmkv_api::switch::MirrorSet;

/// How often a session asks the switch again for its replica sets when a table's set
/// is not among them.
const REFRESH: Duration = Duration::from_secs(1);

/// A session's view of the switch's replica sets, and the memory nodes with a
/// replicated WRITE in flight.
#[derive(Debug, Default)]
pub(crate) struct SwitchMirrors {
    /// The switch's admin URL and the credential to read its sets with; `None`:
    /// switch replication is off for this session.
    switch: Option<(String, Option<String>)>,
    sets: RefCell<Vec<MirrorSet>>,
    fetched: Cell<Option<Instant>>,
    busy: RefCell<HashSet<u64>>,
    aliases: RefCell<HashSet<u32>>,
    /// The path MTU of the session's queue pairs: a replicated WRITE is one packet.
    pmtu: u32,
    /// Whether data WRITEs are replicated by the switch.
    writes: bool,
    /// Whether READs of immutable replicated bytes are balanced by the switch.
    reads: bool,
}

/// A memory node's turn to carry a replicated WRITE; the turn ends when dropped.
pub(crate) struct Turn<'a> {
    mirrors: &'a SwitchMirrors,
    memnode: u64,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.mirrors.busy.borrow_mut().remove(&self.memnode);
    }
}

impl SwitchMirrors {
    /// Switch replication through the switch whose admin URL is `switch`, reading
    /// its sets with `credential`.
    /// Queue pairs of path MTU `pmtu` bytes.
    pub(crate) fn via(switch: String, credential: Option<String>, pmtu: u32) -> SwitchMirrors {
        SwitchMirrors {
            switch: Some((switch, credential)),
            pmtu,
            writes: true,
            ..SwitchMirrors::default()
        }
    }

    /// These sets used for replicating WRITEs (`writes`) and balancing READs
    /// (`reads`).
    pub(crate) fn with_uses(mut self, writes: bool, reads: bool) -> SwitchMirrors {
        self.writes = writes;
        self.reads = reads;
        self
    }

    /// The longest WRITE the switch replicates (one packet).
    pub(crate) fn pmtu(&self) -> u32 {
        self.pmtu
    }

    /// Whether the session replicates through the switch at all.
    pub(crate) fn on(&self) -> bool {
        self.switch.is_some()
    }

    fn refresh(&self, force: bool) {
        let Some((url, credential)) = &self.switch else {
            return;
        };
        let due = self
            .fetched
            .get()
            .is_none_or(|t| force || t.elapsed() >= REFRESH);
        if !due {
            return;
        }
        self.fetched.set(Some(Instant::now()));
        match dmkv_api::switch::mirrors_as(url, credential.as_deref()) {
            Ok(sets) => {
                *self.aliases.borrow_mut() = sets.iter().map(|s| s.alias_rkey).collect();
                *self.sets.borrow_mut() = sets;
            }
            Err(error) => {
                tracing::warn!(%error, switch = %url, "reading the switch's replica sets failed; writing every copy from the client");
            }
        }
    }

    /// The alias key of the switch's replica set whose members are exactly `members`
    /// (memnode ids, primary first), if it has one.
    pub(crate) fn alias(&self, members: &[u64]) -> Option<u32> {
        if !self.writes {
            return None;
        }
        self.set_key(members, |s| Some(s.alias_rkey))
    }

    /// The read alias key of the switch's replica set whose members are exactly
    /// `members` (memnode ids, primary first), if it balances READs.
    pub(crate) fn read_alias(&self, members: &[u64]) -> Option<u32> {
        if !self.reads {
            return None;
        }
        self.set_key(members, |s| s.read_alias_rkey)
    }

    /// `key` of the set whose members are exactly `members`.
    fn set_key(&self, members: &[u64], key: impl Fn(&MirrorSet) -> Option<u32>) -> Option<u32> {
        if !self.on() || members.len() < 2 {
            return None;
        }
        let find = || {
            self.sets
                .borrow()
                .iter()
                .find(|s| {
                    s.primary.memnode_id == members.first().copied()
                        && s.backups.len() + 1 == members.len()
                        && s.backups
                            .iter()
                            .zip(&members[1..])
                            .all(|(b, m)| b.memnode_id == Some(*m))
                })
                .and_then(&key)
        };
        if self.fetched.get().is_none() {
            self.refresh(true);
        }
        find().or_else(|| {
            self.refresh(false);
            find()
        })
    }

    /// Whether `rkey` is one of the switch's WRITE alias keys.
    pub(crate) fn is_alias(&self, rkey: u32) -> bool {
        self.writes && self.on() && self.aliases.borrow().contains(&rkey)
    }

    /// Memory node `memnode`'s turn to carry a replicated WRITE, when no other task of
    /// the session has one in flight to it (`None`: wait and ask again).
    pub(crate) fn enter(&self, memnode: u64) -> Option<Turn<'_>> {
        let free = self.busy.borrow_mut().insert(memnode);
        if !free {
            return None;
        }
        Some(Turn {
            mirrors: self,
            memnode,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::switch::MirrorMember;

    fn member(id: u64) -> MirrorMember {
        MirrorMember {
            memnode: format!("127.0.0.1:{}", 9000 + id),
            addr: std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 4791),
            memnode_id: Some(id),
            rkey: 1,
            base_va: 0,
        }
    }

    fn with_sets(sets: Vec<MirrorSet>) -> SwitchMirrors {
        let m = SwitchMirrors::via("127.0.0.1:1".into(), None, 1024);
        *m.aliases.borrow_mut() = sets.iter().map(|s| s.alias_rkey).collect();
        *m.sets.borrow_mut() = sets;
        m.fetched.set(Some(Instant::now()));
        m
    }

    #[test]
    fn a_set_matches_only_its_exact_members_in_order() {
        let m = with_sets(vec![MirrorSet {
            set: 0,
            alias_rkey: 0xA000_0001,
            primary: member(1),
            backups: vec![member(2), member(3)],
            read_alias_rkey: None,
            non_serving: Vec::new(),
        }]);
        assert_eq!(m.alias(&[1, 2, 3]), Some(0xA000_0001));
        assert_eq!(m.alias(&[1, 3, 2]), None);
        assert_eq!(m.alias(&[2, 1, 3]), None);
        assert_eq!(m.alias(&[1, 2]), None);
        assert_eq!(m.alias(&[1]), None);
        assert!(m.is_alias(0xA000_0001));
        assert!(!m.is_alias(1));
        assert!(!SwitchMirrors::default().is_alias(0xA000_0001));
    }

    #[test]
    fn reads_and_writes_use_their_own_alias_only_when_on() {
        let sets = || {
            vec![
                MirrorSet {
                    set: 0,
                    alias_rkey: 0xA000_0001,
                    primary: member(1),
                    backups: vec![member(2)],
                    read_alias_rkey: Some(0xB000_0001),
                    non_serving: Vec::new(),
                },
                MirrorSet {
                    set: 1,
                    alias_rkey: 0xA000_0002,
                    primary: member(3),
                    backups: vec![member(4)],
                    read_alias_rkey: None,
                    non_serving: Vec::new(),
                },
            ]
        };
        let both = with_sets(sets()).with_uses(true, true);
        assert_eq!(both.alias(&[1, 2]), Some(0xA000_0001));
        assert_eq!(both.read_alias(&[1, 2]), Some(0xB000_0001));
        assert_eq!(both.read_alias(&[3, 4]), None, "the set balances no READ");
        assert_eq!(both.read_alias(&[2, 1]), None);
        assert!(
            !both.is_alias(0xB000_0001),
            "a read alias is no WRITE alias"
        );
        let reads = with_sets(sets()).with_uses(false, true);
        assert_eq!(reads.alias(&[1, 2]), None);
        assert!(!reads.is_alias(0xA000_0001));
        assert_eq!(reads.read_alias(&[1, 2]), Some(0xB000_0001));
        let writes = with_sets(sets());
        assert_eq!(writes.read_alias(&[1, 2]), None);
        assert_eq!(writes.alias(&[1, 2]), Some(0xA000_0001));
    }

    #[test]
    fn one_replicated_write_per_memory_node_at_a_time() {
        let m = SwitchMirrors::default();
        let turn = m.enter(4).expect("free");
        assert!(m.enter(4).is_none());
        assert!(m.enter(5).is_some());
        drop(turn);
        assert!(m.enter(4).is_some());
    }
}
