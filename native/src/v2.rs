//! The messages of a gRPC `PullMessage` answer (apache.rocketmq.v2), read from their protobuf wire bytes: only the
//! fields the source's columns need, as slices of the frame. Field numbers are those of `proto/apache/rocketmq/v2`.
//!
//! Stricter than a protobuf parser where a broker never goes: a group, or a known field in a wire type it does
//! not have, is an error rather than an unknown field (the frame is refused: a ProtocolError); and a Message,
//! Timestamp or Resource given twice is read from its last occurrence where protobuf would merge the two.

/// One pulled message's fields. Strings are the frame's bytes (UTF-8 is checked by the gatherer).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct V2Message<'a> {
    pub topic: &'a [u8],
    /// `user_properties` in wire order; a repeated key keeps its first position and its last value (a map).
    pub properties: Vec<(&'a [u8], &'a [u8])>,
    pub tag: Option<&'a [u8]>,
    pub keys: Vec<&'a [u8]>,
    pub message_id: &'a [u8],
    pub body_encoding: u64,
    /// (seconds, nanos) of `google.protobuf.Timestamp`.
    pub born: (i64, i64),
    pub store: (i64, i64),
    pub born_host: &'a [u8],
    pub store_host: &'a [u8],
    pub queue_id: i32,
    pub queue_offset: i64,
    pub delivery_attempt: Option<i32>,
    pub body: &'a [u8],
}

/// `Encoding.GZIP`: a body the gatherer leaves to the reference decoder.
pub const GZIP: u64 = 2;

/// What one `PullMessageResponse` frame holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Content<'a> {
    Status(&'a [u8]),
    Message(&'a [u8]),
    NextOffset(i64),
}

enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// A walk over the fields of one protobuf message.
struct Fields<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Fields { buf, at: 0 }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.buf.get(self.at).ok_or_else(|| format!("a varint is cut at byte {}", self.at))?;
            self.at += 1;
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!("a varint runs past 10 bytes at byte {}", self.at))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.buf.len()).ok_or_else(|| {
            format!("a field of {n} bytes at byte {} runs past the end ({} bytes)", self.at, self.buf.len())
        })?;
        let out = &self.buf[self.at..end];
        self.at = end;
        Ok(out)
    }

    /// The next (field number, value), or None at the end.
    fn next(&mut self) -> Result<Option<(u64, Value<'a>)>, String> {
        if self.at == self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        if key >> 3 == 0 {
            return Err(format!("field number 0 at byte {}", self.at));
        }
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Value::Fixed
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| "a length past the address space".to_string())?;
                Value::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Value::Fixed
            }
            other => return Err(format!("wire type {other} (field {}) is not one a v2 message uses", key >> 3)),
        };
        Ok(Some((key >> 3, value)))
    }
}

fn bytes<'a>(field: u64, value: Value<'a>) -> Result<&'a [u8], String> {
    match value {
        Value::Bytes(b) => Ok(b),
        _ => Err(format!("field {field} is not length-delimited")),
    }
}

fn varint(field: u64, value: Value<'_>) -> Result<u64, String> {
    match value {
        Value::Varint(v) => Ok(v),
        _ => Err(format!("field {field} is not a varint")),
    }
}

/// The content of one `PullMessageResponse` (the last of its oneof fields, as protobuf reads it).
pub fn response(frame: &[u8]) -> Result<Option<Content<'_>>, String> {
    let mut fields = Fields::new(frame);
    let mut content = None;
    while let Some((field, value)) = fields.next()? {
        content = match field {
            1 => Some(Content::Status(bytes(field, value)?)),
            2 => Some(Content::Message(bytes(field, value)?)),
            3 => Some(Content::NextOffset(varint(field, value)? as i64)),
            _ => content,
        };
    }
    Ok(content)
}

fn timestamp(buf: &[u8]) -> Result<(i64, i64), String> {
    let (mut seconds, mut nanos) = (0, 0);
    let mut fields = Fields::new(buf);
    while let Some((field, value)) = fields.next()? {
        match field {
            1 => seconds = varint(field, value)? as i64,
            2 => nanos = varint(field, value)? as i32 as i64,
            _ => {}
        }
    }
    Ok((seconds, nanos))
}

fn resource_name(buf: &[u8]) -> Result<&[u8], String> {
    let mut name: &[u8] = b"";
    let mut fields = Fields::new(buf);
    while let Some((field, value)) = fields.next()? {
        if field == 2 {
            name = bytes(field, value)?;
        }
    }
    Ok(name)
}

fn map_entry(buf: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let (mut key, mut value): (&[u8], &[u8]) = (b"", b"");
    let mut fields = Fields::new(buf);
    while let Some((field, v)) = fields.next()? {
        match field {
            1 => key = bytes(field, v)?,
            2 => value = bytes(field, v)?,
            _ => {}
        }
    }
    Ok((key, value))
}

