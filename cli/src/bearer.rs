//! Which secret the CLI presents to the metadata service: a credential or the root
//! token, from a file or the environment — never from the command line, which every
//! user of the host can read in the process list.

use std::path::PathBuf;

use dmkv_api::secret_file::{read_secret_file, secret_from_env};
use kvstore::KvError;

/// Environment variable holding a credential (`dmkv_…`).
pub const CREDENTIAL_ENV: &str = "DMKV_CREDENTIAL";
/// Environment variable holding the cluster's root token (admins).
pub const TOKEN_ENV: &str = "DMKV_TOKEN";

/// The secret to present: a credential if one is given (`--credential-file`, else
/// `DMKV_CREDENTIAL`), else the root token (`--token-file`, else `DMKV_TOKEN`); `None`
/// without any. A credential wins so that a shell where an admin's token is set can
/// still act as a narrower credential.
pub fn bearer(
    credential_file: Option<&PathBuf>,
    token_file: Option<&PathBuf>,
) -> Result<Option<String>, KvError> {
    let read = |p: &PathBuf| {
        read_secret_file(p)
            .map(Some)
            .map_err(KvError::InvalidArgument)
    };
    if let Some(p) = credential_file {
        return read(p);
    }
    if let Some(c) = secret_from_env(CREDENTIAL_ENV) {
        return Ok(Some(c));
    }
    match token_file {
        Some(p) => read(p),
        None => Ok(secret_from_env(TOKEN_ENV)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_wins_over_the_token() {
        let dir = std::env::temp_dir().join(format!("dmkv-cli-bearer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cred = dir.join("cred");
        std::fs::write(&cred, "dmkv_x\n").unwrap();
        assert_eq!(
            bearer(Some(&cred), None).unwrap().as_deref(),
            Some("dmkv_x")
        );
        let token = dir.join("token");
        std::fs::write(&token, "root\n").unwrap();
        if std::env::var_os(CREDENTIAL_ENV).is_none() {
            assert_eq!(bearer(None, Some(&token)).unwrap().as_deref(), Some("root"));
        }
        assert_eq!(
            bearer(Some(&cred), Some(&token)).unwrap().as_deref(),
            Some("dmkv_x")
        );
        assert!(matches!(
            bearer(Some(&dir.join("missing")), None),
            Err(KvError::InvalidArgument(m)) if m.contains("cannot read")
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
