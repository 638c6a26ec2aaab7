//! What the clients of a cluster run do: a model drawn from the seed (a
//! line of interrupts and set steps), a few processes, and the client's
//! answer to each waiting interrupt — decided by the seed, the process
//! and the interrupt's key, never by timing or by which node answers —
//! and the outcome of each process in the single-node fault-free run.
//!
//! May use: acts-core and the store contract; no other file of this room;
//! of the simulator the checks, rows and plans the room's line names.

use std::collections::BTreeMap;
use std::sync::Arc;

use acts_core::engine::{Engine, EngineError, Executor};
use acts_core::model::Vars;
use acts_core::scheduler::TaskState;
use acts_core::time::ManualClock;
use acts_store::MemoryStore;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::json;

use crate::check::Outcome;

/// The model's id.
pub const MODEL: &str = "cmain";

/// A cluster run's workload.
#[derive(Debug, Clone)]
pub struct Work {
    seed: u64,
    /// The model (YAML).
    pub model: String,
    /// The processes' ids.
    pub pids: Vec<String>,
}

/// What one client call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acted {
    /// Started the process.
    Started,
    /// Completed the interrupt `tid` (key `key`).
    Completed {
        /// The task.
        tid: String,
        /// Its key.
        key: String,
    },
    /// The process has ended: nothing to do.
    Ended,
    /// Nothing waits for an answer yet.
    Nothing,
}

fn mix(seed: u64, a: &str, b: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for byte in a.bytes().chain([0]).chain(b.bytes()) {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^ (h >> 31)
}

impl Work {
    /// The workload of `seed`: `processes` processes of one model of 2 to
    /// 5 steps.
    pub fn draw(seed: u64, processes: usize) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x636c_7573);
        let steps = rng.random_range(2..=5);
        let mut model = format!("id: {MODEL}\nver: '1'\nsteps:\n");
        for i in 0..steps {
            if i > 0 && rng.random_bool(0.3) {
                model.push_str(&format!(
                    "  - id: s{i}\n    uses: acts.transform.set\n    params: {{ c{i}: {i} }}\n"
                ));
            } else {
                model.push_str(&format!(
                    "  - id: s{i}\n    uses: acts.core.irq\n    params: {{ key: k{i} }}\n"
                ));
            }
        }
        Self {
            seed,
            model,
            pids: (0..processes).map(|i| format!("c{seed}x{i}")).collect(),
        }
    }

    /// The client's answer to the interrupt with `key` of process `pid`.
    pub fn answer(&self, pid: &str, key: &str) -> Vars {
        let mut v = Vars::new();
        v.insert(format!("v_{key}"), json!(mix(self.seed, pid, key) % 1000));
        v
    }

    /// One client call on `exec` for `pid`: start it if it does not
    /// exist, else complete its first waiting interrupt.
    pub async fn act(&self, exec: &Executor, pid: &str) -> Result<Acted, EngineError> {
        let tasks = match exec.task().list(pid).await {
            Ok(t) => t,
            Err(EngineError::ProcessNotFound(_)) => {
                let mut v = Vars::new();
                v.insert("pid".into(), json!(pid));
                return match exec.proc().start(MODEL, v).await {
                    Ok(_) => Ok(Acted::Started),
                    Err(EngineError::Duplicated(_)) => Ok(Acted::Nothing),
                    Err(e) => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        let info = exec.proc().get(pid).await?;
        if info.state.is_terminal() {
            return Ok(Acted::Ended);
        }
        let waiting = tasks
            .iter()
            .filter(|t| t.kind == "act" && t.state == TaskState::Interrupt)
            .min_by(|a, b| a.key.cmp(&b.key));
        let Some(t) = waiting else {
            return Ok(Acted::Nothing);
        };
        let key = t.key.clone().unwrap_or_default();
        exec.act()
            .complete(pid, &t.tid, self.answer(pid, &key))
            .await?;
        Ok(Acted::Completed {
            tid: t.tid.clone(),
            key,
        })
    }

    /// How each process ends on one engine with no fault.
    pub async fn fault_free(&self) -> Result<BTreeMap<String, Outcome>, String> {
        let engine = Engine::builder()
            .store(Arc::new(MemoryStore::new()))
            .clock(Arc::new(ManualClock::new(crate::rows::START)))
            .start()
            .await
            .map_err(|e| format!("the fault-free engine: {e}"))?;
        let exec = engine.executor();
        exec.model()
            .deploy_yaml(&self.model)
            .await
            .map_err(|e| format!("the model does not deploy: {e}"))?;
        let mut out = BTreeMap::new();
        for pid in &self.pids {
            for _ in 0..64 {
                crate::sim::settle(&engine).await?;
                match self.act(&exec, pid).await {
                    Ok(Acted::Ended) => break,
                    Ok(_) => {}
                    Err(e) => return Err(format!("fault-free {pid}: {e}")),
                }
            }
            let info = exec
                .proc()
                .get(pid)
                .await
                .map_err(|e| format!("fault-free {pid}: {e}"))?;
            if !info.state.is_terminal() {
                return Err(format!("fault-free {pid} did not end: {:?}", info.state));
            }
            out.insert(pid.clone(), Outcome::from(&info));
        }
        engine.close().await;
        Ok(out)
    }
}
