//! The archive tier through the store: what a mover pass moves, that reads count every
//! measurement once whatever the split between hot buckets and files, that a bucket
//! changed during a pass stays hot, that writes refuse archived rows, and expiry.

use super::*;
use bson::doc;
use hourglass_archive::ArchiveSpec;

const T0: i64 = 1_451_606_400_000; // 2016-01-01T00:00:00Z

fn measurement(i: i64, host: &str) -> Document {
    doc! {"t": bson::DateTime::from_millis(T0 + i * 10_000), "host": host, "v": i as f64, "n": i}
}

struct Fixture {
    _dir: tempfile::TempDir,
    _archive: tempfile::TempDir,
    _cat: hourglass_catalog::Catalog,
    store: TimeseriesStore,
    c: Arc<Collection>,
    o: TimeseriesOptions,
    spec: ArchiveSpec,
}

/// 3 hosts x 1000 measurements 10 s apart (a bucket per host-hour), all closed.
fn loaded() -> Fixture {
    loaded_with(1000)
}

/// 3 hosts x `n` measurements 10 s apart, all closed.
fn loaded_with(n: i64) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let archive = tempfile::tempdir().unwrap();
    let (cat, c, o) = test_collection(dir.path(), "t", "host");
    let store = TimeseriesStore::default();
    let docs: Vec<Document> = (0..n)
        .flat_map(|i| ["a", "b", "c"].map(|h| measurement(i, h)))
        .collect();
    let raw = raw_measurements(&docs).unwrap();
    store
        .insert(&c, &o, raw.iter().map(|d| d.as_ref()).collect(), true)
        .unwrap();
    store.close_all().unwrap();
    let spec = ArchiveSpec {
        after_seconds: 0,
        uri: format!("file://{}", archive.path().display()),
        partition_by: vec![],
    };
    Fixture {
        _dir: dir,
        _archive: archive,
        _cat: cat,
        store,
        c,
        o,
        spec,
    }
}

fn totals(f: &Fixture) -> (usize, f64) {
    let docs: Vec<Document> = f
        .store
        .measurements(&f.c, &f.o, &BucketPredicate::all(), None)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    (
        docs.len(),
        docs.iter().filter_map(|d| d.get_f64("v").ok()).sum(),
    )
}

fn pass(f: &Fixture, max: usize) -> MoveOutcome {
    f.store
        .archive_pass(&f.c, &f.o, &f.spec, T0 + 86_400_000, max, &|_| {})
        .unwrap()
}

#[test]
fn a_pass_moves_old_closed_buckets_to_files_and_reads_count_each_measurement_once() {
    let f = loaded();
    let before = totals(&f);
    assert_eq!(before.0, 3000);
    let first = pass(&f, 4);
    assert_eq!(first.buckets, 4);
    assert!(first.more);
    assert_eq!(totals(&f), before, "half archived");
    while pass(&f, 4).more {}
    let st = TimeseriesStore::archive_stats(&f.c).unwrap();
    assert_eq!(st.measurements, 3000);
    assert_eq!(TimeseriesStore::bucket_summary(&f.c).unwrap().0, 0);
    assert_eq!(totals(&f), before, "all archived");
}

#[test]
fn archived_files_are_pruned_by_meta_and_rows_by_time_before_conversion() {
    let mut f = loaded();
    f.spec.partition_by = vec!["host".into()];
    while pass(&f, 1000).more {}
    let filter = doc! {"host": "b", "t": {"$gte": bson::DateTime::from_millis(T0 + 9_000_000)}};
    let p = BucketPredicate::from_filter(&filter, &f.o).unwrap();
    let scan = f.store.scan(&f.c, &f.o, &p).unwrap();
    let counters = scan.counters.clone();
    let rows: usize = scan.map(|v| v.unwrap().count()).sum();
    assert_eq!(
        rows, 100,
        "only host b's rows inside the time bounds are converted"
    );
    let get = ScanCounters::get;
    assert_eq!(get(&counters.archive_files_examined), 1);
    assert_eq!(get(&counters.archive_files_pruned), 2);
}

