//! A region that outlives the process (`--region-file PATH`): the memory lives in the
//! file, its identity — instance id, rkey, base VA, length, node name — in the sidecar
//! `PATH.meta` (JSON, replaced atomically by a rename).
//!
//! On first start the file is created (zeroed) and, once the region is registered, its
//! identity is written. On a restart the file is mapped as it is (nothing is zeroed)
//! and registered again under the recorded rkey and base VA, so clients' pointers and
//! the metadata service's leases stay valid; the recorded instance id tells the
//! metadata service that the memory is the one it knew. A file whose length or node
//! name does not match the configuration is refused, never silently reused.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use rand::Rng;
use serde::{Deserialize, Serialize};
use verbs::mem::{Region, RegionError};

/// Version of the identity file's format.
pub const IDENTITY_FORMAT: u32 = 1;

/// What `PATH.meta` records about a region file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionIdentity {
    /// Format version ([`IDENTITY_FORMAT`]).
    pub format: u32,
    /// Random non-zero id made when the file was created.
    pub instance: u64,
    /// The rkey the region is registered under.
    pub rkey: u32,
    /// Virtual address of its first byte.
    pub base_va: u64,
    /// Its length in bytes (a multiple of 64).
    pub len: u64,
    /// The memnode name it was created for (`--name`), if one was given.
    pub name: Option<String>,
}

/// A region file mapped for serving: newly created, or reopened with its identity.
#[derive(Debug)]
pub struct OpenedRegionFile {
    /// The mapped region.
    pub region: Region,
    /// The identity of a reopened file; `None` when the file was just created (its
    /// identity is written with [`write_identity`] once the region is registered).
    pub identity: Option<RegionIdentity>,
    /// Line locks a process that died while writing had left taken (released).
    pub released_locks: u64,
}

/// A region file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RegionFileError {
    /// The region file exists but its identity file does not.
    #[error(
        "region file {} exists but its identity file {} does not (was the first start interrupted?); remove {} to start with empty memory",
        path.display(), meta.display(), path.display()
    )]
    MissingIdentity {
        /// The region file.
        path: PathBuf,
        /// The identity file.
        meta: PathBuf,
    },
    /// The identity file cannot be read or parsed.
    #[error("cannot read the region identity file {}: {reason}", meta.display())]
    BadIdentity {
        /// The identity file.
        meta: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file was made for another configuration.
    #[error(
        "region file {} was created with {what} {recorded} but this memnode is configured with {configured}; start it with the recorded value, or remove {} and {} to start with empty memory",
        path.display(), path.display(), meta.display()
    )]
    Mismatch {
        /// The region file.
        path: PathBuf,
        /// The identity file.
        meta: PathBuf,
        /// What differs (`capacity`, `--name`, `--base-va`).
        what: &'static str,
        /// The recorded value.
        recorded: String,
        /// The configured value.
        configured: String,
    },
    /// The region file could not be created or mapped.
    #[error(transparent)]
    Region(#[from] RegionError),
    /// The identity file could not be written.
    #[error("cannot write the region identity file {}: {source}", meta.display())]
    Write {
        /// The identity file.
        meta: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// The identity file of the region file `path`: `PATH.meta`.
pub fn identity_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".meta");
    PathBuf::from(s)
}

/// A fresh random non-zero instance id.
pub fn new_instance() -> u64 {
    let mut rng = rand::rng();
    loop {
        let v: u64 = rng.random();
        if v != 0 {
            return v;
        }
    }
}

fn describe_name(name: Option<&str>) -> String {
    name.map_or_else(|| "no --name".to_owned(), |n| format!("{n:?}"))
}

/// Opens the region file at `path` for `len` bytes (rounded up to 64) at `base_va`
/// for the memnode named `name`: maps an existing file as it is after checking its
/// identity, or creates a zeroed one.
pub fn open_or_create(
    path: &Path,
    len: u64,
    base_va: u64,
    name: Option<&str>,
) -> Result<OpenedRegionFile, RegionFileError> {
    let meta = identity_path(path);
    let want_len = len.div_ceil(64).saturating_mul(64);
    let size = usize::try_from(want_len).map_err(|_| RegionError::TooLarge(len))?;
    if !path.exists() {
        if meta.exists() {
            tracing::warn!(
                path = %path.display(),
                meta = %meta.display(),
                "the region file is gone but its identity file is there; starting with new, empty memory"
            );
        }
        let region = Region::create_file(path, size)?;
        return Ok(OpenedRegionFile {
            region,
            identity: None,
            released_locks: 0,
        });
    }
    if !meta.exists() {
        return Err(RegionFileError::MissingIdentity {
            path: path.to_owned(),
            meta,
        });
    }
    let identity = read_identity(&meta)?;
    let mismatch = |what, recorded: String, configured: String| RegionFileError::Mismatch {
        path: path.to_owned(),
        meta: meta.clone(),
        what,
        recorded,
        configured,
    };
    if identity.len != want_len {
        return Err(mismatch(
            "capacity",
            format!("{} bytes", identity.len),
            format!("{want_len} bytes"),
        ));
    }
    if identity.name.as_deref() != name {
        return Err(mismatch(
            "--name",
            describe_name(identity.name.as_deref()),
            describe_name(name),
        ));
    }
    if identity.base_va != base_va {
        return Err(mismatch(
            "--base-va",
            format!("{:#x}", identity.base_va),
            format!("{base_va:#x}"),
        ));
    }
    let region = Region::open_file(path)?;
    if region.len() != identity.len {
        return Err(mismatch(
            "capacity",
            format!("{} bytes (in the identity file)", identity.len),
            format!("{} bytes (in the region file)", region.len()),
        ));
    }
    let released_locks = region.release_abandoned_line_locks();
    Ok(OpenedRegionFile {
        region,
        identity: Some(identity),
        released_locks,
    })
}

