//! Which supervised workers the current call is already in an exchange with, so that a call
//! coming back to one of them (a plugin's command dispatches a tool whose hooks are the
//! plugin's own) is refused at once instead of waiting for a lock its own caller holds.
//!
//! The set belongs to the logical call, not to a thread: the registry runs a firing's
//! external hooks on helper threads while the calling thread waits for them, and hands
//! each helper the caller's set ([`held`], [`adopt`]). Imports nothing of this crate.

use std::cell::RefCell;

thread_local! {
    static HELD: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// An exchange with one worker, from [`enter`] until dropped.
#[derive(Debug)]
pub struct Held(usize);

/// Marks the worker `key` (any stable address) as in an exchange with this call; `None`
/// when it already is, further up the same call.
///
/// ```
/// let first = hermes_host::reentry::enter(7).unwrap();
/// assert!(hermes_host::reentry::enter(7).is_none());
/// drop(first);
/// assert!(hermes_host::reentry::enter(7).is_some());
/// ```
pub fn enter(key: usize) -> Option<Held> {
    HELD.with_borrow_mut(|held| {
        if held.contains(&key) {
            return None;
        }
        held.push(key);
        Some(Held(key))
    })
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD.with_borrow_mut(|held| held.retain(|k| *k != self.0));
    }
}

/// The workers this call holds, for a helper thread that works for it (see [`adopt`]).
pub fn held() -> Vec<usize> {
    HELD.with_borrow(Clone::clone)
}

/// Makes this helper thread part of the call that holds `keys` (from [`held`] on the
/// thread that waits for it).
///
/// ```
/// let outer = hermes_host::reentry::enter(9).unwrap();
/// let keys = hermes_host::reentry::held();
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         hermes_host::reentry::adopt(keys);
///         assert!(hermes_host::reentry::enter(9).is_none());
///     });
/// });
/// drop(outer);
/// ```
pub fn adopt(keys: Vec<usize>) {
    HELD.with_borrow_mut(|held| *held = keys);
}
