//! The remoting frame decoder on arbitrary bytes: no panic; a decoded header lies inside the frame, and what it
//! decoded encodes again to a frame that decodes to the same header.
#![no_main]

use _native::frame::{decode, encode, Command};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
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
