//! The Python module `rmq_spark._native`: the gatherer and the columns it hands to pyarrow, the frame codec, the
//! pipe, the line of held pulls and the range cursor. Its types are described in `rmq_spark/_native.pyi`. Its
//! errors are the `CoreError` classes below; `rmq_spark.compiled.package_error` turns them into the package's own.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyBaseException, PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyDict, PyString};

use crate::arrow::{ArrowArray, ArrowSchema};
use crate::arrow_in::{Ints, Lent, StrLists, StrMaps, Strs};
use crate::arrow::{export_array, export_schema, release_unclaimed_array, release_unclaimed_schema, Column};
use crate::columns::{AddError, Gathered, Wanted};
use crate::cursor::{self, Answer, Cursor, Fault, Settings, Status, Verdict};
use crate::frame::{self, Command, Header, Template};
use crate::holds;
use crate::pulls::{self, Limits};
use crate::pipe::{Pipe, PipeError, Response};
use crate::sends::{self, Columns, EncodeError, Keys};
use crate::unique_ids::{self, UniqueIds};

create_exception!(rmq_spark._native, CoreError, PyException, "An error of the compiled core.");
create_exception!(
    rmq_spark._native,
    MalformedError,
    CoreError,
    "Bytes that do not follow the wire format, or a command the frame cannot hold."
);
create_exception!(
    rmq_spark._native,
    UnreadableError,
    MalformedError,
    "A pulled block or answer frame that does not read (nothing of it was gathered)."
);
create_exception!(
    rmq_spark._native,
    BodyTooLargeError,
    UnreadableError,
    "A message body expands past the limit: args (text, limit)."
);
create_exception!(rmq_spark._native, PipeLostError, CoreError, "A pipe could not be opened, broke or was closed.");
create_exception!(rmq_spark._native, PipeTimeoutError, CoreError, "No answer on a pipe in time (the pipe is closed).");
create_exception!(rmq_spark._native, DataLostError, CoreError, "Messages of a range are gone (failOnDataLoss).");
create_exception!(rmq_spark._native, RefusedError, CoreError, "The broker answered a range read what no rule accepts.");
create_exception!(
    rmq_spark._native,
    UnavailableError,
    CoreError,
    "The broker did not serve a range read until its retry timeout."
);

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
    /// `columns`: column names to build; `tags`: keep only messages whose TAGS is one of these (None: all);
    /// `broker_name`: the broker the blocks come from (errors name it); `max_body`: the most a compressed body
    /// may expand to.
    #[new]
    #[pyo3(signature = (columns, tags=None, *, broker_name, max_body))]
    fn new(columns: Vec<String>, tags: Option<Vec<String>>, broker_name: String, max_body: usize) -> PyResult<Self> {
        let want = Wanted::of(columns.iter().map(String::as_str))
            .map_err(|name| PyValueError::new_err(format!("no native column {name:?}")))?;
        let tags = tags.map(|set| set.into_iter().map(String::into_bytes).collect());
        Ok(BlockGatherer { gathered: Gathered::new(want, tags, broker_name, max_body) })
    }

    /// Gathers the messages of `block` with `low <= queueOffset < high`. UnreadableError for a block that does not
    /// read (BodyTooLargeError for a body past `max_body`); nothing is gathered then.
    fn add(&mut self, py: Python<'_>, block: &[u8], low: i64, high: i64) -> PyResult<()> {
        let gathered = &mut self.gathered;
        added(py.detach(|| gathered.add(block, low, high)))
    }

    /// Gathers the messages of a gRPC pull's answer frames (serialized `PullMessageResponse`s that each hold a
    /// message) with `low <= queueOffset < high`; `topic` stands for a message that names none. Errors as `add`.
    fn add_v2(
        &mut self,
        py: Python<'_>,
        frames: Vec<Bound<'_, PyBytes>>,
        topic: &str,
        low: i64,
        high: i64,
    ) -> PyResult<()> {
        let frames: Vec<&[u8]> = frames.iter().map(|f| f.as_bytes()).collect();
        let gathered = &mut self.gathered;
        added(py.detach(|| gathered.add_v2(&frames, topic.as_bytes(), low, high)))
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

fn added(outcome: Result<(), AddError>) -> PyResult<()> {
    outcome.map_err(unreadable)
}

fn unreadable(error: AddError) -> PyErr {
    match error {
        AddError::Malformed(text) => UnreadableError::new_err(text),
        AddError::TooLarge { text, limit } => BodyTooLargeError::new_err((text, limit)),
        AddError::Timestamp => {
            UnreadableError::new_err("a message timestamp is out of the range of microsecond timestamps")
        }
    }
}

/// A decoded frame: a command's header fields and its body.
#[pyclass(module = "rmq_spark._native", frozen, get_all)]
struct Frame {
    code: i32,
    language: Py<PyString>,
    version: i32,
    opaque: i32,
    flag: i32,
    remark: Option<Py<PyString>>,
    ext_fields: Py<PyDict>,
    serialize_type: u8,
    body: Py<PyBytes>,
}

fn frame_of(py: Python<'_>, header: Header, body: &[u8]) -> PyResult<Frame> {
    let ext = PyDict::new(py);
    for (key, value) in header.ext {
        ext.set_item(key, value)?;
    }
    Ok(Frame {
        code: header.code,
        language: PyString::new(py, &header.language).unbind(),
        version: header.version,
        opaque: header.opaque,
        flag: header.flag,
        remark: header.remark.map(|r| PyString::new(py, &r).unbind()),
        ext_fields: ext.unbind(),
        serialize_type: header.serialize_type,
        body: PyBytes::new(py, body).unbind(),
    })
}

fn response_frame(py: Python<'_>, response: Response) -> PyResult<Frame> {
    let start = response.header.body_start;
    frame_of(py, response.header, &response.frame[start..])
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
/// `str()`, None left out). MalformedError names what cannot be encoded.
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
    let frame = frame::encode(&cmd).map_err(MalformedError::new_err)?;
    Ok(PyBytes::new(py, &frame))
}

/// One frame given without its total length. MalformedError says what is malformed.
#[pyfunction]
fn decode_frame(py: Python<'_>, buf: &[u8]) -> PyResult<Frame> {
    let header = frame::decode(buf).map_err(MalformedError::new_err)?;
    let start = header.body_start;
    frame_of(py, header, &buf[start..])
}

/// A request sent many times with only a few integer fields changed (a range read's pulls): its ext fields are
/// rendered to text once; `vary` names the fields each send sets.
#[pyclass(module = "rmq_spark._native")]
struct RequestTemplate {
    template: Template,
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
        let vary: Vec<&str> = vary.iter().map(String::as_str).collect();
        let template = Template::new(code, language, version, serialize_type, ext_text(ext)?, &vary)
            .map_err(MalformedError::new_err)?;
        Ok(RequestTemplate { template })
    }
}

