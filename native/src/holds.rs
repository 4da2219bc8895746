//! Held pulls (RocketMQ's long polling) of many queues over one pipe to a broker: each answer is judged here and
//! the queue held again where it tells, so that the caller only takes compact records of the holds that ended.
//!
//! Times are seconds on the caller's clock, given to each call (Python's `time.monotonic()`); the line reads no
//! clock of its own for its holds, and never lets its clock step back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::cursor::Status;
use crate::frame::Template;
use crate::pipe::{Pipe, PipeError, Response};
use crate::pulls::answer_of;

/// How often the holds past their timeout are looked for (a timeout is tens of seconds).
const EXPIRY_TICK_S: f64 = 0.5;

/// A hold that ended.
pub struct Ended {
    pub key: u64,
    /// Where the queue was held.
    pub offset: i64,
    /// When its pull was written (when the line closed, for one never written).
    pub armed_at: f64,
    /// The earliest its answer may have come (answers are read at polls only), or when it failed.
    pub ended_at: f64,
    /// Where the queue is held again: where it was (nothing came), or the end a message told; None: not held.
    pub next_offset: Option<i64>,
    /// The answer of a hold not held again: its header, without its body.
    pub response: Option<Response>,
    pub failure: Option<PipeError>,
}

enum State {
    /// To be written by the first poll at or after `due`.
    Staged { due: f64 },
    InFlight { opaque: i32, armed_at: f64 },
}

struct Hold {
    template: Template,
    offset: i64,
    state: State,
}

/// The holds of many queues, each named by a key of the caller's, over one pipe.
pub struct HoldLine {
    pipe: Pipe,
    peer: String,
    hold_timeout: f64,
    round_s: f64,
    holds: HashMap<u64, Hold>,
    /// The keys staged, with when each is due (a key held anew or dropped since is passed over).
    staged: Vec<(f64, u64)>,
    in_flight: HashMap<i32, u64>,
    ended: Vec<Ended>,
    last_opaque: i32,
    /// The latest time given (two threads' clocks may be read out of order).
    now: f64,
    /// When the pipe was last read, and when it last gave an answer.
    read_at: f64,
    last_received: f64,
    /// When the holds past their timeout are next looked for.
    expiry_due: f64,
    closed: bool,
}

/// Where a queue held at `offset` is held again after an answer of `status` with these offsets: where it was when
/// nothing came (a max offset of -1: the broker did not say), at the end a message told; None when the answer tells
/// neither. The one rule of both transports' holds (Python's `CallHolds` calls it too).
pub fn next_hold(status: Status, next_begin: i64, max_offset: i64, offset: i64) -> Option<i64> {
    match status {
        Status::NoNewMsg if next_begin == offset && (max_offset == -1 || max_offset == offset) => Some(offset),
        Status::Found if max_offset > offset => Some(max_offset),
        _ => None,
    }
}

