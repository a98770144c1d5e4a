//! Measurement documents written straight as BSON bytes, for the HTTP write paths: a
//! batch of points becomes one buffer of consecutive documents that the time-series
//! insert reads in place, with no `bson::Document` (a map of owned strings per point)
//! built in between.

use bson::RawDocument;

/// A key BSON cannot hold (it has a NUL byte, which ends a key).
#[derive(Debug, PartialEq)]
pub struct BadKey;

/// Consecutive BSON documents in one buffer.
#[derive(Default)]
pub struct DocBuffer {
    buf: Vec<u8>,
    /// Where each finished document ends.
    ends: Vec<usize>,
}

impl DocBuffer {
    pub fn with_capacity(docs: usize, bytes: usize) -> DocBuffer {
        DocBuffer {
            buf: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(docs),
        }
    }

    /// Writes one document with `write`; a document `write` refuses leaves nothing.
    pub fn push<E>(
        &mut self,
        write: impl FnOnce(&mut DocWriter) -> Result<(), E>,
    ) -> Result<(), E> {
        let start = self.buf.len();
        let mut w = DocWriter::open(&mut self.buf);
        match write(&mut w) {
            Ok(()) => {
                w.close();
                self.ends.push(self.buf.len());
                Ok(())
            }
            Err(e) => {
                self.buf.truncate(start);
                Err(e)
            }
        }
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The documents, in the order written.
    pub fn documents(&self) -> Vec<&RawDocument> {
        let mut start = 0;
        self.ends
            .iter()
            .filter_map(|&end| {
                let doc = RawDocument::from_bytes(&self.buf[start..end]).ok();
                start = end;
                doc
            })
            .collect()
    }
}

/// Appends the elements of one (sub)document; `close` writes its terminator and length.
pub struct DocWriter<'b> {
    buf: &'b mut Vec<u8>,
    start: usize,
}

impl<'b> DocWriter<'b> {
    fn open(buf: &'b mut Vec<u8>) -> DocWriter<'b> {
        let start = buf.len();
        buf.extend_from_slice(&[0; 4]);
        DocWriter { buf, start }
    }

    fn close(self) {
        self.buf.push(0);
        // A document past i32::MAX bytes cannot come from a body under the HTTP limit;
        // were it to, the saturated length makes the insert refuse it as malformed.
        let len = i32::try_from(self.buf.len() - self.start).unwrap_or(i32::MAX);
        self.buf[self.start..self.start + 4].copy_from_slice(&len.to_le_bytes());
    }

    fn key(&mut self, kind: u8, key: &str) -> Result<(), BadKey> {
        if key.as_bytes().contains(&0) {
            return Err(BadKey);
        }
        self.buf.push(kind);
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.push(0);
        Ok(())
    }

    pub fn double(&mut self, key: &str, v: f64) -> Result<(), BadKey> {
        self.key(0x01, key)?;
        self.buf.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }

    pub fn string(&mut self, key: &str, v: &str) -> Result<(), BadKey> {
        self.key(0x02, key)?;
        let len = i32::try_from(v.len() + 1).unwrap_or(i32::MAX);
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.extend_from_slice(v.as_bytes());
        self.buf.push(0);
        Ok(())
    }

    pub fn boolean(&mut self, key: &str, v: bool) -> Result<(), BadKey> {
        self.key(0x08, key)?;
        self.buf.push(u8::from(v));
        Ok(())
    }

    pub fn date(&mut self, key: &str, millis: i64) -> Result<(), BadKey> {
        self.key(0x09, key)?;
        self.buf.extend_from_slice(&millis.to_le_bytes());
        Ok(())
    }

    pub fn int32(&mut self, key: &str, v: i32) -> Result<(), BadKey> {
        self.key(0x10, key)?;
        self.buf.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }

    pub fn int64(&mut self, key: &str, v: i64) -> Result<(), BadKey> {
        self.key(0x12, key)?;
        self.buf.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }

    pub fn decimal128(&mut self, key: &str, v: bson::Decimal128) -> Result<(), BadKey> {
        self.key(0x13, key)?;
        self.buf.extend_from_slice(&v.bytes());
        Ok(())
    }

    /// A subdocument under `key`, whose elements `write` appends.
    pub fn document<E: From<BadKey>>(
        &mut self,
        key: &str,
        write: impl FnOnce(&mut DocWriter) -> Result<(), E>,
    ) -> Result<(), E> {
        self.key(0x03, key)?;
        let mut sub = DocWriter::open(self.buf);
        write(&mut sub)?;
        sub.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Document};

    #[test]
    fn written_documents_read_back_as_bson_writes_them() {
        let mut docs = DocBuffer::default();
        docs.push(|w| {
            w.date("time", 1_500)?;
            w.document("tags", |t| t.string("host", "a\u{e9}"))?;
            w.double("x", 1.5)?;
            w.int64("n", -3)?;
            w.int32("ns", 7)?;
            w.boolean("ok", true)?;
            w.decimal128("u", bson::Decimal128::from_bytes([1; 16]))
        })
        .unwrap();
        docs.push(|w| w.string("s", "")).unwrap();
        let read: Vec<Document> = docs
            .documents()
            .into_iter()
            .map(|d| Document::try_from(d).unwrap())
            .collect();
        assert_eq!(
            read,
            vec![
                doc! {
                    "time": bson::DateTime::from_millis(1_500),
                    "tags": {"host": "a\u{e9}"},
                    "x": 1.5, "n": -3i64, "ns": 7, "ok": true,
                    "u": bson::Decimal128::from_bytes([1; 16]),
                },
                doc! {"s": ""},
            ]
        );
    }

    #[test]
    fn a_key_with_a_nul_byte_is_refused_and_leaves_nothing() {
        let mut docs = DocBuffer::default();
        docs.push(|w| w.double("ok", 1.0)).unwrap();
        assert_eq!(
            docs.push(|w| {
                w.double("fine", 1.0)?;
                w.document("tags", |t| t.string("a\0b", "v"))
            }),
            Err(BadKey)
        );
        assert_eq!(docs.len(), 1);
        assert_eq!(
            Document::try_from(docs.documents()[0]).unwrap(),
            doc! {"ok": 1.0}
        );
    }
}
