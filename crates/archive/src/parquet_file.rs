//! One archived file: a record batch written as Parquet (ZSTD, row groups of
//! [`ROW_GROUP_ROWS`] rows, page statistics), and a written file opened for reading:
//! its footer (fetched once per process and cached; files are never rewritten, every
//! name is new), each row group's statistics as BSON bounds for pruning, and the row
//! groups a read keeps, decoded for the columns it needs.

use crate::columnar::EXTJSON_KEY;
use crate::io::block_on;
use crate::{ArchiveError, Location};
use arrow_array::RecordBatch;
use arrow_schema::{DataType, SchemaRef};
use bson::Bson;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, TryStreamExt};
use object_store::ObjectStoreExt;
use parking_lot::Mutex;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::statistics::Statistics;
use parquet::schema::types::ColumnPath;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// Rows per row group: rows are sorted by series then time, so this is about one
/// series-day at 10 s intervals; a read of a few series skips the other row groups by
/// their meta statistics. Still long enough runs for ZSTD and the encodings.
pub const ROW_GROUP_ROWS: usize = 8_192;

/// `batch` as the bytes of a Parquet file. Encodings by column type: doubles as
/// BYTE_STREAM_SPLIT (byte planes compress far better than whole doubles), integers and
/// timestamps as DELTA_BINARY_PACKED (times are sorted within a series), text with a
/// dictionary (meta values repeat); all ZSTD.
pub fn encode(batch: &RecordBatch) -> Result<Vec<u8>, ArchiveError> {
    let mut props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_statistics_enabled(EnabledStatistics::Page);
    // `created_by` stays parquet-rs's own "parquet-rs version x.y.z": readers trust the
    // statistics only of writers they can name (pyarrow ignored the double columns'
    // min/max under a custom name).
    for field in batch.schema().fields() {
        let encoding = match field.data_type() {
            DataType::Float64 => Encoding::BYTE_STREAM_SPLIT,
            DataType::Int32 | DataType::Int64 | DataType::Timestamp(_, _) => {
                Encoding::DELTA_BINARY_PACKED
            }
            _ => continue,
        };
        let path = ColumnPath::new(vec![field.name().clone()]);
        props = props
            .set_column_dictionary_enabled(path.clone(), false)
            .set_column_encoding(path, encoding);
    }
    let props = props.build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(props))?;
    writer.write(batch)?;
    writer.close()?;
    Ok(out)
}

/// A written file opened for reading (its footer).
pub struct OpenedFile {
    location: Arc<Location>,
    rel: String,
    size: u64,
    metadata: ArrowReaderMetadata,
}

/// Footers read so far, by URI and path.
fn footers() -> &'static Mutex<HashMap<String, Arc<OpenedFile>>> {
    static FOOTERS: OnceLock<Mutex<HashMap<String, Arc<OpenedFile>>>> = OnceLock::new();
    FOOTERS.get_or_init(Default::default)
}

/// Footers kept at most (a full cache is emptied, not evicted piecemeal).
const FOOTER_CACHE: usize = 4096;

impl OpenedFile {
    /// Opens the file at `rel` of `size` bytes in the archive at `uri`.
    pub fn open(uri: &str, rel: &str, size: u64) -> Result<Arc<OpenedFile>, ArchiveError> {
        let key = format!("{uri}\u{0}{rel}");
        if let Some(f) = footers().lock().get(&key) {
            return Ok(f.clone());
        }
        let location = Location::open(uri)?;
        let mut reader = ObjectReader {
            store: location.store(),
            path: location.path(rel)?,
            size,
        };
        let metadata = block_on(async move {
            ArrowReaderMetadata::load_async(&mut reader, ArrowReaderOptions::new()).await
        })??;
        let file = Arc::new(OpenedFile {
            location,
            rel: rel.to_string(),
            size,
            metadata,
        });
        let mut cache = footers().lock();
        if cache.len() >= FOOTER_CACHE {
            cache.clear();
        }
        cache.insert(key, file.clone());
        Ok(file)
    }

    /// Forgets the cached footer of a deleted file.
    pub fn forget(uri: &str, rel: &str) {
        footers().lock().remove(&format!("{uri}\u{0}{rel}"));
    }

    pub fn schema(&self) -> SchemaRef {
        self.metadata.schema().clone()
    }

    pub fn row_groups(&self) -> usize {
        self.metadata.metadata().num_row_groups()
    }

