//! Entry points shared by the fuzz targets (`fuzz/`, run with `cargo fuzz` on nightly) and
//! by the bounded corpus run in the test suite (`tests/fuzz_corpus.rs`, stable): whatever
//! bytes come in, these must return without panicking, overflowing the stack or running
//! unbounded.

use bson::{Bson, Document};
use hourglass_query::expr::Expr;
use hourglass_query::filter::Filter;
use hourglass_query::interrupt::{self, Interrupt};
use hourglass_query::limits::{check_raw, MAX_BSON_DEPTH};
use hourglass_query::pipeline::Pipeline;
use hourglass_query::projection::Projection;
use hourglass_query::sort::SortSpec;
use hourglass_query::update::Update;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::wire::{self, Header, Message, HEADER_LEN};

/// Parses `data` as a wire message (header included) and decodes every document in it.
pub fn wire(data: &[u8]) {
    let Some(head) = data.get(..HEADER_LEN) else {
        return;
    };
    let mut h = [0u8; HEADER_LEN];
    h.copy_from_slice(head);
    let Ok(header) = Header::parse(&h) else {
        return;
    };
    if let Ok(Message::Msg(m)) = wire::parse_message(&header, data) {
        for (_, seq) in &m.sequences {
            let _ = seq.decode();
        }
    }
}

/// Reads `data` as one BSON document (checked as the wire checks it) and parses each of its
/// fields as every query language construct: filter, projection, sort, update, pipeline
/// and expression, then applies what parsed to a few sample documents.
pub fn query(data: &[u8]) {
    if check_raw(data, MAX_BSON_DEPTH).is_err() {
        return;
    }
    let Ok(doc) = bson::from_slice::<Document>(data) else {
        return;
    };
    // Anything that evaluates stops after a short deadline, as maxTimeMS would stop it.
    let _entered = interrupt::enter(Arc::new(Interrupt::new(Some(
        Instant::now() + Duration::from_millis(200),
    ))));
    let samples = samples();
    for (_, value) in &doc {
        match value {
            Bson::Document(spec) => {
                if let Ok(f) = Filter::parse(spec) {
                    samples.iter().for_each(|d| {
                        let _ = f.matches(d);
                    });
                }
                if let Ok(p) = Projection::parse(spec) {
                    samples.iter().for_each(|d| {
                        let _ = p.apply(d);
                    });
                }
                if let Ok(s) = SortSpec::parse(spec) {
                    let mut v = samples.clone();
                    s.sort(&mut v);
                }
                if let Ok(u) = Update::parse(spec) {
                    for d in &samples {
                        let _ = u.apply(&mut d.clone(), false);
                    }
                }
            }
            Bson::Array(items) => {
                let stages: Vec<Document> = items
                    .iter()
                    .filter_map(|v| v.as_document().cloned())
                    .collect();
                let _ = Pipeline::parse(&stages);
                let _ = Update::parse_pipeline(&stages);
            }
            _ => {}
        }
        if let Ok(e) = Expr::parse(value) {
            samples.iter().for_each(|d| {
                let _ = e.eval(d);
            });
        }
    }
}

fn samples() -> Vec<Document> {
    vec![
        bson::doc! {},
        bson::doc! {"_id": 1, "a": 1, "b": "x", "c": [1, 2, {"d": 3}], "e": {"f": {"g": null}}},
        bson::doc! {"_id": 2, "a": [[1], [2, 3]], "t": bson::DateTime::from_millis(0), "x": 2.5},
    ]
}
