//! Records of pulled blocks gathered straight into the source's columns (only the ones asked for), compressed
//! bodies inflated and inner batches unwrapped on the way.

use crate::arrow::Column;
use crate::decompress::{decompress, Codec, Failure};
use crate::records::{inner_batch, scan, Record, ScanError, COMPRESSED_FLAG};
use crate::v2;
use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

const TAGS: &[u8] = b"TAGS";
const KEYS: &[u8] = b"KEYS";
const UNIQ_KEY: &[u8] = b"UNIQ_KEY";
/// The user property in which a v2 message carries the message's flag (proto/README.md).
const FLAG_PROPERTY: &[u8] = b"__rmq_spark_flag";

/// What follows the text of a body that expands past the limit.
const TOO_LARGE_HINT: &str = "the limit is option maxMessageBytes (raise it only if producers really send bodies that \
    large: a small body that expands this far is a decompression bomb)";

/// Why a block was not gathered.
#[derive(Debug, PartialEq, Eq)]
pub enum AddError {
    /// Truncated, inconsistent, text that is not UTF-8, a body that does not decompress: the text says which.
    Malformed(String),
    /// A body that expands past the limit (option maxMessageBytes), which the text names.
    TooLarge { text: String, limit: usize },
    /// A timestamp no microsecond timestamp holds.
    Timestamp,
}

/// Whether every byte of `text` is ASCII (then it is UTF-8): 8 bytes OR-ed at a time with no branch, a fraction
/// of the instructions of `from_utf8`, which checks every record's topic and properties.
fn all_ascii(text: &[u8]) -> bool {
    let mut words = text.chunks_exact(8);
    let high = (&mut words).fold(0u64, |acc, w| acc | u64::from_ne_bytes(w.try_into().unwrap()));
    let rest = words.remainder().iter().fold(0u8, |acc, &b| acc | b);
    high & 0x8080_8080_8080_8080 == 0 && rest < 0x80
}

/// Where `text` stops being UTF-8, as "(at byte k of n)"; None when it is UTF-8.
fn not_utf8(text: &[u8]) -> Option<String> {
    if all_ascii(text) {
        return None;
    }
    std::str::from_utf8(text).err().map(|e| format!("(at byte {} of {})", e.valid_up_to(), text.len()))
}

struct Strings {
    offsets: Vec<i32>,
    data: Vec<u8>,
}

impl Strings {
    fn new() -> Self {
        Strings { offsets: vec![0], data: Vec::new() }
    }

    fn push(&mut self, value: &[u8]) {
        self.data.extend_from_slice(value);
        self.offsets.push(self.data.len() as i32);
    }

    fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    fn truncate(&mut self, count: usize) {
        self.offsets.truncate(count + 1);
        self.data.truncate(*self.offsets.last().unwrap() as usize);
    }

    /// The offsets and data; the next ones start with room for as many (batches are of a similar size).
    fn take(&mut self) -> (Vec<i32>, Vec<u8>) {
        let mut offsets = Vec::with_capacity(self.offsets.len());
        offsets.push(0);
        let data = Vec::with_capacity(self.data.len());
        (std::mem::replace(&mut self.offsets, offsets), std::mem::replace(&mut self.data, data))
    }
}

/// ``ip:port`` as the Python reference renders it (inet_ntop's forms; IPv4-mapped IPv6 as IPv4).
pub fn render_host(raw: &[u8], out: &mut String) {
    let (ip, port) = raw.split_at(raw.len() - 4);
    let port = i32::from_be_bytes(port.try_into().unwrap());
    if ip.len() == 4 {
        let _ = write!(out, "{}:{port}", Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3]));
        return;
    }
    let v6 = Ipv6Addr::from(<[u8; 16]>::try_from(ip).unwrap());
    let words = v6.segments();
    let v4 = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    if words[..5] == [0; 5] && words[5] == 0xFFFF {
        let _ = write!(out, "{v4}:{port}");
    } else if words[..6] == [0; 6] && words[6] != 0 {
        let _ = write!(out, "::{v4}:{port}"); // IPv4-compatible, as inet_ntop writes it
    } else {
        let _ = write!(out, "{v6}:{port}");
    }
}

