//! A range read's pulls over a pipe of its own: requests rendered from a template, answers read, judged by the
//! range's cursor and gathered into columns, with no return to the caller between pulls. What needs the caller
//! (a batch to hand on, a gap to check against the queue's first offset, a wait, another broker member, a
//! response that is not a pull answer, records the gatherer does not take) ends the run with a `Step`.

use std::time::Duration;

use crate::columns::{AddError, Gathered};
use crate::cursor::{Answer, Cursor, Fault, Status, Verdict};
use crate::frame::{Header, Template};
use crate::pipe::{Pipe, PipeError, Response};

/// RemotingCommand response codes of a pull.
pub const SUCCESS: i32 = 0;
pub const PULL_NOT_FOUND: i32 = 19;
pub const PULL_RETRY_IMMEDIATELY: i32 = 20;
pub const PULL_OFFSET_MOVED: i32 = 21;
/// The remark of a PULL_RETRY_IMMEDIATELY that means "the filter matched nothing here".
pub const NO_MATCHED_MESSAGE: &str = "NO_MATCHED_MESSAGE";
/// Where a stored record keeps its queue offset (after totalSize, magicCode, bodyCRC, queueId, flag).
const QUEUE_OFFSET_AT: usize = 20;

/// The status of the response to a pull at `offset`, by its code and remark; None for a code that is not a pull
/// status (an error for the caller to map). PULL_RETRY_IMMEDIATELY is a filter span only when the broker says
/// NO_MATCHED_MESSAGE and moved on; any other cause (a slave that cannot serve the offset, a commit-log file being
/// deleted) means the same offset must be pulled again.
pub fn status_of(code: i32, remark: Option<&str>, next_begin: i64, offset: i64) -> Option<Status> {
    Some(match code {
        SUCCESS => Status::Found,
        PULL_NOT_FOUND => Status::NoNewMsg,
        PULL_RETRY_IMMEDIATELY
            if next_begin > offset && matches!(remark, None | Some("") | Some(NO_MATCHED_MESSAGE)) =>
        {
            Status::NoMatchedMsg
        }
        PULL_RETRY_IMMEDIATELY => Status::RetryImmediately,
        PULL_OFFSET_MOVED => Status::OffsetIllegal,
        _ => return None,
    })
}

/// The queue offset of the first record of a pulled block (-1 when the block is too short to hold one).
pub fn first_offset(block: &[u8]) -> i64 {
    match block.get(QUEUE_OFFSET_AT..QUEUE_OFFSET_AT + 8) {
        Some(bytes) => i64::from_be_bytes(bytes.try_into().unwrap()),
        None => -1,
    }
}

fn field(header: &Header, name: &str, absent: i64) -> Option<i64> {
    match header.ext.iter().find(|(key, _)| key == name) {
        Some((_, value)) => value.parse().ok(),
        None => Some(absent),
    }
}

/// The answer of the response to a pull at `offset`, and the broker id it suggests for the next pull; None when
/// it is not a pull answer or a field is not a plain integer (the caller reads it and says what is wrong).
pub fn answer_of(header: &Header, body: &[u8], offset: i64) -> Option<(Answer, i64)> {
    let next_begin = field(header, "nextBeginOffset", -1)?;
    let status = status_of(header.code, header.remark.as_deref(), next_begin, offset)?;
    let found = status == Status::Found;
    let answer = Answer {
        status,
        next_begin,
        min_offset: field(header, "minOffset", -1)?,
        max_offset: field(header, "maxOffset", -1)?,
        first_offset: if found { first_offset(body) } else { -1 },
        nbytes: if found { body.len() } else { 0 },
    };
    Some((answer, field(header, "suggestWhichBrokerId", 0)?))
}

/// Why a run ended.
pub enum Step {
    /// The range is read.
    Done,
    /// The gatherer gained the rows or bytes asked for.
    Full,
    /// Records `[low, high)` of this response are the range's, for the caller to take (there is no gatherer).
    Take { low: i64, high: i64, response: Response },
    /// The range's records of an answer do not read (the gatherer took nothing of them).
    Unreadable(AddError),
    /// The cursor asks for the queue's first offset (`Cursor::gap`); the response may still be taken after it.
    CheckGap(Response),
    /// The cursor asks for a retry (`Cursor::retry`).
    Retry(String),
    /// The broker suggests member `id` of its group for the next pulls.
    Suggest(i64),
    /// The pipe failed (and is closed).
    Failed(PipeError),
    /// A response to the pull at `offset` that is not a plain pull answer (an error code, an odd field).
    Answer { offset: i64, response: Response },
    Fault(Fault),
}

