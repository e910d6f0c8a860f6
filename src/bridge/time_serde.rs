//! RFC 3339 timestamps in task records and reports, without enabling chrono's `serde`
//! feature for the whole crate.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serializer};

/// Millisecond precision: enough to order events, short enough to read.
pub(crate) fn format(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn parse<E: serde::de::Error>(s: &str) -> Result<DateTime<Utc>, E> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| E::custom(format!("invalid RFC 3339 time {s:?}: {e}")))
}

pub(crate) fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(t))
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    parse(&String::deserialize(d)?)
}

/// The same for optional timestamps (`null` when absent), for reports.
pub(crate) mod option {
    use super::{DateTime, Serializer, Utc};

    #[expect(clippy::ref_option, reason = "serde's `with` hands us `&Option<T>`")]
    pub(crate) fn serialize<S: Serializer>(
        t: &Option<DateTime<Utc>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&super::format(t)),
            None => s.serialize_none(),
        }
    }
}