fn pipe_error(e: PipeError) -> PyErr {
    match e {
        PipeError::Lost(why) => PipeLostError::new_err(why),
        PipeError::Timeout => PipeTimeoutError::new_err("no response in time"),
        PipeError::Protocol(why) => MalformedError::new_err(why),
    }
}

fn fault_error(fault: Fault) -> PyErr {
    match fault {
        Fault::Lost(text) => DataLostError::new_err(text),
        Fault::Refused(text) => RefusedError::new_err(text),
        Fault::Unavailable(text) => UnavailableError::new_err(text),
    }
}

fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s.clamp(0.0, 1e9))
}

/// A connection of one reader's own (plain TCP): frames written and responses read on the caller's thread, with
/// the GIL released. PipeLostError when it cannot be opened or broke, PipeTimeoutError when an answer is late,
/// MalformedError for a malformed frame; each of those closes it.
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

    /// The response to request `opaque`, within `timeout` seconds.
    fn receive(&mut self, py: Python<'_>, opaque: i32, timeout: f64) -> PyResult<Frame> {
        let pipe = &mut self.pipe;
        let response = py.detach(|| pipe.receive(opaque, seconds(timeout))).map_err(pipe_error)?;
        response_frame(py, response)
    }

    /// Writes whole frames laid one after the other (of requests `opaques`), within `timeout` seconds.
    fn send_frames(&mut self, py: Python<'_>, frames: &[u8], opaques: Vec<i32>, timeout: f64) -> PyResult<()> {
        let pipe = &mut self.pipe;
        py.detach(|| pipe.send_frames(frames, &opaques, seconds(timeout))).map_err(pipe_error)
    }

    /// The responses to requests in flight that have come by now, without waiting.
    fn ready(&mut self, py: Python<'_>) -> PyResult<Vec<Frame>> {
        let pipe = &mut self.pipe;
        let responses = py.detach(|| pipe.ready()).map_err(pipe_error)?;
        responses.into_iter().map(|response| response_frame(py, response)).collect()
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

    /// Whether requests are in flight on it, or answers read but not taken.
    #[getter]
    fn busy(&self) -> bool {
        self.pipe.is_busy()
    }
}

