//! Parquet input: the file's record batches, each row a document (see [`hourglass_archive::columnar`]:
//! dotted column names nest, null cells are left out). Rows are numbered from 1 in place of
//! lines.

use super::time::TimeField;
use super::{row_from_document, Item, Source};
use crate::cli::ImportArgs;
use anyhow::{anyhow, Context};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::sync::Arc;

pub fn rows(a: &ImportArgs, time: Option<Arc<TimeField>>) -> anyhow::Result<Source> {
    let path = a
        .file
        .as_ref()
        .ok_or_else(|| anyhow!("--type parquet reads a --file"))?;
    let file = std::fs::File::open(path)
        .with_context(|| format!("error opening file {}", path.display()))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .with_context(|| format!("error reading Parquet file {}", path.display()))?
        .with_batch_size(4096)
        .build()?;
    let mut next_row = 1usize;
    Ok(Box::new(reader.flat_map(move |batch| {
        let items: Vec<Item> = match batch
            .map_err(anyhow::Error::from)
            .and_then(|b| Ok(hourglass_archive::columnar::documents(&b)?))
        {
            Ok(docs) => docs
                .into_iter()
                .map(|doc| {
                    let line = next_row;
                    next_row += 1;
                    row_from_document(line, doc, time.as_deref())
                })
                .collect(),
            Err(e) => vec![Item::Fatal(e.context("error reading Parquet rows"))],
        };
        items
    })))
}