/// A column of rendered hosts; consecutive rows mostly share a host, which is rendered once.
struct Hosts {
    strings: Strings,
    last_raw: Vec<u8>,
    last: String,
}

impl Hosts {
    fn new() -> Self {
        Hosts { strings: Strings::new(), last_raw: Vec::new(), last: String::new() }
    }

    fn push(&mut self, host: &Host) {
        let raw = match *host {
            Host::Raw(raw) => raw,
            Host::Text(text) => return self.strings.push(text),
        };
        if raw != self.last_raw.as_slice() {
            self.last.clear();
            render_host(raw, &mut self.last);
            self.last_raw.clear();
            self.last_raw.extend_from_slice(raw);
        }
        self.strings.push(self.last.as_bytes());
    }
}

/// A host as a record carries it: raw (IP + int32 port, rendered here) or as text already (v2).
enum Host<'a> {
    Raw(&'a [u8]),
    Text(&'a [u8]),
}

/// A message id: the UNIQ_KEY or v2 id, or the offset message id of a record without one.
enum MessageId<'a> {
    Text(&'a [u8]),
    Offset { store_host: &'a [u8], physic_offset: i64 },
}

/// One row's values, whichever kind of record they came from; `keys` are the words of one text (remoting's
/// space-separated KEYS property) or a list (v2), empty words dropped either way.
struct Row<'a> {
    topic: &'a [u8],
    queue_id: i32,
    queue_offset: i64,
    body: &'a [u8],
    born_ms: i64,
    store_ms: i64,
    born_host: Host<'a>,
    store_host: Host<'a>,
    reconsume: i32,
    flag: i32,
    properties: &'a [(&'a [u8], &'a [u8])],
    tag: Option<&'a [u8]>,
    keys: (&'a [u8], &'a [&'a [u8]]),
    msg_id: MessageId<'a>,
    sys_flag: i32,
    commit_log_offset: i64,
    body_crc: i32,
}

/// One stored message of a record (the record itself, or a message of its inner batch) and what differs between
/// the two.
struct Stored<'s, 'a> {
    record: &'s Record<'a>,
    queue_offset: i64,
    body: &'s [u8],
    flag: i32,
    reconsume: i32,
    sys_flag: i32,
    body_crc: i32,
}

/// The state of one block's walk.
struct Walk<'a> {
    low: i64,
    high: i64,
    pairs: Vec<(&'a [u8], &'a [u8])>,
    inflated: Vec<u8>,
    failed: Option<AddError>,
    bad_timestamp: bool,
}

/// Which columns to build.
#[derive(Clone, Copy, Default)]
pub struct Wanted {
    topic: bool,
    queue_id: bool,
    queue_offset: bool,
    body: bool,
    born_ts: bool,
    store_ts: bool,
    born_host: bool,
    store_host: bool,
    reconsume: bool,
    flag: bool,
    properties: bool,
    tags: bool,
    keys: bool,
    msg_id: bool,
    // the fields of a client Message outside the schema, and its timestamps in milliseconds
    sys_flag: bool,
    commit_log_offset: bool,
    body_crc: bool,
    born_ms: bool,
    store_ms: bool,
}

impl Wanted {
    /// From the source's column names (brokerName is the caller's); an unknown name is returned as the error.
    pub fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut w = Wanted::default();
        for name in names {
            match name {
                "topic" => w.topic = true,
                "queueId" => w.queue_id = true,
                "queueOffset" => w.queue_offset = true,
                "body" => w.body = true,
                "bornTimestamp" => w.born_ts = true,
                "storeTimestamp" => w.store_ts = true,
                "bornHost" => w.born_host = true,
                "storeHost" => w.store_host = true,
                "reconsumeTimes" => w.reconsume = true,
                "flag" => w.flag = true,
                "properties" => w.properties = true,
                "tags" => w.tags = true,
                "keys" => w.keys = true,
                "msgId" => w.msg_id = true,
                "sysFlag" => w.sys_flag = true,
                "commitLogOffset" => w.commit_log_offset = true,
                "bodyCrc" => w.body_crc = true,
                "bornMillis" => w.born_ms = true,
                "storeMillis" => w.store_ms = true,
                other => return Err(other.to_string()),
            }
        }
        Ok(w)
    }
}

/// The properties of one record with Java's rules (MessageDecoder.string2messageProperties): pairs end at
/// `\x02`, the name at the first `\x01`; a pair with an empty name or value is dropped; a repeated name keeps its
/// first position and its last value. Each pair is (name, value).
fn parse_properties<'a>(text: &'a [u8], pairs: &mut Vec<(&'a [u8], &'a [u8])>) {
    pairs.clear();
    let mut rest = text;
    while !rest.is_empty() {
        let end = memchr::memchr(2, rest).unwrap_or(rest.len());
        let item = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or_default();
        let Some(cut) = memchr::memchr(1, item) else { continue };
        let (name, value) = (&item[..cut], &item[cut + 1..]);
        if name.is_empty() || value.is_empty() {
            continue;
        }
        match pairs.iter_mut().find(|(n, _)| *n == name) {
            Some(pair) => pair.1 = value,
            None => pairs.push((name, value)),
        }
    }
}