fn system_properties<'a>(buf: &'a [u8], m: &mut V2Message<'a>) -> Result<(), String> {
    let mut fields = Fields::new(buf);
    while let Some((field, value)) = fields.next()? {
        match field {
            1 => m.tag = Some(bytes(field, value)?),
            2 => m.keys.push(bytes(field, value)?),
            3 => m.message_id = bytes(field, value)?,
            5 => m.body_encoding = varint(field, value)?,
            7 => m.born = timestamp(bytes(field, value)?)?,
            8 => m.born_host = bytes(field, value)?,
            9 => m.store = timestamp(bytes(field, value)?)?,
            10 => m.store_host = bytes(field, value)?,
            13 => m.queue_id = varint(field, value)? as i32,
            14 => m.queue_offset = varint(field, value)? as i64,
            16 => m.delivery_attempt = Some(varint(field, value)? as i32),
            _ => {}
        }
    }
    Ok(())
}

/// One v2 `Message`, from its wire bytes.
pub fn message(buf: &[u8]) -> Result<V2Message<'_>, String> {
    let mut m = V2Message::default();
    let mut fields = Fields::new(buf);
    while let Some((field, value)) = fields.next()? {
        match field {
            1 => m.topic = resource_name(bytes(field, value)?)?,
            2 => {
                let (key, value) = map_entry(bytes(field, value)?)?;
                match m.properties.iter_mut().find(|(k, _)| *k == key) {
                    Some(pair) => pair.1 = value,
                    None => m.properties.push((key, value)),
                }
            }
            3 => system_properties(bytes(field, value)?, &mut m)?,
            4 => m.body = bytes(field, value)?,
            _ => {}
        }
    }
    Ok(m)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn field(number: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(number << 3 | 2, &mut out);
        put_varint(payload.len() as u64, &mut out);
        out.extend_from_slice(payload);
        out
    }

    pub fn varint_field(number: u64, value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(number << 3, &mut out);
        put_varint(value, &mut out);
        out
    }

    fn put_varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// A `PullMessageResponse` frame of one message at `offset` with `tag` and `body`.
    pub fn message_frame(offset: u64, tag: &[u8], body: &[u8]) -> Vec<u8> {
        let ts = [varint_field(1, 1_700_000_000), varint_field(2, 5_000_000)].concat();
        let sp = [field(1, tag), field(2, b"k1"), field(3, b"ID"), varint_field(5, 1), field(7, &ts),
                  field(8, b"1.2.3.4:5"), field(9, &ts), field(10, b"6.7.8.9:10"), varint_field(13, 3),
                  varint_field(14, offset)]
            .concat();
        let entry = [field(1, b"p"), field(2, b"v")].concat();
        let message = [field(1, &field(2, b"T")), field(2, &entry), field(3, &sp), field(4, body)].concat();
        field(2, &message)
    }

    #[test]
    fn reads_a_message_frame() {
        let frame = message_frame(300, b"TagA", b"hello");
        let Ok(Some(Content::Message(buf))) = response(&frame) else { panic!("a message frame") };
        let m = message(buf).unwrap();
        assert_eq!((m.topic, m.tag, m.message_id, m.body), (&b"T"[..], Some(&b"TagA"[..]), &b"ID"[..], &b"hello"[..]));
        assert_eq!((m.queue_id, m.queue_offset, m.born, m.store.1), (3, 300, (1_700_000_000, 5_000_000), 5_000_000));
        assert_eq!((m.keys, m.properties, m.delivery_attempt), (vec![&b"k1"[..]], vec![(&b"p"[..], &b"v"[..])], None));
        assert_eq!(response(&varint_field(3, 42)), Ok(Some(Content::NextOffset(42))));
    }

    #[test]
    fn a_cut_frame_is_an_error_and_a_repeated_key_keeps_its_first_place() {
        let frame = message_frame(1, b"A", b"body");
        for cut in 0..frame.len() {
            if let Ok(Some(Content::Message(buf))) = response(&frame[..cut]) {
                panic!("a frame cut at {cut} read as a message of {} bytes", buf.len());
            }
        }
        let entries = [field(2, &[field(1, b"a"), field(2, b"1")].concat()),
                       field(2, &[field(1, b"b"), field(2, b"2")].concat()),
                       field(2, &[field(1, b"a"), field(2, b"3")].concat())]
            .concat();
        assert_eq!(message(&entries).unwrap().properties, vec![(&b"a"[..], &b"3"[..]), (&b"b"[..], &b"2"[..])]);
    }

    #[test]
    fn field_number_zero_and_a_group_are_errors_unknown_fields_are_skipped() {
        let frame = message_frame(1, b"A", b"body");
        assert!(response(&[&[0x02, 0x00][..], &frame].concat()).is_err());
        assert!(response(&[&[0x0B][..], &frame].concat()).is_err()); // field 1 as a start group
        let unknown = [varint_field(9, 5), field(10, b"x"), frame.clone()].concat();
        assert_eq!(response(&unknown).unwrap(), response(&frame).unwrap());
    }
}