/// A hold of a `HoldLine` that ended: where the queue was held, when, and where it is held again (None: not held,
/// `frame`, the answer's header without its body, or `failure` says why).
#[pyclass(module = "rmq_spark._native", frozen, get_all)]
struct HoldEnd {
    key: u64,
    offset: i64,
    armed_at: f64,
    ended_at: f64,
    next_offset: Option<i64>,
    frame: Option<Py<Frame>>,
    failure: Option<Py<PyBaseException>>,
}

fn hold_end(py: Python<'_>, ended: holds::Ended) -> PyResult<HoldEnd> {
    Ok(HoldEnd {
        key: ended.key,
        offset: ended.offset,
        armed_at: ended.armed_at,
        ended_at: ended.ended_at,
        next_offset: ended.next_offset,
        frame: ended.response.map(|response| Py::new(py, response_frame(py, response)?)).transpose()?,
        failure: ended.failure.map(|e| pipe_error(e).into_value(py)),
    })
}

/// The held pulls of many queues over one connection to a broker (plain TCP), each answer judged and the queue
/// held again in the core, by a thread of the line's own; times are the caller's `time.monotonic()`. Its state is
/// locked only with the GIL released.
#[pyclass(module = "rmq_spark._native", frozen)]
struct HoldLine {
    line: Arc<Mutex<holds::HoldLine>>,
}

impl HoldLine {
    fn line(&self) -> MutexGuard<'_, holds::HoldLine> {
        self.line.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl HoldLine {
    /// `poll_s`: how often a thread of the line's own writes the holds due and reads what came (each write within
    /// `send_timeout`), on the caller's clock, which reads `now` now.
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        host: &str,
        port: u16,
        connect_timeout: f64,
        max_frame: usize,
        hold_timeout: f64,
        round_s: f64,
        poll_s: f64,
        send_timeout: f64,
        now: f64,
    ) -> PyResult<Self> {
        let pipe = py.detach(|| Pipe::connect(host, port, seconds(connect_timeout), max_frame)).map_err(pipe_error)?;
        let line = Arc::new(Mutex::new(holds::HoldLine::new(pipe, hold_timeout, round_s)));
        holds::poll_in_background(&line, seconds(poll_s), seconds(send_timeout), holds::Clock::starting(now))
            .map_err(|e| PipeLostError::new_err(format!("cannot start the line's thread: {e}")))?;
        Ok(HoldLine { line })
    }

    /// Holds queue `key` at `offset` with pulls from `template` (whose one varying field is the queue offset) from
    /// the next poll on, instead of its hold before. PipeLostError when the line is closed.
    fn hold(&self, py: Python<'_>, key: u64, template: PyRef<'_, RequestTemplate>, offset: i64) -> PyResult<()> {
        let template = template.template.clone();
        py.detach(|| self.line().hold(key, template, offset)).map_err(pipe_error)
    }

    /// No hold of queue `key` any more (its ended holds not taken are dropped too).
    #[pyo3(name = "drop")]
    fn drop_hold(&self, py: Python<'_>, key: u64) {
        py.detach(|| self.line().drop_hold(key));
    }

    /// Reads what came and writes what is due (as the line's thread does), then the holds that ended since the last
    /// take, in the order they ended.
    fn take(&self, py: Python<'_>, now: f64, send_timeout: f64) -> PyResult<Vec<HoldEnd>> {
        let ended = py.detach(|| self.line().take(now, seconds(send_timeout)));
        ended.into_iter().map(|ended| hold_end(py, ended)).collect()
    }

    fn close(&self, py: Python<'_>) {
        py.detach(|| self.line().close());
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        py.detach(|| self.line().is_closed())
    }
}

#[pymethods]
impl Status {
    #[getter(name)]
    fn py_name(&self) -> &'static str {
        self.name()
    }

    /// Pickled as its name: unpickled, it is the same object again.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyAny>, &'static str))> {
        Ok((py.import("builtins")?.getattr("getattr")?, (py.get_type::<Status>().into_any(), self.name())))
    }
}

