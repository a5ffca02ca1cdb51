//! Output: every line stamped with the time since the demo started; sizes in MiB beside bytes.

use std::fmt::Display;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static STARTED: OnceLock<Instant> = OnceLock::new();

pub fn start_clock() {
    STARTED.get_or_init(Instant::now);
}

pub fn elapsed() -> Duration {
    STARTED.get_or_init(Instant::now).elapsed()
}

/// One line of the timeline: `[  12.3s] text`.
pub fn line(text: impl Display) {
    println!("[{:>6.1}s] {text}", elapsed().as_secs_f64());
}

/// A step of the walk-through, set apart from the timeline.
pub fn step(text: impl Display) {
    println!("\n[{:>6.1}s] ── {text}", elapsed().as_secs_f64());
}

const MIB: f64 = 1024.0 * 1024.0;

/// `64.3 MiB`.
pub fn mib(bytes: i64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB)
}

/// `64.3 MiB (67,436,544 B)`: readable, and exact.
pub fn mib_and_bytes(bytes: i64) -> String {
    format!("{} ({} B)", mib(bytes), thousands(bytes))
}

/// `67,436,544`.
pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// The first characters of a ring hash: enough to tell two apart.
pub fn short_hash(hash: &str) -> &str {
    hash.get(..8).unwrap_or(hash)
}
