//! Unix sockets: the control channel's SOCK_SEQPACKET sockets (listen,
//! connect, accept, a connected pair), packets with descriptors passed
//! beside them, the peer's credentials, and socket buffer sizes.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};

use super::{lend, retry, timespec};

/// Room for the control messages of one received packet: 128 bytes, aligned
/// for `cmsghdr`, as many descriptors as fit in it are taken from the kernel
/// (and those beyond [`MAX_FDS`] closed) before a packet counts as truncated.
#[repr(C, align(8))]
struct RecvControl([MaybeUninit<u8>; 128]);

/// Most descriptors passed in one control message.
pub const MAX_FDS: usize = 4;

/// Send one packet with optional descriptors on a SOCK_SEQPACKET socket.
/// Non-blocking when the socket is; returns the error otherwise.
/// Descriptors beyond [`MAX_FDS`] are not sent.
pub fn send_packet(sock: RawFd, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let sock = lend(sock)?;
    let lent = fds
        .iter()
        .take(MAX_FDS)
        .map(|&fd| lend(fd))
        .collect::<io::Result<Vec<BorrowedFd<'_>>>>()?;
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !lent.is_empty() {
        // Room for MAX_FDS descriptors was made above.
        let pushed = control.push(SendAncillaryMessage::ScmRights(&lent));
        debug_assert!(pushed);
    }
    let iov = [io::IoSlice::new(data)];
    // A packet interrupted before it was sent is sent again (a datagram
    // socket sends all of it or nothing).
    retry(|| {
        Ok(rustix::net::sendmsg(
            sock,
            &iov,
            &mut control,
            SendFlags::NOSIGNAL,
        )?)
    })
    .map(|_| ())
}

/// Receive one packet and any descriptors passed with it. Returns the
/// number of bytes (0 means the peer closed). Descriptors beyond
/// [`MAX_FDS`] are closed. A packet longer than `buf`, or with more
/// descriptors than the control buffer holds, is `InvalidData` (the
/// descriptors that came with it are still in `fds`).
pub fn recv_packet(
    sock: RawFd,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
    nonblocking: bool,
) -> io::Result<usize> {
    let r = recv_packet_checked(sock, buf, fds, nonblocking)?;
    if r.truncated {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "control packet truncated",
        ));
    }
    Ok(r.len)
}

/// What [`recv_packet_checked`] received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Bytes placed in the buffer. 0 is a zero-length packet or the end
    /// of the connection: [`peer_closed`] tells them apart.
    pub len: usize,
    /// The packet was longer than the buffer (the rest is lost), or came
    /// with more descriptors than fit.
    pub truncated: bool,
}

/// [`recv_packet`], but a truncated packet is returned (its first
/// `buf.len()` bytes, marked `truncated`) rather than refused, so that a
/// server can still read its header and answer it.
pub fn recv_packet_checked(
    sock: RawFd,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
    nonblocking: bool,
) -> io::Result<Received> {
    let sock = lend(sock)?;
    let mut space = RecvControl([MaybeUninit::uninit(); 128]);
    let mut control = RecvAncillaryBuffer::new(&mut space.0);
    let mut flags = RecvFlags::CMSG_CLOEXEC;
    if nonblocking {
        flags |= RecvFlags::DONTWAIT;
    }
    let mut iov = [io::IoSliceMut::new(buf)];
    let msg = retry(|| Ok(rustix::net::recvmsg(sock, &mut iov, &mut control, flags)?))?;
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = m {
            for fd in received {
                if fds.len() < MAX_FDS {
                    fds.push(fd);
                }
                // Otherwise dropped here: closed.
            }
        }
    }
    Ok(Received {
        len: msg.bytes,
        truncated: msg
            .flags
            .intersects(ReturnFlags::TRUNC | ReturnFlags::CTRUNC),
    })
}

/// Whether the peer of connected socket `fd` has closed its end (or shut
/// down its writing): after a receive of 0 bytes on a SOCK_SEQPACKET
/// socket, true means the end of the connection, false a zero-length
/// packet.
pub fn peer_closed(fd: RawFd) -> bool {
    let Ok(fd) = lend(fd) else {
        return true;
    };
    let mut p = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::RDHUP,
    )];
    match rustix::event::poll(&mut p, Some(&timespec(Duration::ZERO))) {
        Ok(_) => p[0].revents().intersects(
            rustix::event::PollFlags::RDHUP
                | rustix::event::PollFlags::HUP
                | rustix::event::PollFlags::ERR,
        ),
        Err(_) => true,
    }
}

/// The Unix socket address of `path` (an error when the path is too long
/// for `sun_path`).
pub fn unix_addr(path: &std::path::Path) -> io::Result<libc::sockaddr_un> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let mut addr = libc::sockaddr_un {
        sun_family: libc::AF_UNIX as libc::sa_family_t,
        sun_path: [0; 108],
    };
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "control socket path too long",
        ));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(addr)
}

/// The address of `path` for rustix, after the same length check as
/// [`unix_addr`] (and its error).
fn socket_addr(path: &std::path::Path) -> io::Result<SocketAddrUnix> {
    unix_addr(path)?;
    Ok(SocketAddrUnix::new(path)?)
}

