//! The rules of an exact range read `[start, end)` of one queue, apart from any I/O: which pulls to send, and what
//! each answer means for the range (docs/DESIGN.md §2 and §10). Both transports drive it: the native pull loop
//! (`pulls`) over a pipe, and the Python reader over a transport's own calls (gRPC, TLS, signed requests).
//!
//! Queue offsets are dense, so the range is cut into slots and a pull is sent for each of the next `depth` slots
//! at once. A pull answers from its slot's first offset; it may stop short (broker size limits, disk reads) — the
//! rest of the slot is pulled again before the next slot is used — or, with a filter, run past the slot — what lies
//! past the slot is dropped, because the next slot's pull returns it. Each slot's messages therefore come exactly
//! once and in order. Slots are sized to what the broker serves in one pull: a short answer shrinks the slot to
//! what came (the same short count twice caps it there), within the cap the slot follows the messages' size, and
//! it grows back after a run of full answers.
//!
//! Data is lost only when the broker proves it: its first held offset is past the one asked for, or its last
//! offset fell below it. A gap in an unfiltered read is never accepted as it stands: it is data loss when the
//! queue's first offset moved past it (the caller asks, `CheckGap`), else the offset is pulled again. A broker that
//! does not serve an offset is retried with backoff until the retry timeout. Compaction topics (`sparse`) have
//! gaps by design.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// What a slot's messages may weigh: most of the broker's 256 KiB per pull from memory
/// (maxTransferBytesOnMessageInMemory), the rest a margin for messages of uneven size.
pub const SLOT_BYTES: i64 = (256 << 10) * 9 / 10;
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The wait before retry `attempt` (0 for the first) of something that made no progress, for option
/// brokerRetryTimeoutMs: doubling from 50 ms up to 2 s.
pub fn backoff_delay(attempt: u32) -> Duration {
    FIRST_BACKOFF.saturating_mul(1u32.checked_shl(attempt.min(16)).unwrap_or(u32::MAX)).min(MAX_BACKOFF)
}

/// The error of the data-loss rule (docs/DESIGN.md §10) under failOnDataLoss=true, for every place that applies it:
/// `what` is gone, `remedy` says what failOnDataLoss=false would do instead.
pub fn data_loss_error(what: &str, remedy: &str) -> String {
    format!("{what}. Set failOnDataLoss=false to {remedy}.")
}

/// The log line of the data-loss rule under failOnDataLoss=false: `what` is gone, `action` says what is done.
pub fn data_loss_note(what: &str, action: &str) -> String {
    format!("{what}; {action} (failOnDataLoss=false)")
}

/// A pull answer's status, as the transports classify it (`rmq_spark.client.PullStatus` in Python).
#[cfg_attr(feature = "python", pyo3::pyclass(
    module = "rmq_spark._native",
    name = "PullStatus",
    rename_all = "SCREAMING_SNAKE_CASE",
    frozen,
    eq,
    hash
))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    Found,
    /// PULL_NOT_FOUND: nothing at the offset yet.
    NoNewMsg,
    /// PULL_RETRY_IMMEDIATELY for NO_MATCHED_MESSAGE: the filter skipped a span.
    NoMatchedMsg,
    /// Any other PULL_RETRY_IMMEDIATELY: pull the same offset again.
    RetryImmediately,
    /// PULL_OFFSET_MOVED: the offset is outside what the broker holds.
    OffsetIllegal,
}

impl Status {
    /// Its name, in messages and in Python (`PullStatus.FOUND`).
    pub fn name(self) -> &'static str {
        match self {
            Status::Found => "FOUND",
            Status::NoNewMsg => "NO_NEW_MSG",
            Status::NoMatchedMsg => "NO_MATCHED_MSG",
            Status::RetryImmediately => "RETRY_IMMEDIATELY",
            Status::OffsetIllegal => "OFFSET_ILLEGAL",
        }
    }
}

/// What a pull answer says about the queue; `nbytes` is the size of its message block (0 when the transport
/// delivers messages decoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub status: Status,
    pub next_begin: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    pub first_offset: i64,
    pub nbytes: usize,
}

/// A pull to send (or in flight): its slot `[low, high)` and the count asked; `tag` names it to the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pull {
    pub tag: i32,
    pub low: i64,
    pub high: i64,
    pub asked: i64,
}

/// What the answer to the head pull means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The answer's records with `low <= queueOffset < high` belong to the range.
    Take { low: i64, high: i64 },
    /// Nothing of the answer belongs to the range.
    Skip,
    /// Ask the queue's first offset now and hand it to `gap`.
    CheckGap,
    /// Call `retry`, wait as it says, and pull again (the text says why).
    Retry(String),
}

