//! How long to wait before trying again: doubling from a base, never past a cap. The runtime's
//! model calls and the outbox's deliveries both wait this way.

use std::time::Duration;

/// `base` doubled `doublings` times (none below zero), at most `max`.
pub fn exponential(base: Duration, max: Duration, doublings: i32) -> Duration {
    let factor = 2u32.saturating_pow(u32::try_from(doublings).unwrap_or(0).min(20));
    base.saturating_mul(factor).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_the_base_up_to_the_cap() {
        let (base, max) = (Duration::from_secs(1), Duration::from_secs(300));
        let waits: Vec<u64> = (-1..11).map(|n| exponential(base, max, n).as_secs()).collect();
        assert_eq!(waits, [1, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(exponential(base, max, i32::MAX), max);
    }
}
