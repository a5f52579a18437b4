//! Listing a Clover table's keys: the metadata service knows every key that has a
//! chain (was ever written); whether a key is live is for its chain's tail to say.

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
    let (name, prefix, after) = (table.to_owned(), prefix.to_vec(), after.map(<[u8]>::to_vec));
    let r = meta::call(core, &mut stats, move |m| {
        m.chain_keys(&name, &prefix, after.as_deref(), MAX_KEYS_PAGE)
    })
    .await
    .map_err(meta_error);
    core.finish_op(stats);
    r
}
