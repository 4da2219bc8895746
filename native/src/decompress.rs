//! Bounded decompression of message bodies: a body that would expand past the limit stops there (a few KiB of zstd
//! can claim gigabytes), so a worker's memory stays bounded whatever a producer sent. zlib and gzip (RocketMQ's
//! default codec, the v2 API's GZIP encoding), LZ4 frames and zstd frames (RocketMQ 5), each possibly several
//! concatenated frames where the format allows it (LZ4FrameInputStream and ZstdInputStream read them all).

use std::io::{self, Read};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Zlib,
    Gzip,
    Lz4,
    Zstd,
}

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::Zlib => "zlib",
            Codec::Gzip => "gzip",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

/// Why a body did not decompress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// It expands past the limit.
    TooLarge,
    /// The input ends before the stream does.
    Truncated,
    /// The codec refused it; its words.
    Corrupt(String),
}

impl Failure {
    /// The text of a failure of `codec` to decompress within `limit`.
    pub fn text(&self, codec: Codec, limit: usize) -> String {
        let name = codec.name();
        match self {
            Failure::TooLarge => format!("the {name}-compressed message body expands past {limit} bytes"),
            Failure::Truncated => format!("the {name}-compressed message body is truncated"),
            Failure::Corrupt(why) => format!("cannot decompress the {name} message body: {why}"),
        }
    }
}

/// The input, remembering whether a decoder asked for more than it holds (then an error means truncation).
struct Input<'a> {
    rest: &'a [u8],
    starved: bool,
}

impl Read for Input<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.rest.is_empty() && !buf.is_empty() {
            self.starved = true;
        }
        self.rest.read(buf)
    }
}

/// Appends `raw` decompressed with `codec` to `out`, at most `limit` bytes (`out` may then hold part of it).
pub fn decompress(codec: Codec, raw: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), Failure> {
    let start = out.len();
    let mut input = Input { rest: raw, starved: false };
    let outcome = match codec {
        Codec::Zlib => bounded(flate2::read::ZlibDecoder::new(&mut input), start, limit, out),
        Codec::Gzip => bounded(flate2::read::GzDecoder::new(&mut input), start, limit, out),
        Codec::Lz4 => each_frame(&mut input, |i| {
            bounded(lz4_flex::frame::FrameDecoder::new(&mut *i), start, limit, out)?;
            // the decoder takes input that ends between two blocks for a frame without its end mark
            if i.starved { Err(Failure::Truncated) } else { Ok(()) }
        }),
        Codec::Zstd => each_frame(&mut input, |i| {
            let decoder = ruzstd::decoding::StreamingDecoder::new(i).map_err(|e| Failure::Corrupt(e.to_string()))?;
            bounded(decoder, start, limit, out)
        }),
    };
    outcome.map_err(|e| match e {
        Failure::Corrupt(_) if input.starved => Failure::Truncated,
        other => other,
    })
}

/// Reads `decoder` to its end into `out` (which held `start` bytes before this body), failing past `limit`.
fn bounded(decoder: impl Read, start: usize, limit: usize, out: &mut Vec<u8>) -> Result<(), Failure> {
    let room = (limit + start + 1 - out.len()) as u64;
    let result = decoder.take(room).read_to_end(out);
    if out.len() - start > limit {
        return Err(Failure::TooLarge);
    }
    result.map(|_| ()).map_err(|e| Failure::Corrupt(e.to_string()))
}

/// Calls `one` for each of the concatenated frames of the input, until it ends.
fn each_frame(input: &mut Input, mut one: impl FnMut(&mut Input) -> Result<(), Failure>) -> Result<(), Failure> {
    while !input.rest.is_empty() {
        one(input)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn packed(codec: Codec, data: &[u8]) -> Vec<u8> {
        match codec {
            Codec::Zlib => {
                let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(5));
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            Codec::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(5));
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            Codec::Lz4 => {
                let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            Codec::Zstd => ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest),
        }
    }

    fn unpacked(codec: Codec, raw: &[u8], limit: usize) -> Result<Vec<u8>, Failure> {
        let mut out = b"before".to_vec();
        decompress(codec, raw, limit, &mut out).map(|()| out[6..].to_vec())
    }

    const ALL: [Codec; 4] = [Codec::Zlib, Codec::Gzip, Codec::Lz4, Codec::Zstd];

    #[test]
    fn round_trips_and_the_limit_is_exact() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        for codec in ALL {
            let raw = packed(codec, &data);
            assert!(unpacked(codec, &raw, data.len()).as_deref() == Ok(&data[..]), "{codec:?}");
            assert_eq!(unpacked(codec, &raw, data.len() - 1), Err(Failure::TooLarge), "{codec:?}");
        }
    }

    #[test]
    fn a_bomb_stops_at_the_limit() {
        let bomb = vec![0u8; 64 << 20];
        for codec in ALL {
            let raw = packed(codec, &bomb);
            let mut out = Vec::new();
            assert_eq!(decompress(codec, &raw, 1 << 20, &mut out), Err(Failure::TooLarge), "{codec:?}");
            assert!(out.len() <= (1 << 20) + 1);
        }
    }

    #[test]
    fn truncated_and_corrupt_bodies_are_told_apart() {
        let data: Vec<u8> = (0..10_240u32).map(|i| i as u8).collect();
        for codec in ALL {
            let raw = packed(codec, &data);
            for cut in [raw.len() - 1, raw.len() / 2] {
                let got = unpacked(codec, &raw[..cut], 1 << 20).map(|v| v.len());
                assert_eq!(got, Err(Failure::Truncated), "{codec:?} cut at {cut}");
            }
            let garbage = [&b"\x01\x02garbage"[..], &raw[10..]].concat();
            assert!(matches!(unpacked(codec, &garbage, 1 << 20), Err(Failure::Corrupt(_))), "{codec:?}");
        }
        assert_eq!(unpacked(Codec::Gzip, b"", 10), Err(Failure::Truncated));
        assert_eq!(unpacked(Codec::Zstd, b"", 10), Ok(vec![]));
    }

    #[test]
    fn concatenated_frames_count_together() {
        for codec in [Codec::Lz4, Codec::Zstd] {
            let two = [packed(codec, &[b'a'; 600]), packed(codec, &[b'b'; 600])].concat();
            let want = [[b'a'; 600], [b'b'; 600]].concat();
            assert!(unpacked(codec, &two, 1200) == Ok(want), "{codec:?}");
            assert_eq!(unpacked(codec, &two, 1199), Err(Failure::TooLarge), "{codec:?}");
        }
        let zlib = [packed(Codec::Zlib, b"one"), packed(Codec::Zlib, b"two")].concat();
        assert_eq!(unpacked(Codec::Zlib, &zlib, 100), Ok(b"one".to_vec())); // InflaterInputStream stops there too
    }
}
