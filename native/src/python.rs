//! The Python module `rmq_spark._native`: the gatherer and the columns it hands to pyarrow, the frame codec and
//! the pipe.

use std::fmt::Write as _;
use std::time::Duration;

use pyo3::exceptions::{PyConnectionError, PyTimeoutError, PyUnicodeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyDict};

use crate::arrow::{export_array, export_schema, release_unclaimed_array, release_unclaimed_schema, Column};
use crate::columns::{AddError, Gathered, Wanted};
use crate::frame::{self, Command, Header};
use crate::pipe::{Pipe, PipeError};

/// One column, for `pyarrow.array(column)` (the `__arrow_c_array__` protocol); it can be taken once.
#[pyclass(module = "rmq_spark._native", frozen)]
struct ArrowColumn {
    column: std::sync::Mutex<Option<Column>>,
}

#[pymethods]
impl ArrowColumn {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
        let _ = requested_schema; // the column has one type; pyarrow casts if it asked for another
        let column = self
            .column
            .lock()
            .unwrap()
            .take()
            .ok_or_else(|| PyValueError::new_err("this column was already handed to pyarrow"))?;
        let schema = PyCapsule::new_with_destructor(py, export_schema(&column), Some(c"arrow_schema".into()), |s, _| {
            release_unclaimed_schema(s)
        })?;
        let array = PyCapsule::new_with_destructor(py, export_array(column), Some(c"arrow_array".into()), |a, _| {
            release_unclaimed_array(a)
        })?;
        Ok((schema, array))
    }
}

/// Gathers pulled PULL_MESSAGE bodies into the columns named at construction.
#[pyclass(module = "rmq_spark._native")]
struct BlockGatherer {
    gathered: Gathered,
}

#[pymethods]
impl BlockGatherer {
    /// `columns`: source column names to build; `tags`: keep only messages whose TAGS is one of these (None: all).
    #[new]
    #[pyo3(signature = (columns, tags=None))]
    fn new(columns: Vec<String>, tags: Option<Vec<String>>) -> PyResult<Self> {
        let want = Wanted::of(columns.iter().map(String::as_str))
            .map_err(|name| PyValueError::new_err(format!("no native column {name:?}")))?;
        let tags = tags.map(|set| set.into_iter().map(String::into_bytes).collect());
        Ok(BlockGatherer { gathered: Gathered::new(want, tags) })
    }

    /// Gathers the records of `block` with `low <= queueOffset < high`; False (nothing gathered) when one needs
    /// the message decoder. ValueError for a malformed block, UnicodeError for text that is not UTF-8,
    /// OverflowError for a timestamp out of the microsecond range; nothing is gathered then.
    fn add(&mut self, py: Python<'_>, block: &[u8], low: i64, high: i64) -> PyResult<bool> {
        let gathered = &mut self.gathered;
        match py.detach(|| gathered.add(block, low, high)) {
            Ok(plain) => Ok(plain),
            Err(AddError::Malformed(text)) => Err(PyValueError::new_err(text)),
            Err(AddError::InvalidText) => Err(PyUnicodeError::new_err("topic or properties are not valid UTF-8")),
            Err(AddError::Timestamp) => Err(pyo3::exceptions::PyOverflowError::new_err(
                "a message timestamp is out of the range of microsecond timestamps",
            )),
        }
    }

    /// Rows gathered since the last take.
    #[getter]
    fn rows(&self) -> usize {
        self.gathered.rows()
    }

    /// Bytes of the blocks gathered since the last take.
    #[getter]
    fn nbytes(&self) -> usize {
        self.gathered.bytes()
    }

    /// The gathered columns as (name, column) pairs; the gatherer is empty again.
    fn take(&mut self) -> Vec<(&'static str, ArrowColumn)> {
        self.gathered
            .take()
            .into_iter()
            .map(|(name, column)| (name, ArrowColumn { column: std::sync::Mutex::new(Some(column)) }))
            .collect()
    }
}

/// A decoded frame as (code, language, version, opaque, flag, remark, ext fields, serialize type, body).
type FrameParts<'py> = (i32, String, i32, i32, i32, Option<String>, Bound<'py, PyDict>, u8, Bound<'py, PyBytes>);

fn frame_parts<'py>(py: Python<'py>, header: Header, body: &[u8]) -> PyResult<FrameParts<'py>> {
    let ext = PyDict::new(py);
    for (key, value) in header.ext {
        ext.set_item(key, value)?;
    }
    Ok((header.code, header.language, header.version, header.opaque, header.flag, header.remark, ext,
        header.serialize_type, PyBytes::new(py, body)))
}

/// `ext`'s entries as text (`str()` of each key and value), without those whose value is None.
fn ext_text(ext: &Bound<'_, PyDict>) -> PyResult<Vec<(String, String)>> {
    let mut out = Vec::with_capacity(ext.len());
    for (key, value) in ext.iter() {
        if value.is_none() {
            continue;
        }
        out.push((key.str()?.to_str()?.to_owned(), value.str()?.to_str()?.to_owned()));
    }
    Ok(out)
}

/// The whole frame of a command (total length included); `ext` maps field names to values (rendered with
/// `str()`, None left out). ValueError names what cannot be encoded.
#[pyfunction]
#[pyo3(signature = (code, language, version, opaque, flag, remark, ext, body, serialize_type))]
#[allow(clippy::too_many_arguments)]
fn encode_frame<'py>(
    py: Python<'py>,
    code: i64,
    language: &str,
    version: i64,
    opaque: i64,
    flag: i64,
    remark: Option<&str>,
    ext: &Bound<'py, PyDict>,
    body: &[u8],
    serialize_type: u8,
) -> PyResult<Bound<'py, PyBytes>> {
    let ext = ext_text(ext)?;
    let cmd = Command { code, language, version, opaque, flag, remark, ext: &ext, body, serialize_type };
    let frame = frame::encode(&cmd).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &frame))
}

