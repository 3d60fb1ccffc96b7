//! Loopback ports for the components a test starts, which bind them a moment later.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// The ports handed out: below the kernel's ephemeral range (32768-60999 by default on Linux).
/// A port `bind(0)` returned is in that range, and between the check and the component's own
/// bind an outgoing connection (a client of the apiserver, of which a closed-loop run opens
/// thousands) could be given it: the apiserver then failed with "address already in use".
const LOW: u32 = 20_000;
const SPAN: u32 = 12_000;

/// A loopback port nothing listens on now, from [`LOW`] up; each test binary starts at an
/// offset of its own (its pid), so two running at once do not walk the same ports.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let offset = std::process::id().wrapping_mul(7_919);
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = LOW + offset.wrapping_add(n) % SPAN;
        let port = u16::try_from(port).expect("below 32,000");
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port between {LOW} and {}", LOW + SPAN);
}
