//! A pod's start time, kept compact for the running-pod table.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A start time in 12 bytes with 4-byte alignment (`Option<SystemTime>` takes 16 and 8):
/// whole seconds since the epoch (two's complement, low half first) and nanoseconds; none
/// with nanoseconds past a second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Since {
    secs: [u32; 2],
    nanos: u32,
}

impl Since {
    const NONE: Since = Since {
        secs: [0, 0],
        nanos: u32::MAX,
    };

    pub(super) fn of(time: Option<SystemTime>) -> Self {
        let Some(time) = time else {
            return Since::NONE;
        };
        let (secs, nanos) = match time.duration_since(UNIX_EPOCH) {
            Ok(after) => match i64::try_from(after.as_secs()) {
                Ok(secs) => (secs, after.subsec_nanos()),
                Err(_) => return Since::NONE,
            },
            Err(before) => {
                let before = before.duration();
                let Ok(secs) = i64::try_from(before.as_secs()) else {
                    return Since::NONE;
                };
                match before.subsec_nanos() {
                    0 => (-secs, 0),
                    n => (-secs - 1, 1_000_000_000 - n),
                }
            }
        };
        let bits = secs as u64;
        Since {
            secs: [bits as u32, (bits >> 32) as u32],
            nanos,
        }
    }

    pub(super) fn get(self) -> Option<SystemTime> {
        if self.nanos >= 1_000_000_000 {
            return None;
        }
        let secs = ((u64::from(self.secs[1]) << 32) | u64::from(self.secs[0])) as i64;
        let nanos = Duration::from_nanos(u64::from(self.nanos));
        match u64::try_from(secs) {
            Ok(after) => UNIX_EPOCH.checked_add(Duration::from_secs(after) + nanos),
            Err(_) => UNIX_EPOCH
                .checked_sub(Duration::from_secs(secs.unsigned_abs()))?
                .checked_add(nanos),
        }
    }
}
