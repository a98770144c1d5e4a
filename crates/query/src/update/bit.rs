//! `$bit`: bitwise `and` / `or` / `xor` of an integer field with integer operands, applied
//! in the order given. A missing field starts from a 32-bit zero; the result is a 64-bit
//! integer as soon as the field or any operand is one.

use bson::{Bson, Document};

use super::paths;
use crate::compare::type_name;
use crate::error::{render, QueryError};

/// One bitwise operation of a `$bit` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
}

/// A parsed `$bit` argument: its operations with their operands (`true` = 64-bit).
#[derive(Debug, Clone, PartialEq)]
pub struct BitSpec(Vec<(BitOp, i64, bool)>);

const FORMAT: &str = "{$bit: {field: {and/or/xor: #}}";

/// The `{name: value}` of one operand, as MongoDB prints it in its messages.
fn element(name: &str, v: &Bson) -> String {
    format!("{{{name}: {}}}", render(v))
}

impl BitSpec {
    /// Parses the value of one `$bit` field.
    pub fn parse(v: &Bson) -> Result<BitSpec, QueryError> {
        let Bson::Document(ops) = v else {
            return Err(QueryError::BadValue(format!(
                "The $bit modifier is not compatible with a {}. You must pass in an embedded document: {FORMAT}",
                type_name(v)
            )));
        };
        let mut out = Vec::new();
        for (name, operand) in ops {
            let op = match name.as_str() {
                "and" => BitOp::And,
                "or" => BitOp::Or,
                "xor" => BitOp::Xor,
                _ => {
                    return Err(QueryError::BadValue(format!(
                        "The $bit modifier only supports 'and', 'or', and 'xor', not '{name}' which is an unknown operator: {}",
                        element(name, operand)
                    )))
                }
            };
            let (n, long) = match operand {
                Bson::Int32(i) => (i64::from(*i), false),
                Bson::Int64(i) => (*i, true),
                other => {
                    return Err(QueryError::BadValue(format!(
                        "The $bit modifier field must be an Integer(32/64 bit); a '{}' is not supported here: {}",
                        type_name(other),
                        element(name, operand)
                    )))
                }
            };
            out.push((op, n, long));
        }
        if out.is_empty() {
            return Err(QueryError::BadValue(format!(
                "You must pass in at least one bitwise operation. The format is: {FORMAT}"
            )));
        }
        Ok(BitSpec(out))
    }

    /// Applies the operations to the value at `path` (a missing field starts from 0).
    pub(super) fn apply(&self, doc: &mut Document, path: &[String]) -> Result<(), QueryError> {
        let (mut acc, mut long) = match paths::get(doc, path) {
            None => (0i64, false),
            Some(Bson::Int32(i)) => (i64::from(*i), false),
            Some(Bson::Int64(i)) => (*i, true),
            Some(other) => {
                let id = doc
                    .get("_id")
                    .map(|id| format!("_id: {}", render(id)))
                    .unwrap_or_else(|| "no id".into());
                return Err(QueryError::BadValue(format!(
                    "Cannot apply $bit to a value of non-integral type.{id} has the field {} of non-integer type {}",
                    path.last().map(String::as_str).unwrap_or(""),
                    type_name(other)
                )));
            }
        };
        for (op, n, is_long) in &self.0 {
            long |= *is_long;
            acc = match op {
                BitOp::And => acc & n,
                BitOp::Or => acc | n,
                BitOp::Xor => acc ^ n,
            };
        }
        let value = if long {
            Bson::Int64(acc)
        } else {
            // Both sides were 32-bit: the result fits in 32 bits.
            Bson::Int32(i32::try_from(acc).unwrap_or(acc as i32))
        };
        paths::set(doc, path, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn p(s: &str) -> Vec<String> {
        s.split('.').map(String::from).collect()
    }

    #[test]
    fn bit_ops_apply_in_order_and_widen_to_long() {
        let spec = BitSpec::parse(&Bson::Document(doc! {"and": 10, "or": 1})).unwrap();
        let mut d = doc! {"_id": 1, "n": 13};
        spec.apply(&mut d, &p("n")).unwrap();
        assert_eq!(d.get("n"), Some(&Bson::Int32(9)));
        let spec = BitSpec::parse(&Bson::Document(doc! {"or": 5i64})).unwrap();
        spec.apply(&mut d, &p("m")).unwrap();
        assert_eq!(d.get("m"), Some(&Bson::Int64(5)));
    }

    #[test]
    fn bit_parse_errors_are_bad_value() {
        for v in [
            Bson::Int32(1),
            Bson::Document(doc! {}),
            Bson::Document(doc! {"nand": 1}),
            Bson::Document(doc! {"or": 1.0}),
        ] {
            assert_eq!(BitSpec::parse(&v).unwrap_err().code(), 2);
        }
        let e = BitSpec::parse(&Bson::Document(doc! {"or": 1.0})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "The $bit modifier field must be an Integer(32/64 bit); a 'double' is not supported here: {or: 1.0}"
        );
    }
}