/// The class attribute of `status` (`PullStatus.FOUND`): each status is one object, as members of an enum.
fn status_object(py: Python<'_>, status: Status) -> PyResult<Bound<'_, PyAny>> {
    py.get_type::<Status>().getattr(status.name())
}

/// The status of the response to a pull at `offset`; None for a code that is not a pull status.
#[pyfunction]
#[pyo3(signature = (code, remark, next_begin, offset))]
fn pull_status<'py>(
    py: Python<'py>,
    code: i32,
    remark: Option<&str>,
    next_begin: i64,
    offset: i64,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    pulls::status_of(code, remark, next_begin, offset).map(|s| status_object(py, s)).transpose()
}

/// Where a queue held at `offset` is held again after a hold's answer (`holds::next_hold`); None: nowhere.
#[pyfunction]
fn next_hold(status: Status, next_begin: i64, max_offset: i64, offset: i64) -> Option<i64> {
    holds::next_hold(status, next_begin, max_offset, offset)
}

/// The wait in seconds before retry `attempt` (0 for the first) of something that made no progress (option
/// brokerRetryTimeoutMs).
#[pyfunction]
fn backoff_delay(attempt: u32) -> f64 {
    cursor::backoff_delay(attempt).as_secs_f64()
}

/// The queue offset of the first record of a pulled block (-1 when the block is too short to hold one).
#[pyfunction]
fn first_offset(block: &[u8]) -> i64 {
    pulls::first_offset(block)
}

/// The error of the data-loss rule under failOnDataLoss=true: `what` is gone, `remedy` says what
/// failOnDataLoss=false would do instead.
#[pyfunction]
fn data_loss_error(what: &str, remedy: &str) -> String {
    cursor::data_loss_error(what, remedy)
}

/// The log line of the data-loss rule under failOnDataLoss=false: `what` is gone, `action` says what is done.
#[pyfunction]
fn data_loss_note(what: &str, action: &str) -> String {
    cursor::data_loss_note(what, action)
}

/// The queue offset of the message of a gRPC pull's answer frame; MalformedError when it holds no message.
#[pyfunction]
fn v2_queue_offset(frame: &[u8]) -> PyResult<i64> {
    match crate::v2::response(frame) {
        Ok(Some(crate::v2::Content::Message(buf))) => {
            crate::v2::message(buf).map(|m| m.queue_offset).map_err(MalformedError::new_err)
        }
        Ok(_) => Err(MalformedError::new_err("the PullMessage answer frame holds no message")),
        Err(text) => Err(MalformedError::new_err(text)),
    }
}

/// What a range read's cursor tells its driver to do next.
#[pyclass(module = "rmq_spark._native", frozen)]
enum Step {
    /// Records `[low, high)` of the answer belong to the range; `body` is the answer's block when a native run
    /// hands it on (None: the answer the caller judged).
    Take { low: i64, high: i64, body: Option<Py<PyBytes>> },
    /// Nothing of the answer belongs to the range.
    Skip {},
    /// Hand the queue's first offset now to `RangeCursor.gap`.
    Gap {},
    /// Call `RangeCursor.retry`, wait as it says, and go on; `why` says why.
    Retry { why: String },
    /// The range is read (a native run).
    Done {},
    /// The gatherer gained the rows or bytes asked for (a native run).
    Full {},
    /// The broker suggests member `broker_id` of its group for the next pulls (a native run).
    Suggest { broker_id: i64 },
    /// The response to the pull at `offset` is not a plain pull answer: the caller reads it (a native run).
    Answer { offset: i64, frame: Py<Frame> },
}

/// One exact range read's rules (the cursor of `cursor.rs`) for a Python driver, and its native pull loop: each
/// call answers with a `Step`, or raises DataLostError, RefusedError or UnavailableError when the read cannot go
/// on (and a native run the pipe's errors). Offsets skipped for data loss are logged on the logger
/// `rmq_spark.client.range_reader`.
#[pyclass(module = "rmq_spark._native")]
struct RangeCursor {
    cursor: Cursor,
    /// The response of a native run that waits for a gap check.
    held: Option<Response>,
}

impl RangeCursor {
    fn verdict(&mut self, py: Python<'_>, verdict: Result<Verdict, Fault>) -> PyResult<Step> {
        self.log_notes(py)?;
        Ok(match verdict.map_err(fault_error)? {
            Verdict::Take { low, high } => {
                let body = self.held.take().map(|r| PyBytes::new(py, r.body()).unbind());
                Step::Take { low, high, body }
            }
            Verdict::Skip => Step::Skip {},
            Verdict::CheckGap => Step::Gap {},
            Verdict::Retry(why) => Step::Retry { why },
        })
    }

