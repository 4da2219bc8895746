//! The remoting frame: a command header (JSON, or RocketMQ's binary layout) and an opaque body.
//!
//! Wire layout of one frame (integers big-endian): `int32` total length (of everything after it), `int32`
//! serialize type << 24 | header length, the header, the body. [`encode`] writes the whole frame; [`decode`]
//! reads a frame without its total length (the transport consumed it) and never panics on bad input.

use std::fmt::Write as _;

use serde_json::Value;

pub const JSON: u8 = 0;
pub const ROCKETMQ: u8 = 1;
const MAX_HEADER: usize = 0xFF_FFFF;
/// The binary header's fixed part: code i16, language i8, version i16, opaque i32, flag i32.
const FIXED: usize = 2 + 1 + 2 + 4 + 4;

/// LanguageCode, by ordinal (the binary header's language byte).
const LANGUAGES: [&str; 14] = [
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST",
    "NODE_JS",
];
const OTHER: u8 = 7;

/// A decoded command header; the body is the rest of the frame, from `body_start`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub code: i32,
    pub language: String,
    pub version: i32,
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    pub ext: Vec<(String, String)>,
    pub serialize_type: u8,
    pub body_start: usize,
}

impl Header {
    pub fn is_response(&self) -> bool {
        self.flag & 1 != 0
    }
}

/// What to encode: the header's fields (ext field values already rendered as text) and the body.
pub struct Command<'a> {
    pub code: i64,
    pub language: &'a str,
    pub version: i64,
    pub opaque: i64,
    pub flag: i64,
    pub remark: Option<&'a str>,
    pub ext: &'a [(String, String)],
    pub body: &'a [u8],
    pub serialize_type: u8,
}

// ---------------------------------------------------------------------------------------------- encoding

/// The whole frame of `cmd`, total length included; Err names what cannot be encoded.
pub fn encode(cmd: &Command) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    encode_into(cmd, &mut out)?;
    Ok(out)
}

/// `encode`, appended to `out` (left as it was on an error).
pub fn encode_into(cmd: &Command, out: &mut Vec<u8>) -> Result<(), String> {
    let header = match cmd.serialize_type {
        JSON => json_header(cmd),
        ROCKETMQ => binary_header(cmd)?,
        other => return Err(format!("cannot encode serialize type {other} (0 JSON or 1 ROCKETMQ)")),
    };
    if header.len() > MAX_HEADER {
        return Err(format!("header of {} bytes exceeds the 24-bit header length", header.len()));
    }
    let total = 4 + header.len() + cmd.body.len();
    let total = i32::try_from(total).map_err(|_| format!("frame of {total} bytes exceeds the 32-bit frame length"))?;
    out.reserve(4 + total as usize);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&(((cmd.serialize_type as u32) << 24) | header.len() as u32).to_be_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(cmd.body);
    Ok(())
}

/// A request sent many times with only a few integer fields changed (a range read's pulls, held pulls): its ext
/// fields are rendered to text once; `vary` names the fields each frame sets. A JSON header is rendered once in
/// pieces around the opaque and those fields.
#[derive(Debug, Clone)]
pub struct Template {
    code: i64,
    language: String,
    version: i64,
    serialize_type: u8,
    ext: Vec<(String, String)>,
    vary: Vec<usize>,
    /// JSON: the header's pieces, and the hole after each piece but the last.
    pieces: Vec<String>,
    holes: Vec<Hole>,
}

impl Template {
    /// Err names a field of `vary` that `ext` lacks.
    pub fn new(code: i64, language: String, version: i64, serialize_type: u8, ext: Vec<(String, String)>,
               vary: &[&str]) -> Result<Template, String> {
        let vary = vary
            .iter()
            .map(|name| {
                ext.iter().position(|(key, _)| key == name).ok_or_else(|| format!("the template has no field {name:?}"))
            })
            .collect::<Result<Vec<usize>, String>>()?;
        let mut template =
            Template { code, language, version, serialize_type, ext, vary, pieces: Vec::new(), holes: Vec::new() };
        if serialize_type == JSON {
            let holes: Vec<Hole> =
                std::iter::once(Hole::Opaque).chain((0..template.vary.len()).map(Hole::Vary)).collect();
            let (pieces, order) = json_header_pieces(&template.command(0), &holes, &template.vary);
            (template.pieces, template.holes) = (pieces, order);
        }
        Ok(template)
    }

