//! The PTY master descriptor and the three ioctls a session needs on it. Owned by the
//! daemon whether it opened the PTY or the keeper handed it over.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// A PTY master.
pub(super) struct Master(OwnedFd);

impl Master {
    pub(super) fn new(fd: OwnedFd) -> Master {
        Master(fd)
    }

    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.0)
    }

    /// `TIOCSWINSZ`: the kernel tells the foreground process group (SIGWINCH).
    pub(super) fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize.
        if unsafe { libc::ioctl(self.0.as_raw_fd(), libc::TIOCSWINSZ, &size) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// `TIOCGWINSZ`: (cols, rows).
    pub(super) fn size(&self) -> io::Result<(u16, u16)> {
        // SAFETY: a zeroed winsize is a valid out-parameter.
        let mut size: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: TIOCGWINSZ writes one winsize.
        if unsafe { libc::ioctl(self.0.as_raw_fd(), libc::TIOCGWINSZ, &mut size) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((size.ws_col, size.ws_row))
    }

    /// `tcgetpgrp`: the terminal's foreground process group.
    pub(super) fn foreground_pgrp(&self) -> Option<i32> {
        // SAFETY: tcgetpgrp on an open descriptor.
        let pgrp = unsafe { libc::tcgetpgrp(self.0.as_raw_fd()) };
        (pgrp > 0).then_some(pgrp)
    }
}
