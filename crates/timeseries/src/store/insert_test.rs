//! Inserts, the insert log and restarts of the bucket store.

use super::keys::*;
use super::*;
use bson::doc;
use hourglass_catalog::Catalog;
use hourglass_storage::Engine;

fn measurement(i: i64, host: &str) -> Document {
    doc! {"t": bson::DateTime::from_millis(1_700_000_000_000 + i * 1000), "host": host, "v": i as f64 / 4.0}
}

fn collect(s: Result<MeasurementStream, StoreError>) -> Vec<Document> {
    s.unwrap().collect::<Result<_, _>>().unwrap()
}

fn open(dir: &std::path::Path) -> (Catalog, Arc<Collection>, TimeseriesOptions) {
    test_collection(dir, "t", "host")
}

#[test]
fn insert_persists_deltas_and_closes_full_buckets() {
    let dir = tempfile::tempdir().unwrap();
    let (_cat, c, opts) = open(dir.path());
    let store = TimeseriesStore::default();
    let docs: Vec<Document> = (0..2500).map(|i| measurement(i, "a")).collect();
    let out = store.insert_docs(&c, &opts, docs, true).unwrap();
    assert_eq!(out.inserted, 2500);
    assert_eq!(store.stats(&c).num_buckets_closed_due_to_count, 2);
    let buckets = store.bucket_documents(&c, &opts).unwrap();
    assert_eq!(buckets.len(), 3);
    let ms = collect(store.measurements(&c, &opts, &BucketPredicate::all(), None));
    assert_eq!(ms.len(), 2500);
    // Times 0..2500 s after T0; bounds on the first 100 s keep only the first bucket.
    let lo = 1_700_000_000_000;
    let f = doc! {"t": {"$gte": bson::DateTime::from_millis(lo), "$lt": bson::DateTime::from_millis(lo + 100_000)}};
    let pruned = collect(store.measurements(
        &c,
        &opts,
        &BucketPredicate::from_filter(&f, &opts).unwrap(),
        None,
    ));
    assert_eq!(pruned.len(), 1000, "only the first bucket is decoded");
    assert_eq!(ms[0].get_str("host").unwrap(), "a");
}

#[test]
fn legacy_delta_records_are_rebuilt_and_closed_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let (_cat, c, opts) = open(dir.path());
    let first = measurement(0, "a");
    let b = Bucket::new(&opts, Some(Bson::String("a".into())), 1_700_000_000_000);
    // The format before the insert log: a header, then rows without the meta field.
    let row = |i: i64| {
        let mut m = measurement(i, "a");
        m.remove("host");
        bson::to_vec(&m).unwrap()
    };
    let mut d0 = bson::to_vec(&doc! {"min": b.min_time_ms, "meta": "a"}).unwrap();
    d0.extend(row(0));
    let mut d1 = bson::to_vec(&doc! {}).unwrap();
    d1.extend(row(1));
    let mut batch = c.engine().batch();
    batch.put(c.tree(), &delta_key(&b.id, 0), &d0);
    batch.put(c.tree(), &delta_key(&b.id, 1), &d1);
    c.engine().commit(batch).unwrap();
    assert_eq!(TimeseriesStore::bucket_summary(&c).unwrap().0, 1);
    let store = TimeseriesStore::default();
    let got = collect(store.measurements(&c, &opts, &BucketPredicate::all(), None));
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].get("t"), first.get("t"));
    assert_eq!(got[1].get_str("host").unwrap(), "a");
    let snap = c.engine().snapshot();
    assert_eq!(snap.scan_prefix(c.tree(), &[DELTA]).count(), 0);
    assert_eq!(snap.scan_prefix(c.tree(), &[CLOSED]).count(), 1);
}

fn reopen_after_crash(dir: &std::path::Path) -> (Catalog, Arc<Collection>, TimeseriesStore) {
    let cat = Catalog::open(Engine::open(dir).unwrap()).unwrap();
    let c = cat.get("db", "system.buckets.m").unwrap();
    (cat, c, TimeseriesStore::default())
}

fn keys_with_prefix(c: &Collection, prefix: u8) -> usize {
    c.engine()
        .snapshot()
        .scan_prefix(c.tree(), &[prefix])
        .count()
}

