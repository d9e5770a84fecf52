//! One packet on the keeper's `SOCK_SEQPACKET` socketpair: send with its descriptors,
//! receive into a bounded buffer. Shared by the keeper (blocking-free `poll` loop, no
//! runtime) and the daemon's side of the link.

use nix::sys::socket::{
    recvmsg, sendmsg, socketpair, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags,
    SockFlag, SockType,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// A fresh socketpair for a keeper and one daemon: both ends close-on-exec (the keeper
/// places the daemon's end at a fixed descriptor for its child only) and non-blocking.
pub fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
    )
    .map_err(io::Error::from)
}

/// Send one packet, with `fds` attached as `SCM_RIGHTS` (in order) if any. `WouldBlock` when the
/// peer's queue is full (nothing was sent); `MSG_NOSIGNAL`: a gone peer is `EPIPE`, never a
/// signal.
pub fn send(sock: BorrowedFd<'_>, packet: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let iov = [IoSlice::new(packet)];
    let fds: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let cmsgs: Vec<ControlMessage> = if fds.is_empty() {
        Vec::new()
    } else {
        vec![ControlMessage::ScmRights(&fds)]
    };
    loop {
        match sendmsg::<()>(
            sock.as_raw_fd(),
            &iov,
            &cmsgs,
            MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
            None,
        ) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// One received packet.
pub struct Received {
    /// Its length in the buffer.
    pub len: usize,
    /// The descriptors it carried (close-on-exec, owned).
    pub fds: Vec<OwnedFd>,
    /// The packet or its descriptors did not fit: refuse it (the descriptors that did
    /// arrive are in `fds`, to be dropped).
    pub truncated: bool,
}

/// Descriptors one packet may carry before it counts as truncated.
const FDS_MAX: usize = 4;

/// Receive one packet into `buf` without blocking. `Ok(None)`: the peer closed its end.
/// `WouldBlock`: nothing queued.
pub fn recv(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<Received>> {
    let mut cmsg = nix::cmsg_space!([RawFd; FDS_MAX]);
    loop {
        let mut iov = [IoSliceMut::new(buf)];
        let msg = match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(msg) => msg,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        let mut fds = Vec::new();
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmRights(raw) = c {
                    // SAFETY: the kernel just installed these descriptors in this process.
                    fds.extend(raw.into_iter().map(|r| unsafe { OwnedFd::from_raw_fd(r) }));
                }
            }
        }
        let truncated = msg
            .flags
            .intersects(MsgFlags::MSG_TRUNC | MsgFlags::MSG_CTRUNC);
        if msg.bytes == 0 && fds.is_empty() && !truncated {
            // SEQPACKET: a zero-length read is the peer's close (we never send empty packets).
            return Ok(None);
        }
        return Ok(Some(Received {
            len: msg.bytes,
            fds,
            truncated,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_packet_and_its_descriptor_arrive_together() {
        let (a, b) = pair().unwrap();
        let devnull = std::fs::File::open("/dev/null").unwrap();
        send(a.as_fd(), b"hello", &[devnull.as_fd()]).unwrap();
        send(a.as_fd(), b"again", &[]).unwrap();
        let mut buf = [0u8; 16];
        let got = recv(b.as_fd(), &mut buf).unwrap().unwrap();
        assert_eq!(&buf[..got.len], b"hello");
        assert_eq!(got.fds.len(), 1);
        assert!(!got.truncated);
        // Received close-on-exec.
        let flags = unsafe { libc::fcntl(got.fds[0].as_raw_fd(), libc::F_GETFD) };
        assert_ne!(flags & libc::FD_CLOEXEC, 0);
        let got = recv(b.as_fd(), &mut buf).unwrap().unwrap();
        assert_eq!((&buf[..got.len], got.fds.len()), (&b"again"[..], 0));
        let err = recv(b.as_fd(), &mut buf).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        drop(a);
        assert!(recv(b.as_fd(), &mut buf).unwrap().is_none());
    }

    #[test]
    fn an_oversized_packet_is_flagged_never_grown_into() {
        let (a, b) = pair().unwrap();
        send(a.as_fd(), &[7u8; 64], &[]).unwrap();
        let mut buf = [0u8; 16];
        let got = recv(b.as_fd(), &mut buf).unwrap().unwrap();
        assert!(got.truncated);
        assert_eq!(got.len, 16);
    }
}
