//! Git on loopback: the repositories users name (`ssh://git@github.com/acme/fleet.git`, a Gitea
//! host, the read-only backup source) served over SSH by the project's Go `git-server`
//! (`.tools/flux/git-server`, fluxcd/gitkit's SSH server with the system `git-upload-pack`; its
//! contract is `scripts/flux-build/git-server/README.md`).
//!
//! One `git-server` per host (so two hosts may serve the same path), on `127.0.0.1:0` of the
//! machine. Inside pods only, the host's name resolves to a loopback address of its own,
//! `127.0.1.N`, where the pod's network namespace relays port 22 (and any explicit port of the
//! URL) to that server. Each repository's `main` branch is committed by the system `git` from a
//! directory's files into a bare repository under a temporary root. The servers accept the keys
//! of the `--authorized-key` files and of a file this module owns ([`GitServers::authorize`],
//! [`GitServers::revoke`]), read again at each login.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;

use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

/// What `--git-repository`, `--git-authorized-key` and `--git-known-hosts-out` ask for.
#[derive(Clone, Debug, Default)]
pub struct GitConfig {
    /// Repository URL → the directory whose files become its `main` branch.
    pub repositories: Vec<(String, PathBuf)>,
    /// `authorized_keys` files the servers accept keys from.
    pub authorized_keys: Vec<PathBuf>,
    /// Where to write the `known_hosts` lines of every served host.
    pub known_hosts_out: Option<PathBuf>,
    /// Hosts whose server refuses pushes (`git-server --read-only`), as the seeds' read-only
    /// backup source (`backup.example.internal`).
    pub read_only_hosts: Vec<String>,
}

impl GitConfig {
    pub fn is_empty(&self) -> bool {
        self.repositories.is_empty()
    }

    /// `URL=DIR`, as `--git-repository` takes it.
    pub fn parse_repository(arg: &str) -> anyhow::Result<(String, PathBuf)> {
        let (url, dir) = arg
            .rsplit_once('=')
            .ok_or_else(|| anyhow::anyhow!("--git-repository wants URL=DIR, got {arg:?}"))?;
        RepoUrl::parse(url)?;
        Ok((url.to_owned(), PathBuf::from(dir)))
    }
}

/// A repository URL as users write it: `ssh://[user@]host[:port]/path` or `[user@]host:path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoUrl {
    pub host: String,
    pub port: Option<u16>,
    /// The repository's path under the server's root, ending in `.git`.
    pub path: String,
}

impl RepoUrl {
    pub fn parse(url: &str) -> anyhow::Result<RepoUrl> {
        let (authority, path) = if let Some(rest) = url.strip_prefix("ssh://") {
            rest.split_once('/')
                .ok_or_else(|| anyhow::anyhow!("no repository path in {url:?}"))?
        } else if !url.contains("://") {
            url.split_once(':')
                .ok_or_else(|| anyhow::anyhow!("not an SSH Git URL: {url:?}"))?
        } else {
            anyhow::bail!("only SSH Git URLs are served (ssh://git@HOST/PATH), got {url:?}");
        };
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let (host, port) = match host_port.rsplit_once(':') {
            Some((h, p)) if url.starts_with("ssh://") => (h, Some(p.parse()?)),
            _ => (host_port, None),
        };
        let path = path.trim_matches('/');
        anyhow::ensure!(
            !host.is_empty() && !path.is_empty() && !path.split('/').any(|c| c == ".."),
            "not a repository URL: {url:?}"
        );
        let path = if path.ends_with(".git") {
            path.to_owned()
        } else {
            format!("{path}.git")
        };
        Ok(RepoUrl {
            host: host.to_ascii_lowercase(),
            port,
            path,
        })
    }
}

/// One host's server.
struct HostServer {
    name: String,
    /// Its address inside the pods.
    pod_addr: Ipv4Addr,
    ports: Vec<u16>,
    root: PathBuf,
    /// Where it listens on the machine.
    addr: SocketAddr,
    /// `KEY-TYPE BASE64` of its host key.
    host_key: String,
    _child: Child,
}

