//! `dmkv credentials create|list|revoke`: scoped credentials, issued by an admin (the
//! root token or an admin credential).

use std::io::Write;
use std::time::Duration;

use clap::Subcommand;
use dmkv_api::MetadataClient;
use dmkv_api::credentials::{Access, CreateCredentialRequest, CredentialInfo, CredentialKind};
use kvstore::KvError;

/// What to do with credentials.
#[derive(Subcommand, Debug)]
pub enum CredentialsCommand {
    /// Issue a credential and print its secret (shown this once) on standard output.
    Create {
        /// A table the credential covers: an exact name, or a prefix ending in `*`
        /// (`'orders-*'`; `'*'` is every table). Repeat for more.
        #[arg(
            long = "table",
            value_name = "PATTERN",
            required_unless_present = "admin"
        )]
        tables: Vec<String>,
        /// What it may do on those tables: read or read-write.
        #[arg(long, default_value = "read", value_parser = parse_access)]
        access: Access,
        /// Issue an admin credential instead (everything the root token may do).
        #[arg(long, conflicts_with_all = ["tables"])]
        admin: bool,
        /// Lifetime, e.g. 90s, 30m, 12h, 7d (default: until revoked).
        #[arg(long, value_parser = parse_ttl)]
        ttl: Option<Duration>,
        /// What it is for, shown by `dmkv credentials list`.
        #[arg(long, default_value = "")]
        label: String,
    },
    /// List the credentials (never their secrets).
    List,
    /// Revoke a credential: its secret stops working at once.
    Revoke {
        /// Its id (see `dmkv credentials list`).
        id: u64,
    },
}

fn parse_access(s: &str) -> Result<Access, String> {
    s.parse()
}

/// Parses `90s`, `30m`, `12h`, `7d` or a number of seconds.
fn parse_ttl(input: &str) -> Result<Duration, String> {
    let s = input.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid lifetime {input:?}: expected e.g. 90s, 30m, 12h or 7d"))?;
    let secs = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "invalid lifetime {input:?}: unknown unit {unit:?} (s, m, h, d)"
            ));
        }
    };
    match n.checked_mul(secs) {
        Some(0) => Err("the lifetime must be positive".into()),
        Some(s) => Ok(Duration::from_secs(s)),
        None => Err(format!("invalid lifetime {input:?}: too long")),
    }
}

fn meta_error(e: dmkv_api::ClientError) -> KvError {
    KvError::unavailable_because(format!("metadata service: {e}"), e)
}

fn json_text(r: Result<String, serde_json::Error>) -> Result<String, KvError> {
    r.map_err(|e| KvError::InvalidArgument(format!("writing JSON: {e}")))
}

/// One credential as a line of text.
fn line(c: &CredentialInfo) -> String {
    let mut s = format!("{}\t{}", c.id, c.scope_text());
    if !c.label.is_empty() {
        s.push_str(&format!("\tlabel={}", c.label));
    }
    s.push_str(&format!("\tcreated_ms={}", c.created_at_ms));
    if let Some(at) = c.expires_at_ms {
        s.push_str(&format!("\texpires_ms={at}"));
    }
    if c.expired {
        s.push_str("\tEXPIRED");
    }
    match c.last_used_ms {
        Some(at) => s.push_str(&format!("\tlast_used_ms={at}")),
        None => s.push_str("\tnever used"),
    }
    s
}

/// Runs `cmd` against the metadata service `meta`.
pub fn run(meta: &MetadataClient, cmd: CredentialsCommand, json: bool) -> Result<(), KvError> {
    let mut out = std::io::stdout().lock();
    match cmd {
        CredentialsCommand::Create {
            tables,
            access,
            admin,
            ttl,
            label,
        } => {
            let req = CreateCredentialRequest {
                kind: if admin {
                    CredentialKind::Admin
                } else {
                    CredentialKind::Table
                },
                tables,
                access: (!admin).then_some(access),
                ttl_ms: ttl.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                expires_at_ms: None,
                label,
            };
            let made = meta.create_credential(&req).map_err(meta_error)?;
            if json {
                let _ = writeln!(out, "{}", json_text(serde_json::to_string(&made))?);
            } else {
                eprintln!(
                    "dmkv: credential {} ({}): its secret follows, shown this once; keep it in a \
                     file readable only by its user and pass it with --credential-file",
                    made.credential.id,
                    made.credential.scope_text()
                );
                let _ = writeln!(out, "{}", made.secret);
            }
        }
        CredentialsCommand::List => {
            let list = meta.credentials().map_err(meta_error)?;
            if json {
                let _ = writeln!(out, "{}", json_text(serde_json::to_string(&list))?);
            } else {
                for c in &list {
                    let _ = writeln!(out, "{}", line(c));
                }
            }
        }
        CredentialsCommand::Revoke { id } => {
            meta.revoke_credential(id).map_err(|e| match e.status() {
                Some(404) => KvError::InvalidArgument(format!(
                    "no credential {id} (revoked already? see dmkv credentials list)"
                )),
                _ => meta_error(e),
            })?;
            eprintln!("dmkv: credential {id} revoked");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes() {
        assert_eq!(parse_ttl("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_ttl("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_ttl("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_ttl("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_ttl("5"), Ok(Duration::from_secs(5)));
        assert!(parse_ttl("0s").is_err());
        assert!(parse_ttl("1w").is_err());
        assert!(parse_ttl("soon").is_err());
    }
}
