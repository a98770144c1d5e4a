#![no_main]
//! Wire codec and BSON decoding: any bytes, as a client could send them.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hourglass_protocol::fuzzing::wire(data));
