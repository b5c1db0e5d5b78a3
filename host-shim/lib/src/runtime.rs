//! The wasmtime side: one [`Runtime`] per process compiles the component once and keeps an
//! `InstancePre`; each [`GuestInstance`] is a Store plus an instance, used by one caller at a
//! time. Every call runs under an epoch deadline and a memory limit, and any trap is returned as
//! an [`Error`] (the caller then drops the instance, as a trapped instance must not be reused).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};

use crate::bindings::{Policy, PolicyPre, Settings};
use crate::convert;
use crate::{Error, Result};

/// How long one epoch tick lasts; deadlines are whole ticks.
const TICK: Duration = Duration::from_millis(1);

/// Bounds on every guest call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest linear memory a guest instance may have.
    pub memory_bytes: usize,
    /// Longest one guest call may run before it is interrupted.
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { memory_bytes: 512 << 20, deadline: Duration::from_secs(2) }
    }
}

/// Per-store state: the memory limiter.
struct StoreState {
    memory_bytes: usize,
    /// Set when the guest asked for more memory than allowed.
    denied: bool,
}

impl ResourceLimiter for StoreState {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.denied = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// Advances the engine's epoch every [`TICK`] until dropped.
struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    fn start(engine: Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("cdplace-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawn the epoch ticker");
        Ticker { stop, thread: Some(thread) }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The compiled policy component, ready to instantiate.
pub struct Runtime {
    engine: Engine,
    pre: PolicyPre<StoreState>,
    limits: Limits,
    _ticker: Ticker,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("limits", &self.limits).finish_non_exhaustive()
    }
}

impl Runtime {
    /// Compiles the component (`.wasm` bytes) once. The engine installs no signal handlers
    /// (the host may live inside a Go process) and the linker is empty: the guest gets no
    /// filesystem, network, clock or environment, and a component that imports anything fails
    /// here.
    pub fn new(wasm: &[u8], limits: Limits) -> Result<Arc<Self>> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        config.signals_based_traps(false);
        // SAFETY: these Cranelift flags only trade Spectre hardening of bounds checks for
        // working without signal handlers, which wasmtime requires for signals_based_traps(false).
        unsafe {
            config.cranelift_flag_set("enable_heap_access_spectre_mitigation", "false");
            config.cranelift_flag_set("enable_table_access_spectre_mitigation", "false");
        }
        let engine = Engine::new(&config).map_err(load)?;
        let component = Component::new(&engine, wasm).map_err(load)?;
        let linker: Linker<StoreState> = Linker::new(&engine);
        let pre = linker.instantiate_pre(&component).map_err(load)?;
        let pre = PolicyPre::new(pre).map_err(load)?;
        let ticker = Ticker::start(engine.clone());
        Ok(Arc::new(Runtime { engine, pre, limits, _ticker: ticker }))
    }

    /// Reads and compiles a component file.
    pub fn from_file(path: &std::path::Path, limits: Limits) -> Result<Arc<Self>> {
        let wasm = std::fs::read(path).map_err(|e| Error::Load(format!("reading {}: {e}", path.display())))?;
        Self::new(&wasm, limits)
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// A fresh instance.
    pub fn instantiate(self: &Arc<Self>) -> Result<GuestInstance> {
        let mut store = Store::new(&self.engine, StoreState { memory_bytes: self.limits.memory_bytes, denied: false });
        store.limiter(|s| s as &mut dyn ResourceLimiter);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(self.deadline_ticks());
        let policy = self.pre.instantiate(&mut store).map_err(|e| classify(e, false, self.limits))?;
        Ok(GuestInstance { runtime: self.clone(), store, policy })
    }

    fn deadline_ticks(&self) -> u64 {
        (self.limits.deadline.as_micros() / TICK.as_micros()).max(1) as u64
    }
}

fn load(e: wasmtime::Error) -> Error {
    Error::Load(format!("{e:#}"))
}

/// Turns a failed guest call into the error that says why.
fn classify(e: wasmtime::Error, denied: bool, limits: Limits) -> Error {
    if denied {
        return Error::OutOfMemory(limits.memory_bytes);
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => Error::Timeout(limits.deadline),
        Some(Trap::UnreachableCodeReached) => Error::Trap("unreachable executed (the guest panicked)".into()),
        Some(t) => Error::Trap(t.to_string()),
        None => Error::Trap(format!("{e:#}")),
    }
}

/// One guest instance: a Store and the policy's exports. Not shareable between threads at once;
/// drop it after any error from a call.
pub struct GuestInstance {
    runtime: Arc<Runtime>,
    store: Store<StoreState>,
    policy: Policy,
}

impl std::fmt::Debug for GuestInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestInstance").finish_non_exhaustive()
    }
}

impl GuestInstance {
    fn arm(&mut self) {
        self.store.set_epoch_deadline(self.runtime.deadline_ticks());
    }

    fn fail(&self, e: wasmtime::Error) -> Error {
        classify(e, self.store.data().denied, self.runtime.limits)
    }

    /// Validates and sets the plugin arguments (JSON).
    pub fn configure(&mut self, args_json: &str) -> Result<Settings> {
        self.arm();
        match self.policy.call_configure(&mut self.store, args_json) {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(convert::policy_error(e)),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Applies deltas.
    pub fn apply(&mut self, deltas: &[cdplace_policy::Delta]) -> Result<()> {
        if deltas.is_empty() {
            return Ok(());
        }
        let deltas: Vec<_> = deltas.iter().map(convert::delta).collect();
        self.arm();
        match self.policy.call_apply(&mut self.store, &deltas) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(convert::policy_error(e)),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Runs PreFilter for a pod at the host's time `now_ms` (Unix milliseconds).
    pub fn pre_filter(
        &mut self,
        pod: cdplace_policy::StrId,
        overlay: &[cdplace_policy::OverlayOp],
        now_ms: i64,
    ) -> Result<cdplace_policy::PreFilterResult> {
        let overlay: Vec<_> = overlay.iter().map(convert::overlay).collect();
        self.arm();
        match self.policy.call_pre_filter(&mut self.store, pod, &overlay, now_ms) {
            Ok(r) => Ok(convert::result(r)),
            Err(e) => Err(self.fail(e)),
        }
    }
}
