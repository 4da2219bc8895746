//! The sink's hot path: rows of an Arrow batch straight to SEND_BATCH_MESSAGE bodies, per target queue, as
//! `rmq_spark/sink/columns.py` `to_rows`, `sink/routing.py` `Router.route`, `sink/sender.py` `Sender.add` and
//! `client/remoting/send_codec.py` `encode_batch` do it row by row (that path is the test oracle: the same batch
//! gives the same bodies, differential-tested in tests/unit/test_native_sends.py).
//!
//! A body is, per message (MessageDecoder.encodeMessages), big-endian: `int32 totalSize | int32 magic 0 | int32
//! bodyCRC 0 | int32 flag | int32 bodyLength | body | int16 propertiesLength | properties` (`key\x01value\x02`...).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::Write;

use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;

use crate::arrow_in::{Ints, StrLists, StrMaps, Strs};
use crate::frame::{self, Command};
use crate::unique_ids::UniqueIds;

const RECORD_FIXED: usize = 4 * 5 + 2;
const MAX_PROPERTIES: usize = 0x7FFF;
const COMPRESSED_ZLIB: i32 = 0x1 | 3 << 8; // MessageSysFlag: compressed, CompressionType ZLIB
const TRANSACTION_PREPARED: i32 = 0x1 << 2; // MessageSysFlag.TRANSACTION_PREPARED_TYPE
const SEND_MESSAGE_V2: i64 = 310;
const ROW_KEY_BYTES: usize = 12; // a row key's content hash: blake2b of 96 bits

/// The `keys` column: space-separated text or a list.
#[derive(Clone, Copy)]
pub enum Keys<'a> {
    Text(Strs<'a>),
    List(StrLists<'a>),
}

/// The columns of one batch (each None where the batch lacks it). `topic` holds indices into the topics table.
pub struct Columns<'a> {
    pub rows: usize,
    pub body: Strs<'a>,
    pub topic: Option<Ints<'a, i32>>,
    pub tags: Option<Strs<'a>>,
    pub keys: Option<Keys<'a>>,
    pub properties: Option<StrMaps<'a>>,
    pub flag: Option<Ints<'a, i32>>,
    pub sharding: Option<Strs<'a>>,
    pub broker: Option<Strs<'a>>,
    pub queue_id: Option<Ints<'a, i32>>,
}

/// A topic's writable queues in route order (broker name, queue id), numbered from `base` in the caller's list.
pub struct Topic {
    pub base: u32,
    pub queues: Vec<(Vec<u8>, i32)>,
}

/// One send: `count` messages for queue `queue` of the caller's list, all marked `sys_flag`; `flag` is the
/// first message's (the request header carries it).
pub struct Send {
    pub queue: u32,
    pub sys_flag: i32,
    pub flag: i32,
    pub count: u32,
    pub body: Vec<u8>,
}

/// A topic's names beside its `Topic`: as the row key hashes it (the user's) and as the broker knows it (in the
/// client's namespace).
pub struct TopicNames {
    pub name: Vec<u8>,
    pub wire: String,
}

/// The fixed parts of a half message's SEND_MESSAGE_V2 request.
pub struct HalfRequest<'a> {
    /// the producer group as the broker knows it (header and PGROUP property)
    pub group: &'a str,
    /// `Some(group/query/batch/)`: each row carries its row key under `ROW_KEY_PROPERTY` (a streaming write)
    pub key_prefix: Option<&'a str>,
    pub language: &'a str,
    pub version: i64,
}

/// One half message's request, its frame in the caller's buffer up to `end`.
pub struct Half {
    pub queue: u32,
    /// body bytes as sent
    pub size: usize,
    pub end: usize,
    pub unique_id: String,
    /// the row key ("" for rows that carry none)
    pub key: String,
}

#[derive(Clone, Copy)]
pub struct Limits {
    /// messages per send at most
    pub messages: u32,
    /// body bytes (as sent) per send at most
    pub bytes: usize,
    /// bodies of this many bytes or more are zlib-compressed, at `level`
    pub compress_from: usize,
    pub level: u32,
}

#[derive(Debug, PartialEq)]
pub enum EncodeError {
    /// a property the wire cannot carry (a separator inside, or too many bytes): the text says which
    Property(String),
    /// columns that do not fit the rules Python checked (a null body or topic, an unknown queue)
    Malformed(String),
}

struct Pending {
    sys_flag: i32,
    flag: i32,
    count: u32,
    size: usize,
    body: Vec<u8>,
}

