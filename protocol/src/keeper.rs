//! The messages between the keeper and the daemon it runs (see `docs/recovery.md`).
//!
//! They travel over a `SOCK_SEQPACKET` socketpair, one message per packet, so a message is
//! read whole or not at all and its size is bounded by the buffer the reader offers
//! ([`MESSAGE_MAX`]): a packet that does not fit is truncated by the kernel (`MSG_TRUNC`)
//! and refused here, never grown into. A message that carries a PTY master
//! ([`ToKeeper::Register`], [`FromKeeper::Survivor`]) carries it as the first
//! `SCM_RIGHTS` descriptor, optionally followed by the session's screen memory (a memfd,
//! see `docs/recovery.md`); the codec only says which ones must.
//!
//! Encoding: one tag byte, then the fields in order: a pid as a little-endian `u32`, a
//! string as one length byte and that many bytes of printable ASCII (ids and tokens are hex
//! and dashes), a [`ChildStatus`] as one kind byte (0 none, 1 exit code, 2 signal) and a
//! little-endian `i32`. Trailing bytes are an error. Nothing here allocates more than the
//! packet it decodes.

/// The largest packet either side reads; anything longer is refused.
pub const MESSAGE_MAX: usize = 1024;
/// The longest string field (ids are 36 characters, tokens 32).
pub const FIELD_MAX: usize = 64;

/// How a session's child ended, as `waitpid` reported it to the keeper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildStatus {
    /// `exit(code)`.
    Code(i32),
    /// Killed by signal number N.
    Signal(i32),
}

/// What the daemon tells its keeper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToKeeper {
    /// A session's child was spawned (or re-adopted): hold this master (the one descriptor
    /// the packet carries) under `surface_id`.
    Register {
        /// The session.
        session_id: String,
        /// The surface: unique per spawn, the key the keeper files the master under.
        surface_id: String,
        /// The child's pid (a session leader: also its process group).
        pid: u32,
        /// The surface's registration secret, handed back only to the next daemon.
        token: String,
    },
    /// The surface is gone (closed, archived, restarted, daemon stop): drop its master, and
    /// end its process group if the keeper is its parent.
    Close {
        /// The surface.
        surface_id: String,
    },
    /// The daemon serves its socket: a death from now on is a crash worth a restart.
    Ready,
    /// The daemon is stopping on request (or for a reason a restart would not cure) and ends
    /// its sessions: do not restart it.
    Stopping,
}

/// What the keeper tells the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromKeeper {
    /// A session that outlived the previous daemon: its master is the packet's descriptor.
    Survivor {
        /// The session, as the previous daemon registered it.
        session_id: String,
        /// Its surface.
        surface_id: String,
        /// Its child's pid.
        pid: u32,
        /// Its registration secret.
        token: String,
        /// How the child ended while no daemon was there, if it did.
        status: Option<ChildStatus>,
    },
    /// Every survivor has been sent (`count` of them). Every daemon the keeper starts gets
    /// one, the first with no survivors.
    HandoffEnd {
        /// How many survivors came before.
        count: u32,
        /// Daemons the keeper started before this one: 0 on a first start, more after a
        /// recovery.
        daemons_before: u32,
    },
    /// A child the keeper is the parent of (a re-adopted session) ended.
    Exited {
        /// Its surface.
        surface_id: String,
        /// Its pid.
        pid: u32,
        /// How it ended.
        status: ChildStatus,
    },
}

/// Why a packet was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Empty, cut short, or longer than [`MESSAGE_MAX`].
    Length,
    /// An unknown tag byte.
    Tag(u8),
    /// A string field that is too long or not printable ASCII.
    Field,
    /// A status kind byte other than 0, 1, 2.
    Status(u8),
    /// Bytes after the last field.
    Trailing,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Length => f.write_str("a packet of the wrong length"),
            DecodeError::Tag(t) => write!(f, "an unknown message tag {t}"),
            DecodeError::Field => f.write_str("a malformed string field"),
            DecodeError::Status(k) => write!(f, "an unknown status kind {k}"),
            DecodeError::Trailing => f.write_str("bytes after the message"),
        }
    }
}

impl std::error::Error for DecodeError {}

const TAG_REGISTER: u8 = b'R';
const TAG_CLOSE: u8 = b'C';
const TAG_READY: u8 = b'Y';
const TAG_STOPPING: u8 = b'S';
const TAG_SURVIVOR: u8 = b'V';
const TAG_HANDOFF_END: u8 = b'E';
const TAG_EXITED: u8 = b'X';

impl ToKeeper {
    /// Whether this message must carry exactly one descriptor.
    pub fn carries_fd(&self) -> bool {
        matches!(self, ToKeeper::Register { .. })
    }

