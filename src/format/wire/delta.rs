//! The small delta codecs both sides of a chunk run in lockstep: the encoder turns an absolute
//! value into what a record stores, the decoder turns that back, and each codec holds the state
//! they share (the previous value of its stream). Every delta rule of the format is stated here
//! once; `encoder` and `decoder` only pick the codec a field goes through.
//!
//! All arithmetic wraps, so every pair of u64 values round-trips exactly, however far apart.

use super::super::event::RssMember;

/// A stream of values, each stored as the signed step from the one before (zigzag varint on
/// disk): the chunk's timestamps, a thread's heap addresses, a thread's mapping addresses.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Delta {
    prev: u64,
}

impl Delta {
    /// The step from the previous value to `value`, which becomes the previous value.
    #[inline]
    pub(super) fn encode(&mut self, value: u64) -> i64 {
        let d = step(self.prev, value);
        self.prev = value;
        d
    }

    /// The value `d` steps from the previous one, which it becomes; the inverse of `encode`.
    #[inline]
    pub(super) fn decode(&mut self, d: i64) -> u64 {
        self.prev = take_step(self.prev, d);
        self.prev
    }

    /// A move from `from` to `to` (realloc, mremap, brk): `from` is stored as a step from the
    /// previous value, `to` as a step from `from` (0 for an in-place resize), and `to` becomes
    /// the previous value.
    #[inline]
    pub(super) fn encode_move(&mut self, from: u64, to: u64) -> (i64, i64) {
        let d_from = step(self.prev, from);
        self.prev = to;
        (d_from, step(from, to))
    }

    /// The inverse of `encode_move`.
    #[inline]
    pub(super) fn decode_move(&mut self, d_from: i64, d_to: i64) -> (u64, u64) {
        let from = take_step(self.prev, d_from);
        self.prev = take_step(from, d_to);
        (from, self.prev)
    }
}

/// A resident counter's value, predicted as its previous value plus the event's own delta;
/// only the (usually zero) error of the prediction is stored.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Predicted {
    prev: u64,
}

impl Predicted {
    /// The error of predicting `value` from the previous value and `delta`.
    #[inline]
    pub(super) fn encode(&mut self, delta: i64, value: u64) -> i64 {
        let d = step(take_step(self.prev, delta), value);
        self.prev = value;
        d
    }

    /// The value predicted from the previous value and `delta`, corrected by `error`; the
    /// inverse of `encode`.
    #[inline]
    pub(super) fn decode(&mut self, delta: i64, error: i64) -> u64 {
        self.prev = take_step(take_step(self.prev, delta), error);
        self.prev
    }
}

/// The chunk's stream of call-stack trie node ids (`StackNode` records). The trie hands out
/// ids in order and the recorder writes a new stack's nodes parents first, so a node is nearly
/// always the next id, and the child of the node before it: both steps store 0 and 1, one byte
/// each. u32 arithmetic wraps, so every (id, parent) pair round-trips and no stored step decodes
/// to an id outside u32.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct NodeIds {
    prev: u32,
}

impl NodeIds {
    /// `(did, dparent)`: `id` minus (the previous id plus one), and `id` minus `parent`; `id`
    /// becomes the previous id.
    #[inline]
    pub(super) fn encode(&mut self, id: u32, parent: u32) -> (i32, i32) {
        let did = id.wrapping_sub(self.prev.wrapping_add(1)) as i32;
        self.prev = id;
        (did, id.wrapping_sub(parent) as i32)
    }

    /// `(id, parent)`; the inverse of `encode`.
    #[inline]
    pub(super) fn decode(&mut self, did: i32, dparent: i32) -> (u32, u32) {
        let id = self.prev.wrapping_add(1).wrapping_add(did as u32);
        self.prev = id;
        (id, id.wrapping_sub(dparent as u32))
    }
}

/// What one thread of the chunk's table remembers, identically on both sides.
#[derive(Clone, Copy, Debug)]
pub(super) struct ThreadState {
    pub(super) pid: u32,
    pub(super) tid: u32,
    /// Heap addresses: each thread tends to allocate from its own arena, so its addresses are
    /// close together.
    pub(super) heap: Delta,
    /// Mapping addresses, apart from the heap's, so neither spoils the other's deltas.
    pub(super) map: Delta,
    /// One prediction per resident counter, indexed by `RssMember` number.
    pub(super) rss: [Predicted; RssMember::ALL.len()],
    /// rmap page addresses, apart from the others: faults walk a mapping page by page.
    pub(super) rmap: Delta,
}

impl ThreadState {
    /// A thread just introduced: every stream starts from zero.
    pub(super) fn new(pid: u32, tid: u32) -> ThreadState {
        ThreadState {
            pid,
            tid,
            heap: Delta::default(),
            map: Delta::default(),
            rss: [Predicted::default(); RssMember::ALL.len()],
            rmap: Delta::default(),
        }
    }
}

/// The signed step from `from` to `to`.
#[inline]
fn step(from: u64, to: u64) -> i64 {
    to.wrapping_sub(from) as i64
}

/// The value `d` steps from `from`; the inverse of `step`.
#[inline]
fn take_step(from: u64, d: i64) -> u64 {
    from.wrapping_add(d as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const AWKWARD: [u64; 7] = [0, 1, 80, u64::MAX, u64::MAX - 1, 1 << 63, i64::MAX as u64];

    #[test]
    fn delta_round_trips_every_pair_of_extremes() {
        let (mut enc, mut dec) = (Delta::default(), Delta::default());
        for a in AWKWARD {
            for b in AWKWARD {
                assert_eq!(dec.decode(enc.encode(a)), a);
                let (d_from, d_to) = enc.encode_move(a, b);
                assert_eq!(dec.decode_move(d_from, d_to), (a, b));
            }
        }
    }

    #[test]
    fn node_ids_round_trip_every_pair_of_extremes() {
        let awkward = [0, 1, 2, 1000, u32::MAX, u32::MAX - 1, 1 << 31];
        let (mut enc, mut dec) = (NodeIds::default(), NodeIds::default());
        for id in awkward {
            for parent in awkward {
                let (did, dparent) = enc.encode(id, parent);
                assert_eq!(dec.decode(did, dparent), (id, parent));
            }
        }
    }

    #[test]
    fn a_new_chain_of_nodes_stores_zero_and_one() {
        let mut n = NodeIds::default();
        assert_eq!(n.encode(1, 0), (0, 1));
        assert_eq!(n.encode(2, 1), (0, 1));
        assert_eq!(n.encode(3, 2), (0, 1));
        // A new branch off node 1: the next id, two steps back to its parent.
        assert_eq!(n.encode(4, 1), (0, 3));
    }

    #[test]
    fn in_place_move_stores_zero() {
        let mut d = Delta::default();
        d.encode(0x5555_0000_1000);
        assert_eq!(d.encode_move(0x5555_0000_1000, 0x5555_0000_1000), (0, 0));
    }

    #[test]
    fn consistent_prediction_stores_zero() {
        let mut p = Predicted::default();
        assert_eq!(p.encode(10, 10), 0);
        assert_eq!(p.encode(-4, 6), 0);
        assert_eq!(p.encode(-100, 0), 94);
        let mut q = Predicted::default();
        assert_eq!(
            (q.decode(10, 0), q.decode(-4, 0), q.decode(-100, 94)),
            (10, 6, 0)
        );
    }
}
