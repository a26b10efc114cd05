//! The gate between tests of one test process: most tests run side by side, a few run apart.
//!
//! `scripts/test` runs several tests of a process at once (`RUST_TEST_THREADS`): a cluster-facing
//! test mostly waits (on the CLI, on controllers, on pods), so two or three of them share the two
//! cores of CI's machine well. A test that measures wall-clock bounds (a deadline, a budget, how
//! long a retry may wait) or that loses a race against a slow apiserver when the cores are busy
//! is starved by its neighbours into a spurious failure, so it runs apart: it waits until the
//! side-by-side tests running finish, and none starts until it ends. Tests that run apart may
//! share the machine with one another, [`APART_AT_ONCE`] at most: each of them mostly waits on
//! its own deadlines (a suite run measured the machine 10-50 % busy while one ran alone), and
//! the two variants of a test (one per CLI) are next to each other in libtest's order, so they
//! pair up.
//!
//! A test enters once, when it first asks for its cluster or workspace ([`enter`]); its pass is
//! held by its thread (libtest runs each test on a thread of its own) and let go when the thread
//! ends, after the test and everything it dropped. Entering again on the same thread keeps the
//! pass it holds, so a test that asks for a workspace and then a cluster never waits on itself.

use std::cell::RefCell;
use std::sync::{Condvar, Mutex};

/// How many tests that run apart may run at once: one per core of CI's two-core machine.
pub const APART_AT_ONCE: usize = 2;

/// Who is inside the gate, and who waits to run apart.
struct Inside {
    side_by_side: usize,
    apart: usize,
    waiting_to_run_apart: usize,
}

static INSIDE: Mutex<Inside> = Mutex::new(Inside {
    side_by_side: 0,
    apart: 0,
    waiting_to_run_apart: 0,
});
static CHANGED: Condvar = Condvar::new();

/// How a test holds the gate; leaving it wakes the tests that wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    SideBySide,
    Apart,
}

/// The pass a test's thread holds until it ends; the test's name and since when (for
/// [`TIMES_FILE`]: the thread's name cannot be asked for while its thread-locals are dropped).
struct HeldPass(Pass, std::time::Instant, String);

/// Where each test's time inside the gate is appended when set (`name<TAB>seconds<TAB>pass`,
/// one line per test): the time it ran, without the wait at the gate that libtest's
/// `--report-time` counts in, to see where a suite's time goes.
pub const TIMES_FILE: &str = "TALOSBOOT_TEST_TIMES";

impl Drop for HeldPass {
    fn drop(&mut self) {
        let mut inside = INSIDE.lock().unwrap_or_else(|e| e.into_inner());
        match self.0 {
            Pass::SideBySide => inside.side_by_side -= 1,
            Pass::Apart => inside.apart -= 1,
        }
        CHANGED.notify_all();
        drop(inside);
        if let Some(path) = std::env::var_os(TIMES_FILE) {
            use std::io::Write as _;
            let line = format!(
                "{}\t{:.1}\t{:?}\n",
                self.2,
                self.1.elapsed().as_secs_f64(),
                self.0
            );
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut file| file.write_all(line.as_bytes()));
        }
    }
}

thread_local! {
    /// The pass of the test running on this thread.
    static HELD: RefCell<Option<HeldPass>> = const { RefCell::new(None) };
}

/// The name libtest gives the thread of the running test (`module::test_name`).
pub fn current_test() -> String {
    std::thread::current().name().unwrap_or_default().to_owned()
}

/// Lets the current test in: apart when its name is in `run_apart` (the suite's list of tests
/// that must not share the machine with the side-by-side ones), side by side with the others
/// otherwise. Blocks until it may run; a test waiting to run apart goes before side-by-side tests
/// that arrive after it, so it is never starved. Called from a test's own thread (an async
/// test's body runs on it).
pub fn enter(run_apart: &[&str]) {
    if HELD.with(|held| held.borrow().is_some()) {
        return;
    }
    let name = current_test();
    let pass = if run_apart.contains(&name.as_str()) {
        Pass::Apart
    } else {
        Pass::SideBySide
    };
    let mut inside = INSIDE.lock().unwrap_or_else(|e| e.into_inner());
    match pass {
        Pass::SideBySide => {
            while inside.apart > 0 || inside.waiting_to_run_apart > 0 {
                inside = CHANGED.wait(inside).unwrap_or_else(|e| e.into_inner());
            }
            inside.side_by_side += 1;
        }
        Pass::Apart => {
            inside.waiting_to_run_apart += 1;
            while inside.side_by_side > 0 || inside.apart >= APART_AT_ONCE {
                inside = CHANGED.wait(inside).unwrap_or_else(|e| e.into_inner());
            }
            inside.waiting_to_run_apart -= 1;
            inside.apart += 1;
        }
    }
    drop(inside);
    let held = HeldPass(pass, std::time::Instant::now(), name);
    HELD.with(|slot| *slot.borrow_mut() = Some(held));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A test that runs apart never overlaps a side-by-side one, at most [`APART_AT_ONCE`] run
    /// apart at once (and they do pair up), and the others still run side by side.
    #[test]
    fn tests_that_run_apart_overlap_no_side_by_side_test() {
        let side = Arc::new(AtomicUsize::new(0));
        let apart = Arc::new(AtomicUsize::new(0));
        let most_side_by_side = Arc::new(AtomicUsize::new(0));
        let most_apart = Arc::new(AtomicUsize::new(0));
        let mixed = Arc::new(AtomicUsize::new(0));
        let run_apart = ["apart-2", "apart-3", "apart-4"];
        let threads: Vec<_> = (0..9)
            .map(|i| {
                let name = if (2..=4).contains(&i) {
                    "apart"
                } else {
                    "side"
                };
                let (side, apart) = (side.clone(), apart.clone());
                let (most_side, most_apart) = (most_side_by_side.clone(), most_apart.clone());
                let mixed = mixed.clone();
                std::thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || {
                        // In libtest's order: the apart tests arrive while others run.
                        std::thread::sleep(Duration::from_millis(5 * i));
                        enter(&run_apart);
                        enter(&run_apart); // a second entry keeps the pass
                        let (mine, other) = match name {
                            "apart" => (&apart, &side),
                            _ => (&side, &apart),
                        };
                        let now = mine.fetch_add(1, Ordering::SeqCst) + 1;
                        match name {
                            "apart" => most_apart.fetch_max(now, Ordering::SeqCst),
                            _ => most_side.fetch_max(now, Ordering::SeqCst),
                        };
                        for _ in 0..2 {
                            if other.load(Ordering::SeqCst) != 0 {
                                mixed.fetch_add(1, Ordering::SeqCst);
                            }
                            std::thread::sleep(Duration::from_millis(40));
                        }
                        mine.fetch_sub(1, Ordering::SeqCst);
                    })
                    .expect("spawn")
            })
            .collect();
        for thread in threads {
            thread.join().expect("join");
        }
        assert_eq!(
            mixed.load(Ordering::SeqCst),
            0,
            "apart and side by side mixed"
        );
        assert_eq!(most_apart.load(Ordering::SeqCst), APART_AT_ONCE);
        assert!(most_side_by_side.load(Ordering::SeqCst) > 1);
        let inside = INSIDE.lock().unwrap();
        assert_eq!((inside.side_by_side, inside.apart), (0, 0));
    }
}
