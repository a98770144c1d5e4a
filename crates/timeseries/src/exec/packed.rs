//! Rows written as BSON one after another into one buffer: a columnar projection writes
//! each returned row once, there, and the reply copies it from there into its batch, with
//! no allocation per row ([`RawRow`] shares the buffer).

use bson::{Document, RawDocument, RawDocumentBuf};
use std::sync::Arc;

/// One row's BSON bytes, a slice of a shared buffer.
#[derive(Debug, Clone)]
pub struct RawRow {
    block: Arc<Vec<u8>>,
    start: usize,
    end: usize,
}

impl RawRow {
    pub fn as_bytes(&self) -> &[u8] {
        &self.block[self.start..self.end]
    }

    /// The row as a raw document (its length and last byte were checked when written).
    pub fn as_raw(&self) -> Result<&RawDocument, bson::raw::Error> {
        RawDocument::from_bytes(self.as_bytes())
    }

    pub fn to_document(&self) -> Result<Document, bson::raw::Error> {
        Document::try_from(self.as_raw()?)
    }
}

impl From<RawDocumentBuf> for RawRow {
    fn from(d: RawDocumentBuf) -> RawRow {
        let bytes = d.into_bytes();
        let end = bytes.len();
        RawRow {
            block: Arc::new(bytes),
            start: 0,
            end,
        }
    }
}

/// Rows being written into one buffer.
#[derive(Default)]
pub struct PackedRows {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl PackedRows {
    pub fn with_capacity(rows: usize, bytes: usize) -> PackedRows {
        PackedRows {
            bytes: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(rows),
        }
    }

    /// Appends one row: `write` writes its elements, this its length and final 0.
    pub fn push(
        &mut self,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), String>,
    ) -> Result<(), String> {
        hourglass_query::bson_write::write_len_prefixed(&mut self.bytes, write)?;
        self.ends.push(self.bytes.len());
        Ok(())
    }

    /// Appends `d` as a row.
    pub fn push_document(&mut self, d: &Document) -> Result<(), String> {
        hourglass_query::bson_write::write_document(d, &mut self.bytes)?;
        self.ends.push(self.bytes.len());
        Ok(())
    }

    /// The rows, in the order written.
    pub fn into_rows(self) -> impl Iterator<Item = RawRow> + Send {
        let block = Arc::new(self.bytes);
        let mut start = 0;
        self.ends.into_iter().map(move |end| {
            let row = RawRow {
                block: block.clone(),
                start,
                end,
            };
            start = end;
            row
        })
    }
}

/// The rows of `parts`, in order, as an iterator that knows how many are left (a reply
/// batch reserves room for them at once).
pub fn rows_of(parts: Vec<PackedRows>) -> impl Iterator<Item = RawRow> + Send {
    let left = parts.iter().map(|p| p.ends.len()).sum();
    Counted {
        rows: parts.into_iter().flat_map(PackedRows::into_rows),
        left,
    }
}

struct Counted<I> {
    rows: I,
    left: usize,
}

impl<I: Iterator> Iterator for Counted<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let row = self.rows.next()?;
        self.left = self.left.saturating_sub(1);
        Some(row)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn packed_rows_come_back_as_the_documents_written_in_order_and_counted() {
        let docs = [doc! {"a": 1}, doc! {}, doc! {"s": "x", "d": {"e": 2.5}}];
        let mut packed = PackedRows::default();
        for (i, d) in docs.iter().enumerate() {
            if i % 2 == 0 {
                packed.push_document(d).unwrap();
                continue;
            }
            packed
                .push(|out| {
                    for (k, v) in d {
                        hourglass_query::bson_write::write_element(k, v, out)?;
                    }
                    Ok(())
                })
                .unwrap();
        }
        let mut later = PackedRows::default();
        later.push_document(&doc! {"b": 2}).unwrap();
        let rows = rows_of(vec![packed, later]);
        assert_eq!(rows.size_hint(), (4, Some(4)));
        let rows: Vec<Document> = rows.map(|r| r.to_document().unwrap()).collect();
        assert_eq!(rows[..3], docs);
        assert_eq!(rows[3], doc! {"b": 2});
    }
}