/// Why the read cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Messages of the range are gone (failOnDataLoss).
    Lost(String),
    /// The broker answered something no rule accepts.
    Refused(String),
    /// The broker did not serve the range until the retry timeout.
    Unavailable(String),
}

/// The settings of one range read.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The queue as errors name it, and its broker.
    pub queue: String,
    pub broker: String,
    pub start: i64,
    pub end: i64,
    pub depth: usize,
    pub slot: i64,
    /// A filter is in force (a TAG subset or SQL92): spans without matches are normal.
    pub filtered: bool,
    /// A compaction topic: gaps are normal.
    pub sparse: bool,
    pub fail_on_data_loss: bool,
    pub retry_timeout: Duration,
}

/// Waits between attempts that made no progress (`backoff_delay`), until the timeout has passed since the first of
/// them.
struct Backoff {
    timeout: Duration,
    since: Option<Instant>,
    attempts: u32,
}

impl Backoff {
    /// The wait before the next attempt, or the time waited so far once the timeout has passed.
    fn next(&mut self) -> Result<Duration, Duration> {
        let now = Instant::now();
        let elapsed = now - *self.since.get_or_insert(now);
        if elapsed >= self.timeout {
            return Err(elapsed);
        }
        let wait = backoff_delay(self.attempts);
        self.attempts += 1;
        Ok(wait.min(self.timeout - elapsed))
    }

    fn reset(&mut self) {
        self.since = None;
        self.attempts = 0;
    }
}

/// An answer waiting for the queue's first offset: the part of the slot it was about, where a `Take` after the
/// check would end (FOUND), the gap it showed, and its block size.
#[derive(Debug, Clone)]
struct GapCheck {
    pull: Pull,
    low: i64,
    next_begin: Option<i64>,
    what: String,
    nbytes: usize,
}

pub struct Cursor {
    s: Settings,
    slot: i64,
    max_slot: i64,
    full_answers: usize,
    last_short: i64,
    next_slot: i64,
    /// The unread end of the slot just answered: pulled before any other slot.
    rest: Option<(i64, i64)>,
    inflight: VecDeque<Pull>,
    next_tag: i32,
    gap: Option<GapCheck>,
    /// The first unread offset and why, once a retry is due.
    retry_at: Option<(i64, String)>,
    backoff: Backoff,
    lost: i64,
    notes: Vec<String>,
}

impl Cursor {
    pub fn new(s: Settings) -> Result<Cursor, String> {
        if s.start < 0 || s.end < s.start {
            return Err(format!("bad range [{}, {}) for {}", s.start, s.end, s.queue));
        }
        let slot = s.slot.max(1);
        let backoff = Backoff { timeout: s.retry_timeout, since: None, attempts: 0 };
        Ok(Cursor {
            slot,
            max_slot: slot,
            full_answers: 0,
            last_short: 0,
            next_slot: s.start,
            rest: None,
            inflight: VecDeque::new(),
            next_tag: 0,
            gap: None,
            retry_at: None,
            backoff,
            lost: 0,
            notes: Vec::new(),
            s: Settings { depth: s.depth.max(1), ..s },
        })
    }

    pub fn depth(&self) -> usize {
        self.s.depth
    }

    /// Offsets skipped for data loss (failOnDataLoss=false).
    pub fn lost(&self) -> i64 {
        self.lost
    }

    /// The log lines of the skips since the last call.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// The next pull to send now, if any (none while a gap check or a retry is due).
    pub fn next_pull(&mut self) -> Option<Pull> {
        if self.gap.is_some() || self.retry_at.is_some() {
            return None;
        }
        if let Some((low, high)) = self.rest.take() {
            let pull = self.pull(low, high);
            self.inflight.push_front(pull);
            return Some(pull);
        }
        if self.inflight.len() < self.s.depth && self.next_slot < self.s.end {
            let high = (self.next_slot + self.slot).min(self.s.end);
            let pull = self.pull(self.next_slot, high);
            self.inflight.push_back(pull);
            self.next_slot = high;
            return Some(pull);
        }
        None
    }

    /// Whether to send what `next_pull` gives now, when pulls are sent `group` at a time: a slot's rest or an
    /// empty pipeline cannot wait, other pulls wait until `group` of them are due.
    pub fn sends_due(&self, group: usize) -> bool {
        self.rest.is_some() || self.inflight.is_empty() || self.inflight.len() + group <= self.s.depth
    }

    fn pull(&mut self, low: i64, high: i64) -> Pull {
        self.next_tag = if self.next_tag == i32::MAX { 1 } else { self.next_tag + 1 };
        Pull { tag: self.next_tag, low, high, asked: self.slot.min(high - low) }
    }

