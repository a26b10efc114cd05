//! Loopback-only network namespaces: a node's host network, or one pod's own network. Each is
//! created by a short-lived thread (network namespaces are per thread), which brings up `lo`,
//! binds the namespace's listeners and hands back a descriptor of the namespace for processes to
//! join (`setns`). The listeners' relays run in this process, whose other threads stay in the
//! host's namespace: they connect to the apiserver and the chart server on the host's loopback,
//! so a pod reaches exactly what its namespace listens on, and nothing outside loopback.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A listener inside the namespace and where its connections are relayed to on the host.
#[derive(Clone, Debug)]
pub struct Relay {
    pub listen: SocketAddr,
    pub target: SocketAddr,
}

/// A network namespace that lives as long as this value (and the processes in it).
#[derive(Debug)]
pub struct NetNs {
    fd: OwnedFd,
    stop: CancellationToken,
}

impl NetNs {
    /// Creates a namespace with `lo` up and `relays` listening in it.
    pub async fn create(relays: Vec<Relay>) -> std::io::Result<NetNs> {
        let (fd, listeners) = tokio::task::spawn_blocking(move || {
            std::thread::spawn(
                move || -> std::io::Result<(OwnedFd, Vec<(std::net::TcpListener, Relay)>)> {
                    // SAFETY: this thread is ours and does nothing else before it exits.
                    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                        return Err(std::io::Error::other(format!(
                            "failed to create a network namespace (needs root): {}",
                            std::io::Error::last_os_error()
                        )));
                    }
                    loopback_up()?;
                    let path = c"/proc/thread-self/ns/net";
                    // SAFETY: a plain open(2) of a NUL-terminated path.
                    let raw =
                        unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
                    if raw < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // SAFETY: `raw` is a fresh descriptor we own.
                    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
                    let mut listeners = Vec::new();
                    for relay in relays {
                        let listener = std::net::TcpListener::bind(relay.listen)?;
                        listener.set_nonblocking(true)?;
                        listeners.push((listener, relay));
                    }
                    Ok((fd, listeners))
                },
            )
            .join()
            .map_err(|_| std::io::Error::other("the namespace thread panicked"))?
        })
        .await
        .map_err(std::io::Error::other)??;
        let stop = CancellationToken::new();
        for (listener, relay) in listeners {
            let listener = TcpListener::from_std(listener)?;
            tokio::spawn(serve_relay(listener, relay.target, stop.clone()));
        }
        Ok(NetNs { fd, stop })
    }

    /// The namespace's descriptor, for `setns(fd, CLONE_NEWNET)` in a child.
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Runs `work` on a short-lived thread that has joined this namespace: the sockets it
    /// creates (listeners, connections) belong to the namespace and keep working from any
    /// thread once handed back.
    pub async fn within<T, F>(&self, work: F) -> std::io::Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> std::io::Result<T> + Send + 'static,
    {
        let fd = self.fd.try_clone()?;
        tokio::task::spawn_blocking(move || {
            std::thread::spawn(move || {
                // SAFETY: setns(2) of this thread, which is ours and ends after `work`.
                if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                work()
            })
            .join()
            .map_err(|_| std::io::Error::other("the namespace thread panicked"))?
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// A TCP connection to `addr` made from inside this namespace (a pod's own loopback).
    pub async fn connect(&self, addr: SocketAddr) -> std::io::Result<TcpStream> {
        let stream = self
            .within(move || {
                let stream =
                    std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(5))?;
                stream.set_nonblocking(true)?;
                Ok(stream)
            })
            .await?;
        TcpStream::from_std(stream)
    }

    /// Listeners bound inside this namespace, one per address.
    pub async fn bind(
        &self,
        addrs: Vec<SocketAddr>,
    ) -> std::io::Result<Vec<std::io::Result<TcpListener>>> {
        let bound = self
            .within(move || {
                Ok(addrs
                    .into_iter()
                    .map(|addr| {
                        let listener = std::net::TcpListener::bind(addr)?;
                        listener.set_nonblocking(true)?;
                        Ok(listener)
                    })
                    .collect::<Vec<std::io::Result<std::net::TcpListener>>>())
            })
            .await?;
        Ok(bound
            .into_iter()
            .map(|l| l.and_then(TcpListener::from_std))
            .collect())
    }

    /// A token cancelled when this namespace is dropped, for tasks that serve in it.
    pub fn stopped(&self) -> CancellationToken {
        self.stop.child_token()
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn serve_relay(listener: TcpListener, target: SocketAddr, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((mut inbound, _)) = accepted else {
            continue;
        };
        let stop = stop.clone();
        tokio::spawn(async move {
            let Ok(mut outbound) = TcpStream::connect(target).await else {
                return; // the far side is down: the client sees the connection close
            };
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
            }
        });
    }
}

/// `ifreq` with the flags member of its union, as `SIOC[GS]IFFLAGS` use it.
#[repr(C)]
struct IfReqFlags {
    name: [u8; 16],
    flags: libc::c_short,
    _pad: [u8; 22],
}

const SIOCGIFFLAGS: libc::c_ulong = 0x8913;
const SIOCSIFFLAGS: libc::c_ulong = 0x8914;

/// `ip link set lo up` in the calling thread's namespace.
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: a datagram socket used for two ioctls on a correctly sized, owned struct.
    unsafe {
        let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if sock < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let sock = OwnedFd::from_raw_fd(sock);
        let mut req = IfReqFlags {
            name: [0; 16],
            flags: 0,
            _pad: [0; 22],
        };
        req.name[..2].copy_from_slice(b"lo");
        if libc::ioctl(sock.as_raw_fd(), SIOCGIFFLAGS as _, &mut req) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        req.flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), SIOCSIFFLAGS as _, &mut req) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
