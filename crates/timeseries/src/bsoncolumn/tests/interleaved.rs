//! Interleaved mode: reference objects, per-field streams, missing fields, nested
//! objects and arrays, and the end of a run.

use bson::{doc, Bson, Document};

use super::*;

/// Interleaved start `control` followed by the reference object.
fn start(control: u8, reference: &Document) -> Vec<u8> {
    let mut out = vec![control];
    out.extend(bson::to_vec(reference).expect("serializable"));
    out
}

const END: u8 = 0x00;

#[test]
fn an_interleaved_run_rebuilds_objects_with_missing_fields() {
    let reference = doc! { "a": 1, "b": { "c": 1.5 } };
    let bytes = column(&[
        start(0xF0, &reference),
        // Stream "a": 1 (= reference), 2, missing.
        ctl(&[block(12, &[Some(0), Some(zz(1)), None])]),
        // Stream "b.c" in tenths: 1.5 (= reference), missing, 2.5.
        scaled(0xA, &[block(12, &[Some(0), None, Some(zz(10))])]),
        vec![END],
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![
            doc! { "a": 1, "b": { "c": 1.5 } }.into(),
            doc! { "a": 2 }.into(),
            doc! { "b": { "c": 2.5 } }.into(),
        ])
    );
}

#[test]
fn an_interleaved_object_with_every_field_missing_decodes_as_none() {
    let reference = doc! { "a": 1, "b": 2 };
    let bytes = column(&[
        start(0xF1, &reference),
        ctl(&[block(13, &[Some(0), None])]),
        ctl(&[block(13, &[Some(0), None])]),
        vec![END],
    ]);
    assert_eq!(dec(&bytes), vec![Some(reference.into()), None]);
}

#[test]
fn empty_sub_objects_of_the_reference_are_always_rebuilt() {
    let reference = doc! { "a": 1, "e": {}, "n": { "x": 1 } };
    let bytes = column(&[
        start(0xF1, &reference),
        ctl(&[block(13, &[Some(0), None])]),
        ctl(&[block(13, &[Some(0), None])]),
        vec![END],
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![reference.clone().into(), doc! { "e": {} }.into()])
    );
}

#[test]
fn interleaved_arrays_are_traversed_with_the_object_root_start() {
    let reference = doc! { "a": [1, 2], "t": "x" };
    let bytes = column(&[
        start(0xF1, &reference),
        // a.0: 1, 3
        ctl(&[block(13, &[Some(0), Some(zz(2))])]),
        // a.1: 2, missing
        ctl(&[block(13, &[Some(0), None])]),
        // t: "x", "x"
        ctl(&[block(13, &[Some(0), Some(0)])]),
        vec![END],
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![
            doc! { "a": [1, 2], "t": "x" }.into(),
            doc! { "a": [3], "t": "x" }.into(),
        ])
    );
}

#[test]
fn an_array_root_run_rebuilds_arrays() {
    // The reference "object" of an array root has the keys "0", "1", ...
    let reference = doc! { "0": 10, "1": 20 };
    let bytes = column(&[
        start(0xF2, &reference),
        ctl(&[block(13, &[Some(0), Some(zz(1))])]),
        ctl(&[block(13, &[Some(0), Some(0)])]),
        vec![END],
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![
            Bson::Array(vec![10.into(), 20.into()]),
            Bson::Array(vec![11.into(), 20.into()]),
        ])
    );
}

#[test]
fn the_legacy_start_treats_arrays_as_scalars() {
    let reference = doc! { "a": [1, 2], "b": 5 };
    let bytes = column(&[
        start(0xF0, &reference),
        ctl(&[block(13, &[Some(0), Some(0)])]),
        ctl(&[block(13, &[Some(0), Some(zz(1))])]),
        vec![END],
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![
            doc! { "a": [1, 2], "b": 5 }.into(),
            doc! { "a": [1, 2], "b": 6 }.into(),
        ])
    );
    // An array scalar only allows zero deltas.
    let bytes = column(&[
        start(0xF0, &reference),
        ctl(&[block(14, &[Some(zz(1))])]),
        ctl(&[block(14, &[Some(0)])]),
        vec![END],
    ]);
    assert_eq!(dec_err(&bytes), ColumnError::NonDeltaType("array"));
}

#[test]
fn a_literal_inside_an_interleaved_run_replaces_one_field() {
    let reference = doc! { "a": 1, "b": 2 };
    let bytes = column(&[
        start(0xF0, &reference),
        ctl(&[block(13, &[Some(0), Some(zz(1))])]), // a: 1, 2
        ctl(&[block(12, &[Some(0), Some(0), Some(0)])]), // b: 2, 2, 2
        lit("s"),                                   // a: "s"
        vec![END],
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![
            doc! { "a": 1, "b": 2 }.into(),
            doc! { "a": 2, "b": 2 }.into(),
            doc! { "a": "s", "b": 2 }.into(),
        ])
    );
}