fn lookup<'a>(pairs: &[(&'a [u8], &'a [u8])], name: &[u8]) -> Option<&'a [u8]> {
    pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// The first text field of a v2 message that is not UTF-8, named, as an error.
fn v2_text_error(m: &v2::V2Message<'_>) -> Result<(), AddError> {
    let named = [("topic", m.topic), ("message id", m.message_id), ("born host", m.born_host),
                 ("store host", m.store_host), ("tag", m.tag.unwrap_or_default())];
    let keys = m.keys.iter().map(|k| ("key", *k));
    let properties = m.properties.iter().flat_map(|(k, v)| [("property name", *k), ("property value", *v)]);
    for (what, text) in named.into_iter().chain(keys).chain(properties) {
        if let Some(at) = not_utf8(text) {
            return Err(AddError::Malformed(format!("a message's {what} is not valid UTF-8 {at}")));
        }
    }
    Ok(())
}

/// An int32 written as text, read as Python's int() reads ASCII text (surrounding whitespace, a sign, digits
/// with single underscores between them); None for anything else.
fn int_of(text: &[u8]) -> Option<i32> {
    let space = |b: &u8| b.is_ascii_whitespace() || *b == 0x0B || (0x1C..=0x1F).contains(b);
    let start = text.iter().position(|b| !space(b))?;
    let end = text.iter().rposition(|b| !space(b))? + 1;
    let text = &text[start..end];
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.first() == Some(&b'_') || digits.last() == Some(&b'_') || digits.windows(2).any(|w| w == b"__") {
        return None;
    }
    let mut value: i64 = 0;
    let mut any = false;
    for &b in digits.iter().filter(|&&b| b != b'_') {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(i64::from(b - b'0'))?;
        any = true;
    }
    let value = if negative { -value } else { value };
    if any { i32::try_from(value).ok() } else { None }
}

/// MessageDecoder.createMessageId: upper-case hex of the store host (IP + port) and the commit-log offset.
fn push_offset_message_id(store_host: &[u8], physic_offset: i64, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in store_host.iter().chain(physic_offset.to_be_bytes().iter()) {
        out.push(HEX[(b >> 4) as usize]);
        out.push(HEX[(b & 15) as usize]);
    }
}

/// The values of `v`, which starts again with room for as many.
fn renew<T>(v: &mut Vec<T>) -> Vec<T> {
    let room = Vec::with_capacity(v.len());
    std::mem::replace(v, room)
}

/// The offsets of `v`, which starts again at a single 0 with room for as many.
fn renew_offsets(v: &mut Vec<i32>) -> Vec<i32> {
    let mut room = Vec::with_capacity(v.len());
    room.push(0);
    std::mem::replace(v, room)
}

/// The gathered rows of the blocks added since the last `take`.
pub struct Gathered {
    want: Wanted,
    rows: usize,
    bytes: usize,
    topic: Strings,
    queue_id: Vec<i32>,
    queue_offset: Vec<i64>,
    body: Strings,
    born_ts: Vec<i64>,
    store_ts: Vec<i64>,
    born_host: Hosts,
    store_host: Hosts,
    reconsume: Vec<i32>,
    flag: Vec<i32>,
    property_offsets: Vec<i32>,
    property_names: Strings,
    property_values: Strings,
    tags: Strings,
    tags_valid: Vec<bool>,
    key_offsets: Vec<i32>,
    keys: Strings,
    msg_id: Strings,
    sys_flag: Vec<i32>,
    commit_log_offset: Vec<i64>,
    body_crc: Vec<i32>,
    born_ms: Vec<i64>,
    store_ms: Vec<i64>,
    tag_set: Option<Vec<Vec<u8>>>,
    broker: String,
    max_body: usize,
}

const US_PER_MS: i64 = 1000;

impl Gathered {
    /// `tag_set`: keep only the messages whose TAGS is one of these (the client-side re-check of a TAG filter);
    /// `broker`: the broker the blocks come from (errors name it); `max_body`: the most a compressed body may
    /// expand to (option maxMessageBytes).
    pub fn new(want: Wanted, tag_set: Option<Vec<Vec<u8>>>, broker: String, max_body: usize) -> Self {
        Gathered {
            want,
            rows: 0,
            bytes: 0,
            topic: Strings::new(),
            queue_id: Vec::new(),
            queue_offset: Vec::new(),
            body: Strings::new(),
            born_ts: Vec::new(),
            store_ts: Vec::new(),
            born_host: Hosts::new(),
            store_host: Hosts::new(),
            reconsume: Vec::new(),
            flag: Vec::new(),
            property_offsets: vec![0],
            property_names: Strings::new(),
            property_values: Strings::new(),
            tags: Strings::new(),
            tags_valid: Vec::new(),
            key_offsets: vec![0],
            keys: Strings::new(),
            msg_id: Strings::new(),
            sys_flag: Vec::new(),
            commit_log_offset: Vec::new(),
            body_crc: Vec::new(),
            born_ms: Vec::new(),
            store_ms: Vec::new(),
            tag_set,
            broker,
            max_body,
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes of the blocks gathered since the last take.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Gathers the messages of `block` (its records, compressed bodies inflated, inner batches unwrapped) with
    /// `low <= queueOffset < high` that pass the tag re-check; on an error nothing is gathered. Errors come in the
    /// reference's order: a malformed record anywhere in the block; then the first record whose text, body or inner
    /// batch does not read (every record is read, kept or not); then a kept row's timestamp out of range.
    pub fn add(&mut self, block: &[u8], low: i64, high: i64) -> Result<(), AddError> {
        let rows_before = self.rows;
        let mut walk =
            Walk { low, high, pairs: Vec::new(), inflated: Vec::new(), failed: None, bad_timestamp: false };
        let scanned = scan(block, |pos, r| {
            if walk.failed.is_none() {
                if let Err(e) = self.record(pos, &r, &mut walk) {
                    walk.failed = Some(e);
                }
            }
            Ok(())
        });
        let outcome = match (scanned, walk.failed) {
            (Err(ScanError(text)), _) => Err(AddError::Malformed(text)),
            (Ok(()), Some(e)) => Err(e),
            (Ok(()), None) if walk.bad_timestamp => Err(AddError::Timestamp),
            (Ok(()), None) => Ok(()),
        };
        if outcome.is_err() {
            self.truncate(rows_before);
        } else {
            self.bytes += block.len();
        }
        outcome
    }

    /// Reads one record (topic, body, properties, then its inner batch, in the reference's order) and gathers its
    /// messages; the error of the first part that does not read.
    fn record<'a>(&mut self, pos: usize, r: &Record<'a>, walk: &mut Walk<'a>) -> Result<(), AddError> {
        let text_error = |what: &str, text: &[u8]| {
            not_utf8(text).map(|at| AddError::Malformed(format!("message at byte {pos}: {what} not valid UTF-8 {at}")))
        };
        if let Some(e) = text_error("the topic is", r.topic) {
            return Err(e);
        }
        let mut sys_flag = r.sys_flag;
        let codec = r.codec().map_err(AddError::Malformed)?;
        if let Some(codec) = codec {
            walk.inflated.clear();
            decompress(codec, r.body, self.max_body, &mut walk.inflated)
                .map_err(|f| self.body_error(&f, codec, r.topic, r.queue_id, r.queue_offset))?;
            sys_flag &= !COMPRESSED_FLAG;
        }
        if let Some(e) = text_error("the properties are", r.properties) {
            return Err(e);
        }
        let Walk { low, high, pairs, inflated, bad_timestamp, .. } = walk;
        let body: &[u8] = if codec.is_some() { inflated } else { r.body };
        let (low, high) = (*low, *high);
        if !r.is_inner_batch() {
            let stored = Stored {
                record: r,
                queue_offset: r.queue_offset,
                body,
                flag: r.flag,
                reconsume: r.reconsume_times,
                sys_flag,
                body_crc: r.body_crc,
            };
            self.offer(&stored, r.properties, pairs, low, high, bad_timestamp);
            return Ok(());
        }
        let mut inner_pairs = Vec::new();
        inner_batch(body, |index, m| {
            if let Some(at) = not_utf8(m.properties) {
                return Err(format!("inner-batch message {index} properties are not valid UTF-8 {at}"));
            }
            let stored = Stored {
                record: r,
                queue_offset: r.queue_offset + index,
                body: m.body,
                flag: m.flag,
                reconsume: 0,
                sys_flag,
                body_crc: 0,
            };
            self.offer(&stored, m.properties, &mut inner_pairs, low, high, bad_timestamp);
            Ok(())
        })
        .map_err(AddError::Malformed)
    }

    /// The error of a body that `codec` did not decompress, naming the message by its queue and offset.
    fn body_error(&self, failure: &Failure, codec: Codec, topic: &[u8], queue_id: i32, offset: i64) -> AddError {
        let text = failure.text(codec, self.max_body);
        let at = format!("{}:{}/{queue_id} offset {offset}", String::from_utf8_lossy(topic), self.broker);
        match failure {
            Failure::TooLarge => AddError::TooLarge { text: format!("{at}: {text}; {TOO_LARGE_HINT}"), limit: self.max_body },
            _ => AddError::Malformed(format!("{at}: {text}")),
        }
    }

    /// Whether kept rows need their timestamps in microseconds (the Arrow columns; not for Messages alone).
    fn micros(&self) -> bool {
        let w = self.want;
        w.born_ts || w.store_ts || !(w.born_ms || w.store_ms)
    }

    /// Gathers one stored message with `properties` if it is inside the window and passes the tag re-check;
    /// `bad_timestamp` is set (and nothing more gathered) for one whose timestamps no microsecond timestamp holds.
    fn offer<'p>(
        &mut self,
        m: &Stored<'_, '_>,
        properties: &'p [u8],
        pairs: &mut Vec<(&'p [u8], &'p [u8])>,
        low: i64,
        high: i64,
        bad_timestamp: &mut bool,
    ) {
        if *bad_timestamp || m.queue_offset < low || m.queue_offset >= high {
            return;
        }
        let w = self.want;
        if self.tag_set.is_some() || w.properties || w.tags || w.keys || w.msg_id {
            parse_properties(properties, pairs);
            if let Some(set) = &self.tag_set {
                match lookup(pairs, TAGS) {
                    Some(tag) if set.iter().any(|t| t.as_slice() == tag) => {}
                    _ => return,
                }
            }
        }
        let r = m.record;
        // only a row kept is converted, so only its timestamps can be out of range (as in the reference)
        if self.micros()
            && (r.born_timestamp.checked_mul(US_PER_MS).is_none() || r.store_timestamp.checked_mul(US_PER_MS).is_none())
        {
            *bad_timestamp = true;
            return;
        }
        let tag = if w.tags { lookup(pairs, TAGS) } else { None };
        let msg_id = match if w.msg_id { lookup(pairs, UNIQ_KEY) } else { None } {
            Some(id) => MessageId::Text(id),
            None => MessageId::Offset { store_host: r.store_host, physic_offset: r.physic_offset },
        };
        self.push(&Row {
            topic: r.topic,
            queue_id: r.queue_id,
            queue_offset: m.queue_offset,
            body: m.body,
            born_ms: r.born_timestamp,
            store_ms: r.store_timestamp,
            born_host: Host::Raw(r.born_host),
            store_host: Host::Raw(r.store_host),
            reconsume: m.reconsume,
            flag: m.flag,
            properties: pairs,
            tag,
            keys: (if w.keys { lookup(pairs, KEYS).unwrap_or_default() } else { b"" }, &[]),
            msg_id,
            sys_flag: m.sys_flag,
            commit_log_offset: r.physic_offset,
            body_crc: m.body_crc,
        });
    }

    /// Gathers the messages of a gRPC pull's answer frames (each a `PullMessageResponse` holding a message) with
    /// `low <= queueOffset < high` that pass the tag re-check, gzip bodies inflated; `topic` stands for a message
    /// that names none. On an error nothing is gathered.
    pub fn add_v2(&mut self, frames: &[&[u8]], topic: &[u8], low: i64, high: i64) -> Result<(), AddError> {
        let rows_before = self.rows;
        let outcome = self.gather_v2(frames, topic, low, high);
        if outcome.is_err() {
            self.truncate(rows_before);
        } else {
            self.bytes += frames.iter().map(|f| f.len()).sum::<usize>();
        }
        outcome
    }

    fn gather_v2(&mut self, frames: &[&[u8]], topic: &[u8], low: i64, high: i64) -> Result<(), AddError> {
        let mut properties = Vec::new();
        let mut inflated = Vec::new();
        let mut bad_timestamp = false;
        let micros = self.micros();
        for frame in frames {
            let Some(v2::Content::Message(buf)) = v2::response(frame).map_err(AddError::Malformed)? else {
                return Err(AddError::Malformed("a PullMessage answer frame holds no message".into()));
            };
            let m = v2::message(buf).map_err(AddError::Malformed)?;
            v2_text_error(&m)?;
            let topic = if m.topic.is_empty() { topic } else { m.topic };
            let body: &[u8] = if m.body_encoding == v2::GZIP {
                inflated.clear();
                decompress(Codec::Gzip, m.body, self.max_body, &mut inflated)
                    .map_err(|f| self.body_error(&f, Codec::Gzip, topic, m.queue_id, m.queue_offset))?;
                &inflated
            } else {
                m.body
            };
            properties.clear();
            let mut flag = 0;
            for &(name, value) in &m.properties {
                if name != FLAG_PROPERTY {
                    properties.push((name, value));
                    continue;
                }
                flag = int_of(value).ok_or_else(|| {
                    AddError::Malformed(format!(
                        "message {} has a {} {:?} that is not an int32",
                        String::from_utf8_lossy(m.message_id),
                        String::from_utf8_lossy(FLAG_PROPERTY),
                        String::from_utf8_lossy(value)
                    ))
                })?;
            }
            if m.queue_offset < low || m.queue_offset >= high {
                continue;
            }
            if let Some(set) = &self.tag_set {
                match m.tag {
                    Some(tag) if set.iter().any(|t| t.as_slice() == tag) => {}
                    _ => continue,
                }
            }
            let ms = |(seconds, nanos): (i64, i64)| {
                let ms = seconds.checked_mul(1000)?.checked_add(nanos.div_euclid(1_000_000))?;
                (!micros || ms.checked_mul(US_PER_MS).is_some()).then_some(ms)
            };
            // read on: a later malformed frame decides the outcome first, as in the reference
            let (Some(born_ms), Some(store_ms)) = (ms(m.born), ms(m.store)) else {
                bad_timestamp = true;
                continue;
            };
            if bad_timestamp {
                continue;
            }
            self.push(&Row {
                topic,
                queue_id: m.queue_id,
                queue_offset: m.queue_offset,
                body,
                born_ms,
                store_ms,
                born_host: Host::Text(m.born_host),
                store_host: Host::Text(m.store_host),
                reconsume: m.delivery_attempt.map_or(0, |a| a.saturating_sub(1).max(0)),
                flag,
                properties: &properties,
                tag: m.tag,
                keys: (b"", &m.keys),
                msg_id: MessageId::Text(m.message_id),
                sys_flag: 0,
                commit_log_offset: 0,
                body_crc: 0,
            });
        }
        if bad_timestamp {
            return Err(AddError::Timestamp);
        }
        Ok(())
    }

    fn push(&mut self, r: &Row) {
        let w = self.want;
        self.rows += 1;
        if w.topic {
            self.topic.push(r.topic);
        }
        if w.queue_id {
            self.queue_id.push(r.queue_id);
        }
        if w.queue_offset {
            self.queue_offset.push(r.queue_offset);
        }
        if w.body {
            self.body.push(r.body);
        }
        if w.born_ts {
            self.born_ts.push(r.born_ms.wrapping_mul(US_PER_MS)); // checked when kept
        }
        if w.store_ts {
            self.store_ts.push(r.store_ms.wrapping_mul(US_PER_MS));
        }
        if w.born_host {
            self.born_host.push(&r.born_host);
        }
        if w.store_host {
            self.store_host.push(&r.store_host);
        }
        if w.reconsume {
            self.reconsume.push(r.reconsume);
        }
        if w.flag {
            self.flag.push(r.flag);
        }
        if w.properties {
            for (name, value) in r.properties {
                self.property_names.push(name);
                self.property_values.push(value);
            }
            self.property_offsets.push(self.property_names.len() as i32);
        }
        if w.tags {
            self.tags.push(r.tag.unwrap_or_default());
            self.tags_valid.push(r.tag.is_some());
        }
        if w.keys {
            let (text, list) = r.keys;
            for word in text.split(|&b| b == b' ').chain(list.iter().copied()) {
                if !word.is_empty() {
                    self.keys.push(word);
                }
            }
            self.key_offsets.push(self.keys.len() as i32);
        }
        if w.msg_id {
            match r.msg_id {
                MessageId::Text(id) => self.msg_id.push(id),
                MessageId::Offset { store_host, physic_offset } => {
                    push_offset_message_id(store_host, physic_offset, &mut self.msg_id.data);
                    self.msg_id.offsets.push(self.msg_id.data.len() as i32);
                }
            }
        }
        if w.sys_flag {
            self.sys_flag.push(r.sys_flag);
        }
        if w.commit_log_offset {
            self.commit_log_offset.push(r.commit_log_offset);
        }
        if w.body_crc {
            self.body_crc.push(r.body_crc);
        }
        if w.born_ms {
            self.born_ms.push(r.born_ms);
        }
        if w.store_ms {
            self.store_ms.push(r.store_ms);
        }
    }

    fn truncate(&mut self, rows: usize) {
        self.rows = rows;
        self.topic.truncate(rows);
        self.queue_id.truncate(rows);
        self.queue_offset.truncate(rows);
        self.body.truncate(rows);
        self.born_ts.truncate(rows);
        self.store_ts.truncate(rows);
        self.born_host.strings.truncate(rows);
        self.store_host.strings.truncate(rows);
        self.reconsume.truncate(rows);
        self.flag.truncate(rows);
        if self.property_offsets.len() > rows + 1 {
            self.property_offsets.truncate(rows + 1);
            let pairs = *self.property_offsets.last().unwrap() as usize;
            self.property_names.truncate(pairs);
            self.property_values.truncate(pairs);
        }
        self.tags.truncate(rows.min(self.tags.len()));
        self.tags_valid.truncate(rows);
        if self.key_offsets.len() > rows + 1 {
            self.key_offsets.truncate(rows + 1);
            self.keys.truncate(*self.key_offsets.last().unwrap() as usize);
        }
        self.msg_id.truncate(rows.min(self.msg_id.len()));
        self.sys_flag.truncate(rows);
        self.commit_log_offset.truncate(rows);
        self.body_crc.truncate(rows);
        self.born_ms.truncate(rows);
        self.store_ms.truncate(rows);
    }

    /// The built columns by name (the map and list columns as their offsets and values); the gatherer is empty
    /// again.
    pub fn take(&mut self) -> Vec<(&'static str, Column)> {
        let w = self.want;
        let mut out = Vec::new();
        let text = |s: &mut Strings| {
            let (offsets, data) = s.take();
            Column::Utf8 { offsets, data }
        };
        if w.topic {
            out.push(("topic", text(&mut self.topic)));
        }
        if w.queue_id {
            out.push(("queueId", Column::Int32(renew(&mut self.queue_id))));
        }
        if w.queue_offset {
            out.push(("queueOffset", Column::Int64(renew(&mut self.queue_offset))));
        }
        if w.body {
            let (offsets, data) = self.body.take();
            out.push(("body", Column::Binary { offsets, data }));
        }
        if w.born_ts {
            out.push(("bornTimestamp", Column::Timestamp(renew(&mut self.born_ts))));
        }
        if w.store_ts {
            out.push(("storeTimestamp", Column::Timestamp(renew(&mut self.store_ts))));
        }
        if w.born_host {
            out.push(("bornHost", text(&mut self.born_host.strings)));
        }
        if w.store_host {
            out.push(("storeHost", text(&mut self.store_host.strings)));
        }
        if w.reconsume {
            out.push(("reconsumeTimes", Column::Int32(renew(&mut self.reconsume))));
        }
        if w.flag {
            out.push(("flag", Column::Int32(renew(&mut self.flag))));
        }
        if w.properties {
            out.push(("propertyOffsets", Column::Int32(renew_offsets(&mut self.property_offsets))));
            out.push(("propertyNames", text(&mut self.property_names)));
            out.push(("propertyValues", text(&mut self.property_values)));
        }
        if w.tags {
            let (offsets, data) = self.tags.take();
            let valid = renew(&mut self.tags_valid);
            out.push(("tags", Column::NullableUtf8 { offsets, data, valid }));
        }
        if w.keys {
            out.push(("keyOffsets", Column::Int32(renew_offsets(&mut self.key_offsets))));
            out.push(("keyWords", text(&mut self.keys)));
        }
        if w.msg_id {
            out.push(("msgId", text(&mut self.msg_id)));
        }
        if w.sys_flag {
            out.push(("sysFlag", Column::Int32(renew(&mut self.sys_flag))));
        }
        if w.commit_log_offset {
            out.push(("commitLogOffset", Column::Int64(renew(&mut self.commit_log_offset))));
        }
        if w.body_crc {
            out.push(("bodyCrc", Column::Int32(renew(&mut self.body_crc))));
        }
        if w.born_ms {
            out.push(("bornMillis", Column::Int64(renew(&mut self.born_ms))));
        }
        if w.store_ms {
            out.push(("storeMillis", Column::Int64(renew(&mut self.store_ms))));
        }
        self.rows = 0;
        self.bytes = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(raw: &[u8]) -> String {
        let mut s = String::new();
        render_host(raw, &mut s);
        s
    }

    #[test]
    fn ascii_is_told_from_any_high_byte_at_every_position() {
        for len in 0..40 {
            let text = vec![b'a'; len];
            assert!(all_ascii(&text));
            assert_eq!(not_utf8(&text), None);
            for at in 0..len {
                let mut high = text.clone();
                high[at] = 0x80;
                assert!(!all_ascii(&high), "len {len}, high byte at {at}");
                assert!(not_utf8(&high).is_some());
            }
        }
        assert_eq!(not_utf8("ünïcödé, 16+ bytes long".as_bytes()), None);
    }

    #[test]
    fn renders_hosts_as_inet_ntop() {
        assert_eq!(host(&[10, 0, 0, 1, 0, 0, 0x27, 0x10]), "10.0.0.1:10000");
        let mut mapped = [0u8; 20];
        mapped[10] = 0xFF;
        mapped[11] = 0xFF;
        mapped[12..16].copy_from_slice(&[1, 2, 3, 4]);
        mapped[19] = 9;
        assert_eq!(host(&mapped), "1.2.3.4:9");
        let mut v6 = [0u8; 20];
        v6[0] = 0x20;
        v6[1] = 0x01;
        v6[15] = 1;
        v6[19] = 80;
        assert_eq!(host(&v6), "2001::1:80");
    }

    #[test]
    fn rows_outside_the_window_are_not_gathered_and_a_failed_add_leaves_nothing() {
        let mut g = Gathered::new(Wanted::of(["queueOffset", "body"]).unwrap(), None, "b".into(), 1 << 20);
        let block = crate::records::tests::block_of(&[(b"a", 1), (b"b", 2), (b"c", 3)]);
        assert_eq!(g.add(&block, 2, 3), Ok(()));
        assert_eq!(g.rows(), 1);
        assert!(matches!(g.add(&block[..block.len() - 1], 0, 9), Err(AddError::Malformed(_))));
        assert_eq!(g.rows(), 1);
        let columns = g.take();
        match &columns[0].1 {
            Column::Int64(v) => assert_eq!(v, &vec![2]),
            _ => panic!("queueOffset is int64"),
        }
        match &columns[1].1 {
            Column::Binary { offsets, data } => assert_eq!((offsets.as_slice(), data.as_slice()), (&[0, 1][..], &b"b"[..])),
            _ => panic!("body is binary"),
        }
    }
}