/// The Git servers of a cluster (see the module docs); they stop with it.
pub struct GitServers {
    hosts: Vec<HostServer>,
    dir: tempfile::TempDir,
    /// The keys added at run time ([`GitServers::authorize`]).
    keys: Mutex<Vec<String>>,
}

/// gitkit (git-server's SSH side) drops the first `/` of the path a client asks for, assuming it
/// leads: right for `ssh://git@HOST/acme/fleet.git` (`/acme/fleet.git`), wrong for the scp form
/// `git@HOST:acme/fleet.git`, which asks for `acme/fleet.git` and so reaches `acmefleet.git`. A
/// symlink at that mangled path lets both forms reach the repository, as on GitHub.
fn scp_alias(root: &Path, path: &str) -> std::io::Result<()> {
    let Some((first, rest)) = path.split_once('/') else {
        return Ok(());
    };
    let alias = root.join(format!("{first}{rest}"));
    if alias.symlink_metadata().is_ok() {
        return Ok(());
    }
    if let Some(parent) = alias.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::os::unix::fs::symlink(root.join(path), alias)
}

/// The `git-server` binary: `.tools/flux/git-server` (or under `TALOSBOOT_TOOLS`).
pub fn git_server_binary() -> PathBuf {
    std::env::var_os("TALOSBOOT_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools"))
        .join("flux/git-server")
}

fn git(args: &[&str]) -> Command {
    let mut command = Command::new("git");
    command
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "talos-sim")
        .env("GIT_AUTHOR_EMAIL", "talos-sim@localhost")
        .env("GIT_COMMITTER_NAME", "talos-sim")
        .env("GIT_COMMITTER_EMAIL", "talos-sim@localhost")
        .stdin(Stdio::null());
    command
}

