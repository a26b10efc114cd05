//! Child processes of a cluster (the control-plane components, pod sandboxes): started with
//! their output in a log file, killed with their whole process group when dropped, and killed by
//! the kernel if the test process dies first (`PR_SET_PDEATHSIG`), so a panicking or killed test
//! never leaves an apiserver behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, Command};

/// A process that lives as long as this value.
#[derive(Debug)]
pub struct Supervised {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

/// Makes `command` die with its parent and lead its own process group (so the group can be
/// killed at once, with whatever it started).
pub fn tie_to_parent(command: &mut Command) {
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.kill_on_drop(true);
}

/// The Go garbage collector's target for the control plane's processes: four times the default
/// heap growth between collections. A fresh cluster's apiserver spends much of its start-up in
/// the collector; with this setting the suite's CPU time (measured on `cilium::adoption`, 2026-12-05)
/// fell by about 12% for a few hundred MiB more memory per cluster (the machines have 24 GiB).
/// Nothing a test observes depends on it.
pub const GOGC: &str = "400";

impl Supervised {
    /// Starts `program args` with stdout and stderr appended to `log`.
    pub fn start(
        name: &str,
        program: &Path,
        args: &[String],
        log: PathBuf,
    ) -> std::io::Result<Supervised> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let err = out.try_clone()?;
        let mut command = Command::new(program);
        command
            .args(args)
            .env("GOGC", GOGC)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        tie_to_parent(&mut command);
        let child = command.spawn().map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("failed to start {}: {e}", program.display()),
            )
        })?;
        Ok(Supervised {
            name: name.to_owned(),
            child,
            log,
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last `lines` lines of the process's log (for error messages).
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Sends `signal` to the process group.
    pub fn signal(&self, signal: i32) {
        if let Some(pid) = self.child.id() {
            // SAFETY: kill(2) on our own child's process group.
            unsafe {
                libc::kill(-(pid as i32), signal);
            }
        }
    }

    /// Kills the process group and reaps the process.
    pub async fn stop(mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait().await;
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
        // Reaped here when it is already gone; otherwise tokio's orphan reaper collects it.
        let _ = self.child.try_wait();
    }
}

/// A free TCP port on `127.0.0.1` (bound and released: another process could take it in
/// between, which the caller detects when its server fails to start).
pub fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}
