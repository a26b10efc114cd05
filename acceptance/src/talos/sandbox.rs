//! Real programs as pod containers: a process in the pod's loopback-only network namespace, with
//! a private mount namespace whose root is built for the container: the host's `/usr` (read as
//! the image's userland: `sh`, `sed`), the real binaries of the image (Helm) in `/usr/local/bin`
//! or at the image's own paths (`/flux-operator`, its `/data`), the pod's own `/etc` (`hosts`
//! naming the chart repositories, a CA bundle the pods trust; an image's `/etc/os-release` over
//! it), and
//! the pod's volumes at the paths its spec names. Nothing of this touches the host's mount tree.
//!
//! Everything the child does between `fork` and `exec` is a raw system call on data prepared
//! before the fork (no allocation), as `pre_exec` requires.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, Command};

/// Top-level directories of the container that come from the host; volumes may not be mounted
/// under them (that would create directories on the host).
const HOST_DIRS: &[&str] = &["usr", "bin", "sbin", "lib", "lib64", "dev", "proc", "etc"];

/// A directory (or file) of the host mounted into the container.
#[derive(Clone, Debug)]
pub struct Mount {
    pub host: PathBuf,
    /// Absolute path in the container.
    pub path: String,
    pub read_only: bool,
}

/// One container process to start.
#[derive(Clone, Debug)]
pub struct SandboxSpec {
    pub netns_fd: i32,
    /// An empty directory of the host, the mount point of the container's root.
    pub root: PathBuf,
    /// The container's `/etc`.
    pub etc: PathBuf,
    /// Host files visible as `/usr/local/bin/NAME`; a NAME that is an absolute path is the
    /// image's file (or directory) at that path, read-only (`/flux-operator`, `/data`, and in
    /// `/etc` over the pod's files: `/etc/os-release`).
    pub binaries: Vec<(PathBuf, String)>,
    pub mounts: Vec<Mount>,
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub working_dir: Option<String>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub groups: Vec<u32>,
}

enum Op {
    SetNs(i32),
    UnshareMounts,
    MakePrivate,
    Tmpfs(CString),
    Mkdir(CString),
    Symlink {
        target: CString,
        link: CString,
    },
    Bind {
        from: CString,
        to: CString,
        read_only: bool,
    },
    Touch(CString),
    /// Makes a bind mount read-only.
    ReadOnly(CString),
    Chroot(CString),
    Chdir(CString),
    Identity {
        uid: Option<u32>,
        gid: Option<u32>,
        groups: Vec<libc::gid_t>,
    },
}

fn cstr(path: impl AsRef<Path>) -> std::io::Result<CString> {
    CString::new(path.as_ref().as_os_str().as_bytes()).map_err(std::io::Error::other)
}

