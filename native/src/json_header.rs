//! The ordinary JSON command header read in one pass, without building a JSON value tree: what a broker writes for
//! every response (a flat object of integers, plain strings and nulls, with `extFields` an object of plain
//! strings). Anything else (an escape, a float, a bool, a nested array, a repeated key, a number past 18 digits)
//! is left to the general reading of `frame`, so the result is always the one that reading gives.

use crate::frame::{Header, JSON};

struct Scan<'a> {
    b: &'a [u8],
    pos: usize,
}

/// A value the fast path reads.
enum Value<'a> {
    Null,
    Int(i64),
    Str(&'a str),
}

impl<'a> Scan<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.pos) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.b.get(self.pos) == Some(&c)).then(|| self.pos += 1)
    }

    /// A string without escapes or control characters.
    fn string(&mut self, text: &'a str) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.pos;
        let len = memchr::memchr2(b'"', b'\\', &self.b[start..])?;
        let end = start + len;
        if self.b[end] != b'"' || self.b[start..end].iter().any(|&c| c < 0x20) {
            return None;
        }
        self.pos = end + 1;
        text.get(start..end)
    }

    /// An integer of at most 18 digits (no fraction, exponent, leading zero or negative zero).
    fn int(&mut self) -> Option<i64> {
        let start = self.pos;
        let negative = self.b.get(self.pos) == Some(&b'-');
        if negative {
            self.pos += 1;
        }
        let digits = self.pos;
        while self.b.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
        let n = self.pos - digits;
        let leading_zero = n > 1 && self.b[digits] == b'0';
        let zero = n == 1 && self.b[digits] == b'0';
        if n == 0 || n > 18 || leading_zero || (negative && zero) {
            return None;
        }
        if matches!(self.b.get(self.pos), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        std::str::from_utf8(&self.b[start..self.pos]).ok()?.parse().ok()
    }

    fn value(&mut self, text: &'a str) -> Option<Value<'a>> {
        self.ws();
        match self.b.get(self.pos)? {
            b'"' => self.string(text).map(Value::Str),
            b'n' if self.b[self.pos..].starts_with(b"null") => {
                self.pos += 4;
                Some(Value::Null)
            }
            b'-' | b'0'..=b'9' => self.int().map(Value::Int),
            _ => None,
        }
    }

    /// `{` "key" `:` value (`,` ...)* `}`, calling `each` for every pair.
    fn object(&mut self, text: &'a str, mut each: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.string(text)?;
            self.eat(b':')?;
            each(self, key)?;
            if self.eat(b',').is_none() {
                return self.eat(b'}');
            }
        }
    }
}

/// Sets `slot` once; None for a repeated key.
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    match slot {
        Some(_) => None,
        None => {
            *slot = Some(value);
            Some(())
        }
    }
}

fn int32(value: Value) -> Option<i32> {
    match value {
        Value::Null => Some(0),
        Value::Int(v) => i32::try_from(v).ok(),
        Value::Str(_) => None,
    }
}

/// The header of `text` when it is an ordinary one, else None.
pub fn read(text: &str) -> Option<Header> {
    let mut s = Scan { b: text.as_bytes(), pos: 0 };
    let (mut code, mut version, mut opaque, mut flag) = (None, None, None, None);
    let (mut language, mut remark, mut ext) = (None, None, None);
    s.object(text, |s, key| {
        match key {
            "code" => once(&mut code, int32(s.value(text)?)?),
            "version" => once(&mut version, int32(s.value(text)?)?),
            "opaque" => once(&mut opaque, int32(s.value(text)?)?),
            "flag" => once(&mut flag, int32(s.value(text)?)?),
            "language" => match s.value(text)? {
                Value::Str(v) => once(&mut language, v.to_owned()),
                Value::Null => once(&mut language, "OTHER".to_owned()),
                Value::Int(_) => None,
            },
            "remark" => match s.value(text)? {
                Value::Str(v) => once(&mut remark, Some(v.to_owned())),
                Value::Null => once(&mut remark, None),
                Value::Int(_) => None,
            },
            "extFields" => {
                let mut fields: Vec<(&str, Option<&str>)> = Vec::new();
                s.object(text, |s, name| {
                    if fields.iter().any(|(n, _)| *n == name) {
                        return None;
                    }
                    let value = match s.value(text)? {
                        Value::Str(v) => Some(v),
                        Value::Null => None,
                        Value::Int(_) => return None,
                    };
                    fields.push((name, value));
                    Some(())
                })?;
                // as the general reading's map gives them: without nulls, by name
                let mut kept: Vec<(String, String)> =
                    fields.into_iter().filter_map(|(n, v)| Some((n.to_owned(), v?.to_owned()))).collect();
                kept.sort_unstable();
                once(&mut ext, kept)
            }
            _ => s.value(text).map(drop),
        }
    })?;
    s.ws();
    if s.pos != s.b.len() {
        return None;
    }
    Some(Header {
        code: code.unwrap_or(0),
        language: language.unwrap_or_else(|| "JAVA".to_owned()),
        version: version.unwrap_or(0),
        opaque: opaque.unwrap_or(0),
        flag: flag.unwrap_or(0),
        remark: remark.flatten(),
        ext: ext.unwrap_or_default(),
        serialize_type: JSON,
        body_start: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::json_decode_value;

    /// The fast path either declines or gives what the general reading gives.
    fn agrees(text: &str) -> bool {
        match read(text) {
            Some(fast) => {
                assert_eq!(Ok(fast), json_decode_value(text), "{text}");
                true
            }
            None => false,
        }
    }

    #[test]
    fn reads_what_a_broker_writes() {
        let broker = r#"{"code":0,"extFields":{"suggestWhichBrokerId":"0","nextBeginOffset":"64","minOffset":"0",
            "maxOffset":"250000","topicSysFlag":"0","groupSysFlag":"0"},"flag":1,"language":"JAVA","opaque":5,
            "remark":"FOUND","serializeTypeCurrentRPC":"JSON","version":473}"#;
        assert!(agrees(broker));
        let nulls = r#"{"code":19,"flag":1,"opaque":-7,"remark":null,"language":null,"extFields":{"a":null,"b":"x"}}"#;
        assert!(agrees(nulls));
        assert!(agrees(" { } "));
        assert!(agrees(r#"{"extFields":{}, "other":12, "x":null, "y":"été"}"#));
    }

    #[test]
    fn leaves_the_unusual_to_the_general_reading() {
        for text in [
            r#"{"remark":"a\"b"}"#,
            r#"{"code":1.0}"#,
            r#"{"code":-0}"#,
            r#"{"code":01}"#,
            r#"{"code":"1"}"#,
            r#"{"opaque":99999999999}"#,
            r#"{"code":1,"code":2}"#,
            r#"{"extFields":{"a":"1","a":"2"}}"#,
            r#"{"extFields":{"a":1}}"#,
            r#"{"extFields":{"a":true}}"#,
            r#"{"x":[1]}"#,
            r#"{"x":{}}"#,
            r#"{"code":0}x"#,
            r#"{"code":0,}"#,
            "{\"remark\":\"a\tb\"}",
            "[]",
        ] {
            assert!(!agrees(text), "{text}");
        }
    }
}
