//! A connection of one reader's own to a broker, over plain TCP: requests are written and their responses read
//! on the caller's thread (no reader thread, no hand-off), many in flight, matched by `opaque`.
//!
//! Every wait has a deadline. A request not answered by its deadline, a send that does not finish in time, a
//! malformed frame or a broken socket closes the pipe: every later call fails at once, and the owner opens a new
//! one (a half-open or stuck connection is replaced, never waited on again).

use std::collections::{HashMap, HashSet};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::frame::{self, Header};

/// Bytes asked of the socket per read at least (a pulled block is up to 256 KiB).
const READ_CHUNK: usize = 256 << 10;
/// A blocked read or write returns this often to check its deadline (set once: no syscall per call for it).
const TICK: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PipeError {
    /// The connection could not be opened, broke, or was closed.
    Lost(String),
    /// No answer before the deadline (the pipe is closed).
    Timeout,
    /// The peer sent something that is not a frame (the pipe is closed).
    Protocol(String),
}

/// One response: its decoded header and its whole frame (the body from `header.body_start`).
pub struct Response {
    pub header: Header,
    pub frame: Vec<u8>,
}

impl Response {
    pub fn body(&self) -> &[u8] {
        &self.frame[self.header.body_start..]
    }
}

pub struct Pipe {
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max_frame: usize,
    awaited: HashSet<i32>,
    parked: HashMap<i32, Response>,
    closed: Option<PipeError>,
}

fn passed(deadline: Instant) -> bool {
    Instant::now() >= deadline
}

impl Pipe {
    /// Connects to `host:port` (each resolved address in turn) within `timeout`.
    pub fn connect(host: &str, port: u16, timeout: Duration, max_frame: usize) -> Result<Pipe, PipeError> {
        let addresses = (host, port).to_socket_addrs().map_err(|e| PipeError::Lost(e.to_string()))?;
        let mut last = PipeError::Lost(format!("{host} resolves to no address"));
        for address in addresses {
            match TcpStream::connect_timeout(&address, timeout) {
                Ok(stream) => {
                    let set = stream.set_nodelay(true).and(stream.set_read_timeout(Some(TICK)));
                    set.and(stream.set_write_timeout(Some(TICK))).map_err(|e| PipeError::Lost(e.to_string()))?;
                    return Ok(Pipe {
                        stream,
                        buf: vec![0; READ_CHUNK],
                        start: 0,
                        end: 0,
                        max_frame,
                        awaited: HashSet::new(),
                        parked: HashMap::new(),
                        closed: None,
                    });
                }
                Err(e) => last = PipeError::Lost(e.to_string()),
            }
        }
        Err(last)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.is_some()
    }

    /// The address connected to, as `ip:port` (errors name it).
    pub fn peer(&self) -> String {
        self.stream.peer_addr().map_or_else(|_| "the peer".to_owned(), |address| address.to_string())
    }

    /// Whether requests are in flight, or answers read but not taken.
    pub fn is_busy(&self) -> bool {
        !self.awaited.is_empty() || !self.parked.is_empty()
    }

    /// Closes the pipe with `why`: every later call fails with it.
    pub fn close(&mut self, why: PipeError) -> PipeError {
        if self.closed.is_none() {
            let _ = self.stream.shutdown(Shutdown::Both);
            self.closed = Some(why.clone());
            self.parked.clear();
            self.awaited.clear();
        }
        why
    }

    fn check_open(&self) -> Result<(), PipeError> {
        match &self.closed {
            Some(PipeError::Lost(why)) => Err(PipeError::Lost(format!("the connection was closed earlier: {why}"))),
            Some(_) => Err(PipeError::Lost("the connection was closed earlier".to_owned())),
            None => Ok(()),
        }
    }

    /// Writes one whole frame (its request's id `opaque`) within `timeout`.
    pub fn send(&mut self, frame: &[u8], opaque: i32, timeout: Duration) -> Result<(), PipeError> {
        self.send_frames(frame, &[opaque], timeout)
    }