    /// How many descriptors the packet may carry: a `Register` its master, optionally
    /// followed by the screen's memory (a memfd the keeper only holds and hands back).
    pub fn fds_allowed(&self) -> std::ops::RangeInclusive<usize> {
        if self.carries_fd() {
            1..=2
        } else {
            0..=0
        }
    }

    /// The packet. `None` if a string field is too long or not printable ASCII.
    pub fn encode(&self) -> Option<Vec<u8>> {
        let mut w = Writer::default();
        match self {
            ToKeeper::Register {
                session_id,
                surface_id,
                pid,
                token,
            } => {
                w.tag(TAG_REGISTER);
                w.u32(*pid);
                w.str(session_id)?;
                w.str(surface_id)?;
                w.str(token)?;
            }
            ToKeeper::Close { surface_id } => {
                w.tag(TAG_CLOSE);
                w.str(surface_id)?;
            }
            ToKeeper::Ready => w.tag(TAG_READY),
            ToKeeper::Stopping => w.tag(TAG_STOPPING),
        }
        Some(w.0)
    }

    /// Read one packet.
    pub fn decode(packet: &[u8]) -> Result<ToKeeper, DecodeError> {
        let mut r = Reader::new(packet)?;
        let msg = match r.tag()? {
            TAG_REGISTER => ToKeeper::Register {
                pid: r.u32()?,
                session_id: r.str()?,
                surface_id: r.str()?,
                token: r.str()?,
            },
            TAG_CLOSE => ToKeeper::Close {
                surface_id: r.str()?,
            },
            TAG_READY => ToKeeper::Ready,
            TAG_STOPPING => ToKeeper::Stopping,
            other => return Err(DecodeError::Tag(other)),
        };
        r.end()?;
        Ok(msg)
    }
}

impl FromKeeper {
    /// Whether this message must carry exactly one descriptor.
    pub fn carries_fd(&self) -> bool {
        matches!(self, FromKeeper::Survivor { .. })
    }

    /// How many descriptors the packet may carry: a `Survivor` its master, optionally
    /// followed by the screen's memory the daemon registered with it.
    pub fn fds_allowed(&self) -> std::ops::RangeInclusive<usize> {
        if self.carries_fd() {
            1..=2
        } else {
            0..=0
        }
    }

    /// The packet. `None` if a string field is too long or not printable ASCII.
    pub fn encode(&self) -> Option<Vec<u8>> {
        let mut w = Writer::default();
        match self {
            FromKeeper::Survivor {
                session_id,
                surface_id,
                pid,
                token,
                status,
            } => {
                w.tag(TAG_SURVIVOR);
                w.u32(*pid);
                w.status(*status);
                w.str(session_id)?;
                w.str(surface_id)?;
                w.str(token)?;
            }
            FromKeeper::HandoffEnd {
                count,
                daemons_before,
            } => {
                w.tag(TAG_HANDOFF_END);
                w.u32(*count);
                w.u32(*daemons_before);
            }
            FromKeeper::Exited {
                surface_id,
                pid,
                status,
            } => {
                w.tag(TAG_EXITED);
                w.u32(*pid);
                w.status(Some(*status));
                w.str(surface_id)?;
            }
        }
        Some(w.0)
    }

    /// Read one packet.
    pub fn decode(packet: &[u8]) -> Result<FromKeeper, DecodeError> {
        let mut r = Reader::new(packet)?;
        let msg = match r.tag()? {
            TAG_SURVIVOR => FromKeeper::Survivor {
                pid: r.u32()?,
                status: r.status()?,
                session_id: r.str()?,
                surface_id: r.str()?,
                token: r.str()?,
            },
            TAG_HANDOFF_END => FromKeeper::HandoffEnd {
                count: r.u32()?,
                daemons_before: r.u32()?,
            },
            TAG_EXITED => {
                let pid = r.u32()?;
                let status = r.status()?.ok_or(DecodeError::Status(0))?;
                FromKeeper::Exited {
                    pid,
                    status,
                    surface_id: r.str()?,
                }
            }
            other => return Err(DecodeError::Tag(other)),
        };
        r.end()?;
        Ok(msg)
    }
}

