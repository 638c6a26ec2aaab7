//! What the server keeps, read from its settings: `fsync` and
//! `synchronous_commit` decide whether an acknowledged commit survives a
//! crash; a server in recovery (a standby) takes no writes. Read at connect
//! and on every [`KvStore::health`](acts_store::KvStore::health) (a
//! server's settings can change while it runs).

use acts_store::{ErrorKind, Persistence, StoreError, StoreOp, StoreResult};
use deadpool_postgres::Object;
use parking_lot::Mutex;

use crate::error::{BACKEND, map_err};

/// The last settings read.
#[derive(Debug)]
pub(crate) struct Settings {
    persistence: Mutex<Persistence>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            persistence: Mutex::new(Persistence::Unknown(
                "the server's settings were not read yet".into(),
            )),
        }
    }
}

impl Settings {
    /// What an acknowledged write survives, as last read.
    pub(crate) fn persistence(&self) -> Persistence {
        self.persistence.lock().clone()
    }

    /// Reads the server's settings again.
    pub(crate) async fn refresh(&self, client: &Object) -> StoreResult<()> {
        let show = |name: &'static str| async move {
            client
                .query_one(&format!("SHOW {name}"), &[])
                .await
                .and_then(|r| r.try_get::<_, String>(0))
                .map_err(|e| map_err(StoreOp::Health, e))
        };
        let fsync = show("fsync").await?;
        let sync_commit = show("synchronous_commit").await?;
        *self.persistence.lock() = judge(&fsync, &sync_commit);
        Ok(())
    }

    /// `Ok` if the server takes writes (it is not a standby in recovery).
    pub(crate) async fn check_writable(&self, client: &Object) -> StoreResult<()> {
        let in_recovery: bool = client
            .query_one("SELECT pg_is_in_recovery()", &[])
            .await
            .and_then(|r| r.try_get(0))
            .map_err(|e| map_err(StoreOp::Health, e))?;
        if in_recovery {
            return Err(StoreError::new(
                BACKEND,
                StoreOp::Health,
                ErrorKind::Unavailable,
                "the PostgreSQL server is a standby in recovery and takes no writes; \
                 point the URL at the primary (several hosts with target_session_attrs=read-write)",
            ));
        }
        Ok(())
    }
}

/// What `fsync` and `synchronous_commit` promise.
fn judge(fsync: &str, synchronous_commit: &str) -> Persistence {
    if fsync != "on" {
        return Persistence::Weak(
            "the PostgreSQL server runs with fsync=off: a crash of its machine can lose \
             or corrupt acknowledged commits; set fsync=on"
                .into(),
        );
    }
    if synchronous_commit == "off" {
        return Persistence::Weak(
            "the PostgreSQL server runs with synchronous_commit=off: a crash loses the last \
             acknowledged commits (up to 3 × wal_writer_delay); set synchronous_commit=on"
                .into(),
        );
    }
    Persistence::Synced
}

#[cfg(test)]
mod tests {
    use super::judge;

    #[test]
    fn fsync_and_synchronous_commit_decide() {
        assert!(judge("on", "on").is_synced());
        assert!(judge("on", "remote_apply").is_synced());
        assert!(!judge("off", "on").is_synced());
        assert!(!judge("on", "off").is_synced());
    }
}
