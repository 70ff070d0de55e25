//! `wire_enum!`: an enum of the strings agentd puts on the wire, each with a
//! one-line meaning (docs/api.md's tables are rendered from them), and an
//! `Other(String)` fallback.
//!
//! The fallback is for forward compatibility: a client built from this crate
//! (the `agentd` CLI) may read events from a newer server, and a value it does
//! not know must not make the whole event unreadable. `Other` keeps the string
//! as sent, so it serialises back unchanged. agentd sends no value it does
//! not list: a stored event from before a field existed is the one `Other`
//! it writes back (an empty `by`, as it was read).

/// The plain form: unit variants only (it also has `as_str`). The extended
/// form (`extra { … }`) adds variants that carry a string, each with the
/// prefix that marks it, a placeholder for the rest (`"user:" "<name>"`) and
/// its meaning; a unit variant's string wins over a prefix. They hold a
/// `Box<str>`, which keeps the enum as small as a `String` (an
/// [`crate::ErrorInfo`] is in every `turn.finished`, and events are moved
/// around a lot).
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $variant:ident = $wire:literal : $meaning:literal, )*
        }
    ) => {
        wire_enum! {
            $(#[$meta])*
            pub enum $name {
                $( $variant = $wire : $meaning, )*
            }
            extra {}
        }

        impl $name {
            /// The wire string.
            pub fn as_str(&self) -> &str {
                match self {
                    $name::Other(other) => other,
                    known => known.known_str().unwrap_or_default(),
                }
            }
        }
    };
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $variant:ident = $wire:literal : $meaning:literal, )*
        }
        extra {
            $( $extra:ident(Box<str>) = $prefix:literal $rest:literal : $form_meaning:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( #[doc = $meaning] $variant, )*
            $( #[doc = $form_meaning] $extra(Box<str>), )*
            /// A value this build does not know (from a newer agentd), as sent.
            Other(String),
        }

        impl $name {
            /// Every unit variant's wire string and meaning, in order.
            pub const KNOWN: &'static [(&'static str, &'static str)] =
                &[ $( ($wire, $meaning), )* ];

            /// The forms of the variants that carry a string (`user:<name>`)
            /// and their meanings.
            pub const FORMS: &'static [(&'static str, &'static str)] =
                &[ $( (concat!($prefix, $rest), $form_meaning), )* ];

            /// The wire string of a unit variant.
            fn known_str(&self) -> Option<&'static str> {
                match self {
                    $( $name::$variant => Some($wire), )*
                    _ => None,
                }
            }

            fn from_known(s: &str) -> Option<Self> {
                match s {
                    $( $wire => Some($name::$variant), )*
                    _ => None,
                }
            }

            /// Never fails: an unknown string becomes `Other`.
            pub fn parse(s: &str) -> Self {
                if let Some(known) = Self::from_known(s) {
                    return known;
                }
                $(
                    if let Some(rest) = s.strip_prefix($prefix) {
                        return $name::$extra(rest.into());
                    }
                )*
                $name::Other(s.to_string())
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self {
                    $( $name::$extra(rest) => write!(f, "{}{rest}", $prefix), )*
                    $name::Other(other) => f.write_str(other),
                    known => f.write_str(known.known_str().unwrap_or_default()),
                }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self::parse(s)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self::parse(&s)
            }
        }

        /// Compares with a wire string, so a test or a filter can name it.
        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                *self == Self::parse(other)
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                *self == Self::parse(other)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = String::deserialize(deserializer)?;
                Ok(Self::parse(&s))
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                crate::wire_enum::string_schema(Self::KNOWN, Self::FORMS).into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {}
    };
}

/// A string schema that names the known values without restricting to them
/// (agentd may add values; see the module docs).
#[cfg(feature = "openapi")]
pub(crate) fn string_schema(
    known: &[(&str, &str)],
    forms: &[(&str, &str)],
) -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    let values: Vec<String> = known
        .iter()
        .chain(forms)
        .map(|(wire, _)| format!("`{wire}`"))
        .collect();
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .description(Some(format!(
            "One of {}, or a value added later.",
            values.join(", ")
        )))
        .build()
        .into()
}
