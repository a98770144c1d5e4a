//! Gorilla XOR float compression (Pelkonen et al., VLDB 2015), kept as a
//! measured alternative to pco for double columns. On a random walk rounded
//! to 2 decimals pco needs 0.99 bytes/value and Gorilla 6.7 (see `column.rs`),
//! so buckets use pco; this codec is not part of the stored format.

use crate::error::TsError;

struct BitWriter {
    out: Vec<u8>,
    used: u8,
}

impl BitWriter {
    fn write(&mut self, value: u64, bits: u32) {
        for i in (0..bits).rev() {
            if self.used == 0 {
                self.out.push(0);
            }
            let bit = ((value >> i) & 1) as u8;
            if let Some(last) = self.out.last_mut() {
                *last |= bit << (7 - self.used);
            }
            self.used = (self.used + 1) % 8;
        }
    }
}

struct BitReader<'a> {
    src: &'a [u8],
    pos: usize,
}

impl BitReader<'_> {
    fn read(&mut self, bits: u32) -> Result<u64, TsError> {
        let mut v = 0u64;
        for _ in 0..bits {
            let byte = self
                .src
                .get(self.pos / 8)
                .ok_or_else(|| TsError::corrupt("truncated gorilla stream"))?;
            v = (v << 1) | u64::from((byte >> (7 - (self.pos % 8))) & 1);
            self.pos += 1;
        }
        Ok(v)
    }
}

/// Encodes doubles with Gorilla's XOR scheme.
pub fn encode(values: &[f64]) -> Vec<u8> {
    let mut w = BitWriter {
        out: Vec::new(),
        used: 0,
    };
    let Some(first) = values.first() else {
        return w.out;
    };
    let mut prev = first.to_bits();
    w.write(prev, 64);
    let (mut lead, mut trail) = (u32::MAX, 0u32);
    for v in &values[1..] {
        let cur = v.to_bits();
        let x = cur ^ prev;
        prev = cur;
        if x == 0 {
            w.write(0, 1);
            continue;
        }
        w.write(1, 1);
        let l = x.leading_zeros().min(31);
        let t = x.trailing_zeros();
        if lead != u32::MAX && l >= lead && t >= trail {
            w.write(0, 1);
            w.write(x >> trail, 64 - lead - trail);
        } else {
            lead = l;
            trail = t;
            let meaningful = 64 - l - t;
            w.write(1, 1);
            w.write(u64::from(l), 5);
            w.write(u64::from(meaningful & 63), 6);
            w.write(x >> t, meaningful);
        }
    }
    w.out
}

/// Decodes `n` doubles written by [`encode`].
pub fn decode(src: &[u8], n: usize) -> Result<Vec<f64>, TsError> {
    let mut r = BitReader { src, pos: 0 };
    let mut out = Vec::with_capacity(n.min(src.len() * 8 + 1));
    if n == 0 {
        return Ok(out);
    }
    let mut prev = r.read(64)?;
    out.push(f64::from_bits(prev));
    let (mut lead, mut trail) = (0u32, 0u32);
    while out.len() < n {
        if r.read(1)? == 1 {
            if r.read(1)? == 1 {
                lead = r.read(5)? as u32;
                let mut meaningful = r.read(6)? as u32;
                if meaningful == 0 {
                    meaningful = 64;
                }
                if lead + meaningful > 64 {
                    return Err(TsError::corrupt("bad gorilla window"));
                }
                trail = 64 - lead - meaningful;
            }
            let bits = 64 - lead - trail;
            prev ^= r.read(bits)? << trail;
        }
        out.push(f64::from_bits(prev));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrips_bit_exactly() {
        let v = [
            1.0,
            1.0,
            2.5,
            -0.0,
            f64::NAN,
            f64::MAX,
            f64::MIN_POSITIVE,
            12.34,
            12.35,
        ];
        let d = decode(&encode(&v), v.len()).unwrap();
        let bits = |x: &[f64]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&d), bits(&v));
        assert!(decode(&[1, 2], 3).is_err());
    }
}