impl HoldLine {
    /// `hold_timeout`: how long after its pull was written a hold's answer may come; `round_s`: how soon after
    /// its previous pull was written a queue whose hold ended with a message is held again.
    pub fn new(pipe: Pipe, hold_timeout: f64, round_s: f64) -> HoldLine {
        HoldLine {
            peer: pipe.peer(),
            pipe,
            hold_timeout,
            round_s,
            holds: HashMap::new(),
            staged: Vec::new(),
            in_flight: HashMap::new(),
            ended: Vec::new(),
            last_opaque: 0,
            now: 0.0,
            read_at: f64::NEG_INFINITY,
            last_received: f64::NEG_INFINITY,
            expiry_due: f64::NEG_INFINITY,
            closed: false,
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// How many queues are held (written or to be written).
    pub fn held(&self) -> usize {
        self.holds.len()
    }

    /// Holds queue `key` at `offset` from the next poll on, with pulls rendered from `template` (whose one varying
    /// field is the queue offset), instead of any hold of it before (as `drop_hold`). Err(Lost) when the line is
    /// closed, Err(Protocol) when the template does not render.
    pub fn hold(&mut self, key: u64, mut template: Template, offset: i64) -> Result<(), PipeError> {
        if self.closed {
            return Err(PipeError::Lost(format!("the connection to {} was closed", self.peer)));
        }
        template.render_into(&[offset], 0, &mut Vec::new()).map_err(PipeError::Protocol)?;
        self.drop_hold(key);
        self.stage(key, Hold { template, offset, state: State::Staged { due: f64::NEG_INFINITY } });
        Ok(())
    }

    fn stage(&mut self, key: u64, hold: Hold) {
        if let State::Staged { due } = hold.state {
            self.staged.push((due, key));
        }
        self.holds.insert(key, hold);
    }

    /// No hold of `key` any more: the answer of its pull in flight is dropped, and so are its records not taken.
    pub fn drop_hold(&mut self, key: u64) {
        if let Some(Hold { state: State::InFlight { opaque, .. }, .. }) = self.holds.remove(&key) {
            self.forget(opaque);
        }
        self.ended.retain(|ended| ended.key != key);
    }

    /// Reads the answers that have come and judges them, writes the pulls due, and ends the holds past their
    /// timeout; the records wait for `take`. A write must finish within `send_timeout`.
    pub fn poll(&mut self, now: f64, send_timeout: Duration) {
        if self.closed {
            return;
        }
        self.now = self.now.max(now);
        if !self.in_flight.is_empty() {
            self.read();
        }
        self.write(send_timeout);
        self.expire();
    }

    /// `poll`, then the records of the holds that ended since the last take, in the order they ended.
    pub fn take(&mut self, now: f64, send_timeout: Duration) -> Vec<Ended> {
        self.poll(now, send_timeout);
        std::mem::take(&mut self.ended)
    }

    /// Closes the line: every hold ends with a failure.
    pub fn close(&mut self) {
        self.close_with(PipeError::Lost("closed by the client".to_owned()));
    }

    fn read(&mut self) {
        let since = std::mem::replace(&mut self.read_at, self.now);
        match self.pipe.ready() {
            Ok(responses) => {
                if !responses.is_empty() {
                    self.last_received = self.now;
                }
                for response in responses {
                    self.judge(response, since);
                }
            }
            Err(e) => self.close_with(e),
        }
    }

    /// Records the end of the hold `response` answers, read after a read at `since`, and stages its next pull.
    fn judge(&mut self, mut response: Response, since: f64) {
        let Some(key) = self.in_flight.remove(&response.header.opaque) else { return };
        let Some(hold) = self.holds.get_mut(&key) else { return };
        let State::InFlight { armed_at, .. } = hold.state else { return };
        let offset = hold.offset;
        let next = answer_of(&response.header, response.body(), offset)
            .and_then(|(a, _)| next_hold(a.status, a.next_begin, a.max_offset, offset));
        let ended_at = armed_at.max(since);
        let mut ended = Ended { key, offset, armed_at, ended_at, next_offset: next, response: None, failure: None };
        match next {
            Some(next) => {
                let due = if next == offset { f64::NEG_INFINITY } else { armed_at + self.round_s };
                hold.offset = next;
                hold.state = State::Staged { due };
                self.staged.push((due, key));
            }
            None => {
                self.holds.remove(&key);
                response.frame.truncate(response.header.body_start);
                response.frame.shrink_to_fit();
                ended.response = Some(response);
            }
        }
        self.ended.push(ended);
    }

    /// Writes the pulls due in one go.
    fn write(&mut self, timeout: Duration) {
        if self.closed {
            return;
        }
        let now = self.now;
        let mut frames = Vec::new();
        let mut opaques = Vec::new();
        let mut unrendered = Vec::new();
        let mut due_keys = Vec::new();
        self.staged.retain(|&(due, key)| {
            if due <= now {
                due_keys.push(key);
            }
            due > now
        });
        for key in due_keys {
            let Some(hold) = self.holds.get_mut(&key) else { continue };
            if !matches!(hold.state, State::Staged { due } if due <= now) {
                continue; // held anew since (staged again under its own entry), or written
            }
            self.last_opaque = self.last_opaque % i32::MAX + 1;
            let opaque = self.last_opaque;
            match hold.template.render_into(&[hold.offset], opaque as i64, &mut frames) {
                Ok(()) => {
                    hold.state = State::InFlight { opaque, armed_at: now };
                    self.in_flight.insert(opaque, key);
                    opaques.push(opaque);
                }
                Err(why) => unrendered.push((key, why)),
            }
        }
        for (key, why) in unrendered {
            self.fail(key, PipeError::Protocol(why));
        }
        if !opaques.is_empty() {
            if let Err(e) = self.pipe.send_frames(&frames, &opaques, timeout) {
                self.close_with(e);
            }
        }
    }

    /// Ends the holds past their timeout, and closes the line when one of them was written after it last received
    /// anything (a half-open or stuck connection is replaced, not waited on).
    fn expire(&mut self) {
        if self.closed || self.now < self.expiry_due {
            return;
        }
        let now = self.now;
        self.expiry_due = now + EXPIRY_TICK_S;
        let late: Vec<(u64, f64)> = self
            .holds
            .iter()
            .filter_map(|(&key, hold)| match hold.state {
                State::InFlight { armed_at, .. } if armed_at + self.hold_timeout < now => Some((key, armed_at)),
                _ => None,
            })
            .collect();
        let silent = late.iter().map(|&(_, armed_at)| armed_at).filter(|&at| at > self.last_received).reduce(f64::min);
        for (key, _) in late {
            self.fail(key, PipeError::Timeout);
        }
        if let Some(armed_at) = silent {
            self.close_with(PipeError::Lost(format!(
                "{} answered nothing for {:.1} s; the connection was closed and will be reopened",
                self.peer,
                now - armed_at
            )));
        }
    }

    fn close_with(&mut self, why: PipeError) {
        if self.closed {
            return;
        }
        self.closed = true;
        self.pipe.close(why.clone());
        let keys: Vec<u64> = self.holds.keys().copied().collect();
        for key in keys {
            self.fail(key, why.clone());
        }
    }

    /// Ends `key`'s hold now with `failure`.
    fn fail(&mut self, key: u64, failure: PipeError) {
        let Some(hold) = self.holds.remove(&key) else { return };
        let armed_at = match hold.state {
            State::InFlight { opaque, armed_at } => {
                self.forget(opaque);
                armed_at
            }
            State::Staged { .. } => self.now,
        };
        let (offset, ended_at, failure) = (hold.offset, self.now, Some(failure));
        self.ended.push(Ended { key, offset, armed_at, ended_at, next_offset: None, response: None, failure });
    }

    fn forget(&mut self, opaque: i32) {
        self.in_flight.remove(&opaque);
        self.pipe.forget(opaque);
    }
}

/// The caller's clock read without the caller: its time at `at`, and the time elapsed since.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: f64,
    at: Instant,
}

impl Clock {
    /// The clock that reads `now` now.
    pub fn starting(now: f64) -> Clock {
        Clock { origin: now, at: Instant::now() }
    }