    fn command(&self, opaque: i64) -> Command<'_> {
        Command {
            code: self.code,
            language: &self.language,
            version: self.version,
            opaque,
            flag: 0,
            remark: None,
            ext: &self.ext,
            body: &[],
            serialize_type: self.serialize_type,
        }
    }

    /// Appends the frame of request `opaque` with the varying fields set to `values`, in `vary`'s order.
    pub fn render_into(&mut self, values: &[i64], opaque: i64, out: &mut Vec<u8>) -> Result<(), String> {
        if values.len() != self.vary.len() {
            return Err(format!("{} values for {} fields", values.len(), self.vary.len()));
        }
        if self.serialize_type != JSON {
            for (&at, value) in self.vary.iter().zip(values) {
                let text = &mut self.ext[at].1;
                text.clear();
                let _ = write!(text, "{value}");
            }
            return encode_into(&self.command(opaque), out);
        }
        let start = out.len();
        out.extend_from_slice(&[0; 8]); // the lengths, once the header is written
        for (piece, hole) in self.pieces.iter().zip(self.holes.iter().map(Some).chain(std::iter::once(None))) {
            out.extend_from_slice(piece.as_bytes());
            let value = match hole {
                Some(Hole::Opaque) => opaque,
                Some(Hole::Vary(slot)) => values[*slot],
                None => break,
            };
            let _ = write!(Digits(out), "{value}");
        }
        let header = out.len() - start - 8;
        if header > MAX_HEADER {
            out.truncate(start);
            return Err(format!("header of {header} bytes exceeds the 24-bit header length"));
        }
        out[start..start + 4].copy_from_slice(&((4 + header) as i32).to_be_bytes());
        out[start + 4..start + 8].copy_from_slice(&((JSON as u32) << 24 | header as u32).to_be_bytes());
        Ok(())
    }
}

/// Writes formatted text onto a byte buffer.
struct Digits<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Digits<'_> {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        self.0.extend_from_slice(text.as_bytes());
        Ok(())
    }
}

fn json_string(out: &mut String, text: &str) {
    if text.bytes().any(|c| c < 0x20 || c == b'"' || c == b'\\') {
        out.push_str(&serde_json::to_string(text).expect("a str always serializes"));
    } else {
        out.push('"');
        out.push_str(text);
        out.push('"');
    }
}

/// What a JSON header leaves open for each frame a template renders: the opaque, or varying field `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hole {
    Opaque,
    Vary(usize),
}

