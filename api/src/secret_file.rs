//! Reading a secret (a bearer token or a credential) from a file or an environment
//! variable, never from the command line, where every user of the host sees it in
//! the process list.

use std::path::Path;

/// The secret in the file at `path`: its content without surrounding blanks and line
/// ends. Refuses a missing, unreadable, empty or multi-line file, saying which.
pub fn read_secret_file(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the secret file {}: {e}", path.display()))?;
    let secret = text.trim();
    if secret.is_empty() {
        return Err(format!("the secret file {} is empty", path.display()));
    }
    if secret.lines().count() > 1 {
        return Err(format!(
            "the secret file {} holds more than one line; put only the secret in it",
            path.display()
        ));
    }
    Ok(secret.to_owned())
}

/// The secret in environment variable `name`, without surrounding blanks; `None`
/// when unset or blank.
pub fn secret_from_env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_one_trimmed_line() {
        let dir = std::env::temp_dir().join(format!("dmkv-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("s");
        std::fs::write(&f, "  dmkv_abc\n").unwrap();
        assert_eq!(read_secret_file(&f).unwrap(), "dmkv_abc");
        std::fs::write(&f, "\n").unwrap();
        assert!(read_secret_file(&f).unwrap_err().contains("empty"));
        std::fs::write(&f, "a\nb\n").unwrap();
        assert!(
            read_secret_file(&f)
                .unwrap_err()
                .contains("more than one line")
        );
        assert!(
            read_secret_file(&dir.join("missing"))
                .unwrap_err()
                .contains("cannot read")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