    pub fn now(&self) -> f64 {
        self.origin + self.at.elapsed().as_secs_f64()
    }
}

/// Polls `line` every `every` on a thread of its own (`poll` with `send_timeout`, on `clock`), until the line is
/// closed or nobody else holds it: the holds due are written and the answers read without the caller.
pub fn poll_in_background(
    line: &Arc<Mutex<HoldLine>>,
    every: Duration,
    send_timeout: Duration,
    clock: Clock,
) -> std::io::Result<()> {
    let line = Arc::downgrade(line);
    thread::Builder::new().name("rmq-hold-line".to_owned()).spawn(move || loop {
        thread::sleep(every);
        let Some(line) = line.upgrade() else { return };
        let mut line = line.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if line.is_closed() {
            return;
        }
        line.poll(clock.now(), send_timeout);
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{decode, encode, Command, JSON};
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::mpsc::{channel, Receiver, Sender};
    use std::thread;
    use std::time::Instant;

    const SEND: Duration = Duration::from_secs(5);
    const WAIT: Duration = Duration::from_secs(5);

    /// A broker on a loopback port: the requests it reads go to `requests` as (opaque, queueOffset); the frames
    /// sent on `answers` are written back, and None closes the socket.
    struct Peer {
        requests: Receiver<(i32, i64)>,
        answers: Sender<Option<Vec<u8>>>,
    }

    fn request(socket: &mut TcpStream) -> Option<(i32, i64)> {
        let mut length = [0u8; 4];
        socket.read_exact(&mut length).ok()?;
        let mut frame = vec![0u8; i32::from_be_bytes(length) as usize];
        socket.read_exact(&mut frame).ok()?;
        let header = decode(&frame).unwrap();
        let offset = header.ext.iter().find(|(key, _)| key == "queueOffset").unwrap().1.parse().unwrap();
        Some((header.opaque, offset))
    }

    fn peer() -> (u16, Peer) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (request_tx, requests) = channel();
        let (answers, answer_rx) = channel::<Option<Vec<u8>>>();
        thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            let mut reader = socket.try_clone().unwrap();
            thread::spawn(move || {
                while let Some(got) = request(&mut reader) {
                    let _ = request_tx.send(got);
                }
            });
            while let Ok(Some(frame)) = answer_rx.recv() {
                socket.write_all(&frame).unwrap();
            }
            let _ = socket.shutdown(Shutdown::Both);
        });
        (port, Peer { requests, answers })
    }