    fn log_notes(&mut self, py: Python<'_>) -> PyResult<()> {
        let notes = self.cursor.take_notes();
        if !notes.is_empty() {
            let logger = py.import("logging")?.call_method1("getLogger", ("rmq_spark.client.range_reader",))?;
            for note in notes {
                logger.call_method1("warning", (note,))?;
            }
        }
        Ok(())
    }
}

#[pymethods]
impl RangeCursor {
    #[new]
    #[pyo3(signature = (queue, broker, start, end, *, depth, slot, filtered, sparse, fail_on_data_loss,
                        retry_timeout))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        queue: String,
        broker: String,
        start: i64,
        end: i64,
        depth: usize,
        slot: i64,
        filtered: bool,
        sparse: bool,
        fail_on_data_loss: bool,
        retry_timeout: f64,
    ) -> PyResult<Self> {
        let settings = Settings {
            queue,
            broker,
            start,
            end,
            depth,
            slot,
            filtered,
            sparse,
            fail_on_data_loss,
            retry_timeout: seconds(retry_timeout),
        };
        Ok(RangeCursor { cursor: Cursor::new(settings).map_err(PyValueError::new_err)?, held: None })
    }

    /// The pulls to send now, as (tag, offset, count).
    fn next_pulls(&mut self) -> Vec<(i32, i64, i64)> {
        std::iter::from_fn(|| self.cursor.next_pull()).map(|p| (p.tag, p.low, p.asked)).collect()
    }

    /// The tag of the pull whose answer comes next; None when the range is read.
    #[getter]
    fn head(&self) -> Option<i32> {
        self.cursor.head().map(|p| p.tag)
    }

    /// Offsets skipped for data loss (failOnDataLoss=false).
    #[getter]
    fn lost(&self) -> i64 {
        self.cursor.lost()
    }

    /// The step for the answer to the head pull (`nbytes` is the size of its block, 0 for messages delivered
    /// decoded).
    #[pyo3(signature = (status, next_begin, min_offset, max_offset, first_offset, nbytes))]
    #[allow(clippy::too_many_arguments)]
    fn judge(
        &mut self,
        py: Python<'_>,
        status: Status,
        next_begin: i64,
        min_offset: i64,
        max_offset: i64,
        first_offset: i64,
        nbytes: usize,
    ) -> PyResult<Step> {
        let answer = Answer { status, next_begin, min_offset, max_offset, first_offset, nbytes };
        let verdict = self.cursor.judge(&answer);
        self.verdict(py, verdict)
    }

    /// The step after a `Step.Gap`, given the queue's first offset now.
    fn gap(&mut self, py: Python<'_>, first: i64) -> PyResult<Step> {
        let verdict = self.cursor.gap(first);
        self.verdict(py, verdict)
    }

    /// The step after the head pull failed (a retryable error).
    fn failed(&mut self, py: Python<'_>, why: String) -> PyResult<Step> {
        self.held = None;
        let verdict = Ok(self.cursor.failed(why));
        self.verdict(py, verdict)
    }

    /// After a `Step.Retry`: the seconds to wait and the tags of the dropped pulls; UnavailableError once the
    /// retry timeout has passed.
    fn retry(&mut self) -> PyResult<(f64, Vec<i32>)> {
        let (wait, tags) = self.cursor.retry().map_err(fault_error)?;
        Ok((wait.as_secs_f64(), tags))
    }

    /// Pull again from the first unread offset at once; the tags of the dropped pulls.
    fn rewind(&mut self) -> Vec<i32> {
        self.held = None;
        self.cursor.rewind()
    }

    /// Pulls over `pipe` (requests from `template`, whose varying fields are the offset and the count), gathering
    /// into `gatherer` until it gained `rows` rows or `nbytes` bytes or a step needs the caller; the GIL is
    /// released meanwhile. `suggested` is the broker id the pipe's member was chosen by.
    #[pyo3(signature = (pipe, template, gatherer, rows, nbytes, timeout, suggested))]
    #[allow(clippy::too_many_arguments)]
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        mut pipe: PyRefMut<'py, FramePipe>,
        mut template: PyRefMut<'py, RequestTemplate>,
        mut gatherer: Option<PyRefMut<'py, BlockGatherer>>,
        rows: usize,
        nbytes: usize,
        timeout: f64,
        suggested: i64,
    ) -> PyResult<Step> {
        self.held = None;
        let cursor = &mut self.cursor;
        let pipe = &mut pipe.pipe;
        let template = &mut template.template;
        let gathered = gatherer.as_deref_mut().map(|g| &mut g.gathered);
        let limits = Limits { rows, bytes: nbytes };
        let step = py.detach(|| pulls::run(cursor, pipe, template, gathered, limits, seconds(timeout), suggested));
        self.log_notes(py)?;
        Ok(match step {
            pulls::Step::Done => Step::Done {},
            pulls::Step::Full => Step::Full {},
            pulls::Step::Take { low, high, response } => {
                Step::Take { low, high, body: Some(PyBytes::new(py, response.body()).unbind()) }
            }
            pulls::Step::CheckGap(response) => {
                self.held = Some(response);
                Step::Gap {}
            }
            pulls::Step::Retry(why) => Step::Retry { why },
            pulls::Step::Suggest(broker_id) => Step::Suggest { broker_id },
            pulls::Step::Failed(e) => return Err(pipe_error(e)),
            pulls::Step::Unreadable(e) => return Err(unreadable(e)),
            pulls::Step::Answer { offset, response } => {
                Step::Answer { offset, frame: Py::new(py, response_frame(py, response)?)? }
            }
            pulls::Step::Fault(fault) => return Err(fault_error(fault)),
        })
    }
}

