//! A bounded fuzz run on stable: every seed of `fuzz/corpus/` and a fixed number of seeded
//! mutations of them go through the same entry points as the `cargo fuzz` targets, on a
//! thread with the stack the hostile-input tests give the server (4 MiB, a quarter of the
//! server's default), so that an unbounded recursion fails here rather than in
//! production. `HOURGLASS_FUZZ_ITERS` raises the number of mutations.

/// The stack the tests give the server's threads (`--threadStackKiB 4096`).
const TEST_STACK: usize = 4 << 20;

use std::path::PathBuf;

/// A small deterministic generator (xorshift64*): the run is the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} missing: {e}", dir.display()))
        .map(|e| std::fs::read(e.expect("corpus entry").path()).expect("corpus file"))
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "empty corpus {}", dir.display());
    seeds
}

/// One mutation of `seed`: bit flips, interesting bytes (lengths, types), insertions,
/// deletions, duplication of a slice, splicing with another seed, lying lengths.
fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        if v.is_empty() {
            v.push(0);
        }
        let at = rng.below(v.len());
        match rng.below(7) {
            0 => v[at] ^= 1 << rng.below(8),
            1 => v[at] = [0u8, 1, 2, 3, 4, 0x7f, 0x80, 0xff, 0x10, 0x12][rng.below(10)],
            2 => v.insert(at, rng.next() as u8),
            3 => {
                v.remove(at);
            }
            4 => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                let piece = v[at..end].to_vec();
                let to = rng.below(v.len());
                v.splice(to..to, piece);
            }
            5 if !other.is_empty() => {
                let from = rng.below(other.len());
                let end = (from + 1 + rng.below(64)).min(other.len());
                let to = rng.below(v.len());
                v.splice(to..to, other[from..end].iter().copied());
            }
            _ => {
                if v.len() >= at + 4 {
                    let choices = [0u32, 4, 5, 0x7fff_ffff, v.len() as u32, rng.next() as u32];
                    let n = choices[rng.below(choices.len())];
                    v[at..at + 4].copy_from_slice(&n.to_le_bytes());
                }
            }
        }
    }
    v
}

fn run(target: &str, default_iters: usize, entry: fn(&[u8])) {
    let iters = std::env::var("HOURGLASS_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_iters);
    let seeds = corpus(target);
    let worker = std::thread::Builder::new()
        .stack_size(TEST_STACK)
        .spawn(move || {
            for s in &seeds {
                entry(s);
            }
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
            for _ in 0..iters {
                let seed = &seeds[rng.below(seeds.len())];
                let other = &seeds[rng.below(seeds.len())];
                let input = mutate(&mut rng, seed, other);
                entry(&input);
            }
        })
        .expect("spawn fuzz worker");
    worker.join().expect("an input made the entry point panic");
}

#[test]
fn wire_decoder_survives_mutated_frames() {
    run("wire", 100_000, hourglass_protocol::fuzzing::wire);
}

#[test]
fn query_parsers_survive_mutated_documents() {
    run("query", 100_000, hourglass_protocol::fuzzing::query);
}

#[test]
fn the_deepest_accepted_document_fits_the_tested_stack() {
    let worker = std::thread::Builder::new()
        .stack_size(TEST_STACK)
        .spawn(|| {
            // 199 levels: the deepest the wire accepts; decoded, parsed as every query
            // construct and evaluated.
            let mut doc =
                hourglass_query::limits::nested_bytes(hourglass_query::limits::MAX_BSON_DEPTH - 2);
            let mut wrapped = Vec::new();
            let body_len = 4 + 1 + 2 + doc.len() + 1;
            wrapped.extend_from_slice(&(body_len as i32).to_le_bytes());
            wrapped.push(0x03);
            wrapped.extend_from_slice(b"f\0");
            wrapped.append(&mut doc);
            wrapped.push(0);
            let stats = hourglass_query::limits::check_raw(
                &wrapped,
                hourglass_query::limits::MAX_BSON_DEPTH,
            )
            .expect("accepted by the wire check");
            assert_eq!(stats.depth, hourglass_query::limits::MAX_BSON_DEPTH - 1);
            hourglass_protocol::fuzzing::query(&wrapped);
        })
        .expect("spawn");
    worker
        .join()
        .expect("a document at the depth limit overflowed the stack");
}

#[test]
fn deeply_nested_inputs_are_refused_on_a_small_stack() {
    let worker = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let deep = hourglass_query::limits::nested_bytes(50_000);
            hourglass_protocol::fuzzing::query(&deep);
            let len = 16 + 4 + 1 + deep.len();
            let mut frame = Vec::new();
            for n in [len as i32, 1, 0, 2013] {
                frame.extend_from_slice(&n.to_le_bytes());
            }
            frame.extend_from_slice(&0u32.to_le_bytes());
            frame.push(0);
            frame.extend_from_slice(&deep);
            hourglass_protocol::fuzzing::wire(&frame);
        })
        .expect("spawn");
    worker.join().expect("deep input overflowed or panicked");
}