    impl Peer {
        fn next(&self) -> (i32, i64) {
            self.requests.recv_timeout(WAIT).expect("a request")
        }

        fn none_yet(&self) {
            thread::sleep(Duration::from_millis(100));
            assert!(self.requests.try_recv().is_err(), "no request yet");
        }

        fn answer(&self, opaque: i32, code: i32, next_begin: i64, max_offset: i64, body: &[u8]) {
            let fields = [("nextBeginOffset", next_begin), ("minOffset", 0), ("maxOffset", max_offset)];
            let ext: Vec<(String, String)> = fields
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect();
            let cmd = Command {
                code: code as i64,
                language: "JAVA",
                version: 473,
                opaque: opaque as i64,
                flag: 1,
                remark: None,
                ext: &ext,
                body,
                serialize_type: JSON,
            };
            self.answers.send(Some(encode(&cmd).unwrap())).unwrap();
        }
    }

    fn template() -> Template {
        let ext = [("topic", "T"), ("queueId", "0"), ("queueOffset", "0"), ("suspendTimeoutMillis", "30000")];
        let ext = ext.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect();
        Template::new(11, "PYTHON".into(), 473, JSON, ext, &["queueOffset"]).unwrap()
    }

    fn line(port: u16, hold_timeout: f64, round_s: f64) -> HoldLine {
        HoldLine::new(Pipe::connect("127.0.0.1", port, SEND, 16 << 20).unwrap(), hold_timeout, round_s)
    }

