//! The `Info` views of stored rows: what the executor returns for a row
//! it read (the views of a process in memory are built in
//! `types/info.rs`).

use crate::model::Vars;

use crate::engine::persist::delivery_rows::DeliveryRow;
use crate::engine::persist::model_rows::{ModelRow, PackageRow};
use crate::engine::persist::rows::ProcRow;
use crate::engine::persist::trigger_rows::TriggerRow;
use crate::engine::types::info::DeliveryState;
use crate::engine::types::info::{
    DeliveryInfo, ModelInfo, PackageInfo, ProcInfo, TriggerInfo, set,
};

impl From<&ProcRow> for ProcInfo {
    fn from(r: &ProcRow) -> Self {
        Self {
            pid: r.id.clone(),
            model_id: r.mid.clone(),
            model_rev: r.rev,
            state: r.state,
            start_time: set(r.start_time),
            end_time: set(r.end_time),
            outputs: Vars::new(),
            err: r.err.clone(),
            started_by: r.started_by.clone(),
            paused: r.paused.clone(),
            concurrency_key: r.slot.as_ref().map(|s| s.key.clone()),
            waiting_for: None,
        }
    }
}

impl From<&ModelRow> for ModelInfo {
    fn from(r: &ModelRow) -> Self {
        Self {
            id: r.id.clone(),
            name: r.name.clone(),
            ver: r.ver.clone(),
            revision: r.revision,
            deployed_at: r.deployed_at,
            warnings: Vec::new(),
            unchanged: false,
        }
    }
}

impl From<&DeliveryRow> for DeliveryInfo {
    fn from(r: &DeliveryRow) -> Self {
        Self {
            channel: r.channel.clone(),
            msg_id: r.msg_id.clone(),
            pid: r.pid.clone(),
            tid: r.tid.clone(),
            state: r.state,
            tries: r.tries,
            next_at: (r.state == DeliveryState::Pending).then_some(r.next_at),
            created_at: r.created_at,
            message: None,
        }
    }
}

impl From<&TriggerRow> for TriggerInfo {
    fn from(r: &TriggerRow) -> Self {
        Self {
            id: r.id.clone(),
            model_id: r.mid.clone(),
            trigger: r.trigger.clone(),
            kind: r.kind.clone(),
            params: r.params.clone(),
            schedule: r.schedule.clone(),
            next_run: set(r.next_run),
            last_run: set(r.last_run),
        }
    }
}

impl From<&PackageRow> for PackageInfo {
    fn from(r: &PackageRow) -> Self {
        Self {
            definition: r.package.clone(),
            builtin: r.builtin,
        }
    }
}
