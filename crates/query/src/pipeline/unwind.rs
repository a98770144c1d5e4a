//! The `$unwind` stage (string and document forms, with
//! `preserveNullAndEmptyArrays` and `includeArrayIndex`).

use bson::{Bson, Document};

use crate::error::QueryError;

/// A parsed `$unwind` stage.
#[derive(Debug, Clone)]
pub struct Unwind {
    path: Vec<String>,
    include_index: Option<String>,
    preserve: bool,
}

fn parse_path(s: &str) -> Result<Vec<String>, QueryError> {
    let Some(p) = s.strip_prefix('$') else {
        return Err(QueryError::loc(
            28818,
            format!("path option to $unwind stage should be prefixed with a '$': {s}"),
        ));
    };
    let parts: Vec<String> = p.split('.').map(String::from).collect();
    if parts.iter().any(|x| x.is_empty() || x.starts_with('$')) {
        return Err(QueryError::loc(28818, format!("invalid $unwind path: {s}")));
    }
    Ok(parts)
}

impl Unwind {
    /// Parses `"$path"` or `{path, includeArrayIndex, preserveNullAndEmptyArrays}`.
    pub fn parse(v: &Bson) -> Result<Unwind, QueryError> {
        match v {
            Bson::String(s) => Ok(Unwind {
                path: parse_path(s)?,
                include_index: None,
                preserve: false,
            }),
            Bson::Document(d) => {
                let mut path = None;
                let mut include_index = None;
                let mut preserve = false;
                for (k, val) in d {
                    match (k.as_str(), val) {
                        ("path", Bson::String(s)) => path = Some(parse_path(s)?),
                        ("path", _) => return Err(QueryError::loc(28808, "expected a string as the path for $unwind stage")),
                        ("includeArrayIndex", Bson::String(s)) => {
                            if s.is_empty() || s.starts_with('$') {
                                return Err(QueryError::loc(28822, format!("includeArrayIndex option to $unwind stage should not be prefixed with a '$': {s}")));
                            }
                            include_index = Some(s.clone());
                        }
                        ("includeArrayIndex", _) => return Err(QueryError::loc(28810, "expected a non-empty string for the includeArrayIndex option to $unwind stage")),
                        ("preserveNullAndEmptyArrays", Bson::Boolean(b)) => preserve = *b,
                        ("preserveNullAndEmptyArrays", _) => return Err(QueryError::loc(28809, "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage")),
                        (other, _) => return Err(QueryError::loc(28811, format!("unrecognized option to $unwind stage: {other}"))),
                    }
                }
                let path = path
                    .ok_or_else(|| QueryError::loc(28812, "no path specified to $unwind stage"))?;
                Ok(Unwind {
                    path,
                    include_index,
                    preserve,
                })
            }
            _ => Err(QueryError::loc(
                15981,
                "expected either a string or an object as specification for $unwind stage",
            )),
        }
    }

    /// Unwinds each input document. Linear in the output: the array is taken out of the
    /// document before the copies are made, so each copy costs only the other fields.
    pub fn run(&self, docs: Vec<Document>) -> Result<Vec<Document>, QueryError> {
        let parts: Vec<&str> = self.path.iter().map(String::as_str).collect();
        let mut out = Vec::new();
        for mut doc in docs {
            crate::interrupt::check()?;
            let value = match get_doc_path_mut(&mut doc, &parts) {
                Some(slot @ Bson::Array(_)) => Some(std::mem::replace(slot, Bson::Null)),
                Some(other) => Some(other.clone()),
                None => None,
            };
            match value {
                Some(Bson::Array(items)) if !items.is_empty() => {
                    for (i, item) in items.into_iter().enumerate() {
                        if i % 1024 == 1023 {
                            crate::interrupt::check()?;
                        }
                        let mut d = doc.clone();
                        crate::path::set_doc_path(&mut d, &parts, item);
                        if let Some(name) = &self.include_index {
                            d.insert(name.clone(), Bson::Int64(i as i64));
                        }
                        out.push(d);
                    }
                }
                Some(Bson::Array(_)) | None | Some(Bson::Null) | Some(Bson::Undefined) => {
                    if self.preserve {
                        let mut d = doc;
                        if matches!(value, Some(Bson::Array(_))) {
                            remove_path(&mut d, &parts);
                        }
                        if let Some(name) = &self.include_index {
                            d.insert(name.clone(), Bson::Null);
                        }
                        out.push(d);
                    }
                }
                Some(_) => {
                    let mut d = doc;
                    if let Some(name) = &self.include_index {
                        d.insert(name.clone(), Bson::Null);
                    }
                    out.push(d);
                }
            }
        }
        Ok(out)
    }
}

fn get_doc_path_mut<'a>(doc: &'a mut Document, parts: &[&str]) -> Option<&'a mut Bson> {
    let (last, init) = parts.split_last()?;
    let mut cur = doc;
    for p in init {
        match cur.get_mut(*p)? {
            Bson::Document(d) => cur = d,
            _ => return None,
        }
    }
    cur.get_mut(*last)
}

fn remove_path(doc: &mut Document, parts: &[&str]) {
    match parts.split_first() {
        Some((first, [])) => {
            doc.remove(*first);
        }
        Some((first, rest)) => {
            if let Some(Bson::Document(d)) = doc.get_mut(*first) {
                remove_path(d, rest);
            }
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn unwind(spec: Bson, docs: Vec<Document>) -> Vec<Document> {
        Unwind::parse(&spec).unwrap().run(docs).unwrap()
    }

    #[test]
    fn string_form_emits_one_doc_per_element_and_drops_empty() {
        let out = unwind(
            "$a".into(),
            vec![
                doc! {"_id": 1, "a": [1, 2]},
                doc! {"_id": 2, "a": []},
                doc! {"_id": 3},
                doc! {"_id": 4, "a": 5},
            ],
        );
        assert_eq!(
            out,
            vec![
                doc! {"_id": 1, "a": 1},
                doc! {"_id": 1, "a": 2},
                doc! {"_id": 4, "a": 5}
            ]
        );
    }

    #[test]
    fn preserve_and_include_array_index() {
        let spec = Bson::Document(
            doc! {"path": "$a", "preserveNullAndEmptyArrays": true, "includeArrayIndex": "i"},
        );
        let out = unwind(
            spec,
            vec![
                doc! {"_id": 1, "a": ["x"]},
                doc! {"_id": 2, "a": []},
                doc! {"_id": 3, "a": null},
            ],
        );
        assert_eq!(
            out,
            vec![
                doc! {"_id": 1, "a": "x", "i": 0i64},
                doc! {"_id": 2, "i": null},
                doc! {"_id": 3, "a": null, "i": null}
            ]
        );
    }

    #[test]
    fn nested_paths_unwind_subdocument_arrays() {
        let out = unwind("$a.b".into(), vec![doc! {"a": {"b": [1, 2], "c": 0}}]);
        assert_eq!(
            out,
            vec![doc! {"a": {"b": 1, "c": 0}}, doc! {"a": {"b": 2, "c": 0}}]
        );
    }

    #[test]
    fn path_without_dollar_is_rejected() {
        assert_eq!(Unwind::parse(&"a".into()).unwrap_err().code(), 28818);
        assert_eq!(Unwind::parse(&Bson::Int32(1)).unwrap_err().code(), 15981);
    }
}
