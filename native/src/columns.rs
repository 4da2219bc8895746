//! Records of pulled blocks gathered straight into the source's columns (only the ones asked for).

use crate::arrow::Column;
use crate::records::{scan, ScanError};
use crate::v2;
use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

const TAGS: &[u8] = b"TAGS";
const KEYS: &[u8] = b"KEYS";
const UNIQ_KEY: &[u8] = b"UNIQ_KEY";
/// The user property in which a v2 message carries the message's flag (proto/README.md).
const FLAG_PROPERTY: &[u8] = b"__rmq_spark_flag";

/// Why a block was not gathered.
#[derive(Debug, PartialEq, Eq)]
pub enum AddError {
    /// Truncated or inconsistent: the walk's text.
    Malformed(String),
    /// A topic or properties that are not UTF-8 (reported by the reference decoder, which names the codec error).
    InvalidText,
    /// A timestamp no microsecond timestamp holds.
    Timestamp,
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
    born_us: i64,
    store_us: i64,
    born_host: Host<'a>,
    store_host: Host<'a>,
    reconsume: i32,
    flag: i32,
    properties: &'a [(&'a [u8], &'a [u8])],
    tag: Option<&'a [u8]>,
    keys: (&'a [u8], &'a [&'a [u8]]),
    msg_id: MessageId<'a>,
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
    tag_set: Option<Vec<Vec<u8>>>,
}

const US_PER_MS: i64 = 1000;

impl Gathered {
    /// `tag_set`: keep only the messages whose TAGS is one of these (the client-side re-check of a TAG filter).
    pub fn new(want: Wanted, tag_set: Option<Vec<Vec<u8>>>) -> Self {
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
            tag_set,
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes of the blocks gathered since the last take.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Gathers the records of `block` with `low <= queueOffset < high`. Returns false, gathering nothing, when a
    /// record needs the message decoder (a compressed body or an inner batch); on an error nothing is gathered
    /// either. A malformed record anywhere in the block is reported before invalid text, as the reference does.
    pub fn add(&mut self, block: &[u8], low: i64, high: i64) -> Result<bool, AddError> {
        let rows_before = self.rows;
        let parse = self.tag_set.is_some() || self.want.properties || self.want.tags || self.want.keys
            || self.want.msg_id;
        let mut pairs = Vec::new();
        let mut plain = true;
        let mut invalid_text = false;
        let mut bad_timestamp = false;
        let result = scan(block, |_, r| {
            if r.needs_message_decoder() {
                plain = false;
                return Err(ScanError(String::new())); // stop: the block goes to the reference decoder
            }
            if !invalid_text
                && (std::str::from_utf8(r.topic).is_err() || std::str::from_utf8(r.properties).is_err())
            {
                invalid_text = true;
            }
            if invalid_text || bad_timestamp || r.queue_offset < low || r.queue_offset >= high {
                return Ok(());
            }
            if parse {
                parse_properties(r.properties, &mut pairs);
                if let Some(set) = &self.tag_set {
                    match lookup(&pairs, TAGS) {
                        Some(tag) if set.iter().any(|t| t.as_slice() == tag) => {}
                        _ => return Ok(()),
                    }
                }
            }
            // only a row kept is converted, so only its timestamps can be out of range (as in the reference)
            let (Some(born_us), Some(store_us)) =
                (r.born_timestamp.checked_mul(US_PER_MS), r.store_timestamp.checked_mul(US_PER_MS))
            else {
                bad_timestamp = true;
                return Ok(());
            };
            let w = self.want;
            let tag = if w.tags { lookup(&pairs, TAGS) } else { None };
            let msg_id = match if w.msg_id { lookup(&pairs, UNIQ_KEY) } else { None } {
                Some(id) => MessageId::Text(id),
                None => MessageId::Offset { store_host: r.store_host, physic_offset: r.physic_offset },
            };
            self.push(&Row {
                topic: r.topic,
                queue_id: r.queue_id,
                queue_offset: r.queue_offset,
                body: r.body,
                born_us,
                store_us,
                born_host: Host::Raw(r.born_host),
                store_host: Host::Raw(r.store_host),
                reconsume: r.reconsume_times,
                flag: r.flag,
                properties: &pairs,
                tag,
                keys: (if w.keys { lookup(&pairs, KEYS).unwrap_or_default() } else { b"" }, &[]),
                msg_id,
            });
            Ok(())
        });
        let outcome = match result {
            Err(_) if !plain => Ok(false),
            Err(ScanError(text)) => Err(AddError::Malformed(text)),
            Ok(()) if invalid_text => Err(AddError::InvalidText),
            Ok(()) if bad_timestamp => Err(AddError::Timestamp),
            Ok(()) => Ok(true),
        };
        if outcome != Ok(true) {
            self.truncate(rows_before);
        } else {
            self.bytes += block.len();
        }
        outcome
    }

    /// Gathers the messages of a gRPC pull's answer frames (each a `PullMessageResponse` holding a message) with
    /// `low <= queueOffset < high` that pass the tag re-check; `topic` stands for a message that names none.
    /// Returns false, gathering nothing, when a message needs the reference decoder (a gzip body, a flag that is
    /// not a plain integer); on an error nothing is gathered either.
    pub fn add_v2(&mut self, frames: &[&[u8]], topic: &[u8], low: i64, high: i64) -> Result<bool, AddError> {
        let rows_before = self.rows;
        let outcome = self.gather_v2(frames, topic, low, high);
        if outcome != Ok(true) {
            self.truncate(rows_before);
        } else {
            self.bytes += frames.iter().map(|f| f.len()).sum::<usize>();
        }
        outcome
    }

    fn gather_v2(&mut self, frames: &[&[u8]], topic: &[u8], low: i64, high: i64) -> Result<bool, AddError> {
        let mut properties = Vec::new();
        let mut bad_timestamp = false;
        for frame in frames {
            let Some(v2::Content::Message(buf)) = v2::response(frame).map_err(AddError::Malformed)? else {
                return Err(AddError::Malformed("a PullMessage answer frame holds no message".into()));
            };
            let m = v2::message(buf).map_err(AddError::Malformed)?;
            if m.body_encoding == v2::GZIP {
                return Ok(false);
            }
            let texts = [m.topic, m.message_id, m.born_host, m.store_host, m.tag.unwrap_or_default()];
            if texts.iter().chain(&m.keys).chain(m.properties.iter().flat_map(|(k, v)| [k, v]))
                .any(|t| std::str::from_utf8(t).is_err())
            {
                return Err(AddError::InvalidText);
            }
            properties.clear();
            let mut flag = 0;
            for &(name, value) in &m.properties {
                if name != FLAG_PROPERTY {
                    properties.push((name, value));
                    continue;
                }
                match std::str::from_utf8(value).ok().and_then(|v| v.parse::<i32>().ok()) {
                    Some(f) if value.iter().all(u8::is_ascii_digit) || value.first() == Some(&b'-') => flag = f,
                    _ => return Ok(false),
                }
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
            let us = |(seconds, nanos): (i64, i64)| {
                seconds.checked_mul(1000)?.checked_add(nanos.div_euclid(1_000_000))?.checked_mul(US_PER_MS)
            };
            // read on: a later malformed frame, or one the reference must decode, decides the outcome first, as there
            let (Some(born_us), Some(store_us)) = (us(m.born), us(m.store)) else {
                bad_timestamp = true;
                continue;
            };
            if bad_timestamp {
                continue;
            }
            self.push(&Row {
                topic: if m.topic.is_empty() { topic } else { m.topic },
                queue_id: m.queue_id,
                queue_offset: m.queue_offset,
                body: m.body,
                born_us,
                store_us,
                born_host: Host::Text(m.born_host),
                store_host: Host::Text(m.store_host),
                reconsume: m.delivery_attempt.map_or(0, |a| a.saturating_sub(1).max(0)),
                flag,
                properties: &properties,
                tag: m.tag,
                keys: (b"", &m.keys),
                msg_id: MessageId::Text(m.message_id),
            });
        }
        if bad_timestamp {
            return Err(AddError::Timestamp);
        }
        Ok(true)
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
            self.born_ts.push(r.born_us);
        }
        if w.store_ts {
            self.store_ts.push(r.store_us);
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
        let mut g = Gathered::new(Wanted::of(["queueOffset", "body"]).unwrap(), None);
        let block = crate::records::tests::block_of(&[(b"a", 1), (b"b", 2), (b"c", 3)]);
        assert_eq!(g.add(&block, 2, 3), Ok(true));
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
