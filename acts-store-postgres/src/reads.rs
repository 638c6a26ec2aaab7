//! Reading many keys with one statement, on a connection of the pool or
//! inside a transaction. Point reads asked at the same time go through
//! [`acts_store::PointReads`], which calls [`read_in_order`] for each
//! group.

use std::collections::HashMap;

use acts_store::{StoreOp, StoreResult};
use deadpool_postgres::{GenericClient, Pool};

use crate::error::{map_err, map_pool_err};
use crate::sql::Sql;

/// The values of `keys`, in order (`None`: absent), read with one
/// statement on a connection of `pool`.
pub(crate) async fn read_in_order(
    pool: &Pool,
    sql: &Sql,
    op: StoreOp,
    keys: &[Vec<u8>],
) -> StoreResult<Vec<Option<Vec<u8>>>> {
    let found = read_from_pool(pool, sql, op, keys).await?;
    Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
}

/// The values of those of `keys` that are present, by key, read with one
/// statement on a connection of `pool`.
pub(crate) async fn read_from_pool(
    pool: &Pool,
    sql: &Sql,
    op: StoreOp,
    keys: &[Vec<u8>],
) -> StoreResult<HashMap<Vec<u8>, Vec<u8>>> {
    let client = pool.get().await.map_err(|e| map_pool_err(op, e))?;
    read_many(&client, sql, op, keys).await
}

/// The values of those of `keys` that are present, by key, read with one
/// statement on `client` (a connection, or a transaction).
pub(crate) async fn read_many(
    client: &impl GenericClient,
    sql: &Sql,
    op: StoreOp,
    keys: &[Vec<u8>],
) -> StoreResult<HashMap<Vec<u8>, Vec<u8>>> {
    let stmt = client
        .prepare_cached(&sql.get_many())
        .await
        .map_err(|e| map_err(op, e))?;
    let rows = client
        .query(&stmt, &[&keys])
        .await
        .map_err(|e| map_err(op, e))?;
    let mut found = HashMap::with_capacity(rows.len());
    for r in rows {
        let k: Vec<u8> = r.try_get(0).map_err(|e| map_err(op, e))?;
        let v: Vec<u8> = r.try_get(1).map_err(|e| map_err(op, e))?;
        found.insert(k, v);
    }
    Ok(found)
}