#[test]
fn a_bucket_rewritten_during_a_pass_stays_hot_and_no_file_is_left() {
    let f = loaded();
    let stop = |stage: MoverStage| {
        if stage == MoverStage::FilesWritten {
            // A delete rewrites every bucket between the file's write and its commit.
            f.store.delete(&f.c, &f.o, &doc! {"n": 0}, false).unwrap();
        }
    };
    let out = f
        .store
        .archive_pass(&f.c, &f.o, &f.spec, T0 + 86_400_000, 1000, &stop)
        .unwrap();
    assert_eq!(out.files, 0);
    assert!(out.more);
    assert_eq!(TimeseriesStore::archive_stats(&f.c).unwrap().files, 0);
    let loc = hourglass_archive::Location::open(&f.spec.uri).unwrap();
    assert!(loc.list("").unwrap().is_empty());
    assert_eq!(totals(&f).0, 2997);
}

#[test]
fn writes_matching_archived_measurements_are_refused_and_change_nothing() {
    let f = loaded();
    pass(&f, 3);
    let before = totals(&f);
    let err = f
        .store
        .delete(&f.c, &f.o, &doc! {"n": {"$lt": 5}}, false)
        .unwrap_err();
    assert_eq!(err.code(), 20);
    assert_eq!(totals(&f), before);
    // Hot rows only: fine.
    let out = f.store.delete(&f.c, &f.o, &doc! {"n": 999}, false).unwrap();
    assert_eq!(out.deleted, 3);
}

#[test]
fn orphan_files_are_cleaned_and_recorded_ones_kept() {
    let f = loaded();
    pass(&f, 3);
    let loc = hourglass_archive::Location::open(&f.spec.uri).unwrap();
    loc.put(
        "db=db/coll=m/date=2016-01-01/part-0-orphan.parquet",
        vec![0; 8],
    )
    .unwrap();
    assert_eq!(f.store.archive_cleanup(&f.c, &f.spec.uri).unwrap(), 1);
    let files = TimeseriesStore::archived_files(&f.c).unwrap();
    let listed: Vec<String> = loc.list("").unwrap().into_iter().map(|(p, _)| p).collect();
    assert_eq!(listed.len(), files.len());
    assert!(files.iter().all(|e| listed.contains(&e.path)));
}

#[test]
fn expiry_removes_whole_files_older_than_the_cutoff() {
    let f = loaded();
    while pass(&f, 1000).more {}
    let files = TimeseriesStore::archived_files(&f.c).unwrap();
    let (gone, rows) = f
        .store
        .expire_archived(&f.c, &f.o, T0 + 86_400_000)
        .unwrap();
    assert_eq!(gone as usize, files.len());
    assert_eq!(rows, 3000);
    assert_eq!(totals(&f).0, 0);
    let loc = hourglass_archive::Location::open(&f.spec.uri).unwrap();
    assert!(loc.list("").unwrap().is_empty());
}

#[test]
fn row_groups_of_other_series_are_pruned_by_their_meta_statistics() {
    // 8,192 rows a row group: one per host (a day at 10 s is 8,640 rows, in one file).
    let f = loaded_with(8192);
    while pass(&f, 1000).more {}
    for filter in [doc! {"host": "b"}, doc! {"host": {"$in": ["b"]}}] {
        let p = BucketPredicate::from_filter(&filter, &f.o).unwrap();
        let scan = f.store.scan(&f.c, &f.o, &p).unwrap();
        let counters = scan.counters.clone();
        let rows: usize = scan.map(|v| v.unwrap().count()).sum();
        assert_eq!(rows, 8192, "{filter}");
        assert_eq!(
            ScanCounters::get(&counters.archive_row_groups_examined),
            1,
            "{filter}"
        );
        assert_eq!(
            ScanCounters::get(&counters.archive_row_groups_pruned),
            2,
            "{filter}"
        );
    }
}

#[test]
fn lastpoint_reads_the_newest_archived_rows_of_series_with_no_hot_data() {
    let f = loaded();
    while pass(&f, 1000).more {}
    let latest = f.store.latest_per_series(&f.c, &f.o).unwrap();
    assert_eq!(latest.len(), 3);
    for (_, d) in latest {
        assert_eq!(d.get_i64("n").ok(), Some(999), "{d}");
    }
}
