//! Error type of the time-series layer. Every variant carries MongoDB's numeric
//! error code and code name so the protocol layer can report it verbatim.

/// An error raised while validating options, inserting measurements or
/// decoding a stored bucket.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TsError {
    /// Code 2 `BadValue`.
    #[error("{0}")]
    BadValue(String),
    /// Code 14 `TypeMismatch`.
    #[error("{0}")]
    TypeMismatch(String),
    /// Code 22 `InvalidBSON`: stored bucket bytes are malformed.
    #[error("{0}")]
    CorruptBucket(String),
    /// Code 72 `InvalidOptions`.
    #[error("{0}")]
    InvalidOptions(String),
    /// Code 10334 `BSONObjectTooLarge`: a measurement over 16 MiB.
    #[error("{0}")]
    TooLarge(String),
    /// Code 40414 `IDLFailedToParse`: a required IDL field is missing.
    #[error("{0}")]
    MissingField(String),
    /// Code 40415 `IDLUnknownField`: an unknown IDL field.
    #[error("{0}")]
    UnknownField(String),
}

impl TsError {
    /// MongoDB's numeric error code.
    pub fn code(&self) -> i32 {
        match self {
            TsError::BadValue(_) => 2,
            TsError::TypeMismatch(_) => 14,
            TsError::CorruptBucket(_) => 22,
            TsError::InvalidOptions(_) => 72,
            TsError::TooLarge(_) => 10334,
            TsError::MissingField(_) => 40414,
            TsError::UnknownField(_) => 40415,
        }
    }

    /// MongoDB's code name.
    pub fn code_name(&self) -> std::borrow::Cow<'static, str> {
        hourglass_errors::name(self.code())
    }

    /// The error message (`errmsg`).
    pub fn message(&self) -> &str {
        match self {
            TsError::BadValue(m)
            | TsError::TypeMismatch(m)
            | TsError::CorruptBucket(m)
            | TsError::InvalidOptions(m)
            | TsError::TooLarge(m)
            | TsError::MissingField(m)
            | TsError::UnknownField(m) => m,
        }
    }

    pub(crate) fn corrupt(what: impl std::fmt::Display) -> TsError {
        TsError::CorruptBucket(format!("corrupt time-series bucket: {what}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_code_and_name() {
        let e = TsError::MissingField("x".into());
        assert_eq!(
            (e.code(), &*e.code_name(), e.message()),
            (40414, "IDLFailedToParse", "x")
        );
        assert_eq!(TsError::InvalidOptions(String::new()).code(), 72);
        assert_eq!(
            TsError::UnknownField(String::new()).code_name(),
            "IDLUnknownField"
        );
    }
}
