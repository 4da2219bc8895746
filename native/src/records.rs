//! The structural walk of a PULL_MESSAGE body: commit-log records, big-endian (MessageDecoder.decode).
//!
//! ```text
//! int32 totalSize | int32 magicCode | int32 bodyCRC | int32 queueId | int32 flag | int64 queueOffset
//! | int64 physicOffset | int32 sysFlag | int64 bornTimestamp | bornHost (4 or 16 byte IP + int32 port)
//! | int64 storeTimestamp | storeHost (same) | int32 reconsumeTimes | int64 preparedTransactionOffset
//! | int32 bodyLength | body | topic length (int8 in magic V1, int16 in magic V2) | topic
//! | int16 propertiesLength | properties
//! ```
//!
//! A record with INNER_BATCH_FLAG and NEED_UNWRAP_FLAG (a batch sent to a BatchConsumeQueue topic) holds in its body
//! the SEND_BATCH_MESSAGE records of its messages (`inner_batch`); like the Java client (PullAPIWrapper
//! .processPullResult -> MessageDecoder.decodeMessage) they are unwrapped with queue offsets `queueOffset + i`.
//!
//! Every bounds check and error text is the one of the Python reference (`tests/support/reference_codec.py`), which
//! the differential tests hold this walk to.

use crate::decompress::Codec;

/// MessageDecoder magic codes.
pub const MAGIC_V1: i32 = -626843481; // 1-byte topic length
pub const MAGIC_V2: i32 = -626843477; // 2-byte topic length
pub const BLANK_MAGIC: i32 = -875286124; // end-of-file filler of a commit-log file

/// MessageSysFlag bits.
pub const COMPRESSED_FLAG: i32 = 0x1;
pub const BORN_V6_FLAG: i32 = 0x10;
pub const STORE_V6_FLAG: i32 = 0x20;
pub const INNER_BATCH_BITS: i32 = 0xC0; // INNER_BATCH_FLAG | NEED_UNWRAP_FLAG
/// The compression type (CompressionType value << 8) of a compressed body.
const COMPRESSION_TYPE_MASK: i32 = 0x700;

/// The fixed part of a record with two IPv4 hosts; each IPv6 host adds 12 bytes.
const FIXED_V4: usize = 88;
const V6_EXTRA: usize = 12;

/// One record of a block: its fixed fields and where its parts lie in the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub body_crc: i32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physic_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: &'a [u8], // IP + int32 port
    pub store_timestamp: i64,
    pub store_host: &'a [u8],
    pub reconsume_times: i32,
    pub body: &'a [u8],
    pub topic: &'a [u8],
    pub properties: &'a [u8],
}

impl Record<'_> {
    /// The codec of a body that must be decompressed (compressed and not empty); None for a body as it is.
    pub fn codec(&self) -> Result<Option<Codec>, String> {
        if self.sys_flag & COMPRESSED_FLAG == 0 || self.body.is_empty() {
            return Ok(None);
        }
        let kind = (self.sys_flag & COMPRESSION_TYPE_MASK) >> 8;
        match kind {
            0 | 3 => Ok(Some(Codec::Zlib)), // 0: older producers that wrote no compression type
            1 => Ok(Some(Codec::Lz4)),
            2 => Ok(Some(Codec::Zstd)),
            _ => Err(format!("unknown compression type {kind} in sysFlag {}", python_hex(self.sys_flag))),
        }
    }

    /// Whether the body holds the messages of an inner batch, to unwrap.
    pub fn is_inner_batch(&self) -> bool {
        self.sys_flag & INNER_BATCH_BITS == INNER_BATCH_BITS
    }
}

/// `{:#x}` with a sign, as Python writes a negative number in hex.
fn python_hex(value: i32) -> String {
    if value < 0 {
        format!("-{:#x}", -(value as i64))
    } else {
        format!("{value:#x}")
    }
}

/// One message of an inner batch (a SEND_BATCH_MESSAGE record: MessageDecoder.encodeMessage).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMessage<'a> {
    pub flag: i32,
    pub body: &'a [u8],
    pub properties: &'a [u8],
}

