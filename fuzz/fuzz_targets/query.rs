#![no_main]
//! Filter, projection, sort, update, pipeline and expression parsers (and evaluation on
//! sample documents): any BSON document, as a client could send it.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hourglass_protocol::fuzzing::query(data));