/// The sink's encoder of SEND_BATCH_MESSAGE bodies per target queue (`sends.rs`).
#[pyclass(module = "rmq_spark._native")]
struct SendEncoder {
    encoder: sends::Encoder,
}

type SendTuple = (u32, i32, i32, u32, Py<PyBytes>);
type HalfTuple = (u32, usize, usize, String, String);

fn send_topics(topics: Vec<(u32, Vec<(String, i32)>)>) -> Vec<sends::Topic> {
    topics
        .into_iter()
        .map(|(base, queues)| sends::Topic { base, queues: queues.into_iter().map(|(b, q)| (b.into_bytes(), q)).collect() })
        .collect()
}

/// `f` over the sink's columns of a batch of `rows` rows (name: pyarrow array of the sink's canonical type), read
/// in place through the Arrow C interface.
fn with_columns<R>(rows: usize, columns: &Bound<'_, PyDict>, f: impl FnOnce(&Columns<'_>) -> PyResult<R>) -> PyResult<R> {
    let mut held = Vec::new();
    let mut names = Vec::new();
    for (name, array) in columns.iter() {
        names.push(name.extract::<String>()?);
        held.push(lend(&array)?);
    }
    let get = |name: &str| -> PyResult<Option<Lent<'_>>> {
        match names.iter().position(|n| n == name) {
            Some(k) => Ok(Some(lent(&held[k])?)),
            None => Ok(None),
        }
    };
    let err = MalformedError::new_err;
    let strs = |name: &str| -> PyResult<Option<Strs<'_>>> { get(name)?.map(|a| Strs::of(a, name)).transpose().map_err(err) };
    let body = strs("body")?.ok_or_else(|| PyValueError::new_err("no body column"))?;
    let keys = match get("keys")? {
        None => None,
        Some(a) if a.format() == b"+l" => Some(Keys::List(StrLists::of(a, "keys").map_err(err)?)),
        Some(a) => Some(Keys::Text(Strs::of(a, "keys").map_err(err)?)),
    };
    let c = Columns {
        rows,
        body,
        topic: get("topic")?.map(|a| Ints::of(a, b"i", "topic")).transpose().map_err(err)?,
        tags: strs("tags")?,
        keys,
        properties: get("properties")?.map(|a| StrMaps::of(a, "properties")).transpose().map_err(err)?,
        flag: get("flag")?.map(|a| Ints::of(a, b"i", "flag")).transpose().map_err(err)?,
        sharding: strs("shardingKey")?,
        broker: strs("brokerName")?,
        queue_id: get("queueId")?.map(|a| Ints::of(a, b"i", "queueId")).transpose().map_err(err)?,
    };
    let short = [Some(body.len()), c.topic.map(|x| x.len()), c.flag.map(|x| x.len())];
    if short.iter().flatten().any(|&n| n < rows) {
        return Err(PyValueError::new_err(format!("a column shorter than the batch's {rows} rows")));
    }
    f(&c)
}

fn send_tuples(py: Python<'_>, sends: Vec<sends::Send>) -> Vec<SendTuple> {
    sends.into_iter().map(|s| (s.queue, s.sys_flag, s.flag, s.count, PyBytes::new(py, &s.body).unbind())).collect()
}