#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn tag(&mut self, tag: u8) {
        self.0.push(tag);
    }

    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn str(&mut self, s: &str) -> Option<()> {
        if s.len() > FIELD_MAX || !s.bytes().all(|b| b.is_ascii_graphic()) {
            return None;
        }
        self.0.push(s.len() as u8);
        self.0.extend_from_slice(s.as_bytes());
        Some(())
    }

    fn status(&mut self, status: Option<ChildStatus>) {
        let (kind, value) = match status {
            None => (0u8, 0),
            Some(ChildStatus::Code(c)) => (1, c),
            Some(ChildStatus::Signal(s)) => (2, s),
        };
        self.0.push(kind);
        self.0.extend_from_slice(&value.to_le_bytes());
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn new(packet: &'a [u8]) -> Result<Self, DecodeError> {
        if packet.is_empty() || packet.len() > MESSAGE_MAX {
            return Err(DecodeError::Length);
        }
        Ok(Reader(packet))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Length);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn tag(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        let b = self.take(4)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn str(&mut self) -> Result<String, DecodeError> {
        let len = self.take(1)?[0] as usize;
        if len > FIELD_MAX {
            return Err(DecodeError::Field);
        }
        let bytes = self.take(len)?;
        if !bytes.iter().all(u8::is_ascii_graphic) {
            return Err(DecodeError::Field);
        }
        // Printable ASCII is UTF-8.
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    fn status(&mut self) -> Result<Option<ChildStatus>, DecodeError> {
        let kind = self.take(1)?[0];
        let value = self.i32()?;
        match kind {
            0 => Ok(None),
            1 => Ok(Some(ChildStatus::Code(value))),
            2 => Ok(Some(ChildStatus::Signal(value))),
            other => Err(DecodeError::Status(other)),
        }
    }

    fn end(&self) -> Result<(), DecodeError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Trailing)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "6F0A1B2C-0000-4000-8000-000000000001";

    #[test]
    fn every_message_round_trips() {
        for msg in [
            ToKeeper::Register {
                session_id: ID.into(),
                surface_id: "S1".into(),
                pid: 4242,
                token: "ab".repeat(16),
            },
            ToKeeper::Close {
                surface_id: "S1".into(),
            },
            ToKeeper::Ready,
            ToKeeper::Stopping,
        ] {
            let packet = msg.encode().unwrap();
            assert!(packet.len() <= MESSAGE_MAX);
            assert_eq!(ToKeeper::decode(&packet), Ok(msg));
        }
        for msg in [
            FromKeeper::Survivor {
                session_id: ID.into(),
                surface_id: "S1".into(),
                pid: 7,
                token: "cd".repeat(16),
                status: None,
            },
            FromKeeper::Survivor {
                session_id: ID.into(),
                surface_id: "S2".into(),
                pid: 8,
                token: "cd".repeat(16),
                status: Some(ChildStatus::Code(7)),
            },
            FromKeeper::HandoffEnd {
                count: 2,
                daemons_before: 1,
            },
            FromKeeper::Exited {
                surface_id: "S1".into(),
                pid: 7,
                status: ChildStatus::Signal(9),
            },
        ] {
            let packet = msg.encode().unwrap();
            assert_eq!(FromKeeper::decode(&packet), Ok(msg));
        }
    }

    #[test]
    fn only_the_master_carrying_messages_need_a_descriptor() {
        assert!(ToKeeper::Register {
            session_id: ID.into(),
            surface_id: "S".into(),
            pid: 1,
            token: "t".into()
        }
        .carries_fd());
        assert!(!ToKeeper::Ready.carries_fd());
        assert!(!FromKeeper::HandoffEnd {
            count: 0,
            daemons_before: 0
        }
        .carries_fd());
    }

    #[test]
    fn malformed_packets_are_refused_not_guessed() {
        assert_eq!(ToKeeper::decode(&[]), Err(DecodeError::Length));
        assert_eq!(
            ToKeeper::decode(&vec![TAG_READY; MESSAGE_MAX + 1]),
            Err(DecodeError::Length)
        );
        assert_eq!(ToKeeper::decode(b"Z"), Err(DecodeError::Tag(b'Z')));
        assert_eq!(ToKeeper::decode(b"YY"), Err(DecodeError::Trailing));
        // A string longer than the packet, one past the field limit, one with a control byte.
        assert_eq!(ToKeeper::decode(b"C\x05ab"), Err(DecodeError::Length));
        let mut long = vec![TAG_CLOSE, (FIELD_MAX + 1) as u8];
        long.extend(std::iter::repeat_n(b'a', FIELD_MAX + 1));
        assert_eq!(ToKeeper::decode(&long), Err(DecodeError::Field));
        assert_eq!(ToKeeper::decode(b"C\x02a\n"), Err(DecodeError::Field));
        // A status kind that does not exist; an `Exited` without a status.
        let mut bad = vec![TAG_EXITED, 7, 0, 0, 0];
        bad.extend_from_slice(&[3, 0, 0, 0, 0, 1, b'S']);
        assert_eq!(FromKeeper::decode(&bad), Err(DecodeError::Status(3)));
        bad[5] = 0;
        assert_eq!(FromKeeper::decode(&bad), Err(DecodeError::Status(0)));
        // Fields the encoder will not write.
        assert_eq!(
            ToKeeper::Close {
                surface_id: "a b".into()
            }
            .encode(),
            None
        );
        assert_eq!(
            ToKeeper::Close {
                surface_id: "a".repeat(FIELD_MAX + 1)
            }
            .encode(),
            None
        );
    }
}