/// A connected pair of SOCK_SEQPACKET sockets (the embedded engine's control
/// channel).
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Ask for `bytes` of receive buffer and of send buffer on a socket: past the
/// system limits (`SO_RCVBUFFORCE`, `SO_SNDBUFFORCE`) when the process may,
/// capped by them otherwise. Best effort: the kernel may give less, and an
/// error leaves the buffer as it was.
pub fn set_socket_buffers(sock: impl AsFd, bytes: usize) {
    use rustix::net::sockopt;
    let (fd, v) = (sock.as_fd(), bytes.min(i32::MAX as usize));
    if sockopt::set_socket_recv_buffer_size_force(fd, v).is_err() {
        let _ = sockopt::set_socket_recv_buffer_size(fd, v);
    }
    if sockopt::set_socket_send_buffer_size_force(fd, v).is_err() {
        let _ = sockopt::set_socket_send_buffer_size(fd, v);
    }
}

/// Process id and user id of the peer of a Unix socket.
pub fn peer_cred(fd: RawFd) -> Option<(u32, u32)> {
    // Through libc: the kernel reports process id 0 for a peer in a process
    // namespace we cannot see, which `rustix::net::UCred` (a non-zero `Pid`)
    // cannot hold.
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `c`, a live ucred
    // of that size, and reads nothing of ours; `fd` is only a number to it.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some((c.pid as u32, c.uid))
}

/// Connect a SOCK_SEQPACKET socket to a daemon's control socket.
pub fn connect_seqpacket(path: &std::path::Path) -> io::Result<OwnedFd> {
    connect_seqpacket_timeout(path, None)
}

/// Connect a SOCK_SEQPACKET socket to a daemon's control socket, waiting
/// at most `timeout` (None: forever) for room in its listener's backlog
/// (`TimedOut` after it). Sends on the socket keep the same limit
/// (`SO_SNDTIMEO`: `WouldBlock` when the daemon takes nothing for that
/// long).
pub fn connect_seqpacket_timeout(
    path: &std::path::Path,
    timeout: Option<Duration>,
) -> io::Result<OwnedFd> {
    let addr = socket_addr(path)?;
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    if timeout.is_some() {
        rustix::net::sockopt::set_socket_timeout(
            &fd,
            rustix::net::sockopt::Timeout::Send,
            timeout,
        )?;
    }
    // A Unix-domain connect a signal interrupted (waiting for room in the
    // listener's backlog) left the socket unconnected: `retry` tries again.
    retry(|| Ok(rustix::net::connect(&fd, &addr)?)).map_err(|e| {
        if e.kind() == io::ErrorKind::WouldBlock {
            io::Error::new(io::ErrorKind::TimedOut, "no room in the listener's backlog")
        } else {
            e
        }
    })?;
    Ok(fd)
}

/// Accept one connection on a listening socket, non-blocking and
/// close-on-exec (`accept4`); `WouldBlock` when none waits (on a
/// non-blocking listener).
pub fn accept(listener: impl AsFd) -> io::Result<OwnedFd> {
    Ok(rustix::net::accept_with(
        listener,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
    )?)
}