fn plan(spec: &SandboxSpec) -> std::io::Result<Vec<Op>> {
    let root = &spec.root;
    let mut ops = vec![
        Op::SetNs(spec.netns_fd),
        Op::UnshareMounts,
        Op::MakePrivate,
        Op::Tmpfs(cstr(root)?),
    ];
    for dir in ["usr", "bin", "sbin", "lib", "lib64", "dev", "proc"] {
        let host = Path::new("/").join(dir);
        match std::fs::read_link(&host) {
            Ok(target) => ops.push(Op::Symlink {
                target: cstr(target)?,
                link: cstr(root.join(dir))?,
            }),
            Err(_) if host.is_dir() => {
                ops.push(Op::Mkdir(cstr(root.join(dir))?));
                ops.push(Op::Bind {
                    from: cstr(&host)?,
                    to: cstr(root.join(dir))?,
                    read_only: false,
                });
            }
            Err(_) => {}
        }
    }
    ops.push(Op::Mkdir(cstr(root.join("etc"))?));
    ops.push(Op::Bind {
        from: cstr(&spec.etc)?,
        to: cstr(root.join("etc"))?,
        read_only: false,
    });
    // The image's own files of `/etc` (`os-release`) over the pod's, before it turns read-only.
    let (in_etc, at_root): (Vec<_>, Vec<_>) = spec
        .binaries
        .iter()
        .filter(|(_, name)| name.starts_with('/'))
        .partition(|(_, name)| name.starts_with("/etc/"));
    for (host, path) in in_etc.iter().chain(&at_root) {
        let relative = path.trim_start_matches('/');
        if relative.is_empty() || relative.split('/').any(|c| c == "..") {
            return Err(std::io::Error::other(format!(
                "the simulated image has a file at an invalid path {path}"
            )));
        }
        if path.starts_with("/etc/") {
            ops.push(Op::Touch(cstr(root.join(relative))?));
        } else {
            let mut at = root.clone();
            let components: Vec<&str> = relative.split('/').collect();
            for (i, component) in components.iter().enumerate() {
                at.push(component);
                if i + 1 < components.len() || host.is_dir() {
                    ops.push(Op::Mkdir(cstr(&at)?));
                } else {
                    ops.push(Op::Touch(cstr(&at)?));
                }
            }
        }
        ops.push(Op::Bind {
            from: cstr(host)?,
            to: cstr(root.join(relative))?,
            read_only: true,
        });
    }
    ops.push(Op::ReadOnly(cstr(root.join("etc"))?));
    let on_path: Vec<_> = spec
        .binaries
        .iter()
        .filter(|(_, name)| !name.starts_with('/'))
        .collect();
    if !on_path.is_empty() && Path::new("/usr/local/bin").is_dir() {
        // The host's own tools there (a machine's kubectl or helm) must not leak into the image.
        ops.push(Op::Tmpfs(cstr(root.join("usr/local/bin"))?));
        for (host, name) in on_path {
            let to = root.join("usr/local/bin").join(name);
            ops.push(Op::Touch(cstr(&to)?));
            ops.push(Op::Bind {
                from: cstr(host)?,
                to: cstr(&to)?,
                read_only: true,
            });
        }
    }
    for mount in &spec.mounts {
        let relative = mount.path.trim_start_matches('/');
        let first = relative.split('/').next().unwrap_or("");
        if relative.is_empty()
            || HOST_DIRS.contains(&first)
            || relative.split('/').any(|c| c == "..")
        {
            return Err(std::io::Error::other(format!(
                "the simulated container runtime cannot mount a volume at {}",
                mount.path
            )));
        }
        let mut at = root.clone();
        for component in relative.split('/').filter(|c| !c.is_empty()) {
            at.push(component);
            ops.push(Op::Mkdir(cstr(&at)?));
        }
        ops.push(Op::Bind {
            from: cstr(&mount.host)?,
            to: cstr(&at)?,
            read_only: mount.read_only,
        });
    }
    ops.push(Op::Chroot(cstr(root)?));
    ops.push(Op::Chdir(cstr(spec.working_dir.as_deref().unwrap_or("/"))?));
    ops.push(Op::Identity {
        uid: spec.uid,
        gid: spec.gid,
        groups: spec.groups.clone(),
    });
    Ok(ops)
}

/// Writes `what` to stderr (the pod log) from the forked child: async-signal-safe.
fn report(what: &[u8]) {
    // SAFETY: write(2) of a valid buffer to fd 2.
    unsafe {
        libc::write(2, what.as_ptr().cast(), what.len());
    }
}

fn check(result: libc::c_int, what: &'static [u8]) -> std::io::Result<()> {
    if result == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    report(b"talos-sim container runtime: failed to ");
    report(what);
    report(b"\n");
    Err(err)
}

