//! Test and benchmark hooks that run SQL text on the store's own connection and hand back plain
//! Rust values, so nothing outside `store/` names a driver type. Tests use them to write rows the
//! library never would (hostile fixtures, broken invariants) and to read facts the public API
//! does not expose (a plan, a pragma, a statement's step counters). Hidden from the docs: they
//! bypass every check the library makes. This file owns the value both backends hand back; the
//! hooks are the dialects' `raw.rs`.

/// One value of a row or a parameter. The variants and their `Debug` spelling are SQLite's
/// storage classes, so a row printed with `{:?}` reads as it always has.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
pub enum RawValue {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl RawValue {
    /// The integer, or a panic naming what the value was (these are test hooks).
    pub fn as_i64(&self) -> i64 {
        match self {
            RawValue::Integer(i) => *i,
            other => panic!("expected an integer, got {other:?}"),
        }
    }

    /// The text, or a panic naming what the value was.
    pub fn as_str(&self) -> &str {
        match self {
            RawValue::Text(s) => s,
            other => panic!("expected text, got {other:?}"),
        }
    }

    /// The bytes of a blob or of a text, or a panic naming what the value was.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            RawValue::Blob(b) => b,
            RawValue::Text(s) => s.as_bytes(),
            other => panic!("expected a blob, got {other:?}"),
        }
    }

    /// The text, `None` for NULL, or a panic naming what the value was.
    pub fn as_opt_str(&self) -> Option<&str> {
        match self {
            RawValue::Null => None,
            other => Some(other.as_str()),
        }
    }
}

impl From<i64> for RawValue {
    fn from(v: i64) -> Self {
        RawValue::Integer(v)
    }
}
impl From<&str> for RawValue {
    fn from(v: &str) -> Self {
        RawValue::Text(v.to_string())
    }
}
impl From<String> for RawValue {
    fn from(v: String) -> Self {
        RawValue::Text(v)
    }
}
impl From<&String> for RawValue {
    fn from(v: &String) -> Self {
        RawValue::Text(v.clone())
    }
}
impl<T: Into<RawValue>> From<Option<T>> for RawValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(RawValue::Null, Into::into)
    }
}
