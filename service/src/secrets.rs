//! Secrets a service is configured with (tokens, keys): read from a file or from an
//! environment variable, never from a command-line argument, which every user of the
//! host can read in the process list.

use std::path::Path;

/// Why a secret could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The file could not be read.
    #[error("cannot read the {what} from {path}: {source}")]
    Read {
        /// What the secret is.
        what: &'static str,
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file or variable holds nothing but blanks.
    #[error("the {what} in {origin} is empty")]
    Empty {
        /// What the secret is.
        what: &'static str,
        /// Where it was read.
        origin: String,
    },
}

/// The secret `what` from `file` when given, else from the environment variable `env`
/// (`None` when it is unset); surrounding blanks, such as a file's final newline, are
/// not part of it.
pub fn read_secret(
    what: &'static str,
    file: Option<&Path>,
    env: &str,
) -> Result<Option<String>, SecretError> {
    let (text, origin) = match file {
        Some(path) => (
            std::fs::read_to_string(path).map_err(|source| SecretError::Read {
                what,
                path: path.display().to_string(),
                source,
            })?,
            path.display().to_string(),
        ),
        None => match std::env::var(env) {
            Ok(v) => (v, format!("${env}")),
            Err(_) => return Ok(None),
        },
    };
    let secret = text.trim();
    if secret.is_empty() {
        return Err(SecretError::Empty { what, origin });
    }
    Ok(Some(secret.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_win_and_blanks_are_trimmed() {
        let dir = std::env::temp_dir().join(format!("dmkv-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "s3cret-token\n").unwrap();
        assert_eq!(
            read_secret("token", Some(&file), "DMKV_TEST_SECRET_UNSET")
                .unwrap()
                .as_deref(),
            Some("s3cret-token")
        );
        assert!(
            read_secret("token", None, "DMKV_TEST_SECRET_UNSET")
                .unwrap()
                .is_none()
        );
        std::fs::write(&file, " \n").unwrap();
        assert!(matches!(
            read_secret("token", Some(&file), "X"),
            Err(SecretError::Empty { .. })
        ));
        assert!(matches!(
            read_secret("token", Some(&dir.join("missing")), "X"),
            Err(SecretError::Read { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
