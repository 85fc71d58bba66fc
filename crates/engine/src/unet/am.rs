//! The active messages host endpoints send to SPINE: the U-Net data path
//! checks a send descriptor with `SEND_AM`, copies its message here, and
//! SPINE's turn takes it from here (SPINE sits above U-Net and reaches
//! down; U-Net never calls SPINE).
//!
//! The inbox also holds which handler numbers some extension has (SPINE
//! keeps it up to date), so that a send to a number nobody handles is
//! refused at once, with a status the client sees, rather than dropped
//! later.

use std::collections::VecDeque;

use unet_abi::spine::{AM_ARGS_MAX, AM_FRAME_PREFIX, SPINE_MAX_HANDLER};

/// Most active messages waiting for SPINE's turn.
pub(crate) const AM_INBOX_MAX: usize = 1024;

/// One active message from a host endpoint, in the host framing
/// (`[args_len: u16][args][bulk]`).
pub(crate) struct HostAm {
    /// The sender's endpoint id.
    pub endpoint: u32,
    pub handler: u16,
    pub data: Vec<u8>,
}

/// Why the inbox refused a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AmRefusal {
    /// No room now.
    Full,
    /// No extension has the handler number, or the framing is bad.
    Refused,
}

/// The inbox (see the module documentation).
pub(crate) struct AmInbox {
    pub queue: VecDeque<HostAm>,
    /// Buffers of messages SPINE took, for the next ones.
    pool: Vec<Vec<u8>>,
    /// A bit per handler number that some extension has.
    handlers: [u64; (SPINE_MAX_HANDLER as usize + 1) / 64],
    /// The largest bulk part SPINE takes.
    pub bulk_max: usize,
}

impl Default for AmInbox {
    fn default() -> Self {
        AmInbox {
            queue: VecDeque::new(),
            pool: Vec::new(),
            handlers: [0; (SPINE_MAX_HANDLER as usize + 1) / 64],
            bulk_max: 0,
        }
    }
}

impl AmInbox {
    /// Whether some extension has handler `h`.
    #[inline]
    pub(crate) fn handled(&self, h: u16) -> bool {
        let h = h as usize;
        h <= SPINE_MAX_HANDLER as usize && self.handlers[h / 64] & (1 << (h % 64)) != 0
    }

    /// Mark handler `h` as had (`on`) or not.
    pub(crate) fn set_handled(&mut self, h: u16, on: bool) {
        let h = h as usize;
        if h <= SPINE_MAX_HANDLER as usize {
            if on {
                self.handlers[h / 64] |= 1 << (h % 64);
            } else {
                self.handlers[h / 64] &= !(1 << (h % 64));
            }
        }
    }

    /// Check the framing of `msg` (sent to `handler` by endpoint
    /// `endpoint`) and queue a copy for SPINE.
    pub(crate) fn offer(
        &mut self,
        endpoint: u32,
        handler: u16,
        msg: &[u8],
    ) -> Result<(), AmRefusal> {
        if !self.handled(handler) || msg.len() < AM_FRAME_PREFIX {
            return Err(AmRefusal::Refused);
        }
        let args = u16::from_le_bytes([msg[0], msg[1]]) as usize;
        let bulk = msg.len() - AM_FRAME_PREFIX;
        if args > AM_ARGS_MAX || args > bulk || bulk - args > self.bulk_max {
            return Err(AmRefusal::Refused);
        }
        if self.queue.len() >= AM_INBOX_MAX {
            return Err(AmRefusal::Full);
        }
        let mut data = self.pool.pop().unwrap_or_default();
        data.clear();
        data.extend_from_slice(msg);
        self.queue.push_back(HostAm {
            endpoint,
            handler,
            data,
        });
        Ok(())
    }

    /// Keep a taken message's buffer for the next one.
    pub(crate) fn recycle(&mut self, data: Vec<u8>) {
        if self.pool.len() < 64 {
            self.pool.push(data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_are_checked_before_they_are_queued() {
        let mut inbox = AmInbox {
            bulk_max: 8,
            ..AmInbox::default()
        };
        let msg = [2, 0, b'h', b'i', 1, 2, 3];
        assert_eq!(
            inbox.offer(1, 70, &msg),
            Err(AmRefusal::Refused),
            "no handler"
        );
        inbox.set_handled(70, true);
        assert!(inbox.handled(70) && !inbox.handled(71) && !inbox.handled(5000));
        inbox.offer(1, 70, &msg).unwrap();
        assert_eq!(inbox.offer(1, 70, &[1]), Err(AmRefusal::Refused), "short");
        assert_eq!(inbox.offer(1, 70, &[3, 0, 1, 2]), Err(AmRefusal::Refused));
        assert_eq!(inbox.offer(1, 70, &[241, 0]), Err(AmRefusal::Refused));
        assert_eq!(
            inbox.offer(1, 70, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(AmRefusal::Refused),
            "bulk too long"
        );
        for _ in 1..AM_INBOX_MAX {
            inbox.offer(1, 70, &msg).unwrap();
        }
        assert_eq!(inbox.offer(1, 70, &msg), Err(AmRefusal::Full));
        let m = inbox.queue.pop_front().unwrap();
        assert_eq!((m.endpoint, m.handler, &m.data[..]), (1, 70, &msg[..]));
        inbox.set_handled(70, false);
        assert!(!inbox.handled(70));
    }
}
