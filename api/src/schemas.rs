//! The string formats the HTTP APIs enforce beyond JSON types, stated once: the
//! patterns the services check (table names, keys, socket addresses, numbers in a
//! path), and, with feature `openapi`, schema types that carry them into the OpenAPI
//! documents (use them as `value_type` of a field or parameter), so a document says
//! exactly what its service accepts.

/// The pattern every table name matches: 1 to 64 characters of `A-Z`, `a-z`, `0-9`, `_`,
/// `.` and `-`, not only dots (URLs treat `.` and `..` as path segments). With
/// [`TABLE_NAME_MAX`] it is the whole rule the metadata service enforces.
pub const TABLE_NAME_PATTERN: &str = "^[A-Za-z0-9_.-]*[A-Za-z0-9_-][A-Za-z0-9_.-]*$";

/// The longest table name, in characters.
pub const TABLE_NAME_MAX: usize = 64;

/// A table name in the OpenAPI document: a string matching [`TABLE_NAME_PATTERN`], 1 to
/// [`TABLE_NAME_MAX`] characters (the `{name}` path parameter and
/// [`CreateTableRequest::name`]).
#[cfg(feature = "openapi")]
#[derive(Debug)]
pub struct TableName;

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for TableName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(TABLE_NAME_PATTERN))
            .min_length(Some(1))
            .max_length(Some(TABLE_NAME_MAX))
            .description(Some(
                "A table name: 1 to 64 characters of A-Z, a-z, 0-9, '_', '.' and '-', not only dots",
            ))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for TableName {}

/// The pattern of a key in standard base64 with padding, exactly as the service
/// decodes it (the unused bits of the last character zero).
pub const BASE64_PATTERN: &str =
    "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$";

/// A key in the OpenAPI document: standard base64 ([`BASE64_PATTERN`]).
#[cfg(feature = "openapi")]
#[derive(Debug)]
pub struct Base64Key;

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for Base64Key {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(BASE64_PATTERN))
            .description(Some("Bytes in standard base64, padded"))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for Base64Key {}

/// The pattern of an IPv4 socket address, `a.b.c.d:port`, as Rust's `SocketAddrV4`
/// parses it (each number in range is checked on parsing: 400/422 when not).
pub const SOCKET_ADDR_V4_PATTERN: &str =
    "^[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}:[0-9]{1,5}$";

/// An IPv4 socket address (`a.b.c.d:port`) in the OpenAPI document
/// ([`SOCKET_ADDR_V4_PATTERN`]).
#[cfg(feature = "openapi")]
#[derive(Debug)]
pub struct SocketAddrV4String;

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for SocketAddrV4String {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(SOCKET_ADDR_V4_PATTERN))
            .description(Some("An IPv4 socket address, a.b.c.d:port"))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for SocketAddrV4String {}

/// The pattern of a 32-bit number in a path segment (a queue pair number, a memory
/// key): decimal, or hexadecimal after `0x`/`0X`. Values past `u32::MAX` match but are
/// answered 400.
pub const U32_SEGMENT_PATTERN: &str = "^(?:[0-9]{1,10}|0[xX][0-9A-Fa-f]{1,8})$";

/// A 32-bit number in a path segment, in the OpenAPI document ([`U32_SEGMENT_PATTERN`]).
#[cfg(feature = "openapi")]
#[derive(Debug)]
pub struct U32Segment;

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for U32Segment {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(U32_SEGMENT_PATTERN))
            .description(Some("A 32-bit number: decimal, or hexadecimal after 0x"))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for U32Segment {}

/// The path MTUs a queue pair may use (256, 512, 1024, 2048 or 4096; default 1024), as
/// the schema of a `pmtu` field.
#[cfg(feature = "openapi")]
pub fn pmtu_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .enum_values(Some([256, 512, 1024, 2048, 4096]))
        .default(Some(1024.into()))
        .description(Some(
            "Path MTU: 256, 512, 1024, 2048 or 4096 (default 1024)",
        ))
        .build()
}