/// One frame given without its total length, as its parts. ValueError says what is malformed.
#[pyfunction]
fn decode_frame<'py>(py: Python<'py>, buf: &[u8]) -> PyResult<FrameParts<'py>> {
    let header = frame::decode(buf).map_err(PyValueError::new_err)?;
    let start = header.body_start;
    frame_parts(py, header, &buf[start..])
}

/// A request sent many times with only a few integer fields changed (a range read's pulls): its ext fields are
/// rendered to text once; `vary` names the fields each send sets.
#[pyclass(module = "rmq_spark._native")]
struct RequestTemplate {
    #[pyo3(get)]
    code: i64,
    language: String,
    version: i64,
    serialize_type: u8,
    ext: Vec<(String, String)>,
    vary: Vec<usize>,
}

#[pymethods]
impl RequestTemplate {
    #[new]
    fn new(
        code: i64,
        language: String,
        version: i64,
        ext: &Bound<'_, PyDict>,
        vary: Vec<String>,
        serialize_type: u8,
    ) -> PyResult<Self> {
        let ext = ext_text(ext)?;
        let vary = vary
            .iter()
            .map(|name| {
                ext.iter()
                    .position(|(key, _)| key == name)
                    .ok_or_else(|| PyValueError::new_err(format!("the template has no field {name:?}")))
            })
            .collect::<PyResult<Vec<usize>>>()?;
        Ok(RequestTemplate { code, language, version, serialize_type, ext, vary })
    }
}

impl RequestTemplate {
    /// The frame of request `opaque` with the varying fields set to `values`, in `vary`'s order.
    fn frame(&mut self, values: &[i64], opaque: i64) -> PyResult<Vec<u8>> {
        if values.len() != self.vary.len() {
            return Err(PyValueError::new_err(format!("{} values for {} fields", values.len(), self.vary.len())));
        }
        for (&at, value) in self.vary.iter().zip(values) {
            let text = &mut self.ext[at].1;
            text.clear();
            let _ = write!(text, "{value}");
        }
        let cmd = Command {
            code: self.code,
            language: &self.language,
            version: self.version,
            opaque,
            flag: 0,
            remark: None,
            ext: &self.ext,
            body: &[],
            serialize_type: self.serialize_type,
        };
        frame::encode(&cmd).map_err(PyValueError::new_err)
    }
}

fn pipe_error(e: PipeError) -> PyErr {
    match e {
        PipeError::Lost(why) => PyConnectionError::new_err(why),
        PipeError::Timeout => PyTimeoutError::new_err("no response in time"),
        PipeError::Protocol(why) => PyValueError::new_err(why),
    }
}

fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s.clamp(0.0, 1e9))
}

/// A connection of one reader's own (plain TCP): frames written and responses read on the caller's thread, with
/// the GIL released. ConnectionError when it cannot be opened or broke, TimeoutError when an answer is late,
/// ValueError for a malformed frame; each of those closes it.
#[pyclass(module = "rmq_spark._native")]
struct FramePipe {
    pipe: Pipe,
}

#[pymethods]
impl FramePipe {
    #[new]
    fn new(py: Python<'_>, host: &str, port: u16, connect_timeout: f64, max_frame: usize) -> PyResult<Self> {
        let pipe = py.detach(|| Pipe::connect(host, port, seconds(connect_timeout), max_frame)).map_err(pipe_error)?;
        Ok(FramePipe { pipe })
    }

    /// Writes one whole frame of request `opaque`, within `timeout` seconds.
    fn send(&mut self, py: Python<'_>, frame: &[u8], opaque: i32, timeout: f64) -> PyResult<()> {
        let pipe = &mut self.pipe;
        py.detach(|| pipe.send(frame, opaque, seconds(timeout))).map_err(pipe_error)
    }

    /// Writes request `opaque` of `template` with its varying fields set to `values`, within `timeout` seconds.
    fn send_templated(
        &mut self,
        py: Python<'_>,
        mut template: PyRefMut<'_, RequestTemplate>,
        values: Vec<i64>,
        opaque: i32,
        timeout: f64,
    ) -> PyResult<()> {
        let frame = template.frame(&values, opaque as i64)?;
        let pipe = &mut self.pipe;
        py.detach(|| pipe.send(&frame, opaque, seconds(timeout))).map_err(pipe_error)
    }

    /// The response to request `opaque` as the parts `decode_frame` gives, within `timeout` seconds.
    fn receive<'py>(&mut self, py: Python<'py>, opaque: i32, timeout: f64) -> PyResult<FrameParts<'py>> {
        let pipe = &mut self.pipe;
        let response = py.detach(|| pipe.receive(opaque, seconds(timeout))).map_err(pipe_error)?;
        let start = response.header.body_start;
        frame_parts(py, response.header, &response.frame[start..])
    }

    /// Stops waiting for request `opaque`.
    fn forget(&mut self, opaque: i32) {
        self.pipe.forget(opaque);
    }

    fn close(&mut self) {
        self.pipe.close(PipeError::Lost("closed by the client".to_owned()));
    }

    #[getter]
    fn closed(&self) -> bool {
        self.pipe.is_closed()
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BlockGatherer>()?;
    m.add_class::<ArrowColumn>()?;
    m.add_class::<FramePipe>()?;
    m.add_class::<RequestTemplate>()?;
    m.add_function(wrap_pyfunction!(encode_frame, m)?)?;
    m.add_function(wrap_pyfunction!(decode_frame, m)?)?;
    Ok(())
}
