//! The gate between tests of one test process: most tests run side by side, a few run alone.
//!
//! `scripts/test` runs several tests of a process at once (`RUST_TEST_THREADS`): a cluster-facing
//! test mostly waits (on the CLI, on controllers, on pods), so two or three of them share the two
//! cores of CI's machine well. A test that measures wall-clock bounds (a deadline, a budget, how
//! long a retry may wait) or that loses a race against a slow apiserver when the cores are busy
//! is starved by its neighbours into a spurious failure, so it runs alone: it waits until the
//! tests running finish, and no other test starts until it ends.
//!
//! A test enters once, when it first asks for its cluster or workspace ([`enter`]); its pass is
//! held by its thread (libtest runs each test on a thread of its own) and let go when the thread
//! ends, after the test and everything it dropped. Entering again on the same thread keeps the
//! pass it holds, so a test that asks for a workspace and then a cluster never waits on itself.

use std::cell::RefCell;
use std::sync::{Condvar, Mutex};

/// Who is inside the gate, and who waits to run alone.
struct Inside {
    side_by_side: usize,
    alone: bool,
    waiting_to_run_alone: usize,
}

static INSIDE: Mutex<Inside> = Mutex::new(Inside {
    side_by_side: 0,
    alone: false,
    waiting_to_run_alone: 0,
});
static CHANGED: Condvar = Condvar::new();

/// How a test holds the gate; leaving it wakes the tests that wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    SideBySide,
    Alone,
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
            Pass::Alone => inside.alone = false,
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

/// Lets the current test in: alone when its name is in `run_alone` (the suite's list of tests
/// that must not share the machine), side by side with the others otherwise. Blocks until it
/// may run; a test waiting to run alone goes before tests that arrive after it, so it is never
/// starved. Called from a test's own thread (an async test's body runs on it).
pub fn enter(run_alone: &[&str]) {
    if HELD.with(|held| held.borrow().is_some()) {
        return;
    }
    let name = current_test();
    let pass = if run_alone.contains(&name.as_str()) {
        Pass::Alone
    } else {
        Pass::SideBySide
    };
    let mut inside = INSIDE.lock().unwrap_or_else(|e| e.into_inner());
    match pass {
        Pass::SideBySide => {
            while inside.alone || inside.waiting_to_run_alone > 0 {
                inside = CHANGED.wait(inside).unwrap_or_else(|e| e.into_inner());
            }
            inside.side_by_side += 1;
        }
        Pass::Alone => {
            inside.waiting_to_run_alone += 1;
            while inside.alone || inside.side_by_side > 0 {
                inside = CHANGED.wait(inside).unwrap_or_else(|e| e.into_inner());
            }
            inside.waiting_to_run_alone -= 1;
            inside.alone = true;
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

    /// A test that runs alone never overlaps another, and the others still run side by side.
    #[test]
    fn a_test_that_runs_alone_overlaps_no_other() {
        let running = Arc::new(AtomicUsize::new(0));
        let most_side_by_side = Arc::new(AtomicUsize::new(0));
        let overlapped_alone = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let name = if i == 3 { "alone" } else { "side" };
                let running = running.clone();
                let most = most_side_by_side.clone();
                let overlapped = overlapped_alone.clone();
                std::thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || {
                        enter(&["alone-3"]);
                        enter(&["alone-3"]); // a second entry keeps the pass
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        if name == "alone" && now != 1 {
                            overlapped.fetch_add(1, Ordering::SeqCst);
                        }
                        std::thread::sleep(Duration::from_millis(50));
                        if name == "alone" && running.load(Ordering::SeqCst) != 1 {
                            overlapped.fetch_add(1, Ordering::SeqCst);
                        }
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                    .expect("spawn")
            })
            .collect();
        for thread in threads {
            thread.join().expect("join");
        }
        assert_eq!(overlapped_alone.load(Ordering::SeqCst), 0);
        assert!(most_side_by_side.load(Ordering::SeqCst) > 1);
        let inside = INSIDE.lock().unwrap();
        assert_eq!((inside.side_by_side, inside.alone), (0, false));
    }
}