    /// The records taken at `now` once there are some.
    fn ended(line: &mut HoldLine, now: f64) -> Vec<Ended> {
        let deadline = Instant::now() + WAIT;
        loop {
            let ended = line.take(now, SEND);
            if !ended.is_empty() || Instant::now() > deadline {
                return ended;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Polls at `now` until the peer reads a request.
    fn polled_until_request(line: &mut HoldLine, peer: &Peer, now: f64) -> (i32, i64) {
        let deadline = Instant::now() + WAIT;
        loop {
            line.poll(now, SEND);
            if let Ok(got) = peer.requests.try_recv() {
                return got;
            }
            assert!(Instant::now() < deadline, "no request");
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// A record's key, offset, next offset, response code and failure.
    type Summary = (u64, i64, Option<i64>, Option<i32>, Option<PipeError>);

    fn summary(ended: &[Ended]) -> Vec<Summary> {
        let code = |e: &Ended| e.response.as_ref().map(|r| r.header.code);
        ended.iter().map(|e| (e.key, e.offset, e.next_offset, code(e), e.failure.clone())).collect()
    }

    #[test]
    fn a_quiet_answer_holds_the_queue_again_where_it_was_at_once() {
        let (port, peer) = peer();
        let mut line = line(port, 40.0, 0.5);
        line.hold(1, template(), 5).unwrap();
        assert!(line.take(1.0, SEND).is_empty());
        let (opaque, offset) = peer.next();
        assert_eq!(offset, 5);
        peer.answer(opaque, 19, 5, 5, b"");
        let got = ended(&mut line, 2.0);
        assert_eq!(summary(&got), vec![(1, 5, Some(5), None, None)]);
        assert_eq!(got[0].armed_at, 1.0);
        assert!((1.0..=2.0).contains(&got[0].ended_at));
        let (again, offset) = peer.next(); // written by the poll that judged the answer
        assert_eq!(offset, 5);
        assert_ne!(again, opaque);
        assert_eq!(line.held(), 1);
    }

    #[test]
    fn a_moved_answer_holds_the_queue_again_at_its_end_a_round_after_the_hold_was_written() {
        let (port, peer) = peer();
        let mut line = line(port, 40.0, 0.5);
        line.hold(1, template(), 5).unwrap();
        line.poll(10.0, SEND);
        let (opaque, _) = peer.next();
        peer.answer(opaque, 0, 6, 8, &[7u8; 100_000]);
        let got = ended(&mut line, 10.1);
        assert_eq!(summary(&got), vec![(1, 5, Some(8), None, None)]);
        line.poll(10.4, SEND);
        peer.none_yet();
        line.poll(10.5, SEND);
        assert_eq!(peer.next().1, 8);
    }

    #[test]
    fn an_error_answer_ends_the_hold_with_its_header_only() {
        let (port, peer) = peer();
        let mut line = line(port, 40.0, 0.5);
        line.hold(1, template(), 5).unwrap();
        line.poll(1.0, SEND);
        let (opaque, _) = peer.next();
        peer.answer(opaque, 24, 0, 0, b"no permission");
        let got = ended(&mut line, 1.5);
        assert_eq!(summary(&got), vec![(1, 5, None, Some(24), None)]);
        assert!(got[0].response.as_ref().unwrap().body().is_empty());
        assert_eq!(line.held(), 0);
        line.poll(3.0, SEND);
        peer.none_yet();
    }

    #[test]
    fn a_dropped_or_replaced_hold_loses_its_answers_and_its_records_not_taken() {
        let (port, peer) = peer();
        let mut line = line(port, 40.0, 0.5);
        line.hold(1, template(), 5).unwrap();
        line.hold(2, template(), 5).unwrap();
        line.poll(1.0, SEND);
        for _ in 0..2 {
            let (opaque, _) = peer.next();
            peer.answer(opaque, 19, 5, -1, b"");
        }
        let first = polled_until_request(&mut line, &peer, 1.1); // the quiet ends are recorded and held again
        let second = polled_until_request(&mut line, &peer, 1.1);
        line.drop_hold(1);
        line.hold(2, template(), 9).unwrap();
        line.poll(1.2, SEND);
        let (fresh, offset) = peer.next();
        assert_eq!(offset, 9);
        for opaque in [first.0, second.0] {
            peer.answer(opaque, 24, 0, 0, b"");
        }
        peer.answer(fresh, 19, 9, 9, b"");
        assert_eq!(summary(&ended(&mut line, 1.3)), vec![(2, 9, Some(9), None, None)]);
        assert_eq!(line.held(), 1);
    }

    #[test]
    fn a_late_hold_times_out_and_the_line_stays_open_when_it_heard_from_the_broker_since() {
        let (port, peer) = peer();
        let mut line = line(port, 1.0, 0.5);
        line.hold(1, template(), 5).unwrap();
        line.hold(2, template(), 5).unwrap();
        line.poll(10.0, SEND);
        peer.next();
        let (opaque, _) = peer.next();
        peer.answer(opaque, 24, 0, 0, b"");
        assert_eq!(ended(&mut line, 10.5).len(), 1);
        let got = line.take(11.5, SEND);
        assert_eq!(summary(&got), vec![(1, 5, None, None, Some(PipeError::Timeout))]);
        assert_eq!((got[0].armed_at, got[0].ended_at), (10.0, 11.5));
        assert!(!line.is_closed());
    }

    #[test]
    fn a_line_that_heard_nothing_since_a_late_hold_was_written_closes() {
        let (port, peer) = peer();
        let mut line = line(port, 1.0, 0.5);
        line.hold(1, template(), 5).unwrap();
        line.poll(10.0, SEND);
        peer.next();
        assert!(line.take(10.9, SEND).is_empty());
        line.hold(2, template(), 7).unwrap();
        let got = line.take(11.5, SEND);
        assert!(line.is_closed());
        assert_eq!(got.len(), 2);
        assert_eq!(summary(&got[..1]), vec![(1, 5, None, None, Some(PipeError::Timeout))]);
        let Some(PipeError::Lost(why)) = &got[1].failure else { panic!("the other hold is lost") };
        assert!(why.contains("answered nothing for 1.5 s"), "{why}");
        assert_eq!((got[1].key, line.held()), (2, 0));
        assert!(matches!(line.hold(3, template(), 1), Err(PipeError::Lost(_))));
    }

    #[test]
    fn a_broker_that_closes_the_connection_ends_every_hold() {
        let (port, peer) = peer();
        let mut line = line(port, 40.0, 0.5);
        line.hold(1, template(), 5).unwrap();
        line.hold(2, template(), 6).unwrap();
        line.poll(1.0, SEND);
        peer.next();
        peer.next();
        peer.answers.send(None).unwrap();
        let got = ended(&mut line, 2.0);
        let lost = |e: &Ended| matches!(e.failure, Some(PipeError::Lost(_))) && e.next_offset.is_none();
        assert_eq!((got.len(), got.iter().all(lost)), (2, true));
        assert!(line.is_closed());
        assert_eq!(line.held(), 0);
        assert!(matches!(line.hold(1, template(), 5), Err(PipeError::Lost(_))));
        assert!(line.take(3.0, SEND).is_empty());
    }

    #[test]
    fn a_line_polled_in_the_background_holds_again_and_writes_holds_without_its_caller() {
        let (port, peer) = peer();
        let line = Arc::new(Mutex::new(line(port, 40.0, 0.05)));
        poll_in_background(&line, Duration::from_millis(10), SEND, Clock::starting(100.0)).unwrap();
        line.lock().unwrap().hold(1, template(), 5).unwrap();
        let (opaque, offset) = peer.next(); // written by the background poll
        assert_eq!(offset, 5);
        peer.answer(opaque, 0, 6, 9, b"m");
        assert_eq!(peer.next().1, 9); // held again at the new end, a round later
        let got = line.lock().unwrap().take(0.0, SEND);
        assert_eq!(summary(&got), vec![(1, 5, Some(9), None, None)]);
        assert!(got[0].armed_at >= 100.0 && got[0].ended_at >= got[0].armed_at);
        line.lock().unwrap().close();
        thread::sleep(Duration::from_millis(50)); // the poller sees the line closed and ends
        assert_eq!(Arc::strong_count(&line), 1);
    }
}
