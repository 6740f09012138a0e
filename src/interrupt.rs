//! Cooperative interruption of long calls, free of any particular host.
//!
//! A caller (the Python binding, a Rust service with a deadline) installs a hook for the duration
//! of a call with [`with_hook`]; the batch loops and the long inner loops (the MTFL/TRML retrain
//! solver) call the crate's internal `check`, which returns [`Error::Interrupted`] once the hook
//! says stop. The hook is polled about every [`POLL_INTERVAL`], not on every check: a check costs a
//! thread-local counter increment, and the clock is read only every `stride` checks, the stride
//! adapting to how long the checks take (so a loop of 50 ns rows and a loop of 50 ms solver
//! iterations are both polled on time without reading the clock 20 million times a second).
//!
//! The hook lives in a thread-local slot because the long loops sit inside
//! [`crate::learner::OnlineLearner::update`], whose signature carries no context; without a hook
//! `check` is a no-op that never fails.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How often an installed hook is asked whether to stop.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Clock reads are spaced so that about this much time passes between them.
const CLOCK_SPACING: Duration = Duration::from_millis(2);
const MAX_STRIDE: u32 = 1 << 16;

struct Poller {
    interval: Duration,
    /// `None` while the hook runs.
    hook: Option<Box<dyn FnMut() -> bool>>,
    /// Checks left before the next clock read, and the current spacing of clock reads.
    countdown: u32,
    stride: u32,
    last_clock: Instant,
    last_poll: Instant,
    /// Once the hook said stop, every later check fails too (until the hook is removed).
    stopped: bool,
}

thread_local! {
    static POLLER: RefCell<Option<Poller>> = const { RefCell::new(None) };
}

/// Runs `f` with `hook` installed on this thread: inside `f`, the crate's long loops fail with
/// [`Error::Interrupted`] once `hook()` returns `true`. The previous hook (if any) is restored
/// afterwards, also when `f` panics.
pub fn with_hook<T>(hook: Box<dyn FnMut() -> bool>, f: impl FnOnce() -> T) -> T {
    with_hook_every(POLL_INTERVAL, hook, f)
}

/// [`with_hook`] polling the hook at most every `interval` (zero: at every clock read, the first
/// check included; for tests, and for hosts whose hook is cheap).
pub fn with_hook_every<T>(interval: Duration, hook: Box<dyn FnMut() -> bool>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Poller>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            POLLER.with(|p| *p.borrow_mut() = previous);
        }
    }
    let now = Instant::now();
    let poller = Poller {
        interval,
        hook: Some(hook),
        countdown: 1,
        stride: 1,
        last_clock: now,
        last_poll: now,
        stopped: false,
    };
    let _restore = Restore(POLLER.with(|p| p.borrow_mut().replace(poller)));
    f()
}

/// Fails with [`Error::Interrupted`] when the installed hook asks to stop; `Ok` without a hook.
///
/// Call it between units of work that leave the model consistent (between rows, or at the top of
/// a solver iteration whose result is not yet written back).
#[inline]
pub(crate) fn check() -> Result<()> {
    poll(false)
}

/// [`check`] that reads the clock every time: for loops whose iterations are long and irregular
/// (a solver iteration is a pass over all stored examples), where the adaptive stride of
/// [`check`], learnt on cheap rows, could skip many of them.
pub(crate) fn check_now() -> Result<()> {
    poll(true)
}

fn poll(force_clock: bool) -> Result<()> {
    POLLER.with(|p| {
        let mut slot = p.borrow_mut();
        let Some(poller) = slot.as_mut() else {
            return Ok(());
        };
        if poller.stopped {
            return Err(Error::Interrupted { scores: Vec::new() });
        }
        poller.countdown = poller.countdown.saturating_sub(1);
        if poller.countdown > 0 && !force_clock {
            return Ok(());
        }
        let now = Instant::now();
        if !force_clock {
            // Double the stride while clock reads come too often, halve it when they come late.
            let since_clock = now - poller.last_clock;
            if since_clock < CLOCK_SPACING {
                poller.stride = (poller.stride * 2).min(MAX_STRIDE);
            } else if since_clock > 4 * CLOCK_SPACING {
                poller.stride = (poller.stride / 2).max(1);
            }
            poller.countdown = poller.stride;
        }
        poller.last_clock = now;
        if now - poller.last_poll < poller.interval {
            return Ok(());
        }
        poller.last_poll = now;
        // The hook runs with the slot released: it may run host code that itself makes a
        // (nested, separately hooked) call on this thread.
        let Some(mut hook) = poller.hook.take() else {
            return Ok(()); // this poller's hook is running further up the stack
        };
        drop(slot);
        let stop = hook();
        let mut slot = p.borrow_mut();
        if let Some(poller) = slot.as_mut() {
            poller.hook = Some(hook);
            poller.stopped |= stop;
        }
        if stop {
            return Err(Error::Interrupted { scores: Vec::new() });
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn no_hook_never_interrupts() {
        assert!((0..1000).all(|_| check().is_ok()));
    }

    #[test]
    fn a_hook_that_says_stop_interrupts_within_the_poll_interval() {
        let calls = Rc::new(Cell::new(0));
        let seen = calls.clone();
        let start = Instant::now();
        let result = with_hook(
            Box::new(move || {
                seen.set(seen.get() + 1);
                true
            }),
            || loop {
                if let Err(e) = check() {
                    return e;
                }
                assert!(start.elapsed() < Duration::from_secs(5), "the hook was never polled");
            },
        );
        assert!(matches!(result, Error::Interrupted { .. }));
        assert_eq!(calls.get(), 1);
        assert!(start.elapsed() < Duration::from_secs(1), "took {:?}", start.elapsed());
        // The hook is removed with the call.
        assert!(check().is_ok());
    }

    #[test]
    fn slow_checks_are_polled_every_interval() {
        let calls = Rc::new(Cell::new(0u32));
        let seen = calls.clone();
        with_hook(
            Box::new(move || {
                seen.set(seen.get() + 1);
                false
            }),
            || {
                let start = Instant::now();
                while start.elapsed() < POLL_INTERVAL * 6 {
                    std::thread::sleep(Duration::from_millis(5));
                    check().unwrap();
                }
            },
        );
        assert!(calls.get() >= 3, "polled {} times in 6 intervals", calls.get());
    }
}