/// Reads and checks the identity file `meta`.
pub fn read_identity(meta: &Path) -> Result<RegionIdentity, RegionFileError> {
    let bad = |reason: String| RegionFileError::BadIdentity {
        meta: meta.to_owned(),
        reason,
    };
    let text = std::fs::read_to_string(meta).map_err(|e| bad(e.to_string()))?;
    let identity: RegionIdentity =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a region identity: {e}")))?;
    if identity.format != IDENTITY_FORMAT {
        return Err(bad(format!(
            "format {} is not the supported format {IDENTITY_FORMAT}",
            identity.format
        )));
    }
    if identity.instance == 0 || identity.rkey == 0 || identity.len == 0 {
        return Err(bad("instance, rkey and len must be non-zero".into()));
    }
    Ok(identity)
}

/// Writes the identity of the region file `path` to `PATH.meta` atomically: a
/// temporary file, flushed to disk, renamed over the old one, then the directory
/// flushed.
pub fn write_identity(path: &Path, identity: &RegionIdentity) -> Result<(), RegionFileError> {
    let meta = identity_path(path);
    let fail = |source: io::Error| RegionFileError::Write {
        meta: meta.clone(),
        source,
    };
    let mut tmp_name = meta.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    let json = serde_json::to_vec_pretty(identity).map_err(|e| fail(io::Error::other(e)))?;
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(fail)?;
        f.write_all(&json).map_err(fail)?;
        f.write_all(b"\n").map_err(fail)?;
        f.sync_all().map_err(fail)?;
    }
    std::fs::rename(&tmp, &meta).map_err(fail)?;
    let dir = meta
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    File::open(dir).and_then(|d| d.sync_all()).map_err(fail)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(len: u64) -> RegionIdentity {
        RegionIdentity {
            format: IDENTITY_FORMAT,
            instance: 42,
            rkey: 0x1234,
            base_va: 0x1000_0000_0000,
            len,
            name: Some("mn-a".into()),
        }
    }

    #[test]
    fn created_then_reopened_without_zeroing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mem");
        let first = open_or_create(&path, 4000, 0x1000_0000_0000, Some("mn-a")).unwrap();
        assert!(first.identity.is_none());
        assert_eq!(first.region.len(), 4032);
        first.region.write(128, b"survives").unwrap();
        write_identity(&path, &identity(4032)).unwrap();
        drop(first);
        let again = open_or_create(&path, 4000, 0x1000_0000_0000, Some("mn-a")).unwrap();
        assert_eq!(again.identity, Some(identity(4032)));
        let mut b = [0u8; 8];
        again.region.read(128, &mut b).unwrap();
        assert_eq!(&b, b"survives");
        assert!(!dir.path().join("mem.meta.tmp").exists());
    }

    #[test]
    fn mismatches_are_refused_and_nothing_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mem");
        let r = open_or_create(&path, 4096, 0x1000_0000_0000, Some("mn-a")).unwrap();
        r.region.write(0, b"keep").unwrap();
        write_identity(&path, &identity(4096)).unwrap();
        drop(r);
        let e = open_or_create(&path, 8192, 0x1000_0000_0000, Some("mn-a")).unwrap_err();
        assert!(e.to_string().contains("capacity 4096 bytes"), "{e}");
        let e = open_or_create(&path, 4096, 0x1000_0000_0000, Some("mn-b")).unwrap_err();
        assert!(e.to_string().contains("--name \"mn-a\""), "{e}");
        let e = open_or_create(&path, 4096, 0x1000_0000_0000, None).unwrap_err();
        assert!(e.to_string().contains("no --name"), "{e}");
        let e = open_or_create(&path, 4096, 0x2000_0000_0000, Some("mn-a")).unwrap_err();
        assert!(e.to_string().contains("--base-va"), "{e}");
        let r = open_or_create(&path, 4096, 0x1000_0000_0000, Some("mn-a")).unwrap();
        let mut b = [0u8; 4];
        r.region.read(0, &mut b).unwrap();
        assert_eq!(&b, b"keep");
    }

    #[test]
    fn a_missing_or_broken_identity_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mem");
        drop(open_or_create(&path, 4096, 0x1000, None).unwrap());
        let e = open_or_create(&path, 4096, 0x1000, None).unwrap_err();
        assert!(matches!(e, RegionFileError::MissingIdentity { .. }), "{e}");
        std::fs::write(identity_path(&path), "{not json").unwrap();
        let e = open_or_create(&path, 4096, 0x1000, None).unwrap_err();
        assert!(e.to_string().contains("not a region identity"), "{e}");
        let mut id = identity(4096);
        id.instance = 0;
        std::fs::write(identity_path(&path), serde_json::to_vec(&id).unwrap()).unwrap();
        assert!(open_or_create(&path, 4096, 0x1000, None).is_err());
    }

    #[test]
    fn a_lost_region_file_starts_new_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mem");
        std::fs::write(identity_path(&path), b"stale").unwrap();
        let r = open_or_create(&path, 4096, 0x1000, None).unwrap();
        assert!(r.identity.is_none());
        assert_ne!(new_instance(), 0);
    }
}
