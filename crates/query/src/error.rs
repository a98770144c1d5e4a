//! Error type of the query layer. Every variant maps to a MongoDB error code
//! and code name so the protocol layer can report it verbatim.

use bson::{Bson, Document};

/// An error raised while parsing or evaluating a query construct.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum QueryError {
    /// Code 2.
    #[error("{0}")]
    BadValue(String),
    /// Code 4.
    #[error("{0}")]
    NoSuchKey(String),
    /// Code 9.
    #[error("{0}")]
    FailedToParse(String),
    /// Code 14.
    #[error("{0}")]
    TypeMismatch(String),
    /// Code 15.
    #[error("{0}")]
    Overflow(String),
    /// Code 28.
    #[error("{0}")]
    PathNotViable(String),
    /// Code 40.
    #[error("{0}")]
    ConflictingUpdateOperators(String),
    /// Code 52.
    #[error("{0}")]
    DollarPrefixedFieldName(String),
    /// Code 56.
    #[error("{0}")]
    EmptyFieldName(String),
    /// Code 66.
    #[error("{0}")]
    ImmutableField(String),
    /// Code 72.
    #[error("{0}")]
    InvalidOptions(String),
    /// Code 168.
    #[error("{0}")]
    InvalidPipelineOperator(String),
    /// Code 241.
    #[error("{0}")]
    ConversionFailure(String),
    /// Code 292.
    #[error("{0}")]
    QueryExceededMemoryLimitNoDiskUseAllowed(String),
    /// Code 50.
    #[error("{0}")]
    MaxTimeMSExpired(String),
    /// Code 11601.
    #[error("{0}")]
    Interrupted(String),
    /// Code 10334.
    #[error("{0}")]
    BSONObjectTooLarge(String),
    /// An error from another layer (e.g. the catalog behind `$merge`), kept verbatim.
    #[error("{2}")]
    Foreign(i32, &'static str, String),
    /// A MongoDB "location" error: a numeric code with code name `Location<code>`.
    #[error("{1}")]
    Location(i32, String),
}

/// Location codes this crate raises; their code names are `Location<code>`, except the
/// IDL parser's, which MongoDB's error_codes.yml names.
macro_rules! location_names {
    ($($code:literal),* $(,)?) => {
        fn location_name(code: i32) -> &'static str {
            match code {
                40414 => "IDLFailedToParse",
                40415 => "IDLUnknownField",
                $($code => concat!("Location", stringify!($code)),)*
                _ => "Location",
            }
        }
    };
}