fn run_ops(ops: &[Op]) -> std::io::Result<()> {
    let none = std::ptr::null::<libc::c_char>();
    // SAFETY: raw system calls on NUL-terminated strings owned by `ops`.
    unsafe {
        for op in ops {
            match op {
                Op::SetNs(fd) => check(
                    libc::setns(*fd, libc::CLONE_NEWNET),
                    b"join the pod network namespace",
                )?,
                Op::UnshareMounts => check(
                    libc::unshare(libc::CLONE_NEWNS),
                    b"create a mount namespace",
                )?,
                Op::MakePrivate => check(
                    libc::mount(
                        none,
                        c"/".as_ptr(),
                        none,
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ),
                    b"make mounts private",
                )?,
                Op::Tmpfs(at) => check(
                    libc::mount(
                        c"tmpfs".as_ptr(),
                        at.as_ptr(),
                        c"tmpfs".as_ptr(),
                        0,
                        c"mode=0755".as_ptr().cast(),
                    ),
                    b"mount a tmpfs",
                )?,
                Op::Mkdir(at) => {
                    if libc::mkdir(at.as_ptr(), 0o755) != 0
                        && std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST)
                    {
                        check(-1, b"create a mount point")?;
                    }
                }
                Op::Symlink { target, link } => check(
                    libc::symlink(target.as_ptr(), link.as_ptr()),
                    b"link a root directory",
                )?,
                Op::Touch(at) => {
                    let fd = libc::open(
                        at.as_ptr(),
                        libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                        0o755,
                    );
                    if fd < 0 {
                        check(-1, b"create a file mount point")?;
                    }
                    libc::close(fd);
                }
                Op::Bind {
                    from,
                    to,
                    read_only,
                } => {
                    check(
                        libc::mount(
                            from.as_ptr(),
                            to.as_ptr(),
                            none,
                            libc::MS_BIND | libc::MS_REC,
                            std::ptr::null(),
                        ),
                        b"bind a volume",
                    )?;
                    if *read_only {
                        check(
                            libc::mount(
                                none,
                                to.as_ptr(),
                                none,
                                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                                std::ptr::null(),
                            ),
                            b"make a volume read-only",
                        )?;
                    }
                }
                Op::ReadOnly(at) => check(
                    libc::mount(
                        none,
                        at.as_ptr(),
                        none,
                        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                        std::ptr::null(),
                    ),
                    b"make /etc read-only",
                )?,
                Op::Chroot(at) => check(libc::chroot(at.as_ptr()), b"enter the container root")?,
                Op::Chdir(at) => check(libc::chdir(at.as_ptr()), b"enter the working directory")?,
                Op::Identity { uid, gid, groups } => {
                    if uid.is_some() || gid.is_some() {
                        check(
                            libc::setgroups(groups.len(), groups.as_ptr()),
                            b"set the supplementary groups",
                        )?;
                    }
                    if let Some(gid) = gid {
                        check(libc::setgid(*gid), b"set the group")?;
                    }
                    if let Some(uid) = uid {
                        check(libc::setuid(*uid), b"set the user")?;
                    }
                    // A change of credentials clears the parent-death signal: set it again.
                    check(
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL),
                        b"tie the process to the node",
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// Starts the container's process, stdout and stderr piped, in its own process group, killed
/// when the test process dies.
pub fn spawn(spec: &SandboxSpec) -> std::io::Result<Child> {
    let ops = plan(spec)?;
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(std::io::Error::other("the container has no command"));
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(&spec.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    super::process::tie_to_parent(&mut command);
    // SAFETY: `run_ops` makes only raw system calls on memory prepared before the fork.
    unsafe {
        command.pre_exec(move || run_ops(&ops));
    }
    command.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(binaries: Vec<(PathBuf, String)>) -> SandboxSpec {
        SandboxSpec {
            netns_fd: -1,
            root: PathBuf::from("/r"),
            etc: PathBuf::from("/pod/etc"),
            binaries,
            mounts: Vec::new(),
            argv: vec!["x".into()],
            env: BTreeMap::new(),
            working_dir: None,
            uid: None,
            gid: None,
            groups: Vec::new(),
        }
    }

    /// The image's own files: `/etc/os-release` over the pod's `/etc` before it turns
    /// read-only, `/flux-operator` and `/data` at the root, the rest in `/usr/local/bin`.
    #[test]
    fn image_files_at_absolute_paths_are_mounted_there_read_only() {
        let data = std::env::temp_dir();
        let ops = plan(&spec(vec![
            (PathBuf::from("/host/op"), "/flux-operator".into()),
            (data.clone(), "/data".into()),
            (PathBuf::from("/host/os"), "/etc/os-release".into()),
            (PathBuf::from("/host/sc"), "source-controller".into()),
        ]))
        .expect("plan");
        let position = |want: &dyn Fn(&Op) -> bool| ops.iter().position(want).expect("op");
        let bind_to = |to: &'static str| move |op: &Op| matches!(op, Op::Bind { to: t, read_only: true, .. } if t.as_bytes() == to.as_bytes());
        let etc_ro = position(&|op| matches!(op, Op::ReadOnly(at) if at.as_bytes() == b"/r/etc"));
        assert!(position(&bind_to("/r/etc/os-release")) < etc_ro);
        assert!(
            position(&|op| matches!(op, Op::Touch(at) if at.as_bytes() == b"/r/flux-operator"))
                < position(&bind_to("/r/flux-operator"))
        );
        assert!(
            position(&|op| matches!(op, Op::Mkdir(at) if at.as_bytes() == b"/r/data"))
                < position(&bind_to("/r/data"))
        );
        position(&bind_to("/r/usr/local/bin/source-controller"));
        assert!(
            plan(&spec(vec![(PathBuf::from("/h"), "/../x".into())])).is_err(),
            "no path out of the root"
        );
    }
}
