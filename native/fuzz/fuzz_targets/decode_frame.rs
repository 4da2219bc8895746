//! The remoting frame decoder on arbitrary bytes: no panic; a decoded header lies inside the frame, and what it
//! decoded encodes again to a frame that decodes to the same header. A JSON header goes to the one-pass reading of
//! ordinary headers too, which must agree with the general reading whenever it reads it.
#![no_main]

use _native::frame::{decode, encode, json_decode_value, Command};
use _native::json_header;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // a JSON header: the one-pass reading of ordinary ones gives what the general reading gives, when it reads one
    if let Some(mark) = data.get(..4).filter(|mark| mark[0] == 0) {
        let hlen = (u32::from_be_bytes(mark.try_into().unwrap()) & 0xFF_FFFF) as usize;
        if let Some(Ok(text)) = data.get(4..4 + hlen).map(std::str::from_utf8) {
            if let Some(fast) = json_header::read(text) {
                assert_eq!(Ok(fast), json_decode_value(text));
            }
        }
    }
    let Ok(header) = decode(data) else { return };
    assert!(header.body_start <= data.len());
    let body = &data[header.body_start..];
    let cmd = Command {
        code: header.code as i64,
        language: &header.language,
        version: header.version as i64,
        opaque: header.opaque as i64,
        flag: header.flag as i64,
        remark: header.remark.as_deref(),
        ext: &header.ext,
        body,
        serialize_type: header.serialize_type,
    };
    let Ok(frame) = encode(&cmd) else { return }; // e.g. an ext field name too long for the binary layout
    let again = decode(&frame[4..]).expect("an encoded frame decodes");
    assert_eq!((again.code, again.opaque, again.flag, &again.remark), (header.code, header.opaque, header.flag, &header.remark));
    let (mut a, mut b) = (again.ext.clone(), header.ext.clone());
    a.sort();
    b.sort();
    a.dedup_by(|x, y| x.0 == y.0);
    b.dedup_by(|x, y| x.0 == y.0);
    assert_eq!(a.len(), b.len());
    assert_eq!(&frame[4 + again.body_start..], body);
});
