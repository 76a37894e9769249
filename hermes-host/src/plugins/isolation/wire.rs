//! The framing between the host and a plugin worker: one length-prefixed binary frame per
//! message over a socket pair. Not JSON lines: payloads hold arbitrary text, newlines and
//! invalid UTF-8 included, and a frame's length is known before it is read, so an oversized
//! or truncated frame is detected without trusting anything the worker sent.
//!
//! A frame is `len: u32 LE` (of what follows), `kind: u8`, then the body. Strings are
//! `u32 LE` length plus bytes. The worker speaks first with [`Kind::Hello`], carrying
//! [`VERSION`]; a different version is refused.

use std::io::{self, Read, Write};

/// The wire version; the host refuses a worker that says another.
pub const VERSION: u32 = 1;

/// The largest frame either side accepts (a payload with a long conversation history fits).
pub const MAX_FRAME: usize = 64 << 20;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Worker → host, once: version, register error, the callbacks registered.
    Hello = 1,
    /// Host → worker: fire callback `index` with a hook name and fields.
    Fire = 2,
    /// Worker → host: a callback's answer.
    Answer = 3,
    /// Worker → host, during a firing: invoke a host capability (name, JSON arguments).
    Call = 4,
    /// Host → worker: the capability's result (ok flag, JSON answer or error text).
    CallResult = 5,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Hello),
            2 => Some(Kind::Fire),
            3 => Some(Kind::Answer),
            4 => Some(Kind::Call),
            5 => Some(Kind::CallResult),
            _ => None,
        }
    }
}

/// A field value, owned.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// No value.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// Text.
    Str(String),
    /// JSON text.
    Json(String),
}

/// A callback's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// No opinion.
    None,
    /// A reply: action, text, json.
    Reply(String, String, String),
    /// The callback failed (an error or a caught panic).
    Error(String),
}

/// What the worker says first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hello {
    /// `register`'s error, when it failed (or the library did not load).
    pub error: Option<String>,
    /// `(hook, callback name)` in registration order.
    pub callbacks: Vec<(String, String)>,
}

impl Hello {
    /// Decodes a hello body, checking the version.
    ///
    /// # Errors
    ///
    /// Another wire version, or a malformed body.
    pub fn decode(r: &mut Reader) -> Result<Hello, WireError> {
        let version = r.u32()?;
        if version != VERSION {
            return Err(WireError::Malformed(format!(
                "wire version {version}, this host speaks {VERSION}"
            )));
        }
        let error = r.str()?;
        let n = r.u32()? as usize;
        let mut callbacks = Vec::new();
        for _ in 0..n {
            callbacks.push((r.str()?, r.str()?));
        }
        r.end()?;
        Ok(Hello {
            error: (!error.is_empty()).then_some(error),
            callbacks,
        })
    }
}

/// One firing the host asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct Fire {
    /// The callback's index in the hello's list.
    pub index: usize,
    /// The hook fired.
    pub hook: String,
    /// The payload's fields.
    pub fields: Vec<(String, Value)>,
}

impl Fire {
    /// Decodes a fire body.
    ///
    /// # Errors
    ///
    /// A malformed body.
    pub fn decode(r: &mut Reader) -> Result<Fire, WireError> {
        let index = r.u32()? as usize;
        let hook = r.str()?;
        let n = r.u32()? as usize;
        let mut fields = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            fields.push((r.str()?, r.value()?));
        }
        r.end()?;
        Ok(Fire {
            index,
            hook,
            fields,
        })
    }
}

/// A message body being written.
#[derive(Default)]
pub struct Body(Vec<u8>);

impl Body {
    /// Appends a `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends a string.
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    /// Appends a byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    /// Appends a field value.
    pub fn value(&mut self, v: &Value) -> &mut Self {
        match v {
            Value::Null => self.0.push(0),
            Value::Bool(b) => {
                self.0.push(1);
                self.0.push(u8::from(*b));
            }
            Value::Int(i) => {
                self.0.push(2);
                self.0.extend_from_slice(&i.to_le_bytes());
            }
            Value::Float(f) => {
                self.0.push(3);
                self.0.extend_from_slice(&f.to_le_bytes());
            }
            Value::Str(s) => {
                self.0.push(4);
                self.str(s);
            }
            Value::Json(s) => {
                self.0.push(5);
                self.str(s);
            }
        }
        self
    }
    /// Appends an answer.
    pub fn answer(&mut self, a: &Answer) -> &mut Self {
        match a {
            Answer::None => self.0.push(0),
            Answer::Reply(action, text, json) => {
                self.0.push(1);
                self.str(action).str(text).str(json);
            }
            Answer::Error(e) => {
                self.0.push(2);
                self.str(e);
            }
        }
        self
    }
}

/// Writes one frame.
///
/// # Errors
///
/// The write error (a broken pipe when the peer is gone), or `InvalidInput` for a body
/// above [`MAX_FRAME`].
pub fn write_frame(out: &mut impl Write, kind: Kind, body: &Body) -> io::Result<()> {
    if body.0.len() + 1 > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "frame too large",
        ));
    }
    let len = (body.0.len() + 1) as u32;
    let mut frame = Vec::with_capacity(body.0.len() + 5);
    frame.extend_from_slice(&len.to_le_bytes());
    frame.push(kind as u8);
    frame.extend_from_slice(&body.0);
    out.write_all(&frame)?;
    out.flush()
}