async fn run(mut command: Command, what: &str) -> anyhow::Result<String> {
    let out = command.output().await?;
    anyhow::ensure!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Commits `files`' contents as the whole tree of `bare`'s `main` (a new commit on top of the
/// last); returns the commit.
async fn commit_tree(bare: &Path, files: &Path, message: &str) -> anyhow::Result<String> {
    let index = bare.join("talos-sim.index");
    let _ = std::fs::remove_file(&index);
    let git_dir = format!("--git-dir={}", bare.display());
    let work_tree = format!("--work-tree={}", files.display());
    let mut add = git(&[&git_dir, &work_tree, "add", "-A", "."]);
    add.env("GIT_INDEX_FILE", &index);
    run(add, "git add").await?;
    let mut commit = git(&[
        &git_dir,
        &work_tree,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        message,
    ]);
    commit.env("GIT_INDEX_FILE", &index);
    run(commit, "git commit").await?;
    let _ = std::fs::remove_file(&index);
    run(
        git(&[&git_dir, "rev-parse", "refs/heads/main"]),
        "git rev-parse",
    )
    .await
}

impl GitServers {
    /// Creates the repositories and starts one server per host.
    pub async fn start(config: &GitConfig) -> anyhow::Result<GitServers> {
        let binary = git_server_binary();
        anyhow::ensure!(
            binary.is_file(),
            "{} is missing: run scripts/install-tools.sh (it builds the Flux tools)",
            binary.display()
        );
        let dir = tempfile::Builder::new()
            .prefix("talos-sim-git-")
            .tempdir()?;
        let managed = dir.path().join("authorized_keys");
        std::fs::write(&managed, "")?;
        let mut by_host: BTreeMap<String, Vec<(RepoUrl, PathBuf)>> = BTreeMap::new();
        for (url, files) in &config.repositories {
            let parsed = RepoUrl::parse(url)?;
            by_host
                .entry(parsed.host.clone())
                .or_default()
                .push((parsed, files.clone()));
        }
        let mut hosts = Vec::new();
        for (i, (name, repos)) in by_host.into_iter().enumerate() {
            let root = dir.path().join("hosts").join(&name);
            let mut ports = vec![22];
            for (url, files) in &repos {
                let bare = root.join(&url.path);
                std::fs::create_dir_all(&bare)?;
                let mut init = git(&["init", "-q", "--bare", "-b", "main"]);
                init.arg(&bare);
                run(init, "git init").await?;
                commit_tree(&bare, files, "talos-sim: the repository's files").await?;
                scp_alias(&root, &url.path)?;
                ports.extend(url.port);
            }
            ports.sort_unstable();
            ports.dedup();
            let mut command = Command::new(&binary);
            command
                .arg("--root")
                .arg(&root)
                .args(["--listen", "127.0.0.1:0", "--authorized-key"])
                .arg(&managed);
            for key in &config.authorized_keys {
                command.arg("--authorized-key").arg(key);
            }
            if config
                .read_only_hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(&name))
            {
                command.arg("--read-only");
            }
            command
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            super::process::tie_to_parent(&mut command);
            let mut child = command.spawn()?;
            let stdout = child
                .stdout
                .take()
                .ok_or_else(|| anyhow::anyhow!("git-server has no stdout"))?;
            // Its log (connections, commands, refused keys) at debug level, off the tests' output.
            if let Some(stderr) = child.stderr.take() {
                let host = name.clone();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::debug!(%host, "{line}");
                    }
                });
            }
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            let line = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
                .await
                .map_err(|_| anyhow::anyhow!("git-server for {name} did not start in 20 s"))??
                .ok_or_else(|| anyhow::anyhow!("git-server for {name} exited at start (its stderr is logged at debug level: RUST_LOG=talos_sim=debug)"))?;
            let mut words = line.split_whitespace();
            let (Some("listening"), Some(addr), Some(kind), Some(key)) =
                (words.next(), words.next(), words.next(), words.next())
            else {
                anyhow::bail!("git-server for {name} printed {line:?}");
            };
            hosts.push(HostServer {
                name,
                pod_addr: Ipv4Addr::new(127, 0, 1, (i + 1) as u8),
                ports,
                root,
                addr: addr.parse()?,
                host_key: format!("{kind} {key}"),
                _child: child,
            });
        }
        let servers = GitServers {
            hosts,
            dir,
            keys: Mutex::new(Vec::new()),
        };
        if let Some(out) = &config.known_hosts_out {
            std::fs::write(out, servers.known_hosts())?;
        }
        Ok(servers)
    }

    /// The `hosts` lines of the pods: each served host at its address.
    pub fn hosts_lines(&self) -> String {
        self.hosts
            .iter()
            .map(|h| format!("{}\t{}\n", h.pod_addr, h.name))
            .collect()
    }

    /// `(listen in the pod, the server)` for every host and port.
    pub fn relays(&self) -> Vec<(SocketAddr, SocketAddr)> {
        self.hosts
            .iter()
            .flat_map(|h| {
                h.ports
                    .iter()
                    .map(|p| (SocketAddr::from((h.pod_addr, *p)), h.addr))
            })
            .collect()
    }

    /// The `known_hosts` lines of every served host and port, as pods see them (OpenSSH's
    /// format: `NAME TYPE KEY` for port 22, `[NAME]:PORT TYPE KEY` otherwise).
    pub fn known_hosts(&self) -> String {
        let mut out = String::new();
        for host in &self.hosts {
            for port in &host.ports {
                let name = if *port == 22 {
                    host.name.clone()
                } else {
                    format!("[{}]:{port}", host.name)
                };
                out.push_str(&format!("{name} {}\n", host.host_key));
            }
        }
        out
    }

    fn host(&self, url: &str) -> anyhow::Result<(&HostServer, RepoUrl)> {
        let parsed = RepoUrl::parse(url)?;
        let host = self
            .hosts
            .iter()
            .find(|h| h.name == parsed.host)
            .ok_or_else(|| anyhow::anyhow!("no Git server for {}", parsed.host))?;
        Ok((host, parsed))
    }

    /// The URL a process on the machine (a test's own `git`) clones `url` from:
    /// `ssh://git@127.0.0.1:PORT/PATH`, with the host key of [`Self::known_hosts_for_machine`].
    pub fn machine_url(&self, url: &str) -> anyhow::Result<String> {
        let (host, parsed) = self.host(url)?;
        Ok(format!("ssh://git@{}/{}", host.addr, parsed.path))
    }

    /// `known_hosts` lines for [`Self::machine_url`]s.
    pub fn known_hosts_for_machine(&self) -> String {
        self.hosts
            .iter()
            .map(|h| format!("[127.0.0.1]:{} {}\n", h.addr.port(), h.host_key))
            .collect()
    }

    /// Replaces the files of `url`'s `main` with `files`' (a new commit); returns the commit.
    pub async fn commit_dir(
        &self,
        url: &str,
        files: &Path,
        message: &str,
    ) -> anyhow::Result<String> {
        let (host, parsed) = self.host(url)?;
        commit_tree(&host.root.join(&parsed.path), files, message).await
    }

    /// Replaces the files of `url`'s `main` with `files` (path, contents); returns the commit.
    pub async fn commit_files(
        &self,
        url: &str,
        files: &[(&str, &str)],
        message: &str,
    ) -> anyhow::Result<String> {
        let work = tempfile::tempdir_in(self.dir.path())?;
        for (path, contents) in files {
            let at = work.path().join(path);
            if let Some(parent) = at.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(at, contents)?;
        }
        self.commit_dir(url, work.path(), message).await
    }

    /// The commit `url`'s `main` points at.
    pub async fn head(&self, url: &str) -> anyhow::Result<String> {
        let (host, parsed) = self.host(url)?;
        let git_dir = format!("--git-dir={}", host.root.join(&parsed.path).display());
        run(
            git(&[&git_dir, "rev-parse", "refs/heads/main"]),
            "git rev-parse",
        )
        .await
    }

    /// Accepts `public_key` (an `authorized_keys` line) from the next login on.
    pub fn authorize(&self, public_key: &str) -> std::io::Result<()> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.push(public_key.trim().to_owned());
        self.write_keys(&keys)
    }

    /// Refuses `public_key` again from the next login on (keys of `--authorized-key` files stay).
    pub fn revoke(&self, public_key: &str) -> std::io::Result<()> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.retain(|k| k != public_key.trim());
        self.write_keys(&keys)
    }

    fn write_keys(&self, keys: &[String]) -> std::io::Result<()> {
        let path = self.dir.path().join("authorized_keys");
        let tmp = path.with_extension("tmp");
        let text: String = keys.iter().map(|k| format!("{k}\n")).collect();
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_users_write() {
        let github = RepoUrl::parse("ssh://git@github.com/acme/fleet.git").unwrap();
        assert_eq!(
            github,
            RepoUrl {
                host: "github.com".into(),
                port: None,
                path: "acme/fleet.git".into()
            }
        );
        let gitea = RepoUrl::parse("ssh://git@gitea.example.internal:2222/infra/fleet").unwrap();
        assert_eq!(gitea.port, Some(2222));
        assert_eq!(gitea.path, "infra/fleet.git");
        let scp = RepoUrl::parse("git@backup.example.internal:srv/git/infra.git").unwrap();
        assert_eq!(scp.host, "backup.example.internal");
        assert_eq!(scp.path, "srv/git/infra.git");
        assert!(RepoUrl::parse("https://github.com/acme/fleet.git").is_err());
        assert!(RepoUrl::parse("ssh://git@github.com/../etc").is_err());
        let (url, dir) =
            GitConfig::parse_repository("ssh://git@github.com/a/b.git=/tmp/x").unwrap();
        assert_eq!(
            (url.as_str(), dir),
            ("ssh://git@github.com/a/b.git", "/tmp/x".into())
        );
    }
}