fn encode_error(e: EncodeError) -> PyErr {
    match e {
        EncodeError::Property(text) | EncodeError::Malformed(text) => MalformedError::new_err(text),
    }
}

fn new_ids(prefix: &str, month_start_ms: i64) -> PyResult<UniqueIds> {
    UniqueIds::new(prefix, month_start_ms).map_err(PyValueError::new_err)
}

/// The capsules of `array.__arrow_c_array__()`: kept alive while the encoder reads through their pointers.
fn lend<'py>(array: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
    let pair = array.call_method0("__arrow_c_array__")?;
    Ok((pair.get_item(0)?.cast_into::<PyCapsule>()?, pair.get_item(1)?.cast_into::<PyCapsule>()?))
}

fn lent<'a>(capsules: &'a (Bound<'_, PyCapsule>, Bound<'_, PyCapsule>)) -> PyResult<Lent<'a>> {
    let schema = capsules.0.pointer() as *const ArrowSchema;
    let array = capsules.1.pointer() as *const ArrowArray;
    unsafe { Lent::new(array, schema) }.map_err(MalformedError::new_err)
}

#[pymethods]
impl SendEncoder {
    /// `reserved`: property names a row's `properties` never set, nor those starting with `transient_prefix`;
    /// a send holds up to `max_messages` messages and `max_bytes` body bytes; bodies of `compress_from` bytes or
    /// more are zlib-compressed at `level`; UNIQ_KEYs start with `id_prefix`, their month at `month_start_ms`.
    #[new]
    #[pyo3(signature = (*, reserved, transient_prefix, max_messages, max_bytes, compress_from, level, id_prefix, month_start_ms))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        reserved: Vec<String>,
        transient_prefix: &str,
        max_messages: u32,
        max_bytes: usize,
        compress_from: usize,
        level: u32,
        id_prefix: &str,
        month_start_ms: i64,
    ) -> PyResult<Self> {
        let limits = sends::Limits { messages: max_messages, bytes: max_bytes, compress_from, level };
        let reserved = reserved.into_iter().map(String::into_bytes);
        let ids = new_ids(id_prefix, month_start_ms)?;
        Ok(SendEncoder { encoder: sends::Encoder::new(limits, reserved, transient_prefix.as_bytes(), ids) })
    }

    /// UNIQ_KEYs from here on start with `id_prefix`, their month at `month_start_ms`.
    fn set_ids(&mut self, id_prefix: &str, month_start_ms: i64) -> PyResult<()> {
        self.encoder.set_ids(new_ids(id_prefix, month_start_ms)?);
        Ok(())
    }

    /// Encodes `rows` rows of `columns` (name: pyarrow array of the sink's canonical type; `topic` as int32
    /// indices into `topics`, each (first queue's number, [(broker name, queue id)...])); `turn` is the round-robin
    /// position. Returns the full sends, each (queue number, sysFlag, flag, count, body), and the next turn.
    /// MalformedError for a row the wire cannot carry (a separator in a property, too many property bytes).
    fn add(
        &mut self,
        py: Python<'_>,
        rows: usize,
        columns: &Bound<'_, PyDict>,
        topics: Vec<(u32, Vec<(String, i32)>)>,
        turn: u64,
    ) -> PyResult<(Vec<SendTuple>, u64)> {
        let topics = send_topics(topics);
        let encoder = &mut self.encoder;
        let mut turn = turn;
        let sends = with_columns(rows, columns, |c| {
            py.detach(|| encoder.add(c, &topics, &mut turn, &mut unique_ids::now_ms)).map_err(encode_error)
        })?;
        Ok((send_tuples(py, sends), turn))
    }

    /// The half messages of an exactly-once write's rows, routed as `add` routes (`names`: each topic's
    /// (name, name on the wire)). Each row's SEND_MESSAGE_V2 frame, under its opaque of `opaques`, is in the
    /// returned bytes; the list gives per row (queue number, body bytes as sent, end of its frame, UNIQ_KEY, row
    /// key or ""), then the next turn. Rows carry a row key when `key_prefix` is given.
    #[pyo3(signature = (rows, columns, topics, names, turn, *, group, key_prefix, language, version, opaques))]
    #[allow(clippy::too_many_arguments)]
    fn halves(
        &mut self,
        py: Python<'_>,
        rows: usize,
        columns: &Bound<'_, PyDict>,
        topics: Vec<(u32, Vec<(String, i32)>)>,
        names: Vec<(String, String)>,
        turn: u64,
        group: &str,
        key_prefix: Option<&str>,
        language: &str,
        version: i64,
        opaques: Vec<i32>,
    ) -> PyResult<(Py<PyBytes>, Vec<HalfTuple>, u64)> {
        let topics = send_topics(topics);
        let names: Vec<sends::TopicNames> =
            names.into_iter().map(|(name, wire)| sends::TopicNames { name: name.into_bytes(), wire }).collect();
        let request = sends::HalfRequest { group, key_prefix, language, version };
        let encoder = &mut self.encoder;
        let mut turn = turn;
        let mut frames = Vec::new();
        let halves = with_columns(rows, columns, |c| {
            py.detach(|| {
                encoder.halves(c, &topics, &names, &mut turn, &mut unique_ids::now_ms, &request, &opaques, &mut frames)
            })
            .map_err(encode_error)
        })?;
        let halves = halves.into_iter().map(|h| (h.queue, h.size, h.end, h.unique_id, h.key)).collect();
        Ok((PyBytes::new(py, &frames).unbind(), halves, turn))
    }

    /// Every send still gathering, as `add` returns them.
    fn finish(&mut self, py: Python<'_>) -> Vec<SendTuple> {
        let sends = self.encoder.finish();
        send_tuples(py, sends)
    }
}