/// Encodes the rows of a task's batches; a queue's messages gather across batches until a send is full.
pub struct Encoder {
    limits: Limits,
    reserved: HashSet<Vec<u8>>,
    transient_prefix: Vec<u8>,
    ids: UniqueIds,
    pending: Vec<Option<Pending>>,
    order: Vec<u32>, // queues in the order their pending send began (Python's dict order)
    // per-row scratch
    props: Vec<u8>,
    pairs: Vec<(usize, usize, usize, usize)>,
    compressed: Vec<u8>,
    scratch: Vec<u8>,
    /// where the last row's UNIQ_KEY and KEYS values sit in `props`
    uniq: (usize, usize),
    keys_at: (usize, usize),
}

/// Java's `String.hashCode` over UTF-16 code units.
pub fn java_string_hash(s: &[u8]) -> i32 {
    String::from_utf8_lossy(s).encode_utf16().fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(u as i32))
}

fn check_separators(key: &[u8], value: &[u8]) -> Result<(), EncodeError> {
    if key.iter().any(|&b| b == 1 || b == 2) || value.contains(&2) {
        return Err(EncodeError::Property(format!(
            "property {:?} contains a \\x01 or \\x02 separator character",
            String::from_utf8_lossy(key)
        )));
    }
    Ok(())
}

impl Encoder {
    pub fn new(limits: Limits, reserved: impl IntoIterator<Item = Vec<u8>>, transient_prefix: &[u8], ids: UniqueIds) -> Self {
        Encoder {
            limits,
            reserved: reserved.into_iter().collect(),
            transient_prefix: transient_prefix.to_vec(),
            ids,
            pending: Vec::new(),
            order: Vec::new(),
            props: Vec::new(),
            pairs: Vec::new(),
            compressed: Vec::new(),
            scratch: Vec::new(),
            uniq: (0, 0),
            keys_at: (0, 0),
        }
    }

    /// A new UNIQ_KEY generator (a new month, or a forked process).
    pub fn set_ids(&mut self, ids: UniqueIds) {
        self.ids = ids;
    }

    /// Encodes the rows of `c`, routed over `topics`; `turn` is the round-robin position, moved past every row
    /// that has no sharding key or named queue. Returns the sends that are full; the rest wait for the next batch
    /// or `finish`. `now_ms` gives the UNIQ_KEY clock.
    pub fn add(
        &mut self,
        c: &Columns<'_>,
        topics: &[Topic],
        turn: &mut u64,
        now_ms: &mut dyn FnMut() -> i64,
    ) -> Result<Vec<Send>, EncodeError> {
        let mut out = Vec::new();
        for i in 0..c.rows {
            let queue = route(c, topics, i, turn)?;
            let raw = c.body.get(i).ok_or_else(|| EncodeError::Malformed(format!("row {i} has a null body")))?;
            let sharding = c.sharding.and_then(|s| s.get(i));
            let now = now_ms();
            self.properties(c, i, sharding, now)?;
            let mut compressed = std::mem::take(&mut self.compressed);
            let (body, sys_flag) = as_sent(raw, &self.limits, &mut compressed);
            let flag = c.flag.and_then(|f| f.get(i)).unwrap_or(0);
            let total = RECORD_FIXED + body.len() + self.props.len();
            if total > i32::MAX as usize {
                return Err(EncodeError::Property(format!("a message of {total} bytes does not fit an int32")));
            }
            let q = queue as usize;
            if self.pending.len() <= q {
                self.pending.resize_with(q + 1, || None);
            }
            if let Some(p) = &self.pending[q] {
                if p.sys_flag != sys_flag || p.count >= self.limits.messages || p.size + body.len() > self.limits.bytes {
                    out.push(self.take(queue));
                }
            }
            let p = self.pending[q].get_or_insert_with(|| Pending { sys_flag, flag, count: 0, size: 0, body: Vec::new() });
            if p.count == 0 {
                self.order.push(queue);
            }
            let b = &mut p.body;
            for v in [total as i32, 0, 0, flag, body.len() as i32] {
                b.extend_from_slice(&v.to_be_bytes());
            }
            b.extend_from_slice(body);
            b.extend_from_slice(&(self.props.len() as i16).to_be_bytes());
            b.extend_from_slice(&self.props);
            p.count += 1;
            p.size += body.len();
            self.compressed = compressed;
        }
        Ok(out)
    }

