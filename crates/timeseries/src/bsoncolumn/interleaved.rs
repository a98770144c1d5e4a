//! Interleaved mode (see `docs/formats/bsoncolumn.md`, section "Interleaved mode").
//!
//! An interleaved run starts with a control byte (0xF0, 0xF1 or 0xF2) followed by a
//! reference object. Every scalar field of the reference object (in depth-first order,
//! descending into sub-objects, and into arrays too for 0xF1/0xF2) is its own stream of
//! values, seeded with the reference field's value as if it were a literal. Each decoded
//! object takes one value from every stream, in that order; when a stream has used up
//! the blocks of its last control byte, the next control byte in the column belongs to
//! it. An EOO byte met by the first stream ends the run.

use bson::raw::{RawBsonRef, RawDocument};
use bson::{Bson, Document};

use super::literal::to_bson;
use super::{
    is_literal, ColumnError, Output, Reader, StreamState, EOO, INTERLEAVED_ARRAY,
    INTERLEAVED_LEGACY, MAX_NESTING,
};

/// One field of the reference object.
#[derive(Debug)]
enum Node {
    /// A scalar field decoded from stream `stream`.
    Scalar { name: String, stream: usize },
    /// A sub-object or sub-array rebuilt from its children.
    Nested { name: String, group: Group },
}

/// An object or array of the reference object (the root included).
#[derive(Debug)]
struct Group {
    array: bool,
    /// Emit the group even when none of its fields has a value: only when it is empty in
    /// the reference object.
    allow_empty: bool,
    children: Vec<Node>,
}

/// Result of decoding one object of the run.
enum Step {
    /// An object (or `None`: every field missing).
    Value(Option<Bson>),
    /// The run ended (EOO met by the first stream).
    End,
}

/// Decodes the interleaved run starting at the reader's position (its control byte),
/// pushing one value per object. Returns the last value pushed, which becomes the
/// previous value of regular mode.
pub(crate) fn decode_run(
    reader: &mut Reader<'_>,
    out: &mut Output,
) -> Result<Option<Bson>, ColumnError> {
    let start = reader.pos();
    let control = reader.peek()?;
    reader.advance(1)?;
    let invalid =
        |offset: usize, reason: String| ColumnError::InvalidInterleaved { offset, reason };

    let reference = reader.document()?;
    let reference =
        RawDocument::from_bytes(reference).map_err(|e| invalid(start, e.to_string()))?;
    let arrays = control != INTERLEAVED_LEGACY;
    let mut streams = Vec::new();
    let root = Group {
        array: control == INTERLEAVED_ARRAY,
        allow_empty: false,
        children: schema(reference, arrays, 0, &mut streams).map_err(|e| invalid(start, e))?,
    };
    if streams.is_empty() {
        return Err(invalid(
            start,
            "the reference object has no scalar field".to_string(),
        ));
    }
    if reader.peek()? == EOO {
        return Err(invalid(reader.pos(), "the run holds no object".to_string()));
    }

    let mut last = None;
    while let Step::Value(value) = rebuild(&root, &mut streams, reader)? {
        out.push(value.clone())?;
        last = value;
    }
    // Every stream must end together with the first one.
    for (index, stream) in streams.iter_mut().enumerate().skip(1) {
        if stream.has_pending()? {
            return Err(invalid(
                reader.pos(),
                format!("stream {index} still holds values when the run ends"),
            ));
        }
    }
    Ok(last)
}

/// Lists the fields of `doc`, creating a stream (seeded with the field's value) for
/// every scalar. `arrays` makes arrays groups rather than scalars.
fn schema(
    doc: &RawDocument,
    arrays: bool,
    depth: usize,
    streams: &mut Vec<StreamState>,
) -> Result<Vec<Node>, String> {
    if depth >= MAX_NESTING {
        return Err(format!(
            "the reference object nests deeper than {MAX_NESTING} levels"
        ));
    }
    let mut nodes = Vec::new();
    for item in doc {
        let (name, value) = item.map_err(|e| e.to_string())?;
        let name = name.to_string();
        let group = match value {
            RawBsonRef::Document(sub) => Some((false, sub)),
            RawBsonRef::Array(sub) if arrays => Some((
                true,
                RawDocument::from_bytes(sub.as_bytes()).map_err(|e| e.to_string())?,
            )),
            _ => None,
        };
        match group {
            Some((array, sub)) => {
                let children = schema(sub, arrays, depth + 1, streams)?;
                nodes.push(Node::Nested {
                    name,
                    group: Group {
                        array,
                        allow_empty: sub.is_empty(),
                        children,
                    },
                });
            }
            None => {
                let seed = to_bson(value, depth + 1)?;
                nodes.push(Node::Scalar {
                    name,
                    stream: streams.len(),
                });
                streams.push(StreamState::seeded(&seed));
            }
        }
    }
    Ok(nodes)
}

/// Decodes one object of the run following `group`.
fn rebuild(
    group: &Group,
    streams: &mut [StreamState],
    reader: &mut Reader<'_>,
) -> Result<Step, ColumnError> {
    let mut doc = Document::new();
    let mut items = Vec::new();
    let mut any = false;
    for child in &group.children {
        let (name, step) = match child {
            Node::Scalar { name, stream } => (name, next_value(*stream, streams, reader)?),
            Node::Nested { name, group } => (name, rebuild(group, streams, reader)?),
        };
        let value = match step {
            Step::Value(value) => value,
            Step::End => return Ok(Step::End),
        };
        if let Some(value) = value {
            any = true;
            if group.array {
                items.push(value);
            } else {
                doc.insert(name.clone(), value);
            }
        }
    }
    if !any && !group.allow_empty {
        return Ok(Step::Value(None));
    }
    Ok(Step::Value(Some(if group.array {
        Bson::Array(items)
    } else {
        Bson::Document(doc)
    })))
}

/// The next value of stream `index`, loading the next control byte for it when its
/// blocks are used up.
fn next_value(
    index: usize,
    streams: &mut [StreamState],
    reader: &mut Reader<'_>,
) -> Result<Step, ColumnError> {
    let stream = streams
        .get_mut(index)
        .ok_or_else(|| ColumnError::InvalidInterleaved {
            offset: reader.pos(),
            reason: format!("no stream {index}"),
        })?;
    if let Some(value) = stream.next_pending()? {
        return Ok(Step::Value(value));
    }
    let offset = reader.pos();
    let control = reader.peek()?;
    if control == EOO {
        if index != 0 {
            return Err(ColumnError::InvalidInterleaved {
                offset,
                reason: "the run ends in the middle of an object".to_string(),
            });
        }
        reader.advance(1)?;
        return Ok(Step::End);
    }
    if is_literal(control) {
        let value = reader.literal()?;
        stream.load_literal(&value);
        return Ok(Step::Value(Some(value)));
    }
    // Anything else must be a Simple-8b control byte (an interleaved start is not).
    Ok(Step::Value(stream.load_control(reader, control, offset)?))
}