    /// The pull whose answer comes next; None when the range is read (after `next_pull` gave all it had).
    pub fn head(&self) -> Option<Pull> {
        self.inflight.front().copied()
    }

    fn loose(&self) -> bool {
        self.s.filtered || self.s.sparse
    }

    /// Judges the answer to the head pull.
    pub fn judge(&mut self, a: &Answer) -> Result<Verdict, Fault> {
        let head = self.head().expect("an answer is judged while its pull is in flight");
        let (mut low, high) = (head.low, head.high);
        if a.status == Status::OffsetIllegal {
            if a.min_offset > low {
                let covered = self.lose(low, a.min_offset.min(high), a.min_offset)?;
                return Ok(self.complete(covered, None, 0));
            }
            if 0 <= a.max_offset && a.max_offset < low {
                let what = format!(
                    "{}: the broker's last offset is {}, below offset {low} of the range [{}, {}): the queue was \
                     reset (the topic deleted and recreated?), so messages [{low}, {high}) are gone",
                    self.s.queue, a.max_offset, self.s.start, self.s.end
                );
                let covered = self.lose_what(low, high, what)?;
                return Ok(self.complete(covered, None, 0));
            }
            return Err(Fault::Refused(format!(
                "{}: the broker refuses offset {low} (it holds [{}, {})); the queue may have been reset",
                self.s.queue, a.min_offset, a.max_offset
            )));
        }
        if a.min_offset > low {
            // any other answer: the head of the slot was deleted meanwhile
            low = self.lose(low, a.min_offset.min(high), a.min_offset)?;
            if low >= high {
                return Ok(self.complete(high, None, 0));
            }
        }
        match a.status {
            Status::Found => {
                if a.next_begin <= low {
                    return Err(Fault::Refused(format!(
                        "{}: the broker answered a pull at offset {low} with next offset {}; the queue does not \
                         advance",
                        self.s.queue, a.next_begin
                    )));
                }
                let what = if a.first_offset >= a.next_begin {
                    // a healthy broker returns records of [low, next) only: these come from another commit-log
                    // file, because the one under the consume queue is being deleted
                    Some(format!(
                        "the broker answered offsets [{low}, {}) with a record of offset {}",
                        a.next_begin, a.first_offset
                    ))
                } else if a.first_offset > low && !self.loose() {
                    Some(format!("the broker returned offsets from {}, not from {low}", a.first_offset))
                } else {
                    None
                };
                match what {
                    Some(what) => Ok(self.check_gap(head, low, Some(a.next_begin), what, a.nbytes)),
                    None => Ok(self.take(low, high, a.next_begin, a.nbytes)),
                }
            }
            Status::NoMatchedMsg if a.next_begin > low => {
                if self.loose() {
                    return Ok(self.complete(high.min(a.next_begin), None, 0));
                }
                let what = format!("the broker skipped offsets [{low}, {}) of an unfiltered read", a.next_begin);
                Ok(self.check_gap(head, low, None, what, 0))
            }
            // NO_NEW_MSG, RETRY_IMMEDIATELY (a slave that cannot serve the offset, a commit-log file being
            // deleted): the same offset again, until the broker serves it or proves it gone.
            status => Ok(self.due_retry(
                low,
                format!("{} at offset {low} (broker max offset {})", status.name(), a.max_offset),
            )),
        }
    }

    fn check_gap(&mut self, pull: Pull, low: i64, next_begin: Option<i64>, what: String, nbytes: usize) -> Verdict {
        self.gap = Some(GapCheck { pull, low, next_begin, what, nbytes });
        Verdict::CheckGap
    }

    /// Goes on after `CheckGap` with the queue's first offset now: the gap is lost when the queue starts past it,
    /// else its first offset is pulled again.
    pub fn gap(&mut self, first: i64) -> Result<Verdict, Fault> {
        let g = self.gap.take().expect("gap() follows a CheckGap verdict");
        if first <= g.low {
            return Ok(self.due_retry(g.low, format!("{}, while its first offset is {first}", g.what)));
        }
        let high = g.pull.high;
        let covered = self.lose(g.low, first.min(high), first)?;
        match g.next_begin {
            Some(next_begin) if covered < high => Ok(self.take(covered, high, next_begin, g.nbytes)),
            _ => Ok(self.complete(covered, None, 0)),
        }
    }

    /// Records `[low, min(high, next_begin))` of the answer are the range's.
    fn take(&mut self, low: i64, high: i64, next_begin: i64, nbytes: usize) -> Verdict {
        let upto = high.min(next_begin);
        self.complete(low.max(upto), Some((low, upto)), nbytes)
    }

