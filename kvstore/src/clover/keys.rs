//! Listing a Clover table's keys: the metadata service knows every key that has a
//! chain (was ever written) once the client that created the chain published it
//! ([`super::publish`]; this client publishes its own first); whether a key is
//! live is for its chain's tail to say.

use dmkv_api::metadata::{ChainKeysPage, MAX_KEYS_PAGE};

use crate::client::meta_error;
use crate::error::KvError;
use crate::meta;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// One page of the keys of Clover table `table` that have a chain and start with
/// `prefix`, after key `after` (`None`: from the first), in byte order.
pub(crate) async fn page(
    core: &SessionCore,
    table: &str,
    prefix: &[u8],
    after: Option<&[u8]>,
) -> Result<ChainKeysPage, KvError> {
    let mut stats = OpStats::default();
    // Mappings this client claimed in the chain directory are listed too.
    if let Err(e) = super::publish::flush_named(core, table, &mut stats).await {
        core.finish_op(stats);
        return Err(e);
    }
    let (name, prefix, after) = (table.to_owned(), prefix.to_vec(), after.map(<[u8]>::to_vec));
    let r = meta::call(core, &mut stats, move |m| {
        m.chain_keys(&name, &prefix, after.as_deref(), MAX_KEYS_PAGE)
    })
    .await
    .map_err(meta_error);
    core.finish_op(stats);
    r
}
