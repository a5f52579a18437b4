//! Bindings by name.

pub mod dmkv;
pub mod memory;
pub mod record_codec;
pub mod redis;
pub mod resp;

use crate::db::{Binding, DbError};
use crate::props::Properties;

/// The bindings this build has, for `--help` and errors.
pub const NAMES: &[&str] = &["dmkv", "memory (alias basic)", "redis"];

/// The binding called `name`.
pub fn by_name(name: &str, props: &Properties) -> Result<Box<dyn Binding>, DbError> {
    match name {
        "dmkv" => Ok(Box::new(dmkv::DmkvBinding::new(props)?)),
        "memory" | "basic" => Ok(Box::new(memory::MemoryBinding::new())),
        "redis" => Ok(Box::new(redis::RedisBinding::new(props))),
        other => Err(DbError::new(format!(
            "unknown binding {other:?}; available: {}",
            NAMES.join(", ")
        ))),
    }
}