/// The UNIQ_KEYs a generator with `prefix` and `month_start_ms` makes at `times` (ms since the epoch), as
/// `SendEncoder` makes them: for the differential test against `rmq_spark.client.unique_ids`.
#[pyfunction]
fn unique_ids_at(prefix: &str, month_start_ms: i64, times: Vec<i64>) -> PyResult<Vec<String>> {
    let mut ids = new_ids(prefix, month_start_ms)?;
    let mut out = Vec::new();
    Ok(times
        .into_iter()
        .map(|t| {
            out.clear();
            ids.push_next(t, &mut out);
            String::from_utf8_lossy(&out).into_owned()
        })
        .collect())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<BlockGatherer>()?;
    m.add_class::<ArrowColumn>()?;
    m.add_class::<Frame>()?;
    m.add_class::<FramePipe>()?;
    m.add_class::<HoldLine>()?;
    m.add_class::<HoldEnd>()?;
    m.add_class::<RequestTemplate>()?;
    m.add_class::<RangeCursor>()?;
    m.add_class::<Step>()?;
    m.add_class::<Status>()?;
    m.add_class::<SendEncoder>()?;
    m.add("CoreError", py.get_type::<CoreError>())?;
    m.add("UnreadableError", py.get_type::<UnreadableError>())?;
    m.add("BodyTooLargeError", py.get_type::<BodyTooLargeError>())?;
    m.add("MalformedError", py.get_type::<MalformedError>())?;
    m.add("PipeLostError", py.get_type::<PipeLostError>())?;
    m.add("PipeTimeoutError", py.get_type::<PipeTimeoutError>())?;
    m.add("DataLostError", py.get_type::<DataLostError>())?;
    m.add("RefusedError", py.get_type::<RefusedError>())?;
    m.add("UnavailableError", py.get_type::<UnavailableError>())?;
    m.add("SUCCESS", pulls::SUCCESS)?;
    m.add("PULL_NOT_FOUND", pulls::PULL_NOT_FOUND)?;
    m.add("PULL_RETRY_IMMEDIATELY", pulls::PULL_RETRY_IMMEDIATELY)?;
    m.add("PULL_OFFSET_MOVED", pulls::PULL_OFFSET_MOVED)?;
    m.add("NO_MATCHED_MESSAGE", pulls::NO_MATCHED_MESSAGE)?;
    m.add_function(wrap_pyfunction!(backoff_delay, m)?)?;
    m.add_function(wrap_pyfunction!(data_loss_error, m)?)?;
    m.add_function(wrap_pyfunction!(data_loss_note, m)?)?;
    m.add_function(wrap_pyfunction!(pull_status, m)?)?;
    m.add_function(wrap_pyfunction!(next_hold, m)?)?;
    m.add_function(wrap_pyfunction!(first_offset, m)?)?;
    m.add_function(wrap_pyfunction!(v2_queue_offset, m)?)?;
    m.add_function(wrap_pyfunction!(encode_frame, m)?)?;
    m.add_function(wrap_pyfunction!(decode_frame, m)?)?;
    m.add_function(wrap_pyfunction!(unique_ids_at, m)?)?;
    Ok(())
}