location_names!(
    13026, 13027, 16755, 16804, 40603, 5626500, 183934, 183493, 5892921, 1938439, 5860208, 16866,
    16867, 16868, 17419, 5729100, 7749501, 4568, 40257, 40261, 40262, 40263, 40268, 40241, 40242,
    18537, 40192, 51047, 31441, 5439013, 5439014, 5439015, 5439016, 5439017, 5439018, 5166307,
    5166400, 5166401, 5166402, 5166403, 5166405, 6045000, 4570, 16990, 16994, 51182, 51134, 51186,
    40602, 5858203, 17053, 5733201, 5733501, 5946802, 8993000, 5897900, 605001, 6050106, 40239,
    15947, 15952, 15955, 15956, 15957, 15958, 15959, 15969, 15972, 15973, 15975, 15976, 15981,
    15983, 15998, 16006, 16007, 16020, 16034, 16404, 16410, 16412, 16554, 16555, 16556, 16609,
    16610, 16611, 16612, 16702, 16872, 16876, 16877, 16883, 17083, 17124, 17276, 17312, 28656,
    28657, 28664, 28680, 28689, 28690, 28714, 28758, 28761, 28762, 28764, 28765, 28766, 28808,
    28724, 28725, 28727, 28729, 28809, 28810, 28811, 28812, 28818, 28822, 31002, 31120, 31250,
    31253, 31254, 34435, 34455, 34456, 34471, 34473, 40060, 40061, 40062, 40064, 40065, 40066,
    40067, 40068, 40081, 40085, 40086, 40087, 40149, 40156, 40157, 40158, 40160, 40177, 40228,
    40231, 40234, 40235, 40236, 40237, 40238, 40272, 40323, 40324, 40400, 40517, 51081, 51083,
    51091, 51108, 51270, 51272, 1257300, 18533, 18534, 18535, 18536, 18628, 18629, 40485, 40489,
    40515, 40516, 40518, 40519, 40520, 40521, 40522, 40523, 40524, 40535, 40536, 40539, 40540,
    40541, 40542, 40684, 31034, 40076, 40079, 40080, 51104, 51105, 51106, 51107, 51111, 51746,
    50699, 50700, 3041704, 3041705, 4161105, 4161106, 34460, 34463, 34466, 34467, 34468, 2942504,
    2942505, 5787801, 5787901, 5787907, 5787908, 5788200, 5788604, 7750301, 40090, 40091, 40092,
    40093, 40094, 40096, 40097, 40390, 40386, 40393, 40395, 40398, 17040, 17041, 17044, 34443,
    34445, 34447, 34449, 40201, 40202, 40193, 40194, 40195, 40196, 40197, 40198, 40199, 40200,
    40240, 40243, 40244, 40245, 40246, 40247, 40169, 40170, 40171, 40172, 40173, 40174, 28745,
    28746, 28747, 28748, 28749, 40321, 40319, 40449, 40600, 40601, 51132, 51183, 13113, 5733400,
    5733401, 5733402, 5733403, 5733404, 5733405, 5733406, 5733407, 5733408, 5733409, 5733410,
    5733411, 6050200, 6050201, 6050202, 6050203, 6050204, 6050205, 6050206, 6050207, 5371601,
    5371602, 5397901, 5397902, 5397903, 5397904, 5397905, 5397906, 5397907, 5397908, 5429410,
    5429411, 5429412, 5429413, 5429414, 5429415, 5429416, 5480405, 5480406, 5490700, 5490701,
    5490702, 5490703, 5490704, 5490705,
);

impl QueryError {
    /// MongoDB's numeric error code.
    pub fn code(&self) -> i32 {
        match self {
            QueryError::BadValue(_) => 2,
            QueryError::NoSuchKey(_) => 4,
            QueryError::FailedToParse(_) => 9,
            QueryError::TypeMismatch(_) => 14,
            QueryError::Overflow(_) => 15,
            QueryError::PathNotViable(_) => 28,
            QueryError::ConflictingUpdateOperators(_) => 40,
            QueryError::DollarPrefixedFieldName(_) => 52,
            QueryError::EmptyFieldName(_) => 56,
            QueryError::ImmutableField(_) => 66,
            QueryError::InvalidOptions(_) => 72,
            QueryError::InvalidPipelineOperator(_) => 168,
            QueryError::ConversionFailure(_) => 241,
            QueryError::QueryExceededMemoryLimitNoDiskUseAllowed(_) => 292,
            QueryError::MaxTimeMSExpired(_) => 50,
            QueryError::Interrupted(_) => 11601,
            QueryError::BSONObjectTooLarge(_) => 10334,
            QueryError::Foreign(code, _, _) => *code,
            QueryError::Location(code, _) => *code,
        }
    }