/// The JSON header of `cmd` in pieces around `holes`' values: the opaque (with `Hole::Opaque` among them) and the
/// ext fields at the positions `vary` gives, each left open between its quotes; without holes, one piece.
fn json_header_pieces(cmd: &Command, holes: &[Hole], vary: &[usize]) -> (Vec<String>, Vec<Hole>) {
    let mut pieces = Vec::new();
    let mut order = Vec::new();
    let mut out = String::with_capacity(160 + cmd.ext.iter().map(|(k, v)| k.len() + v.len() + 6).sum::<usize>());
    let mut hole = |out: &mut String, which: Hole| {
        pieces.push(std::mem::take(out));
        order.push(which);
    };
    out.push_str("{\"code\":");
    let _ = write!(out, "{}", cmd.code);
    out.push_str(",\"language\":");
    json_string(&mut out, cmd.language);
    let _ = write!(out, ",\"version\":{},\"opaque\":", cmd.version);
    if holes.contains(&Hole::Opaque) {
        hole(&mut out, Hole::Opaque);
    } else {
        let _ = write!(out, "{}", cmd.opaque);
    }
    let _ = write!(out, ",\"flag\":{}", cmd.flag);
    if let Some(remark) = cmd.remark {
        out.push_str(",\"remark\":");
        json_string(&mut out, remark);
    }
    if !cmd.ext.is_empty() {
        out.push_str(",\"extFields\":{");
        for (i, (key, value)) in cmd.ext.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            json_string(&mut out, key);
            out.push(':');
            match vary.iter().position(|&at| at == i) {
                Some(slot) if holes.contains(&Hole::Vary(slot)) => {
                    out.push('"');
                    hole(&mut out, Hole::Vary(slot));
                    out.push('"');
                }
                _ => json_string(&mut out, value),
            }
        }
        out.push('}');
    }
    out.push_str(",\"serializeTypeCurrentRPC\":\"JSON\"}");
    pieces.push(out);
    (pieces, order)
}

fn json_header(cmd: &Command) -> Vec<u8> {
    json_header_pieces(cmd, &[], &[]).0.concat().into_bytes()
}

fn binary_header(cmd: &Command) -> Result<Vec<u8>, String> {
    let language = LANGUAGES.iter().position(|l| *l == cmd.language).map_or(OTHER, |i| i as u8);
    let mut out = Vec::with_capacity(FIXED + 8 + cmd.ext.iter().map(|(k, v)| k.len() + v.len() + 6).sum::<usize>());
    out.extend_from_slice(&(cmd.code as u16).to_be_bytes());
    out.push(language);
    out.extend_from_slice(&(cmd.version as u16).to_be_bytes());
    out.extend_from_slice(&(cmd.opaque as u32).to_be_bytes());
    out.extend_from_slice(&(cmd.flag as u32).to_be_bytes());
    let remark = cmd.remark.unwrap_or("").as_bytes();
    out.extend_from_slice(&(remark.len() as u32).to_be_bytes());
    out.extend_from_slice(remark);
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    for (key, value) in cmd.ext {
        if key.len() > 0x7FFF {
            return Err(format!("ext field name of {} bytes does not fit the binary header", key.len()));
        }
        out.extend_from_slice(&(key.len() as u16).to_be_bytes());
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(&(value.len() as u32).to_be_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    let ext_len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&ext_len.to_be_bytes());
    Ok(out)
}

// ---------------------------------------------------------------------------------------------- decoding

/// The header of one frame given without its total length (header-length int, header, body).
pub fn decode(buf: &[u8]) -> Result<Header, String> {
    let n = buf.len();
    if n < 4 {
        return Err(format!("frame of {n} bytes is too short for its header length field"));
    }
    let mark = u32::from_be_bytes(buf[..4].try_into().unwrap());
    let stype = (mark >> 24) as u8;
    let hlen = (mark & 0xFF_FFFF) as usize;
    if hlen > n - 4 {
        return Err(format!("header length {hlen} exceeds the {} bytes after the header length field", n - 4));
    }
    let header = &buf[4..4 + hlen];
    match stype {
        JSON => json_decode(header),
        ROCKETMQ => binary_decode(header),
        other => Err(format!("unknown serialize type {other} (0 JSON or 1 ROCKETMQ)")),
    }
    .map(|mut h| {
        h.body_start = 4 + hlen;
        h
    })
}

/// The name Python gives the type of a JSON value (the errors speak of the header as Python reads it).
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

fn int_field(obj: &serde_json::Map<String, Value>, name: &str) -> Result<i32, String> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) if !n.is_f64() => n
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| format!("JSON header field '{name}' = {n} is outside the 32-bit range")),
        Some(other) => Err(format!("JSON header field '{name}' is {}, not an integer", type_name(other))),
    }
}

