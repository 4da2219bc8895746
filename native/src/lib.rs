//! `rmq_spark._native`: the executor's hot path in compiled code (docs/DESIGN.md §12). Pulled message blocks are walked
//! and gathered into Arrow columns with the GIL released; the columns reach pyarrow through the Arrow C data
//! interface, without a copy. Pulls travel over `pipe`s of the reader's own, whose frames `frame` encodes and
//! decodes; the stream driver's held pulls of many queues share a pipe per broker in `holds`, which judges their
//! answers and holds each queue again itself. The core (`records`, `columns`, `arrow`, `frame`, `pipe`, `holds`) is
//! plain Rust; `python` binds it (feature `python`, set by the extension build), so tests and the fuzzer build
//! without an interpreter.

pub mod arrow;
pub mod arrow_in;
pub mod columns;
pub mod cursor;
pub mod decompress;
pub mod frame;
pub mod holds;
pub mod json_header;
pub mod pipe;
pub mod pulls;
pub mod records;
pub mod sends;
pub mod unique_ids;
pub mod v2;

#[cfg(feature = "python")]
mod python;