    /// MongoDB's code name, e.g. `"BadValue"` or `"Location40324"`.
    pub fn code_name(&self) -> &'static str {
        match self {
            QueryError::BadValue(_) => "BadValue",
            QueryError::NoSuchKey(_) => "NoSuchKey",
            QueryError::FailedToParse(_) => "FailedToParse",
            QueryError::TypeMismatch(_) => "TypeMismatch",
            QueryError::Overflow(_) => "Overflow",
            QueryError::PathNotViable(_) => "PathNotViable",
            QueryError::ConflictingUpdateOperators(_) => "ConflictingUpdateOperators",
            QueryError::DollarPrefixedFieldName(_) => "DollarPrefixedFieldName",
            QueryError::EmptyFieldName(_) => "EmptyFieldName",
            QueryError::ImmutableField(_) => "ImmutableField",
            QueryError::InvalidOptions(_) => "InvalidOptions",
            QueryError::InvalidPipelineOperator(_) => "InvalidPipelineOperator",
            QueryError::ConversionFailure(_) => "ConversionFailure",
            QueryError::QueryExceededMemoryLimitNoDiskUseAllowed(_) => {
                "QueryExceededMemoryLimitNoDiskUseAllowed"
            }
            QueryError::MaxTimeMSExpired(_) => "MaxTimeMSExpired",
            QueryError::Interrupted(_) => "Interrupted",
            QueryError::BSONObjectTooLarge(_) => "BSONObjectTooLarge",
            QueryError::Foreign(_, name, _) => name,
            QueryError::Location(code, _) => location_name(*code),
        }
    }

    /// The human readable message (MongoDB's `errmsg`).
    pub fn message(&self) -> String {
        self.to_string()
    }

    pub(crate) fn bad(msg: impl Into<String>) -> Self {
        QueryError::BadValue(msg.into())
    }

    pub(crate) fn loc(code: i32, msg: impl Into<String>) -> Self {
        QueryError::Location(code, msg.into())
    }
}

/// Renders a value the way MongoDB prints values inside error messages
/// (`{ a: 1, b: "x" }`).
pub fn render(v: &Bson) -> String {
    match v {
        Bson::Document(d) => render_doc(d),
        Bson::Array(a) => {
            let parts: Vec<String> = a.iter().map(render).collect();
            format!("[ {} ]", parts.join(", "))
        }
        Bson::String(s) => format!("\"{s}\""),
        Bson::Double(f) => {
            if f.fract() == 0.0 && f.is_finite() {
                format!("{f:.1}")
            } else {
                format!("{f}")
            }
        }
        Bson::Int64(i) => i.to_string(),
        Bson::Int32(i) => i.to_string(),
        Bson::ObjectId(o) => format!("ObjectId('{o}')"),
        Bson::Boolean(b) => b.to_string(),
        Bson::Null => "null".into(),
        other => other.to_string(),
    }
}

/// Renders a document like [`render`].
pub fn render_doc(d: &Document) -> String {
    if d.is_empty() {
        return "{}".into();
    }
    let parts: Vec<String> = d
        .iter()
        .map(|(k, v)| format!("{k}: {}", render(v)))
        .collect();
    format!("{{ {} }}", parts.join(", "))
}

/// Renders `{ _id: <id> }` for a document, as used by update error messages.
pub fn render_id(d: &Document) -> String {
    match d.get("_id") {
        Some(id) => format!("{{_id: {}}}", render(id)),
        None => "{}".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_match_mongodb() {
        assert_eq!(QueryError::bad("x").code(), 2);
        assert_eq!(QueryError::bad("x").code_name(), "BadValue");
        assert_eq!(QueryError::FailedToParse("x".into()).code(), 9);
        assert_eq!(QueryError::ImmutableField("x".into()).code(), 66);
        assert_eq!(
            QueryError::ConflictingUpdateOperators("x".into()).code(),
            40
        );
        let e = QueryError::loc(40324, "Unrecognized pipeline stage name: '$foo'");
        assert_eq!(e.code(), 40324);
        assert_eq!(e.code_name(), "Location40324");
        assert_eq!(e.to_string(), "Unrecognized pipeline stage name: '$foo'");
    }

    #[test]
    fn render_prints_shell_like_documents() {
        let d = bson::doc! {"_id": 1, "a": "x", "b": [1, 2.5]};
        assert_eq!(render_doc(&d), "{ _id: 1, a: \"x\", b: [ 1, 2.5 ] }");
        assert_eq!(render_id(&d), "{_id: 1}");
    }
}