fn json_decode(header: &[u8]) -> Result<Header, String> {
    let text = std::str::from_utf8(header).map_err(|e| format!("JSON header is not valid UTF-8: {e}"))?;
    match crate::json_header::read(text) {
        Some(header) => Ok(header),
        None => json_decode_value(text),
    }
}

/// The JSON header read as a JSON value: any valid JSON, with an error that names what does not fit.
pub fn json_decode_value(text: &str) -> Result<Header, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("JSON header is not valid JSON: {e}"))?;
    let Value::Object(obj) = value else {
        return Err(format!("JSON header is a {}, not an object", type_name(&value)));
    };
    let language = match obj.get("language") {
        None => "JAVA".to_owned(),
        Some(Value::Null) => "OTHER".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(format!("JSON header field 'language' is {}, not a string", type_name(other))),
    };
    let remark = match obj.get("remark") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => return Err(format!("JSON header field 'remark' is {}, not a string", type_name(other))),
    };
    let mut ext = Vec::new();
    match obj.get("extFields") {
        None | Some(Value::Null) => {}
        Some(Value::Object(fields)) => {
            for (key, value) in fields {
                let text = match value {
                    Value::Null => continue,
                    Value::String(s) => s.clone(),
                    Value::Bool(b) => b.to_string(),
                    Value::Number(n) => n.to_string(),
                    other => {
                        return Err(format!("JSON header ext field value is {}, not a string", type_name(other)))
                    }
                };
                ext.push((key.clone(), text));
            }
        }
        Some(other) => return Err(format!("JSON header field 'extFields' is {}, not an object", type_name(other))),
    }
    Ok(Header {
        code: int_field(&obj, "code")?,
        language,
        version: int_field(&obj, "version")?,
        opaque: int_field(&obj, "opaque")?,
        flag: int_field(&obj, "flag")?,
        remark,
        ext,
        serialize_type: JSON,
        body_start: 0,
    })
}

/// Reads the binary header's variable part, each length checked against what is left.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        out
    }

    fn int(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().unwrap())
    }
}

fn text(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|e| format!("binary header holds invalid UTF-8: {}", e.utf8_error()))
}