    /// The half messages of the rows of `c` (an exactly-once write: one SEND_MESSAGE_V2 each, as
    /// `client/remoting/broker.py` `half_request` makes it, with the row key of `sink/row_keys.py` `row_key`),
    /// routed as `add` routes. Each frame is appended to `out` under the next of `opaques` (one per row).
    #[allow(clippy::too_many_arguments)]
    pub fn halves(
        &mut self,
        c: &Columns<'_>,
        topics: &[Topic],
        names: &[TopicNames],
        turn: &mut u64,
        now_ms: &mut dyn FnMut() -> i64,
        request: &HalfRequest<'_>,
        opaques: &[i32],
        out: &mut Vec<u8>,
    ) -> Result<Vec<Half>, EncodeError> {
        if opaques.len() < c.rows {
            return Err(EncodeError::Malformed(format!("{} opaques for {} rows", opaques.len(), c.rows)));
        }
        if names.len() < topics.len() {
            return Err(EncodeError::Malformed(format!("{} topic names for {} topics", names.len(), topics.len())));
        }
        let mut halves = Vec::with_capacity(c.rows);
        let mut key = String::new();
        for (i, &opaque) in opaques.iter().enumerate().take(c.rows) {
            let queue = route(c, topics, i, turn)?;
            let t = c.topic.and_then(|col| col.get(i)).unwrap_or(0) as usize;
            let (broker, queue_id) = find_queue(topics, queue);
            let raw = c.body.get(i).ok_or_else(|| EncodeError::Malformed(format!("row {i} has a null body")))?;
            let sharding = c.sharding.and_then(|s| s.get(i));
            let now = now_ms();
            self.properties(c, i, sharding, now)?;
            let unique_id = String::from_utf8_lossy(&self.props[self.uniq.0..self.uniq.1]).into_owned();
            key.clear();
            if let Some(prefix) = request.key_prefix {
                key.push_str(prefix);
                let named = c.broker.and_then(|b| b.get(i)).is_some();
                self.row_hash(c, i, &names[t].name, sharding, named.then_some((broker, queue_id)), raw, &mut key);
                push_pair(&mut self.props, b"rmqSparkRow", key.as_bytes());
            }
            push_pair(&mut self.props, b"TRAN_MSG", b"true");
            push_pair(&mut self.props, b"PGROUP", request.group.as_bytes());
            if self.props.len() > MAX_PROPERTIES {
                return Err(EncodeError::Property(format!(
                    "properties of {} bytes exceed the 32767 a message can carry",
                    self.props.len()
                )));
            }
            let properties = std::str::from_utf8(&self.props)
                .map_err(|_| EncodeError::Malformed(format!("row {i}'s properties are not UTF-8")))?
                .to_owned();
            let mut compressed = std::mem::take(&mut self.compressed);
            let (body, sys_flag) = as_sent(raw, &self.limits, &mut compressed);
            let flag = c.flag.and_then(|f| f.get(i)).unwrap_or(0);
            let ext: Vec<(String, String)> = vec![
                ("a".into(), request.group.into()),
                ("b".into(), names[t].wire.clone()),
                ("c".into(), "TBW102".into()),
                ("d".into(), "4".into()),
                ("e".into(), queue_id.to_string()),
                ("f".into(), (sys_flag | TRANSACTION_PREPARED).to_string()),
                ("g".into(), now.to_string()),
                ("h".into(), flag.to_string()),
                ("i".into(), properties),
                ("j".into(), "0".into()),
                ("k".into(), "false".into()),
                ("m".into(), "false".into()),
                ("n".into(), String::from_utf8_lossy(broker).into_owned()),
            ];
            let command = Command {
                code: SEND_MESSAGE_V2,
                language: request.language,
                version: request.version,
                opaque: opaque as i64,
                flag: 0,
                remark: None,
                ext: &ext,
                body,
                serialize_type: frame::JSON,
            };
            frame::encode_into(&command, out).map_err(EncodeError::Property)?;
            halves.push(Half { queue, size: body.len(), end: out.len(), unique_id, key: key.clone() });
            self.compressed = compressed;
        }
        Ok(halves)
    }