#[test]
fn streams_take_control_bytes_in_the_order_they_run_out() {
    let reference = doc! { "a": 1, "b": 10 };
    let bytes = column(&[
        start(0xF0, &reference),
        ctl(&[block(13, &[Some(0), Some(zz(1))])]), // a, objects 1-2
        ctl(&[block(11, &[Some(0), Some(zz(1)), Some(zz(1)), Some(zz(1))])]), // b, 1-4
        ctl(&[block(13, &[Some(zz(1)), Some(zz(1))])]), // a, objects 3-4
        vec![END],
    ]);
    let expected: Vec<Bson> = (0..4)
        .map(|i| doc! { "a": 1 + i, "b": 10 + i }.into())
        .collect();
    assert_eq!(dec(&bytes), some(expected));
}

#[test]
fn regular_mode_resumes_after_an_interleaved_run() {
    let reference = doc! { "a": 1 };
    let bytes = column(&[
        start(0xF0, &reference),
        ctl(&[block(14, &[Some(0)])]),
        vec![END],
        // A zero delta right after the run repeats its last object.
        ctl(&[block(14, &[Some(0)])]),
        lit(7),
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![
            doc! { "a": 1 }.into(),
            doc! { "a": 1 }.into(),
            Bson::Int32(7)
        ])
    );
    // A non-zero delta there applies to an object: an error.
    let bytes = column(&[
        start(0xF0, &reference),
        ctl(&[block(14, &[Some(0)])]),
        vec![END],
        ctl(&[block(14, &[Some(zz(1))])]),
    ]);
    assert_eq!(dec_err(&bytes), ColumnError::NonDeltaType("object"));
}

#[test]
fn two_interleaved_runs_can_follow_each_other() {
    let bytes = column(&[
        start(0xF1, &doc! { "a": 1 }),
        ctl(&[block(14, &[Some(0)])]),
        vec![END],
        start(0xF1, &doc! { "b": "x" }),
        ctl(&[block(14, &[Some(0)])]),
        vec![END],
    ]);
    assert_eq!(
        dec(&bytes),
        some(vec![doc! { "a": 1 }.into(), doc! { "b": "x" }.into()])
    );
}

#[test]
fn an_interleaved_run_ending_in_the_middle_of_an_object_is_an_error() {
    let reference = doc! { "a": 1, "b": 2 };
    let bytes = column(&[
        start(0xF0, &reference),
        ctl(&[block(13, &[Some(0), Some(0)])]),
        ctl(&[block(14, &[Some(0)])]),
        vec![END],
    ]);
    assert!(matches!(
        dec_err(&bytes),
        ColumnError::InvalidInterleaved { .. }
    ));
}

#[test]
fn values_left_in_a_stream_when_the_run_ends_are_an_error() {
    let reference = doc! { "a": 1, "b": 2 };
    let bytes = column(&[
        start(0xF0, &reference),
        ctl(&[block(14, &[Some(0)])]),
        ctl(&[block(13, &[Some(0), Some(0)])]),
        vec![END],
    ]);
    assert!(matches!(
        dec_err(&bytes),
        ColumnError::InvalidInterleaved { .. }
    ));
}

#[test]
fn an_interleaved_run_without_objects_or_without_scalars_is_an_error() {
    let bytes = column(&[start(0xF0, &doc! { "a": 1 }), vec![END]]);
    assert!(matches!(
        dec_err(&bytes),
        ColumnError::InvalidInterleaved { .. }
    ));
    let bytes = column(&[
        start(0xF1, &doc! { "e": {} }),
        ctl(&[block(14, &[Some(0)])]),
        vec![END],
    ]);
    assert!(matches!(
        dec_err(&bytes),
        ColumnError::InvalidInterleaved { .. }
    ));
}

#[test]
fn an_interleaved_start_inside_a_run_is_an_error() {
    let bytes = column(&[
        start(0xF0, &doc! { "a": 1 }),
        start(0xF0, &doc! { "a": 1 }),
        vec![END],
    ]);
    assert!(matches!(
        dec_err(&bytes),
        ColumnError::UnknownControl { control: 0xF0, .. }
    ));
}

#[test]
fn interleaved_objects_count_against_max_values() {
    let bytes = column(&[start(0xF0, &doc! { "a": 1 }), ctl(&[rle(16)]), vec![END]]);
    assert_eq!(
        decode(&bytes, 100),
        Err(ColumnError::TooManyValues { max: 100 })
    );
    assert_eq!(decode(&bytes, 1920).map(|v| v.len()), Ok(1920));
}