fn binary_decode(header: &[u8]) -> Result<Header, String> {
    if header.len() < FIXED + 8 {
        return Err(format!(
            "binary header of {} bytes is shorter than its fixed part ({} bytes)",
            header.len(),
            FIXED + 8
        ));
    }
    let code = i16::from_be_bytes([header[0], header[1]]) as i32;
    let language = LANGUAGES.get(header[2] as usize).copied().unwrap_or("OTHER").to_owned();
    let version = i16::from_be_bytes([header[3], header[4]]) as i32;
    let opaque = i32::from_be_bytes(header[5..9].try_into().unwrap());
    let flag = i32::from_be_bytes(header[9..13].try_into().unwrap());
    let mut c = Cursor { buf: header, pos: FIXED };
    let rlen = c.int();
    if rlen < 0 || rlen as usize > c.left() {
        return Err(format!("binary header remark length {rlen} exceeds the {} header bytes left", c.left()));
    }
    let remark = if rlen > 0 { Some(text(c.take(rlen as usize))?) } else { None };
    if c.left() < 4 {
        return Err("binary header truncated before the ext fields length".to_owned());
    }
    let elen = c.int();
    if elen < 0 || elen as usize > c.left() {
        return Err(format!("binary header ext fields length {elen} exceeds the {} header bytes left", c.left()));
    }
    let ext_end = c.pos + elen as usize;
    let mut ext = Vec::new();
    while c.pos < ext_end {
        if ext_end - c.pos < 2 {
            return Err("binary header ext field name length truncated".to_owned());
        }
        let klen = u16::from_be_bytes(c.take(2).try_into().unwrap()) as usize;
        if klen > 0x7FFF || klen > ext_end - c.pos {
            return Err(format!("binary header ext field name length {klen} exceeds the ext fields"));
        }
        let key = text(c.take(klen))?;
        if ext_end - c.pos < 4 {
            return Err(format!("binary header ext field '{key}' value length truncated"));
        }
        let vlen = c.int();
        if vlen < 0 || vlen as usize > ext_end - c.pos {
            return Err(format!("binary header ext field '{key}' value length {vlen} exceeds the ext fields"));
        }
        let value = text(c.take(vlen as usize))?;
        ext.push((key, value));
    }
    if c.left() != 0 {
        return Err(format!("binary header has {} trailing bytes after the ext fields", c.left()));
    }
    Ok(Header { code, language, version, opaque, flag, remark, ext, serialize_type: ROCKETMQ, body_start: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command<'a>(ext: &'a [(String, String)], stype: u8) -> Command<'a> {
        Command {
            code: 11,
            language: "PYTHON",
            version: 473,
            opaque: 99,
            flag: 0,
            remark: Some("ünï \"q\""),
            ext,
            body: b"xyz",
            serialize_type: stype,
        }
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let texts = ["plain", "", "TagA || TagB", "a\"b", "back\\slash", "tab\tnew\nline\u{1}", "caf\u{e9} \u{7f}"];
        for text in texts {
            let mut out = String::new();
            json_string(&mut out, text);
            assert_eq!(out, serde_json::to_string(text).unwrap());
        }
    }

    #[test]
    fn a_template_renders_the_frame_encode_gives() {
        let field = |name: &str, value: &str| (name.to_owned(), value.to_owned());
        let ext = vec![
            field("consumerGroup", "g"),
            field("queueOffset", "0"),
            field("subscription", "a \"b\" \u{1}"),
            field("maxMsgNums", "0"),
        ];
        for stype in [JSON, ROCKETMQ] {
            let vary = ["maxMsgNums", "queueOffset"]; // not in the fields' order
            let mut template = Template::new(11, "PYTHON".into(), 473, stype, ext.clone(), &vary).unwrap();
            for (values, opaque) in [([32, 1 << 40], 9), ([0, -1], i32::MAX as i64), ([7, 0], 1)] {
                let mut out = b"before".to_vec();
                template.render_into(&values, opaque, &mut out).unwrap();
                let mut set = ext.clone();
                set[3].1 = values[0].to_string();
                set[1].1 = values[1].to_string();
                let cmd = Command {
                    code: 11,
                    language: "PYTHON",
                    version: 473,
                    opaque,
                    flag: 0,
                    remark: None,
                    ext: &set,
                    body: &[],
                    serialize_type: stype,
                };
                assert_eq!(out, [b"before".to_vec(), encode(&cmd).unwrap()].concat(), "type {stype}, {values:?}");
            }
        }
    }

    #[test]
    fn round_trips_both_header_types() {
        let ext = vec![("topic".to_owned(), "T\u{f8}".to_owned()), ("queueId".to_owned(), "3".to_owned())];
        for stype in [JSON, ROCKETMQ] {
            let frame = encode(&command(&ext, stype)).unwrap();
            assert_eq!(u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize, frame.len() - 4);
            let h = decode(&frame[4..]).unwrap();
            assert_eq!((h.code, h.version, h.opaque, h.flag, h.serialize_type), (11, 473, 99, 0, stype));
            assert_eq!(h.language, "PYTHON");
            assert_eq!(h.remark.as_deref(), Some("ünï \"q\""));
            let mut got = h.ext.clone();
            got.sort();
            let mut want = ext.clone();
            want.sort();
            assert_eq!(got, want);
            assert_eq!(&frame[4 + h.body_start..], b"xyz");
        }
    }

    #[test]
    fn every_truncation_is_an_error_or_a_header() {
        let ext = vec![("k".to_owned(), "v".to_owned())];
        for stype in [JSON, ROCKETMQ] {
            let frame = encode(&command(&ext, stype)).unwrap();
            for cut in 0..frame.len() - 4 {
                let _ = decode(&frame[4..4 + cut]);
            }
        }
    }
}