    /// The head pull is done: its slot is read up to `covered`; `taken` is the part of the answer to keep.
    fn complete(&mut self, covered: i64, taken: Option<(i64, i64)>, nbytes: usize) -> Verdict {
        let head = self.inflight.pop_front().expect("a pull in flight");
        self.backoff.reset();
        if covered < head.high {
            self.rest = Some((covered, head.high));
        }
        match taken {
            Some((low, high)) => {
                if nbytes > 0 && !self.loose() && high > low {
                    self.fit(head.asked, high - low, nbytes as i64);
                }
                Verdict::Take { low, high }
            }
            None => Verdict::Skip,
        }
    }

    /// Sizes the next slots after an answer of `got` of `asked` offsets in `nbytes`.
    fn fit(&mut self, asked: i64, got: i64, nbytes: i64) {
        let fits = (SLOT_BYTES * got / nbytes).max(1);
        if got < asked {
            // the broker stopped short: by bytes, or by count (a read from disk); the same count twice is the
            // broker's limit, not a one-off (a file's end)
            if got == self.last_short {
                self.max_slot = got;
            }
            self.last_short = got;
            self.slot = got.min(fits).max(1);
            self.full_answers = 0;
            return;
        }
        self.full_answers += 1;
        if self.full_answers >= self.s.depth {
            // a run of full answers: try a larger slot again
            self.slot = self.max_slot.min(fits).min(self.slot + (self.slot / 4).max(1));
            self.full_answers = 0;
        } else {
            self.slot = self.slot.min(fits);
        }
    }

    /// The pull of the head failed (the connection broke, the broker asked to back off): pull the first unread
    /// offset again.
    pub fn failed(&mut self, why: String) -> Verdict {
        let low = match (self.rest, self.inflight.front()) {
            (Some((low, _)), _) => low,
            (None, Some(head)) => head.low,
            (None, None) => self.next_slot,
        };
        self.gap = None;
        self.due_retry(low, why)
    }

    fn due_retry(&mut self, low: i64, why: String) -> Verdict {
        self.retry_at = Some((low, why.clone()));
        Verdict::Retry(why)
    }

    /// After `Retry`: how long to wait before pulling again, and the tags of the pulls in flight, dropped (their
    /// answers are of no use any more). Unavailable once the retry timeout has passed without progress.
    pub fn retry(&mut self) -> Result<(Duration, Vec<i32>), Fault> {
        let (low, why) = self.retry_at.clone().expect("retry() follows a Retry verdict");
        match self.backoff.next() {
            Ok(wait) => Ok((wait, self.rewind_to(low))),
            Err(waited) => Err(Fault::Unavailable(format!(
                "{}: broker {} did not serve offset {low} for {:.0} s (last: {why}); gave up after \
                 brokerRetryTimeoutMs={:.0}. Spark retries the task; raise that option to wait longer for a broker \
                 restart or fail-over",
                self.s.queue,
                self.s.broker,
                waited.as_secs_f64(),
                self.s.retry_timeout.as_secs_f64() * 1000.0
            ))),
        }
    }

    /// Pulls again from the first unread offset at once (another member of the broker group is to serve them);
    /// the tags of the pulls in flight, dropped.
    pub fn rewind(&mut self) -> Vec<i32> {
        let low = match self.retry_at.take() {
            Some((low, _)) => low,
            None => self.rest.map_or_else(|| self.head().map_or(self.next_slot, |p| p.low), |r| r.0),
        };
        self.rewind_to(low)
    }

    fn rewind_to(&mut self, low: i64) -> Vec<i32> {
        self.retry_at = None;
        self.gap = None;
        self.rest = None;
        self.next_slot = low;
        self.inflight.drain(..).map(|p| p.tag).collect()
    }

    fn lose(&mut self, low: i64, upto: i64, available: i64) -> Result<i64, Fault> {
        let what = format!(
            "{}: messages [{low}, {upto}) are gone from the broker (its first available offset is {available}); \
             they were deleted before they were read",
            self.s.queue
        );
        self.lose_what(low, upto, what)
    }