/// The fixed part of a SEND_BATCH_MESSAGE record: totalSize, magic, bodyCRC, flag, body length; then the
/// properties length.
const BATCH_HEAD: usize = 20;
const BATCH_FIXED: usize = BATCH_HEAD + 2;

/// Calls `each` with the index and the fields of every message of an inner batch's `body`, in order; stops at the
/// first error (a message that does not fit the body, or `each`'s).
pub fn inner_batch<'a, F>(body: &'a [u8], mut each: F) -> Result<(), String>
where
    F: FnMut(i64, BatchMessage<'a>) -> Result<(), String>,
{
    let n = body.len();
    let (mut pos, mut index) = (0usize, 0i64);
    while pos < n {
        if n - pos < BATCH_FIXED {
            return Err(format!(
                "inner-batch message {index} truncated: {} bytes left, {BATCH_FIXED} needed for its header",
                n - pos
            ));
        }
        let total = i32_at(body, pos) as i64;
        let flag = i32_at(body, pos + 12);
        let blen = i32_at(body, pos + 16) as i64;
        let b0 = pos + BATCH_HEAD;
        if blen < 0 || blen > (n - b0 - 2) as i64 {
            return Err(format!("inner-batch message {index} body length {blen} exceeds the batch"));
        }
        let b1 = b0 + blen as usize;
        let plen = i16_at(body, b1);
        let p0 = b1 + 2;
        if plen < 0 || plen > (n - p0) as i64 {
            return Err(format!("inner-batch message {index} properties length {plen} exceeds the batch"));
        }
        let end = p0 + plen as usize;
        if total != (end - pos) as i64 {
            return Err(format!(
                "inner-batch message {index} totalSize {total} disagrees with its fields ({} bytes)",
                end - pos
            ));
        }
        each(index, BatchMessage { flag, body: &body[b0..b1], properties: &body[p0..end] })?;
        pos = end;
        index += 1;
    }
    Ok(())
}

/// A truncated or inconsistent block; the text names the byte and the length at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanError(pub String);

fn i16_at(b: &[u8], at: usize) -> i64 {
    i16::from_be_bytes([b[at], b[at + 1]]) as i64
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// At a record too short for its fixed part or with the blank magic: the position after a well-formed blank
/// filler, else the error.
fn skip_blank_or_fail(b: &[u8], pos: usize, needed: usize) -> Result<usize, ScanError> {
    let left = b.len() - pos;
    if left >= 8 {
        let total = i32_at(b, pos);
        let magic = i32_at(b, pos + 4);
        if magic == BLANK_MAGIC && total >= 8 && total as usize <= left {
            return Ok(pos + total as usize);
        }
        if magic == BLANK_MAGIC {
            return Err(ScanError(format!(
                "blank record at byte {pos} has totalSize {total}, but {left} bytes are left"
            )));
        }
    }
    Err(ScanError(format!(
        "message at byte {pos} truncated: {left} bytes left, at least {needed} needed"
    )))
}

fn record_error(pos: usize, n: usize, total: i64, blen: i64, tlen: i64, p0: i64, end: i64) -> ScanError {
    let left = n - pos;
    ScanError(if end > n as i64 {
        format!("message at byte {pos} has totalSize {total}, but {left} bytes are left")
    } else if tlen == 0 && p0 == 0 {
        format!("message at byte {pos}: body length {blen} overruns its totalSize {total}")
    } else if tlen < 0 {
        format!("message at byte {pos}: negative topic length {tlen}")
    } else {
        format!("message at byte {pos}: topic length {tlen} overruns its totalSize {total}")
    })
}

/// Calls `each` with every record of `block` in order (blank fillers skipped); stops at the first error.
pub fn scan<'a, F>(block: &'a [u8], mut each: F) -> Result<(), ScanError>
where
    F: FnMut(usize, Record<'a>) -> Result<(), ScanError>,
{
    let n = block.len();
    let mut pos = 0usize;
    while pos < n {
        let left = n - pos;
        if left < FIXED_V4 + 3 {
            pos = skip_blank_or_fail(block, pos, FIXED_V4 + 3)?;
            continue;
        }
        let sys_flag = i32_at(block, pos + 36);
        let born_len = if sys_flag & BORN_V6_FLAG != 0 { 20 } else { 8 };
        let store_len = if sys_flag & STORE_V6_FLAG != 0 { 20 } else { 8 };
        let fixed = FIXED_V4 + V6_EXTRA * ((born_len == 20) as usize + (store_len == 20) as usize);
        if left < fixed + 3 {
            pos = skip_blank_or_fail(block, pos, fixed + 3)?;
            continue;
        }
        let magic = i32_at(block, pos + 4);
        let topic_len_size: i64 = match magic {
            MAGIC_V1 => 1,
            MAGIC_V2 => 2,
            BLANK_MAGIC => {
                pos = skip_blank_or_fail(block, pos, 8)?;
                continue;
            }
            _ => {
                return Err(ScanError(format!(
                    "message at byte {pos} has bad magic code {:#010x}",
                    magic as u32
                )))
            }
        };
        let total = i32_at(block, pos) as i64;
        let born_at = pos + 48;
        let store_ts_at = born_at + born_len;
        let store_at = store_ts_at + 8;
        let reconsume_at = store_at + store_len;
        let blen = i32_at(block, reconsume_at + 12) as i64;
        let (p, ni) = (pos as i64, n as i64);
        let end = p + total;
        let b0 = p + fixed as i64;
        let b1 = b0 + blen;
        let t0 = b1 + topic_len_size;
        if end > ni || blen < 0 || t0 + 2 > end {
            return Err(record_error(pos, n, total, blen, 0, 0, end));
        }
        let tlen = if topic_len_size == 1 {
            block[b1 as usize] as i8 as i64
        } else {
            i16_at(block, b1 as usize)
        };
        let t1 = t0 + tlen;
        let p0 = t1 + 2;
        if tlen < 0 || p0 > end {
            return Err(record_error(pos, n, total, blen, tlen, p0, end));
        }
        let plen = i16_at(block, t1 as usize);
        if plen != end - p0 {
            return Err(ScanError(format!(
                "message at byte {pos}: properties length {plen} does not end the record at its totalSize {total}"
            )));
        }
        let (b0, b1, t0, t1, p0, end) = (b0 as usize, b1 as usize, t0 as usize, t1 as usize, p0 as usize, end as usize);
        each(
            pos,
            Record {
                body_crc: i32_at(block, pos + 8),
                queue_id: i32_at(block, pos + 12),
                flag: i32_at(block, pos + 16),
                queue_offset: i64_at(block, pos + 20),
                physic_offset: i64_at(block, pos + 28),
                sys_flag,
                born_timestamp: i64_at(block, pos + 40),
                born_host: &block[born_at..born_at + born_len],
                store_timestamp: i64_at(block, store_ts_at),
                store_host: &block[store_at..store_at + store_len],
                reconsume_times: i32_at(block, reconsume_at),
                body: &block[b0..b1],
                topic: &block[t0..t1],
                properties: &block[p0..end],
            },
        )?;
        pos = end;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A block of V1 records with the given bodies and queue offsets.
    pub fn block_of(messages: &[(&[u8], i64)]) -> Vec<u8> {
        messages.iter().flat_map(|(body, offset)| record(body, b"T", b"", *offset)).collect()
    }

    fn record(body: &[u8], topic: &[u8], props: &[u8], offset: i64) -> Vec<u8> {
        let mut r = Vec::new();
        let total = FIXED_V4 + body.len() + 1 + topic.len() + 2 + props.len();
        r.extend((total as i32).to_be_bytes());
        r.extend(MAGIC_V1.to_be_bytes());
        r.extend(7i32.to_be_bytes()); // crc
        r.extend(3i32.to_be_bytes()); // queue id
        r.extend(0i32.to_be_bytes()); // flag
        r.extend(offset.to_be_bytes());
        r.extend(1000i64.to_be_bytes()); // physic offset
        r.extend(0i32.to_be_bytes()); // sys flag
        r.extend(5i64.to_be_bytes());
        r.extend([127, 0, 0, 1, 0, 0, 0x27, 0x10]);
        r.extend(6i64.to_be_bytes());
        r.extend([127, 0, 0, 1, 0, 0, 0x2A, 0x9F]);
        r.extend(0i32.to_be_bytes());
        r.extend(0i64.to_be_bytes());
        r.extend((body.len() as i32).to_be_bytes());
        r.extend(body);
        r.push(topic.len() as u8);
        r.extend(topic);
        r.extend((props.len() as i16).to_be_bytes());
        r.extend(props);
        r
    }

    #[test]
    fn walks_records_and_reports_truncation() {
        let mut block = record(b"hello", b"T", b"TAGS\x01a\x02", 41);
        block.extend(record(b"", b"T", b"", 42));
        let mut seen = Vec::new();
        scan(&block, |_, r| {
            seen.push((r.queue_offset, r.body.to_vec(), r.properties.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(41, b"hello".to_vec(), b"TAGS\x01a\x02".to_vec()), (42, vec![], vec![])]);
        let err = scan(&block[..block.len() - 1], |_, _| Ok(())).unwrap_err();
        assert_eq!(err.0, "message at byte 104 has totalSize 92, but 91 bytes are left");
    }

    #[test]
    fn unwraps_inner_batches_and_names_the_message_that_does_not_fit() {
        let one = |body: &[u8], props: &[u8], flag: i32| {
            let mut r = Vec::new();
            r.extend(((BATCH_FIXED + body.len() + props.len()) as i32).to_be_bytes());
            r.extend([0u8; 8]);
            r.extend(flag.to_be_bytes());
            r.extend((body.len() as i32).to_be_bytes());
            r.extend(body);
            r.extend((props.len() as i16).to_be_bytes());
            r.extend(props);
            r
        };
        let batch = [one(b"a", b"TAGS\x01x\x02", 1), one(b"", b"", 2)].concat();
        let mut seen = Vec::new();
        inner_batch(&batch, |i, m| {
            seen.push((i, m.flag, m.body.to_vec(), m.properties.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(0, 1, b"a".to_vec(), b"TAGS\x01x\x02".to_vec()), (1, 2, vec![], vec![])]);
        let cut = inner_batch(&batch[..batch.len() - 1], |_, _| Ok(())).unwrap_err();
        assert_eq!(cut, "inner-batch message 1 truncated: 21 bytes left, 22 needed for its header");
        let mut wrong = batch.clone();
        wrong[3] += 1;
        let err = inner_batch(&wrong, |_, _| Ok(())).unwrap_err();
        assert_eq!(err, "inner-batch message 0 totalSize 31 disagrees with its fields (30 bytes)");
    }

    #[test]
    fn the_compression_type_names_the_codec() {
        let mut block = record(b"z", b"T", b"", 1);
        let codec = |block: &[u8]| {
            let mut out = None;
            scan(block, |_, r| {
                out = Some(r.codec());
                Ok(())
            })
            .unwrap();
            out.unwrap()
        };
        assert_eq!(codec(&block), Ok(None));
        for (flag, want) in [(0x001, Codec::Zlib), (0x301, Codec::Zlib), (0x101, Codec::Lz4), (0x201, Codec::Zstd)] {
            block[36..40].copy_from_slice(&(flag as i32).to_be_bytes());
            assert_eq!(codec(&block), Ok(Some(want)));
        }
        block[36..40].copy_from_slice(&0x501i32.to_be_bytes());
        assert_eq!(codec(&block), Err("unknown compression type 5 in sysFlag 0x501".to_string()));
    }

    #[test]
    fn skips_blank_fillers() {
        let mut block = record(b"x", b"T", b"", 1);
        block.extend(16i32.to_be_bytes());
        block.extend(BLANK_MAGIC.to_be_bytes());
        block.extend([0u8; 8]);
        let mut count = 0;
        scan(&block, |_, _| {
            count += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(count, 1);
    }
}
