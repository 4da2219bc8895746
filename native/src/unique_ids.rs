//! Client-side message ids (the UNIQ_KEY property) in the layout of the Java client's MessageClientIDSetter, as
//! `rmq_spark/client/unique_ids.py` makes them (the same steps, differential-tested): a fixed 20-hex-digit prefix
//! (fake IP, pid, random), then the milliseconds since the month started and a counter, upper-case hex.

use std::time::{SystemTime, UNIX_EPOCH};

const HEX: &[u8; 16] = b"0123456789ABCDEF";

pub struct UniqueIds {
    prefix: Vec<u8>,
    month_start_ms: i64,
    last_diff: i64,
    counter: u32,
}

impl UniqueIds {
    /// `prefix`: the 20 upper-case hex digits of this generator; `month_start_ms`: when the month of its ids
    /// began (local time, ms since the epoch). The caller starts a new generator with a new prefix each month.
    pub fn new(prefix: &str, month_start_ms: i64) -> Result<Self, String> {
        if prefix.len() != 20 || !prefix.bytes().all(|b| HEX.contains(&b)) {
            return Err(format!("a UNIQ_KEY prefix is 20 upper-case hex digits, not {prefix:?}"));
        }
        Ok(UniqueIds { prefix: prefix.as_bytes().to_vec(), month_start_ms, last_diff: -1, counter: 0 })
    }

    /// Appends the next id, made at `now_ms`, to `out`: the (ms, counter) pair only moves forward.
    pub fn push_next(&mut self, now_ms: i64, out: &mut Vec<u8>) {
        let mut diff = (now_ms - self.month_start_ms).max(self.last_diff).max(0);
        let counter = self.counter;
        if diff == self.last_diff && counter == 0 {
            diff += 1; // the counter wrapped within one millisecond: move time forward instead
        }
        self.counter = (counter + 1) & 0xFFFF;
        self.last_diff = diff;
        out.extend_from_slice(&self.prefix);
        let d = diff as u32; // & 0xFFFFFFFF
        for shift in (0..8).rev() {
            out.push(HEX[(d >> (shift * 4)) as usize & 0xF]);
        }
        for shift in (0..4).rev() {
            out.push(HEX[(counter >> (shift * 4)) as usize & 0xF]);
        }
    }
}

/// Milliseconds since the epoch now, as Python's `datetime.now().timestamp()` gives them.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(g: &mut UniqueIds, times: &[i64]) -> Vec<String> {
        times
            .iter()
            .map(|&t| {
                let mut out = Vec::new();
                g.push_next(t, &mut out);
                String::from_utf8(out).unwrap()
            })
            .collect()
    }

    #[test]
    fn time_and_counter_move_forward() {
        let mut g = UniqueIds::new("0A0B0C0D12340102ABCD", 1_000).unwrap();
        let got = ids(&mut g, &[1_005, 1_005, 900]);
        assert_eq!(got[0], "0A0B0C0D12340102ABCD000000050000");
        assert_eq!(got[1], "0A0B0C0D12340102ABCD000000050001");
        assert_eq!(got[2], "0A0B0C0D12340102ABCD000000050002"); // the clock went back: time stays
    }

    #[test]
    fn a_wrapped_counter_moves_time() {
        let mut g = UniqueIds::new("0A0B0C0D12340102ABCD", 0).unwrap();
        let got = ids(&mut g, &vec![7; 65_537]);
        assert_eq!(&got[65_535][20..], "00000007FFFF");
        assert_eq!(&got[65_536][20..], "000000080000");
    }

    #[test]
    fn a_bad_prefix_is_refused() {
        assert!(UniqueIds::new("0a0b0c0d12340102abcd", 0).is_err());
        assert!(UniqueIds::new("ABC", 0).is_err());
    }
}
