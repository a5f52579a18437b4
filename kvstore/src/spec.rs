//! Table specs: what [`crate::Client::create_table`] makes — the index and its limits.

use dmkv_api::metadata::{
    CreateTableRequest, InPlaceRequest, IndexKind, LatchPlacement, TableDescription,
};

use crate::client::{Client, meta_error};
use crate::error::KvError;
use crate::inplace::{KEY_CAP, Placement, SchemeSpec, TUPLE_HEADER};

/// A table to create: its index and the limits the index needs. Every index kind is
/// created with one call, [`crate::Client::create_table`].
///
/// ```
/// use kvstore::{SchemeSpec, TableSpec};
///
/// let chains = TableSpec::clover(1024);
/// let hashed = TableSpec::race(1024);
/// // 10 000 tuples of up to 128-byte values under versioning latches.
/// let scheme: SchemeSpec = "versioning".parse().unwrap();
/// let fixed = TableSpec::in_place(scheme, 128, 10_000);
/// assert_eq!(fixed.value_limit(), 128);
/// # let _ = (chains, hashed);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableSpec {
    /// Clover: per-key chains of immutable versions, values up to `value_limit` bytes.
    Clover {
        /// Largest value in bytes (64 B … 1 MiB).
        value_limit: u64,
    },
    /// RACE extendible hashing over out-of-place KV blocks.
    Race {
        /// Largest value in bytes (64 B … 1 MiB).
        value_limit: u64,
    },
    /// A fixed array of `capacity` tuples overwritten in place under latch scheme `scheme`.
    InPlace {
        /// The latch scheme.
        scheme: SchemeSpec,
        /// Largest value in bytes.
        value_limit: u64,
        /// Number of tuples (fixed for the table's life).
        capacity: u64,
    },
}

impl TableSpec {
    /// A Clover table with values of up to `value_limit` bytes.
    pub fn clover(value_limit: u64) -> TableSpec {
        TableSpec::Clover { value_limit }
    }

    /// A RACE table with values of up to `value_limit` bytes.
    pub fn race(value_limit: u64) -> TableSpec {
        TableSpec::Race { value_limit }
    }

    /// An in-place table of `capacity` tuples with latch scheme `scheme` and values
    /// of up to `value_limit` bytes.
    pub fn in_place(scheme: SchemeSpec, value_limit: u64, capacity: u64) -> TableSpec {
        TableSpec::InPlace {
            scheme,
            value_limit,
            capacity,
        }
    }

    /// The index this spec makes.
    pub fn index(&self) -> IndexKind {
        match self {
            TableSpec::Clover { .. } => IndexKind::Clover,
            TableSpec::Race { .. } => IndexKind::Race,
            TableSpec::InPlace { .. } => IndexKind::InPlace,
        }
    }

    /// The largest value.
    pub fn value_limit(&self) -> u64 {
        match self {
            TableSpec::Clover { value_limit }
            | TableSpec::Race { value_limit }
            | TableSpec::InPlace { value_limit, .. } => *value_limit,
        }
    }

    /// The metadata service's `POST /v1/tables` for table `name` of this spec.
    pub fn request(&self, name: &str) -> Result<CreateTableRequest, KvError> {
        let inplace = match self {
            TableSpec::Clover { .. } | TableSpec::Race { .. } => None,
            TableSpec::InPlace {
                scheme,
                value_limit,
                capacity,
            } => Some(in_place_request(scheme, *value_limit, *capacity)?),
        };
        Ok(CreateTableRequest {
            name: name.to_owned(),
            index: self.index(),
            value_limit: self.value_limit(),
            memnodes: None,
            replication: None,
            update_mode: None,
            inplace,
        })
    }
}

/// The in-place part of a `POST /v1/tables` for `capacity` tuples of scheme
/// `scheme` with values of up to `value_limit` bytes (the tuple stride comes from
/// the scheme's layout).
fn in_place_request(
    scheme: &SchemeSpec,
    value_limit: u64,
    capacity: u64,
) -> Result<InPlaceRequest, KvError> {
    scheme.validate()?;
    let value_cap = usize::try_from(value_limit)
        .map_err(|_| KvError::InvalidArgument(format!("value limit {value_limit} is too large")))?;
    let built = scheme.build(TUPLE_HEADER + KEY_CAP + value_cap)?;
    let latch_placement = match scheme {
        SchemeSpec::Pessimistic { placement, .. } => Some(match placement {
            Placement::Embedded => LatchPlacement::Embedded,
            Placement::Padded => LatchPlacement::Padded,
            Placement::Separate => LatchPlacement::Separate,
        }),
        _ => None,
    };
    Ok(InPlaceRequest {
        scheme: scheme.name(),
        capacity,
        tuple_bytes: built.layout().stride,
        latch_placement,
        unsafe_demo: scheme.is_unsafe(),
    })
}

impl Client {
    /// Create a table of any index kind — Clover, RACE, or in place with its latch
    /// scheme — as `spec` says. Fails with `AlreadyExists` when the name is taken and
    /// `InvalidArgument` when the service refuses the spec (e.g. a latch scheme's
    /// options that do not go together).
    pub fn create_table(&self, name: &str, spec: &TableSpec) -> Result<TableDescription, KvError> {
        self.create_replicated_table(name, spec, 1)
    }

    /// [`Client::create_table`] with `replication` copies of the table's data (1–3;
    /// the metadata service refuses more copies than memnodes). Sessions serve
    /// replicated Clover tables (see `docs/replication.md`); opening a replicated
    /// table of another index fails with [`KvError::Unsupported`].
    pub fn create_replicated_table(
        &self,
        name: &str,
        spec: &TableSpec,
        replication: u32,
    ) -> Result<TableDescription, KvError> {
        let mut request = spec.request(name)?;
        request.replication = (replication != 1).then_some(replication);
        let t = self.inner.meta.create_table(&request).map_err(meta_error)?;
        self.inner.remember(&t);
        Ok(t)
    }
}
