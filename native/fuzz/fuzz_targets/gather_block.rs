//! The column gatherer on arbitrary input, remoting blocks (the block scanner, decompression, inner batches) or gRPC
//! answer frames (the v2 reader, gzip bodies): it must never panic, a failed add must leave the gatherer as it was, and what it hands to pyarrow
//! (which trusts it) must be well-formed Arrow: one value per row in every column, offsets that start at 0, never
//! decrease and end at the data's length, and UTF-8 text.
//!
//! Input: byte 0 picks the columns (bit i: column i of COLUMNS; 0 means all), byte 1 the window (see `window`),
//! byte 2 bit 0 whether a tag filter applies, bit 1 whether the rest is v2 frames (each behind a length byte, see
//! `frames`) rather than a block; the rest is added twice (once whole, once cut in two).
#![no_main]

use libfuzzer_sys::fuzz_target;
use _native::arrow::Column;
use _native::columns::{Gathered, Wanted};

const COLUMNS: [&str; 14] = ["topic", "queueId", "queueOffset", "body", "bornTimestamp", "storeTimestamp",
    "bornHost", "storeHost", "reconsumeTimes", "flag", "properties", "tags", "keys", "msgId"];

fn window(b: u8) -> (i64, i64) {
    match b % 4 {
        0 => (i64::MIN, i64::MAX),
        1 => (0, 2),
        2 => (1, 1), // empty
        _ => (i64::from(b >> 2), i64::from(b >> 2) + 3),
    }
}

fn check(rows: usize, columns: &[(&'static str, Column)]) {
    let offsets_ok = |offsets: &[i32], data_len: usize| {
        assert_eq!(offsets.first(), Some(&0));
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]), "offsets decrease");
        assert_eq!(*offsets.last().unwrap() as usize, data_len);
    };
    let mut property_pairs = None;
    let mut key_words = None;
    for (name, column) in columns {
        match (*name, column) {
            ("propertyOffsets", Column::Int32(offsets)) => {
                assert_eq!(offsets.len(), rows + 1);
                property_pairs = Some(*offsets.last().unwrap() as usize);
                assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
            }
            ("keyOffsets", Column::Int32(offsets)) => {
                assert_eq!(offsets.len(), rows + 1);
                key_words = Some(*offsets.last().unwrap() as usize);
                assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
            }
            ("propertyNames" | "propertyValues", c) => assert_eq!(Some(c.len()), property_pairs, "{name}"),
            ("keyWords", c) => assert_eq!(Some(c.len()), key_words),
            (_, c) => assert_eq!(c.len(), rows, "{name}"),
        }
        match column {
            Column::Binary { offsets, data } => offsets_ok(offsets, data.len()),
            Column::Utf8 { offsets, data } => {
                offsets_ok(offsets, data.len());
                assert!(std::str::from_utf8(data).is_ok(), "{name} is not UTF-8");
            }
            Column::NullableUtf8 { offsets, data, valid } => {
                offsets_ok(offsets, data.len());
                assert_eq!(valid.len(), offsets.len() - 1);
                assert!(std::str::from_utf8(data).is_ok(), "{name} is not UTF-8");
            }
            Column::Int32(_) | Column::Int64(_) | Column::Timestamp(_) => {}
        }
    }
}

/// Frames behind a length byte each; what is left after the last whole one is a last frame.
fn frames(mut rest: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let Some((&n, tail)) = rest.split_first() {
        let n = usize::from(n).min(tail.len());
        out.push(&tail[..n]);
        rest = &tail[n..];
    }
    out
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 3 {
        return;
    }
    let (mask, (low, high)) = (input[0], window(input[1]));
    let names: Vec<&str> = COLUMNS.iter().enumerate()
        .filter(|(i, _)| mask == 0 || (u16::from(mask) << 6 | u16::from(mask)) >> i & 1 == 1)
        .map(|(_, n)| *n).collect();
    let tags = (input[2] & 1 == 1).then(|| vec![b"TagA".to_vec(), b"".to_vec()]);
    let (block, v2) = (&input[3..], input[2] & 2 == 2);
    // a small body limit, so that bodies past it are met too
    let mut g = Gathered::new(Wanted::of(names.iter().copied()).unwrap(), tags, "b".into(), 6000);
    let all = frames(block);
    let (cut, cut_frames) = (block.len() / 2, all.len() / 2);
    let parts = [(block, &all[..]), (&block[..cut], &all[..cut_frames]), (&block[cut..], &all[cut_frames..])];
    for (part, part_frames) in parts {
        let (rows, bytes) = (g.rows(), g.bytes());
        let added = if v2 { g.add_v2(part_frames, b"T", low, high) } else { g.add(part, low, high) };
        match added {
            Ok(()) => assert!(g.bytes() >= bytes),
            Err(_) => assert_eq!((g.rows(), g.bytes()), (rows, bytes), "a failed add left rows"),
        }
    }
    let rows = g.rows();
    check(rows, &g.take());
    assert_eq!((g.rows(), g.bytes()), (0, 0));
});