    /// Writes whole frames laid one after the other (the requests `opaques`), in one write where the socket
    /// takes them, within `timeout`.
    pub fn send_frames(&mut self, frames: &[u8], opaques: &[i32], timeout: Duration) -> Result<(), PipeError> {
        self.check_open()?;
        let deadline = Instant::now() + timeout;
        let mut rest = frames;
        while !rest.is_empty() {
            if passed(deadline) {
                return Err(self.close(PipeError::Lost(format!(
                    "sending did not finish within {:.1} s (the peer does not read)",
                    timeout.as_secs_f64()
                ))));
            }
            match self.stream.write(rest) {
                Ok(0) => return Err(self.close(PipeError::Lost("closed while sending".to_owned()))),
                Ok(n) => rest = &rest[n..],
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                }
                Err(e) => return Err(self.close(PipeError::Lost(format!("broke while sending: {e}")))),
            }
        }
        self.awaited.extend(opaques);
        Ok(())
    }

    /// Stops waiting for request `opaque`: its response is dropped when it comes.
    pub fn forget(&mut self, opaque: i32) {
        self.awaited.remove(&opaque);
        self.parked.remove(&opaque);
    }

    /// The response to request `opaque`, read within `timeout`; responses to other requests in flight that come
    /// first are kept for their own call.
    pub fn receive(&mut self, opaque: i32, timeout: Duration) -> Result<Response, PipeError> {
        if let Some(response) = self.parked.remove(&opaque) {
            self.awaited.remove(&opaque);
            return Ok(response);
        }
        self.check_open()?;
        if !self.awaited.contains(&opaque) {
            return Err(PipeError::Lost(format!("no request {opaque} is in flight on this connection")));
        }
        let deadline = Instant::now() + timeout;
        let mut read_some = true; // what has already arrived counts even past the deadline (a paused reader)
        loop {
            while let Some(response) = self.next_frame()? {
                let id = response.header.opaque;
                if !response.header.is_response() || !self.awaited.contains(&id) {
                    continue; // a request from the server, or an answer nobody waits for any more
                }
                if id == opaque {
                    self.awaited.remove(&id);
                    return Ok(response);
                }
                self.parked.insert(id, response);
            }
            if passed(deadline) && !read_some {
                return Err(self.close(PipeError::Timeout));
            }
            read_some = self.fill(passed(deadline))?;
        }
    }

    /// The responses to requests in flight that have come by now, without waiting: what the socket holds is read
    /// and every whole frame in it taken (answers nobody waits for and requests from the server are dropped).
    pub fn ready(&mut self) -> Result<Vec<Response>, PipeError> {
        let mut out: Vec<Response> = self.parked.drain().map(|(_, response)| response).collect();
        for response in &out {
            self.awaited.remove(&response.header.opaque);
        }
        self.check_open()?;
        loop {
            while let Some(response) = self.next_frame()? {
                let id = response.header.opaque;
                if response.header.is_response() && self.awaited.remove(&id) {
                    out.push(response);
                }
            }
            if !self.fill(true)? {
                return Ok(out);
            }
        }
    }

    /// The next whole frame in the buffer, if one is there.
    fn next_frame(&mut self) -> Result<Option<Response>, PipeError> {
        let have = self.end - self.start;
        if have < 4 {
            return Ok(None);
        }
        let length = i32::from_be_bytes(self.buf[self.start..self.start + 4].try_into().unwrap());
        if length < 4 || length as usize > self.max_frame {
            let why = format!("sent a frame of length {length}, outside 4..{}", self.max_frame);
            return Err(self.close(PipeError::Protocol(why)));
        }
        let length = length as usize;
        if have < 4 + length {
            return Ok(None);
        }
        let frame = self.buf[self.start + 4..self.start + 4 + length].to_vec();
        self.start += 4 + length;
        match frame::decode(&frame) {
            Ok(header) => Ok(Some(Response { header, frame })),
            Err(why) => Err(self.close(PipeError::Protocol(why))),
        }
    }

    /// Reads what the socket has (waiting at most a tick, not at all with `now`), with room for at least the
    /// frame being read; whether anything came.
    fn fill(&mut self, now: bool) -> Result<bool, PipeError> {
        let have = self.end - self.start;
        let frame_len = if have >= 4 {
            4 + i32::from_be_bytes(self.buf[self.start..self.start + 4].try_into().unwrap()) as usize
        } else {
            4
        };
        // room for a useful read and for the whole frame being read
        if self.buf.len() - self.end < 4096 || self.buf.len() - self.start < frame_len {
            self.buf.copy_within(self.start..self.end, 0);
            self.start = 0;
            self.end = have;
            if self.buf.len() < frame_len.max(READ_CHUNK) {
                self.buf.resize(frame_len.max(READ_CHUNK), 0);
            }
        }
        if now {
            let _ = self.stream.set_nonblocking(true);
        }
        let read = self.stream.read(&mut self.buf[self.end..]);
        if now {
            let _ = self.stream.set_nonblocking(false);
        }
        match read {
            Ok(0) => {
                let mid = if have > 0 { " in the middle of a frame" } else { "" };
                Err(self.close(PipeError::Lost(format!("was closed by the server{mid}"))))
            }
            Ok(n) => {
                self.end += n;
                Ok(true)
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                Ok(false)
            }
            Err(e) => Err(self.close(PipeError::Lost(format!("broke: {e}")))),
        }
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{encode, Command, JSON};
    use std::net::TcpListener;
    use std::thread;

    fn response(opaque: i64, body: &[u8]) -> Vec<u8> {
        let ext = vec![("nextBeginOffset".to_owned(), "32".to_owned())];
        let cmd = Command {
            code: 0,
            language: "JAVA",
            version: 473,
            opaque,
            flag: 1,
            remark: None,
            ext: &ext,
            body,
            serialize_type: JSON,
        };
        encode(&cmd).unwrap()
    }

    /// A peer on a loopback port that runs `script` on the first connection (the socket stays open until joined).
    fn peer(script: impl FnOnce(&mut TcpStream) + Send + 'static) -> (u16, thread::JoinHandle<TcpStream>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        (port, thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            script(&mut socket);
            socket
        }))
    }

    #[test]
    fn answers_out_of_order_reach_their_requests_and_a_silent_peer_times_out() {
        let (port, server) = peer(|socket| {
            let mut got = [0u8; 6];
            socket.read_exact(&mut got).unwrap();
            let big = vec![7u8; 600_000];
            socket.write_all(&response(2, &big)).unwrap();
            socket.write_all(&response(1, b"one")).unwrap();
            thread::sleep(Duration::from_millis(500)); // then silence: request 3 is never answered
        });
        let mut pipe = Pipe::connect("127.0.0.1", port, Duration::from_secs(5), 16 << 20).unwrap();
        pipe.send(b"req", 1, Duration::from_secs(5)).unwrap();
        pipe.send(b"req", 2, Duration::from_secs(5)).unwrap();
        let one = pipe.receive(1, Duration::from_secs(5)).unwrap();
        assert_eq!(one.body(), b"one");
        let two = pipe.receive(2, Duration::from_secs(5)).unwrap();
        assert_eq!(two.body().len(), 600_000);
        assert_eq!(two.header.ext, vec![("nextBeginOffset".to_owned(), "32".to_owned())]);
        pipe.send(b"x", 3, Duration::from_secs(5)).unwrap();
        assert_eq!(pipe.receive(3, Duration::from_millis(100)).err(), Some(PipeError::Timeout));
        assert!(pipe.is_closed());
        drop(server.join().unwrap());
    }

    #[test]
    fn an_answer_that_came_while_nobody_read_is_not_late() {
        let (port, server) = peer(|socket| {
            let mut got = [0u8; 3];
            socket.read_exact(&mut got).unwrap();
            socket.write_all(&response(1, &vec![1u8; 300_000])).unwrap();
            thread::sleep(Duration::from_millis(500));
        });
        let mut pipe = Pipe::connect("127.0.0.1", port, Duration::from_secs(5), 16 << 20).unwrap();
        pipe.send(b"req", 1, Duration::from_secs(5)).unwrap();
        thread::sleep(Duration::from_millis(200)); // the reader is busy elsewhere; its deadline passes
        assert_eq!(pipe.receive(1, Duration::ZERO).unwrap().body().len(), 300_000);
        drop(server.join().unwrap());
    }

    #[test]
    fn ready_takes_the_answers_that_came_without_waiting_for_the_rest() {
        let (port, server) = peer(|socket| {
            let mut got = [0u8; 9];
            socket.read_exact(&mut got).unwrap();
            socket.write_all(&response(2, b"two")).unwrap();
            socket.write_all(&response(9, b"nobody's")).unwrap();
            socket.write_all(&response(1, &vec![1u8; 300_000])).unwrap();
            thread::sleep(Duration::from_millis(500)); // request 3 stays unanswered
        });
        let mut pipe = Pipe::connect("127.0.0.1", port, Duration::from_secs(5), 16 << 20).unwrap();
        pipe.send_frames(b"reqreqreq", &[1, 2, 3], Duration::from_secs(5)).unwrap();
        let mut got: Vec<(i64, usize)> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < 2 && !passed(deadline) {
            got.extend(pipe.ready().unwrap().iter().map(|r| (r.header.opaque as i64, r.body().len())));
        }
        got.sort();
        assert_eq!(got, vec![(1, 300_000), (2, 3)]);
        assert!(pipe.ready().unwrap().is_empty());
        assert!(!pipe.is_closed());
        assert_eq!(pipe.receive(3, Duration::from_millis(100)).err(), Some(PipeError::Timeout));
        drop(server.join().unwrap());
    }

    #[test]
    fn a_timed_out_pipe_refuses_more_requests() {
        let (port, server) = peer(|_| {});
        let mut pipe = Pipe::connect("127.0.0.1", port, Duration::from_secs(5), 16 << 20).unwrap();
        pipe.send(b"x", 3, Duration::from_secs(5)).unwrap();
        assert_eq!(pipe.receive(3, Duration::from_millis(100)).err(), Some(PipeError::Timeout));
        assert!(pipe.is_closed());
        assert!(matches!(pipe.send(b"x", 4, Duration::from_secs(1)), Err(PipeError::Lost(_))));
        drop(server.join().unwrap());
    }

    #[test]
    fn a_frame_length_past_the_limit_closes_the_pipe() {
        let (port, server) = peer(|socket| {
            socket.write_all(&[0x7f, 0, 0, 0, 1, 2, 3]).unwrap();
        });
        let mut pipe = Pipe::connect("127.0.0.1", port, Duration::from_secs(5), 1 << 20).unwrap();
        pipe.send(b"req", 1, Duration::from_secs(5)).unwrap();
        assert!(matches!(pipe.receive(1, Duration::from_secs(5)), Err(PipeError::Protocol(_))));
        drop(server.join().unwrap());
    }
}