    /// Offsets `[low, upto)` are gone: a fault under failOnDataLoss, else counted, noted and skipped.
    fn lose_what(&mut self, low: i64, upto: i64, what: String) -> Result<i64, Fault> {
        if self.s.fail_on_data_loss {
            return Err(Fault::Lost(data_loss_error(&what, "skip them (they are counted and logged)")));
        }
        self.lost += upto - low;
        self.notes.push(data_loss_note(&what, &format!("skipping {} offsets", upto - low)));
        Ok(upto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cursor(start: i64, end: i64, depth: usize, slot: i64) -> Cursor {
        cursor_waiting(start, end, depth, slot, Duration::from_secs(5))
    }

    fn cursor_waiting(start: i64, end: i64, depth: usize, slot: i64, retry_timeout: Duration) -> Cursor {
        Cursor::new(Settings {
            queue: "Q".into(),
            broker: "b".into(),
            start,
            end,
            depth,
            slot,
            filtered: false,
            sparse: false,
            fail_on_data_loss: false,
            retry_timeout,
        })
        .unwrap()
    }

    fn found(next_begin: i64, first_offset: i64, nbytes: usize) -> Answer {
        Answer { status: Status::Found, next_begin, min_offset: 0, max_offset: 1000, first_offset, nbytes }
    }

    fn drain(c: &mut Cursor) -> Vec<(i64, i64)> {
        std::iter::from_fn(|| c.next_pull()).map(|p| (p.low, p.asked)).collect()
    }

    #[test]
    fn pipelines_slots_and_pulls_a_short_answers_rest_first() {
        let mut c = cursor(0, 100, 3, 32);
        assert_eq!(drain(&mut c), vec![(0, 32), (32, 32), (64, 32)]);
        // the broker served 10 of the first 32 offsets (10 x 3000 bytes)
        assert_eq!(c.judge(&found(10, 0, 30_000)), Ok(Verdict::Take { low: 0, high: 10 }));
        assert_eq!(drain(&mut c), vec![(10, 10)]); // the rest of the slot, before slot 96
        assert_eq!(c.head().unwrap().low, 10);
    }

    #[test]
    fn a_gap_is_checked_and_lost_only_when_the_queue_moved_past_it() {
        let mut c = cursor(0, 64, 1, 32);
        drain(&mut c);
        assert_eq!(c.judge(&found(40, 8, 100)), Ok(Verdict::CheckGap));
        assert_eq!(c.next_pull(), None); // nothing is sent while the check is due
        assert!(matches!(c.gap(0), Ok(Verdict::Retry(why)) if why.contains("while its first offset is 0")));
        let (_, dropped) = c.retry().unwrap();
        assert_eq!(dropped, vec![1]);
        drain(&mut c);
        assert_eq!(c.judge(&found(40, 8, 100)), Ok(Verdict::CheckGap));
        assert_eq!(c.gap(8), Ok(Verdict::Take { low: 8, high: 32 }));
        assert_eq!(c.lost(), 8);
        assert!(c.take_notes()[0].contains("messages [0, 8) are gone"));
    }

    #[test]
    fn pulls_are_due_in_groups_but_a_rest_or_an_empty_pipeline_at_once() {
        let mut c = cursor(0, 1000, 8, 32);
        assert!(c.sends_due(4));
        assert_eq!(drain(&mut c).len(), 8);
        for _ in 0..3 {
            c.judge(&found(c.head().unwrap().high, c.head().unwrap().low, 3200)).unwrap();
            assert!(!c.sends_due(4));
        }
        c.judge(&found(c.head().unwrap().high, c.head().unwrap().low, 3200)).unwrap();
        assert!(c.sends_due(4));
        assert_eq!(drain(&mut c).len(), 4);
        let head = c.head().unwrap();
        c.judge(&found(head.low + 10, head.low, 1000)).unwrap(); // a short answer: its rest cannot wait
        assert!(c.sends_due(4));
        assert_eq!(drain(&mut c)[0].0, head.low + 10);
    }

    #[test]
    fn tags_wrap_within_positive_int32() {
        let mut c = cursor(0, 96, 3, 32);
        c.next_tag = i32::MAX - 1;
        let tags: Vec<i32> = std::iter::from_fn(|| c.next_pull()).map(|p| p.tag).collect();
        assert_eq!(tags, vec![i32::MAX, 1, 2]);
    }

    #[test]
    fn a_broker_that_never_serves_is_unavailable_at_the_deadline() {
        let mut c = cursor_waiting(5, 10, 1, 32, Duration::from_millis(1));
        drain(&mut c);
        let answer = Answer { status: Status::RetryImmediately, ..found(5, -1, 0) };
        assert!(matches!(c.judge(&answer), Ok(Verdict::Retry(_))));
        let (wait, _) = c.retry().unwrap();
        assert!(wait <= Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(2));
        drain(&mut c);
        assert!(matches!(c.judge(&answer), Ok(Verdict::Retry(_))));
        match c.retry() {
            Err(Fault::Unavailable(text)) => assert!(text.contains("did not serve offset 5"), "{text}"),
            other => panic!("{other:?}"),
        }
    }
}