    /// Appends to `key` the hex of row `i`'s content hash: its topic, tags, keys, flag, delivery time (none: the
    /// caller sends no timer row), sharding key and named queue, then its own properties by name, then its body.
    #[allow(clippy::too_many_arguments)]
    fn row_hash(
        &self,
        c: &Columns<'_>,
        i: usize,
        topic: &[u8],
        sharding: Option<&[u8]>,
        named: Option<(&[u8], i32)>,
        raw: &[u8],
        key: &mut String,
    ) {
        let mut h = Blake2bVar::new(ROW_KEY_BYTES).expect("12 bytes is a blake2b digest size");
        let tags = c.tags.and_then(|t| t.get(i)).unwrap_or_default();
        let keys = &self.props[self.keys_at.0..self.keys_at.1];
        let flag = c.flag.and_then(|f| f.get(i)).unwrap_or(0).to_string();
        let queue = named.map(|(b, q)| format!("{}/{q}", String::from_utf8_lossy(b))).unwrap_or_default();
        let parts: [&[u8]; 7] =
            [topic, tags, keys, flag.as_bytes(), b"None", sharding.unwrap_or_default(), queue.as_bytes()];
        for part in parts {
            h.update(part);
            h.update(&[0]);
        }
        let mut pairs: Vec<_> = self.pairs.iter().map(|&(ks, ke, vs, ve)| (&self.scratch[ks..ke], &self.scratch[vs..ve])).collect();
        if c.properties.is_none() {
            pairs.clear();
        }
        pairs.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (k, v) in pairs {
            h.update(k);
            h.update(&[1]);
            h.update(v);
            h.update(&[2]);
        }
        h.update(raw);
        let mut digest = [0u8; ROW_KEY_BYTES];
        h.finalize_variable(&mut digest).expect("the digest's size");
        for b in digest {
            let _ = write!(key, "{b:02x}");
        }
    }

    /// Every send still gathering, in the order they began.
    pub fn finish(&mut self) -> Vec<Send> {
        let order = std::mem::take(&mut self.order);
        order.into_iter().filter_map(|q| self.pending[q as usize].take().map(|p| send(q, p))).collect()
    }

    fn take(&mut self, queue: u32) -> Send {
        self.order.retain(|&q| q != queue);
        send(queue, self.pending[queue as usize].take().expect("a pending send"))
    }

    /// Row `i`'s properties into `self.props`: its own (no reserved name, no null value, a repeated key keeping
    /// its first place and its last value, as a Python dict), then UNIQ_KEY, TAGS, KEYS and __SHARDINGKEY.
    fn properties(&mut self, c: &Columns<'_>, i: usize, sharding: Option<&[u8]>, now: i64) -> Result<(), EncodeError> {
        self.props.clear();
        if let Some(map) = c.properties {
            // (key start, key end, value start, value end) into a scratch copy, so repeated keys can be replaced
            self.pairs.clear();
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.clear();
            if let Some(entries) = map.get(i) {
                for (k, v) in entries {
                    let Some(v) = v else { continue };
                    if self.reserved.contains(k) || k.starts_with(&self.transient_prefix) {
                        continue;
                    }
                    let (ks, ke) = (scratch.len(), scratch.len() + k.len());
                    scratch.extend_from_slice(k);
                    let (vs, ve) = (scratch.len(), scratch.len() + v.len());
                    scratch.extend_from_slice(v);
                    match self.pairs.iter_mut().find(|p| scratch[p.0..p.1] == scratch[ks..ke]) {
                        Some(p) => (p.2, p.3) = (vs, ve),
                        None => self.pairs.push((ks, ke, vs, ve)),
                    }
                }
            }
            for &(ks, ke, vs, ve) in &self.pairs {
                check_separators(&scratch[ks..ke], &scratch[vs..ve])?;
                push_pair(&mut self.props, &scratch[ks..ke], &scratch[vs..ve]);
            }
            self.scratch = scratch;
        }
        self.props.extend_from_slice(b"UNIQ_KEY\x01");
        let start = self.props.len();
        self.ids.push_next(now, &mut self.props);
        self.uniq = (start, self.props.len());
        self.props.push(2);
        self.keys_at = (0, 0);
        if let Some(tags) = c.tags.and_then(|t| t.get(i)).filter(|t| !t.is_empty()) {
            check_separators(b"TAGS", tags)?;
            push_pair(&mut self.props, b"TAGS", tags);
        }
        if let Some(keys) = c.keys {
            let start = self.props.len();
            self.props.extend_from_slice(b"KEYS\x01");
            let mut any = false;
            let mut join = |k: &[u8], props: &mut Vec<u8>| {
                if !k.is_empty() {
                    if any {
                        props.push(b' ');
                    }
                    props.extend_from_slice(k);
                    any = true;
                }
            };
            match keys {
                Keys::Text(t) => {
                    if let Some(text) = t.get(i) {
                        for k in text.split(|&b| b == b' ') {
                            join(k, &mut self.props);
                        }
                    }
                }
                Keys::List(l) => {
                    if let Some(items) = l.get(i) {
                        for k in items.flatten() {
                            join(k, &mut self.props);
                        }
                    }
                }
            }
            if any {
                if self.props[start + 5..].contains(&2) {
                    return Err(EncodeError::Property("property \"KEYS\" contains a \\x01 or \\x02 separator character".into()));
                }
                self.keys_at = (start + 5, self.props.len());
                self.props.push(2);
            } else {
                self.props.truncate(start);
            }
        }
        if let Some(key) = sharding {
            check_separators(b"__SHARDINGKEY", key)?;
            push_pair(&mut self.props, b"__SHARDINGKEY", key);
        }
        if self.props.len() > MAX_PROPERTIES {
            return Err(EncodeError::Property(format!(
                "properties of {} bytes exceed the 32767 a message can carry",
                self.props.len()
            )));
        }
        Ok(())
    }
}