#[test]
fn a_removed_bucket_is_not_replayed_from_a_log_record_an_open_bucket_still_needs() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (_cat, c, opts) = open(dir.path());
        let store = TimeseriesStore::default();
        // One record: host a fills a bucket (closed by count) and opens another, host b
        // opens one. The full bucket is stored; the record stays for the open ones.
        let mut docs: Vec<Document> = (0..1001).map(|i| measurement(i, "a")).collect();
        docs.push(measurement(0, "b"));
        store.insert_docs(&c, &opts, docs, true).unwrap();
        store.compressor.drain();
        assert_eq!(keys_with_prefix(&c, CLOSED), 1);
        assert_eq!(keys_with_prefix(&c, STORED_MARK), 1);
        assert_eq!(keys_with_prefix(&c, LOG), 1);
        assert_eq!(TimeseriesStore::bucket_summary(&c).unwrap().0, 3);
        // The stored bucket's measurements are deleted (the bucket goes), then a crash:
        // no close_all.
        let gone = store
            .delete(&c, &opts, &doc! {"host": "a", "v": {"$lt": 250.0}}, false)
            .unwrap();
        assert_eq!(gone.deleted, 1000);
    }
    let (_cat, c, store) = reopen_after_crash(dir.path());
    let opts = options_of(&c).unwrap();
    let all = collect(store.measurements(&c, &opts, &BucketPredicate::all(), None));
    assert_eq!(
        all.len(),
        2,
        "the removed bucket's log entries are not replayed"
    );
    assert_eq!(store.bucket_documents(&c, &opts).unwrap().len(), 2);
    assert_eq!(keys_with_prefix(&c, LOG), 0, "start-up empties the log");
    assert_eq!(keys_with_prefix(&c, STORED_MARK), 0);
}

#[test]
fn log_records_and_marks_are_deleted_once_their_buckets_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    let (_cat, c, opts) = open(dir.path());
    let store = TimeseriesStore::default();
    for i in 0..3000 {
        store
            .insert_docs(&c, &opts, vec![measurement(i, "a")], true)
            .unwrap();
    }
    store.compressor.drain();
    // Two buckets stored; the records of the first 2000 inserts are gone, with the
    // bucket stored before the last one's mark (records up to it are gone). The open
    // bucket's 1000 records remain, and one insert's worth of garbage is pending.
    let logs = keys_with_prefix(&c, LOG);
    assert!((1000..=1001).contains(&logs), "{logs} records");
    assert!(keys_with_prefix(&c, STORED_MARK) <= 2);
    store.close_all().unwrap();
    assert_eq!(keys_with_prefix(&c, LOG), 0);
    assert_eq!(keys_with_prefix(&c, STORED_MARK), 0);
    assert_eq!(keys_with_prefix(&c, CLOSED), 3);
    assert_eq!(
        collect(store.measurements(&c, &opts, &BucketPredicate::all(), None)).len(),
        3000
    );
}

#[test]
fn restart_closes_open_buckets_without_losing_measurements() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (_cat, c, opts) = open(dir.path());
        let store = TimeseriesStore::default();
        for i in 0..10 {
            store
                .insert_docs(
                    &c,
                    &opts,
                    vec![measurement(i, "a"), measurement(i, "b")],
                    true,
                )
                .unwrap();
        }
    }
    let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
    let c = cat.get("db", "system.buckets.m").unwrap();
    let opts = options_of(&c).unwrap();
    let store = TimeseriesStore::default();
    store
        .insert_docs(&c, &opts, vec![measurement(100, "a")], true)
        .unwrap();
    let buckets = store.bucket_documents(&c, &opts).unwrap();
    assert_eq!(
        buckets.len(),
        2,
        "two closed at restart, one of them reopened for the same hour"
    );
    assert_eq!(store.stats(&c).num_buckets_reopened, 1);
    assert_eq!(
        collect(store.measurements(&c, &opts, &BucketPredicate::all(), None)).len(),
        21
    );
    // A crash now: the reopened bucket is stored with its 10 measurements and its
    // log entry holds the 11th; the next start rebuilds it from both.
    drop((store, c, cat));
    let cat = Catalog::open(Engine::open(dir.path()).unwrap()).unwrap();
    let c = cat.get("db", "system.buckets.m").unwrap();
    let store = TimeseriesStore::default();
    assert_eq!(
        collect(store.measurements(&c, &opts, &BucketPredicate::all(), None)).len(),
        21,
        "a reopened bucket survives a crash with its stored and new measurements"
    );
    assert_eq!(store.bucket_documents(&c, &opts).unwrap().len(), 2);
}