    /// A column's smallest and largest value in row group `rg`, from its statistics;
    /// `None` when unknown (no statistics, no non-null value, Extended JSON text,
    /// inexact bounds).
    pub fn bounds(&self, rg: usize, column: &str) -> Option<(Bson, Bson)> {
        let schema = self.metadata.schema();
        let (_, field) = schema.column_with_name(column)?;
        if field.metadata().contains_key(EXTJSON_KEY) {
            return None;
        }
        let leaf = self.leaf(column)?;
        let stats = self
            .metadata
            .metadata()
            .row_group(rg)
            .column(leaf)
            .statistics()?;
        let pair = |lo: Option<Bson>, hi: Option<Bson>| Some((lo?, hi?));
        match (field.data_type(), stats) {
            (DataType::Int32, Statistics::Int32(s)) => pair(
                s.min_opt().map(|v| Bson::Int32(*v)),
                s.max_opt().map(|v| Bson::Int32(*v)),
            ),
            (DataType::Int64, Statistics::Int64(s)) => pair(
                s.min_opt().map(|v| Bson::Int64(*v)),
                s.max_opt().map(|v| Bson::Int64(*v)),
            ),
            (DataType::Timestamp(arrow_schema::TimeUnit::Millisecond, _), Statistics::Int64(s)) => {
                let date = |v: &i64| Bson::DateTime(bson::DateTime::from_millis(*v));
                pair(s.min_opt().map(date), s.max_opt().map(date))
            }
            (DataType::Float64, Statistics::Double(s)) => pair(
                s.min_opt().map(|v| Bson::Double(*v)),
                s.max_opt().map(|v| Bson::Double(*v)),
            ),
            (DataType::Utf8, Statistics::ByteArray(s)) if s.min_is_exact() && s.max_is_exact() => {
                let text = |v: &parquet::data_type::ByteArray| {
                    v.as_utf8().ok().map(|t| Bson::String(t.to_string()))
                };
                pair(s.min_opt().and_then(text), s.max_opt().and_then(text))
            }
            _ => None,
        }
    }

    /// The Parquet leaf column index of a top-level column.
    fn leaf(&self, column: &str) -> Option<usize> {
        self.metadata
            .metadata()
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .position(|c| c.path().parts().len() == 1 && c.name() == column)
    }

    /// Decodes row groups `rgs` (in order), only `columns` when given.
    pub fn read(
        &self,
        rgs: Vec<usize>,
        columns: Option<&[String]>,
    ) -> Result<Vec<RecordBatch>, ArchiveError> {
        if rgs.is_empty() {
            return Ok(Vec::new());
        }
        let reader = ObjectReader {
            store: self.location.store(),
            path: self.location.path(&self.rel)?,
            size: self.size,
        };
        let mut builder =
            ParquetRecordBatchStreamBuilder::new_with_metadata(reader, self.metadata.clone())
                .with_row_groups(rgs)
                .with_batch_size(8192);
        if let Some(columns) = columns {
            let leaves: Vec<usize> = columns.iter().filter_map(|c| self.leaf(c)).collect();
            let mask = ProjectionMask::leaves(
                self.metadata.metadata().file_metadata().schema_descr(),
                leaves,
            );
            builder = builder.with_projection(mask);
        }
        let stream = builder.build()?;
        Ok(block_on(
            async move { stream.try_collect::<Vec<_>>().await },
        )??)
    }
}

/// Byte ranges of one object, as the Parquet reader asks for them.
struct ObjectReader {
    store: Arc<dyn object_store::ObjectStore>,
    path: object_store::path::Path,
    size: u64,
}

fn external(e: object_store::Error) -> parquet::errors::ParquetError {
    parquet::errors::ParquetError::External(Box::new(e))
}

impl AsyncFileReader for ObjectReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(external)
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(external)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let metadata = ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columnar::{documents, Columns, Typing};
    use bson::{doc, DateTime};

    #[test]
    fn a_written_file_reads_back_with_row_group_bounds() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let uri = format!("file://{}", dir.path().display());
        let docs: Vec<_> = (0..100)
            .map(|i| doc! {"t": DateTime::from_millis(i * 1000), "tags": {"h": format!("h{}", i % 3)}, "v": i as f64})
            .collect();
        let mut cols = Columns::new(Typing::Exact);
        docs.iter().for_each(|d| cols.learn(d));
        let bytes = encode(&cols.batch(&docs).unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
        let loc = Location::open(&uri).unwrap_or_else(|e| panic!("{e}"));
        let size = bytes.len() as u64;
        loc.put("f.parquet", bytes)
            .unwrap_or_else(|e| panic!("{e}"));
        let f = OpenedFile::open(&uri, "f.parquet", size).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.row_groups(), 1);
        assert_eq!(
            f.bounds(0, "t"),
            Some((
                Bson::DateTime(DateTime::from_millis(0)),
                Bson::DateTime(DateTime::from_millis(99_000))
            ))
        );
        assert_eq!(
            f.bounds(0, "v"),
            Some((Bson::Double(0.0), Bson::Double(99.0)))
        );
        let batches = f.read(vec![0], None).unwrap_or_else(|e| panic!("{e}"));
        let back: Vec<_> = batches
            .iter()
            .flat_map(|b| documents(b).unwrap_or_default())
            .collect();
        assert_eq!(back, docs);
        let only_v = f
            .read(vec![0], Some(&["v".to_string()]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(only_v[0].num_columns(), 1);
    }
}