/// `raw` as sent, and its sysFlag: zlib-compressed into `buf` from `limits.compress_from` bytes on.
fn as_sent<'b>(raw: &'b [u8], limits: &Limits, buf: &'b mut Vec<u8>) -> (&'b [u8], i32) {
    if raw.len() < limits.compress_from {
        return (raw, 0);
    }
    buf.clear();
    let mut e = flate2::write::ZlibEncoder::new(std::mem::take(buf), flate2::Compression::new(limits.level));
    e.write_all(raw).expect("writing to a vector");
    *buf = e.finish().expect("writing to a vector");
    (&buf[..], COMPRESSED_ZLIB)
}

fn push_pair(props: &mut Vec<u8>, k: &[u8], v: &[u8]) {
    props.extend_from_slice(k);
    props.push(1);
    props.extend_from_slice(v);
    props.push(2);
}

fn send(queue: u32, p: Pending) -> Send {
    Send { queue, sys_flag: p.sys_flag, flag: p.flag, count: p.count, body: p.body }
}

/// The broker name and queue id of queue number `queue` of the caller's list.
fn find_queue(topics: &[Topic], queue: u32) -> (&[u8], i32) {
    let topic = topics
        .iter()
        .rev()
        .find(|t| t.base <= queue && ((queue - t.base) as usize) < t.queues.len())
        .expect("route gives a queue of a listed topic");
    let (broker, id) = &topic.queues[(queue - topic.base) as usize];
    (broker, *id)
}

/// The queue of row `i` (an index into the caller's list): the queue it names, its sharding key's
/// (SelectMessageQueueByHash), or the next in turn.
fn route(c: &Columns<'_>, topics: &[Topic], i: usize, turn: &mut u64) -> Result<u32, EncodeError> {
    let t = match c.topic {
        None => 0,
        Some(col) => col.get(i).ok_or_else(|| EncodeError::Malformed(format!("row {i} has a null topic")))? as usize,
    };
    let topic = topics.get(t).ok_or_else(|| EncodeError::Malformed(format!("row {i} names topic {t}, not listed")))?;
    let n = topic.queues.len();
    if n == 0 {
        return Err(EncodeError::Malformed(format!("topic {t} of row {i} has no writable queue")));
    }
    let broker = c.broker.and_then(|b| b.get(i));
    let queue_id = c.queue_id.and_then(|q| q.get(i));
    if broker.is_some() || queue_id.is_some() {
        let (broker, queue_id) = (broker.unwrap_or_default(), queue_id.unwrap_or(-1));
        return match topic.queues.iter().position(|(b, q)| b == broker && *q == queue_id) {
            Some(k) => Ok(topic.base + k as u32),
            None => Err(EncodeError::Malformed(format!(
                "row {i} names queue {queue_id} of broker {:?}, not a writable queue of its topic",
                String::from_utf8_lossy(broker)
            ))),
        };
    }
    if let Some(key) = c.sharding.and_then(|s| s.get(i)) {
        return Ok(topic.base + ((java_string_hash(key) as i64).unsigned_abs() % n as u64) as u32);
    }
    let k = *turn % n as u64;
    *turn += 1;
    Ok(topic.base + k as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_java() {
        assert_eq!(java_string_hash(b""), 0);
        assert_eq!(java_string_hash(b"hello"), 99162322);
        assert_eq!(java_string_hash("\u{1F600}".as_bytes()), 1772899); // a surrogate pair: two code units
        assert_eq!(java_string_hash(b"polygenelubricants"), i32::MIN);
    }
}
