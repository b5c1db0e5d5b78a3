//! The primitives of the packed formats of the C ABI (`include/cdplace.h`), little-endian:
//! `str` = u32 byte length + UTF-8 bytes, `ostr`/`ou32`/`oi32`/`oi64` = u8 0 | u8 1 and the value,
//! booleans as u8 0 | 1. [`Reader`] names the field and byte offset of whatever it cannot read;
//! the batch, overlay and decision codecs are built on it.

/// Why a field could not be read, and where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireError {
    pub offset: usize,
    pub message: String,
}

pub(crate) type WireResult<T> = Result<T, WireError>;

/// Reads the packed primitives from a byte slice, front to back.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// The offset of the next byte.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn fail<T>(&self, at: usize, message: String) -> WireResult<T> {
        Err(WireError { offset: at, message })
    }

    fn take(&mut self, n: usize, field: &str) -> WireResult<&'a [u8]> {
        if self.remaining() < n {
            let left = self.remaining();
            return self.fail(self.pos, format!("{field}: truncated (needs {n} bytes, {left} left)"));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Exactly these bytes (a magic number).
    pub fn expect(&mut self, magic: &[u8], field: &str) -> WireResult<()> {
        let at = self.pos;
        let got = self.take(magic.len(), field)?;
        if got != magic {
            let (want, got) = (String::from_utf8_lossy(magic), String::from_utf8_lossy(got));
            return self.fail(at, format!("{field}: expected {want:?}, got {got:?}"));
        }
        Ok(())
    }

    pub fn u8(&mut self, field: &str) -> WireResult<u8> {
        Ok(self.take(1, field)?[0])
    }

    pub fn bool(&mut self, field: &str) -> WireResult<bool> {
        let at = self.pos;
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            b => self.fail(at, format!("{field}: {b} is not a boolean (0 or 1)")),
        }
    }

    pub fn u32(&mut self, field: &str) -> WireResult<u32> {
        let b = self.take(4, field)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn i32(&mut self, field: &str) -> WireResult<i32> {
        let b = self.take(4, field)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn i64(&mut self, field: &str) -> WireResult<i64> {
        let b = self.take(8, field)?;
        Ok(i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    pub fn str(&mut self, field: &str) -> WireResult<String> {
        let at = self.pos;
        let n = self.u32(field)? as usize;
        if n > self.remaining() {
            let left = self.remaining();
            return self.fail(at, format!("{field}: string of {n} bytes, only {left} left"));
        }
        let bytes = self.take(n, field)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(e) => self.fail(at, format!("{field}: not UTF-8 ({e})")),
        }
    }

    fn tag(&mut self, field: &str) -> WireResult<bool> {
        let at = self.pos;
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            b => self.fail(at, format!("{field}: option tag {b} is not 0 or 1")),
        }
    }

    pub fn ostr(&mut self, field: &str) -> WireResult<Option<String>> {
        if self.tag(field)? { self.str(field).map(Some) } else { Ok(None) }
    }

    pub fn ou32(&mut self, field: &str) -> WireResult<Option<u32>> {
        if self.tag(field)? { self.u32(field).map(Some) } else { Ok(None) }
    }

    pub fn oi32(&mut self, field: &str) -> WireResult<Option<i32>> {
        if self.tag(field)? { self.i32(field).map(Some) } else { Ok(None) }
    }

    pub fn oi64(&mut self, field: &str) -> WireResult<Option<i64>> {
        if self.tag(field)? { self.i64(field).map(Some) } else { Ok(None) }
    }
}

/// Writes the packed primitives.
pub(crate) trait Writer {
    fn put_u8(&mut self, v: u8);
    fn put_bool(&mut self, v: bool);
    fn put_u32(&mut self, v: u32);
    fn put_i32(&mut self, v: i32);
    fn put_i64(&mut self, v: i64);
    fn put_str(&mut self, s: &str);
    fn put_ostr(&mut self, s: Option<&str>);
    fn put_ou32(&mut self, v: Option<u32>);
    fn put_oi32(&mut self, v: Option<i32>);
    fn put_oi64(&mut self, v: Option<i64>);
}

impl Writer for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_bool(&mut self, v: bool) {
        self.push(u8::from(v));
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_i32(&mut self, v: i32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_i64(&mut self, v: i64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_str(&mut self, s: &str) {
        let n = u32::try_from(s.len()).expect("a packed string fits u32");
        self.put_u32(n);
        self.extend_from_slice(s.as_bytes());
    }
    fn put_ostr(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.push(1);
                self.put_str(s);
            }
            None => self.push(0),
        }
    }
    fn put_ou32(&mut self, v: Option<u32>) {
        match v {
            Some(v) => {
                self.push(1);
                self.put_u32(v);
            }
            None => self.push(0),
        }
    }
    fn put_oi32(&mut self, v: Option<i32>) {
        match v {
            Some(v) => {
                self.push(1);
                self.put_i32(v);
            }
            None => self.push(0),
        }
    }
    fn put_oi64(&mut self, v: Option<i64>) {
        match v {
            Some(v) => {
                self.push(1);
                self.put_i64(v);
            }
            None => self.push(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_round_trip() {
        let mut b = Vec::new();
        b.put_u8(7);
        b.put_bool(true);
        b.put_u32(0xDEAD_BEEF);
        b.put_i32(-5);
        b.put_i64(-1_700_000_000_000);
        b.put_str("héllo");
        b.put_ostr(None);
        b.put_ostr(Some(""));
        b.put_ou32(Some(3));
        b.put_oi32(Some(i32::MIN));
        b.put_oi32(None);
        b.put_oi64(Some(i64::MIN));
        b.put_oi64(None);
        let mut r = Reader::new(&b);
        assert_eq!(r.u8("a"), Ok(7));
        assert_eq!(r.bool("b"), Ok(true));
        assert_eq!(r.u32("c"), Ok(0xDEAD_BEEF));
        assert_eq!(r.i32("d"), Ok(-5));
        assert_eq!(r.i64("e"), Ok(-1_700_000_000_000));
        assert_eq!(r.str("f").as_deref(), Ok("héllo"));
        assert_eq!(r.ostr("g"), Ok(None));
        assert_eq!(r.ostr("h"), Ok(Some(String::new())));
        assert_eq!(r.ou32("i"), Ok(Some(3)));
        assert_eq!(r.oi32("j"), Ok(Some(i32::MIN)));
        assert_eq!(r.oi32("k"), Ok(None));
        assert_eq!(r.oi64("l"), Ok(Some(i64::MIN)));
        assert_eq!(r.oi64("m"), Ok(None));
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn errors_name_field_and_offset() {
        let mut r = Reader::new(&[1, 0, 0]);
        assert_eq!(
            r.u32("gpus"),
            Err(WireError { offset: 0, message: "gpus: truncated (needs 4 bytes, 3 left)".into() })
        );
        let mut r = Reader::new(&[9]);
        assert_eq!(r.ostr("nodeName").unwrap_err().message, "nodeName: option tag 9 is not 0 or 1");
        let mut r = Reader::new(&[0, 2]);
        assert_eq!(r.bool("a"), Ok(false));
        assert_eq!(
            r.bool("daemon"),
            Err(WireError { offset: 1, message: "daemon: 2 is not a boolean (0 or 1)".into() })
        );
        let mut r = Reader::new(&[3, 0, 0, 0, b'a', 0xff, b'b']);
        assert_eq!(
            r.str("name").unwrap_err().message,
            "name: not UTF-8 (invalid utf-8 sequence of 1 bytes from index 1)"
        );
        let mut r = Reader::new(&[200, 0, 0, 0, b'a']);
        assert_eq!(r.str("name").unwrap_err().message, "name: string of 200 bytes, only 1 left");
        let mut r = Reader::new(b"CDP1");
        assert_eq!(r.expect(b"CDF1", "magic").unwrap_err().message, "magic: expected \"CDF1\", got \"CDP1\"");
    }
}