/// How much a run gathers before it ends with `Full`.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub rows: usize,
    pub bytes: usize,
}

/// Sends the cursor's pulls and takes their answers until a step needs the caller. `suggested` is the broker id
/// the pipe's member was chosen by; each answer must wait no longer than `timeout`.
pub fn run(
    cursor: &mut Cursor,
    pipe: &mut Pipe,
    template: &mut Template,
    mut gathered: Option<&mut Gathered>,
    limits: Limits,
    timeout: Duration,
    suggested: i64,
) -> Step {
    let start = gathered.as_ref().map_or((0, 0), |g| (g.rows(), g.bytes()));
    let group = (cursor.depth() / 2).max(1);
    let mut frames = Vec::new();
    let mut tags = Vec::new();
    loop {
        frames.clear();
        tags.clear();
        if cursor.sends_due(group) {
            while let Some(pull) = cursor.next_pull() {
                if let Err(why) = template.render_into(&[pull.low, pull.asked], pull.tag as i64, &mut frames) {
                    return Step::Failed(PipeError::Protocol(why));
                }
                tags.push(pull.tag);
            }
        }
        if !tags.is_empty() {
            if let Err(e) = pipe.send_frames(&frames, &tags, timeout) {
                return Step::Failed(e);
            }
        }
        let Some(head) = cursor.head() else { return Step::Done };
        let response = match pipe.receive(head.tag, timeout) {
            Ok(response) => response,
            Err(e) => return Step::Failed(e),
        };
        let Some((answer, suggest)) = answer_of(&response.header, response.body(), head.low) else {
            return Step::Answer { offset: head.low, response };
        };
        match cursor.judge(&answer) {
            Err(fault) => return Step::Fault(fault),
            Ok(Verdict::Take { low, high }) => {
                match gathered.as_deref_mut() {
                    Some(g) => {
                        if let Err(e) = g.add(response.body(), low, high) {
                            return Step::Unreadable(e);
                        }
                    }
                    None => return Step::Take { low, high, response },
                }
            }
            Ok(Verdict::Skip) => {}
            Ok(Verdict::CheckGap) => return Step::CheckGap(response),
            Ok(Verdict::Retry(why)) => return Step::Retry(why),
        }
        if suggest != suggested {
            return Step::Suggest(suggest);
        }
        if let Some(g) = &gathered {
            if g.rows() - start.0 >= limits.rows || g.bytes() - start.1 >= limits.bytes {
                return Step::Full;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_immediately_is_a_filter_span_only_when_the_broker_says_so_and_moved_on() {
        assert_eq!(status_of(20, Some(NO_MATCHED_MESSAGE), 40, 32), Some(Status::NoMatchedMsg));
        assert_eq!(status_of(20, None, 40, 32), Some(Status::NoMatchedMsg));
        assert_eq!(status_of(20, Some("MESSAGE_WAS_REMOVING"), 40, 32), Some(Status::RetryImmediately));
        assert_eq!(status_of(20, Some(NO_MATCHED_MESSAGE), 32, 32), Some(Status::RetryImmediately));
        assert_eq!(status_of(2, Some("busy"), 0, 0), None);
    }

    #[test]
    fn an_odd_field_leaves_the_answer_to_the_caller() {
        let header = |value: &str| Header {
            code: 0,
            language: "JAVA".into(),
            version: 1,
            opaque: 1,
            flag: 1,
            remark: None,
            ext: vec![("nextBeginOffset".into(), value.into()), ("minOffset".into(), "0".into())],
            serialize_type: 0,
            body_start: 0,
        };
        let (answer, suggest) = answer_of(&header("64"), &[], 32).unwrap();
        assert_eq!((answer.next_begin, answer.min_offset, answer.max_offset, answer.first_offset), (64, 0, -1, -1));
        assert_eq!(suggest, 0);
        assert!(answer_of(&header("6x"), &[], 32).is_none());
    }
}