/// Listen on a Unix SOCK_SEQPACKET socket at `path` (non-blocking), removing
/// a stale socket file that nobody answers on; refused if an engine listens
/// there already.
pub fn listen_seqpacket(path: &std::path::Path) -> io::Result<OwnedFd> {
    let addr = socket_addr(path)?;
    // A stale socket file from a dead daemon: remove it if nobody answers.
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() || connect_seqpacket(path).is_ok()
        {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("an engine already listens on {}", path.display()),
            ));
        }
        let _ = std::fs::remove_file(path);
    }
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    rustix::net::bind(&fd, &addr)?;
    rustix::net::listen(&fd, 128)?;
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{effective_uid, set_nonblocking, EventFd};
    use rustix::fs::OFlags;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn packets_carry_descriptors_and_at_most_max_fds_are_kept() {
        let (a, b) = seqpacket_pair().unwrap();
        let bells: Vec<EventFd> = (0..6).map(|_| EventFd::new().unwrap()).collect();
        let raw: Vec<RawFd> = bells.iter().map(|e| e.fd().as_raw_fd()).collect();
        send_packet(a.as_raw_fd(), b"hello", &raw[..2]).unwrap();
        let mut buf = [0u8; 64];
        let mut fds = Vec::new();
        let n = recv_packet(b.as_raw_fd(), &mut buf, &mut fds, false).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(fds.len(), 2);
        // The received descriptor is the same eventfd, and close-on-exec.
        EventFd::from_fd(fds.pop().unwrap()).notify();
        assert_eq!(bells[1].drain(), 1);
        let fl = rustix::io::fcntl_getfd(&fds[0]).unwrap();
        assert!(fl.contains(rustix::io::FdFlags::CLOEXEC));

        // send_packet sends MAX_FDS at most.
        fds.clear();
        send_packet(a.as_raw_fd(), b"six", &raw).unwrap();
        assert_eq!(
            recv_packet(b.as_raw_fd(), &mut buf, &mut fds, false).unwrap(),
            3
        );
        assert_eq!(fds.len(), MAX_FDS);

        // A peer that sends more: the ones beyond MAX_FDS are closed.
        fds.clear();
        let lent: Vec<BorrowedFd<'_>> = bells.iter().map(|e| e.fd().as_fd()).collect();
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(6))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        assert!(control.push(SendAncillaryMessage::ScmRights(&lent)));
        rustix::net::sendmsg(
            &a,
            &[io::IoSlice::new(b"x")],
            &mut control,
            SendFlags::empty(),
        )
        .unwrap();
        let open_before = std::fs::read_dir("/proc/self/fd").unwrap().count();
        assert_eq!(
            recv_packet(b.as_raw_fd(), &mut buf, &mut fds, false).unwrap(),
            1
        );
        assert_eq!(fds.len(), MAX_FDS);
        let open_after = std::fs::read_dir("/proc/self/fd").unwrap().count();
        assert_eq!(open_after, open_before + MAX_FDS);
    }

    #[test]
    fn a_truncated_packet_is_invalid_data_and_an_empty_socket_would_block() {
        let (a, b) = seqpacket_pair().unwrap();
        let mut fds = Vec::new();
        let mut small = [0u8; 4];
        let e = recv_packet(b.as_raw_fd(), &mut small, &mut fds, true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        send_packet(a.as_raw_fd(), &[1u8; 100], &[]).unwrap();
        let e = recv_packet(b.as_raw_fd(), &mut small, &mut fds, true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        // A socket made non-blocking would block even when the call blocks.
        set_nonblocking(b.as_raw_fd()).unwrap();
        let e = recv_packet(b.as_raw_fd(), &mut small, &mut fds, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        // The peer gone: 0 bytes.
        drop(a);
        assert_eq!(
            recv_packet(b.as_raw_fd(), &mut small, &mut fds, false).unwrap(),
            0
        );
        // Sending to a closed peer is an error, not a signal.
        let (a, b) = seqpacket_pair().unwrap();
        drop(b);
        let e = send_packet(a.as_raw_fd(), b"x", &[]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
        assert_eq!(
            send_packet(-1, b"x", &[]).unwrap_err().raw_os_error(),
            Some(libc::EBADF)
        );
        assert_eq!(
            send_packet(a.as_raw_fd(), b"x", &[-1])
                .unwrap_err()
                .raw_os_error(),
            Some(libc::EBADF)
        );
    }

    #[test]
    fn control_sockets_listen_connect_and_know_their_peer() {
        let dir = std::env::temp_dir().join(format!("unet-sys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl");
        let l = listen_seqpacket(&path).unwrap();
        let fl = rustix::fs::fcntl_getfl(&l).unwrap();
        assert!(fl.contains(OFlags::NONBLOCK));
        let e = listen_seqpacket(&path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        // The connection that found the listener, already closed.
        let probe = accept(&l).unwrap();
        let mut buf = [0u8; 8];
        let mut fds = Vec::new();
        assert_eq!(
            recv_packet(probe.as_raw_fd(), &mut buf, &mut fds, false).unwrap(),
            0
        );
        let c = connect_seqpacket(&path).unwrap();
        let uid = std::fs::metadata(&dir).unwrap().uid();
        assert_eq!(effective_uid(), uid);
        assert_eq!(peer_cred(c.as_raw_fd()), Some((std::process::id(), uid)));
        let s = accept(&l).unwrap();
        let fl = rustix::fs::fcntl_getfl(&s).unwrap();
        assert!(fl.contains(OFlags::NONBLOCK));
        let fl = rustix::io::fcntl_getfd(&s).unwrap();
        assert!(fl.contains(rustix::io::FdFlags::CLOEXEC));
        assert_eq!(peer_cred(s.as_raw_fd()), Some((std::process::id(), uid)));
        send_packet(c.as_raw_fd(), b"hi", &[]).unwrap();
        assert_eq!(
            recv_packet(s.as_raw_fd(), &mut buf, &mut fds, false).unwrap(),
            2
        );
        let e = accept(&l).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(peer_cred(-1), None);
        drop((l, c));
        // A stale socket file nobody answers on is replaced.
        let l = listen_seqpacket(&path).unwrap();
        drop(l);
        let long = dir.join("x".repeat(200));
        let e = connect_seqpacket(&long).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            listen_seqpacket(&long).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn socket_buffers_grow() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = rustix::net::sockopt::socket_recv_buffer_size(&s).unwrap();
        set_socket_buffers(&s, 4 * before);
        // The kernel doubles what it is given (for its bookkeeping) and caps
        // it at the system limit unless forced: it grows either way.
        assert!(rustix::net::sockopt::socket_recv_buffer_size(&s).unwrap() > before);
        let send = rustix::net::sockopt::socket_send_buffer_size(&s).unwrap();
        set_socket_buffers(&s, usize::MAX);
        assert!(rustix::net::sockopt::socket_send_buffer_size(&s).unwrap() >= send);
    }
}