/// Why a frame could not be read.
#[derive(Debug)]
pub enum WireError {
    /// The peer closed the connection before a whole frame.
    Closed,
    /// Reading failed (a timeout shows as `WouldBlock`/`TimedOut`).
    Io(io::Error),
    /// The frame broke the protocol; the text says how.
    Malformed(String),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Closed => write!(f, "closed the connection"),
            WireError::Io(e) => write!(f, "{e}"),
            WireError::Malformed(why) => write!(f, "sent a malformed frame ({why})"),
        }
    }
}

/// Reads one frame: its kind and a reader over its body.
///
/// # Errors
///
/// [`WireError`]: a closed peer, an IO error, or a frame that is empty, oversized or of an
/// unknown kind.
pub fn read_frame(input: &mut impl Read) -> Result<(Kind, Reader), WireError> {
    let mut len = [0u8; 4];
    read_all(input, &mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(WireError::Malformed(format!(
            "length {len}, allowed 1 to {MAX_FRAME}"
        )));
    }
    // Grown as the bytes arrive rather than allocated at the claimed length: a peer that
    // sends a length and dies costs what it sent, not MAX_FRAME.
    let mut frame = Vec::with_capacity(len.min(64 << 10));
    match input.take(len as u64).read_to_end(&mut frame) {
        Ok(n) if n == len => {}
        Ok(_) => return Err(WireError::Closed),
        Err(e) => return Err(WireError::Io(e)),
    }
    let kind = Kind::from_u8(frame[0])
        .ok_or_else(|| WireError::Malformed(format!("unknown kind {}", frame[0])))?;
    frame.remove(0);
    Ok((
        kind,
        Reader {
            bytes: frame,
            at: 0,
        },
    ))
}

fn read_all(input: &mut impl Read, buf: &mut [u8]) -> Result<(), WireError> {
    match input.read_exact(buf) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(WireError::Closed),
        Err(e) => Err(WireError::Io(e)),
    }
}

/// Reads the parts of a frame's body, each checked against what is left.
pub struct Reader {
    bytes: Vec<u8>,
    at: usize,
}

impl Reader {
    fn take(&mut self, n: usize) -> Result<&[u8], WireError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| WireError::Malformed("truncated body".into()))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }
    /// A `u32`.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// A byte.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    /// A string (invalid UTF-8 is replaced, never trusted).
    pub fn str(&mut self) -> Result<String, WireError> {
        let n = self.u32()? as usize;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
    /// A field value.
    pub fn value(&mut self) -> Result<Value, WireError> {
        let tag = self.take(1)?[0];
        Ok(match tag {
            0 => Value::Null,
            1 => Value::Bool(self.take(1)?[0] != 0),
            2 => {
                let b = self.take(8)?;
                Value::Int(i64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
            }
            3 => {
                let b = self.take(8)?;
                Value::Float(f64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
            }
            4 => Value::Str(self.str()?),
            5 => Value::Json(self.str()?),
            other => return Err(WireError::Malformed(format!("unknown value tag {other}"))),
        })
    }
    /// An answer.
    pub fn answer(&mut self) -> Result<Answer, WireError> {
        let tag = self.take(1)?[0];
        Ok(match tag {
            0 => Answer::None,
            1 => Answer::Reply(self.str()?, self.str()?, self.str()?),
            2 => Answer::Error(self.str()?),
            other => return Err(WireError::Malformed(format!("unknown answer tag {other}"))),
        })
    }
    /// Fails unless the whole body was read.
    pub fn end(&self) -> Result<(), WireError> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(WireError::Malformed(format!(
                "{} trailing byte(s)",
                self.bytes.len() - self.at
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_answers_round_trip_through_a_frame() {
        let mut body = Body::default();
        body.u32(7)
            .str("pre_tool_call")
            .value(&Value::Str("line\nbreak".into()))
            .value(&Value::Int(-3))
            .value(&Value::Float(1.5))
            .value(&Value::Null)
            .answer(&Answer::Reply("block".into(), "no".into(), String::new()));
        let mut wire = Vec::new();
        write_frame(&mut wire, Kind::Fire, &body).unwrap();
        let (kind, mut r) = read_frame(&mut wire.as_slice()).unwrap();
        assert_eq!(kind, Kind::Fire);
        assert_eq!(r.u32().unwrap(), 7);
        assert_eq!(r.str().unwrap(), "pre_tool_call");
        assert_eq!(r.value().unwrap(), Value::Str("line\nbreak".into()));
        assert_eq!(r.value().unwrap(), Value::Int(-3));
        assert_eq!(r.value().unwrap(), Value::Float(1.5));
        assert_eq!(r.value().unwrap(), Value::Null);
        assert_eq!(
            r.answer().unwrap(),
            Answer::Reply("block".into(), "no".into(), String::new())
        );
        r.end().unwrap();
    }

    #[test]
    fn oversized_truncated_and_unknown_frames_are_malformed() {
        let huge = ((MAX_FRAME + 1) as u32).to_le_bytes();
        assert!(matches!(
            read_frame(&mut &huge[..]),
            Err(WireError::Malformed(_))
        ));
        assert!(matches!(
            read_frame(&mut &[5u8, 0, 0][..]),
            Err(WireError::Closed)
        ));
        assert!(matches!(
            read_frame(&mut &[1u8, 0, 0, 0, 99][..]),
            Err(WireError::Malformed(_))
        ));
        // A string that claims more bytes than the frame holds.
        let mut body = Body::default();
        body.u32(1000);
        let mut wire = Vec::new();
        write_frame(&mut wire, Kind::Answer, &body).unwrap();
        let (_, mut r) = read_frame(&mut wire.as_slice()).unwrap();
        assert!(matches!(r.str(), Err(WireError::Malformed(_))));
    }
}
