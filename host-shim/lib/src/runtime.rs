//! The wasmtime side: one [`Runtime`] per process compiles the component once and keeps an
//! `InstancePre`; each [`GuestInstance`] is a Store plus an instance, used by one caller at a
//! time, made with the [`Limits`] of the cluster it serves (limits come from the plugin
//! arguments, so they belong to a cluster, not to the runtime). Every call runs under an epoch
//! deadline and a memory limit, and any trap is returned as an [`Error`] (the caller then drops
//! the instance, as a trapped instance must not be reused).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};

use crate::bindings::{Policy, PolicyPre};
use crate::convert;
use crate::limits::Limits;
use crate::settings::Settings;
use crate::wit;
use crate::{Error, Result};

/// The WIT world the host is built against (`wit/cdplace.wit`: package and world), as errors
/// name it; a test checks it against the file.
pub const WORLD: &str = "cdplace:policy/policy@0.3.0";

/// How long one epoch tick lasts; deadlines are whole ticks.
const TICK: Duration = Duration::from_millis(1);

/// Per-store state: the memory limiter.
struct StoreState {
    memory_bytes: usize,
    /// Set when the guest asked for more memory than allowed.
    denied: bool,
    /// The largest linear memory granted so far.
    peak: usize,
}

impl ResourceLimiter for StoreState {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.denied = true;
            return Ok(false);
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// Advances the engine's epoch every [`TICK`] while a guest call runs, and sleeps on a condition
/// variable otherwise: a scheduler whose pods never reach the guest (no ComputeDomains) pays no
/// wake-ups for it. Deadlines are set relative to the epoch at the start of each call, so a
/// paused epoch loses nothing.
struct Ticker {
    shared: Arc<TickShared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct TickShared {
    state: Mutex<TickState>,
    wake: Condvar,
    /// Epoch increments so far (tests read it).
    ticks: AtomicU64,
}

#[derive(Default)]
struct TickState {
    /// Guest calls running now.
    active: usize,
    stop: bool,
}

impl TickShared {
    fn lock(&self) -> MutexGuard<'_, TickState> {
        // The state is two plain fields: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Holds the ticker running for one guest call.
pub(crate) struct Ticking(Arc<TickShared>);

impl Drop for Ticking {
    fn drop(&mut self) {
        self.0.lock().active -= 1;
    }
}

impl Ticker {
    fn start(engine: Engine) -> Self {
        let shared = Arc::new(TickShared::default());
        let mine = shared.clone();
        let thread = std::thread::Builder::new()
            .name("cdplace-epoch".into())
            .spawn(move || {
                loop {
                    {
                        let mut s = mine.lock();
                        while s.active == 0 && !s.stop {
                            s = mine.wake.wait(s).unwrap_or_else(|e| e.into_inner());
                        }
                        if s.stop {
                            return;
                        }
                    }
                    std::thread::sleep(TICK);
                    engine.increment_epoch();
                    mine.ticks.fetch_add(1, Ordering::Relaxed);
                }
            })
            .expect("spawn the epoch ticker");
        Ticker { shared, thread: Some(thread) }
    }

    /// Keeps the epoch advancing until the returned guard is dropped.
    fn ticking(&self) -> Ticking {
        let mut s = self.shared.lock();
        s.active += 1;
        if s.active == 1 {
            self.shared.wake.notify_one();
        }
        drop(s);
        Ticking(self.shared.clone())
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Blocks SIGPROF on the calling thread until the guard drops, so that the threads it starts
/// meanwhile inherit the mask and never take one. Go's CPU profiler (kube-scheduler's
/// /debug/pprof/profile) arms a process-wide setitimer besides its per-thread timers; a signal
/// of the process-wide one that lands on a thread Go did not start is recorded as
/// `runtime._ExternalCode` at wherever that thread is parked. With wasmtime's idle compilation
/// threads and the epoch ticker parked in libc, that was 9–12% of a cdplace kube-scheduler's
/// pprof samples, phantom CPU in `[libc.so.6]` (perf finds those threads idle). Those threads
/// never need SIGPROF; the calling thread gets back the mask it had, and a SIGPROF that arrived
/// for it meanwhile is delivered then.
#[must_use = "SIGPROF is blocked only while the guard lives"]
pub(crate) struct SigprofBlocked {
    #[cfg(unix)]
    old: libc::sigset_t,
}

pub(crate) fn sigprof_blocked() -> SigprofBlocked {
    #[cfg(unix)]
    {
        // SAFETY: sigset_t is plain data that sigemptyset initialises; pthread_sigmask only
        // reads `set` and writes `old`, both valid for the call.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGPROF);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            SigprofBlocked { old }
        }
    }
    #[cfg(not(unix))]
    SigprofBlocked {}
}

impl Drop for SigprofBlocked {
    fn drop(&mut self) {
        #[cfg(unix)]
        // SAFETY: restores the mask sigprof_blocked saved; `old` is valid for the call.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut());
        }
    }
}

impl std::fmt::Debug for SigprofBlocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigprofBlocked").finish_non_exhaustive()
    }
}

/// The compiled policy component, ready to instantiate.
pub struct Runtime {
    engine: Engine,
    pre: PolicyPre<StoreState>,
    ticker: Ticker,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

impl Runtime {
    /// Compiles the component (`.wasm` bytes) once. The engine installs no signal handlers
    /// (the host may live inside a Go process) and the linker is empty: the guest gets no
    /// filesystem, network, clock or environment, and a component that imports anything fails
    /// here. Traps carry no wasm backtrace (the guest is built without names; a trap's kind is
    /// what the host reports).
    pub fn new(wasm: &[u8]) -> Result<Arc<Self>> {
        // The threads started here (wasmtime's compilation pool, the epoch ticker) are born with
        // SIGPROF blocked (see `sigprof_blocked`).
        let _blocked = sigprof_blocked();
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        config.signals_based_traps(false);
        config.wasm_backtrace_max_frames(None);
        // SAFETY: these Cranelift flags only trade Spectre hardening of bounds checks for
        // working without signal handlers, which wasmtime requires for signals_based_traps(false).
        unsafe {
            config.cranelift_flag_set("enable_heap_access_spectre_mitigation", "false");
            config.cranelift_flag_set("enable_table_access_spectre_mitigation", "false");
        }
        let engine = Engine::new(&config).map_err(Error::Load)?;
        let component = Component::new(&engine, wasm).map_err(Error::Load)?;
        let linker: Linker<StoreState> = Linker::new(&engine);
        let pre = linker.instantiate_pre(&component).map_err(Error::World)?;
        let pre = PolicyPre::new(pre).map_err(Error::World)?;
        let ticker = Ticker::start(engine.clone());
        Ok(Arc::new(Runtime { engine, pre, ticker }))
    }

    /// Reads and compiles a component file.
    pub fn from_file(path: &std::path::Path) -> Result<Arc<Self>> {
        let wasm = std::fs::read(path).map_err(|source| Error::Read { path: path.to_path_buf(), source })?;
        Self::new(&wasm)
    }

    /// A fresh instance whose calls run under `limits`.
    pub fn instantiate(self: &Arc<Self>, limits: Limits) -> Result<GuestInstance> {
        let mut store =
            Store::new(&self.engine, StoreState { memory_bytes: limits.memory_bytes, denied: false, peak: 0 });
        store.limiter(|s| s as &mut dyn ResourceLimiter);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(deadline_ticks(limits));
        let ticking = self.ticker.ticking();
        let policy = self.pre.instantiate(&mut store).map_err(|e| classify(e, store.data().denied, limits))?;
        drop(ticking);
        Ok(GuestInstance { runtime: self.clone(), store, policy, limits, until: None })
    }
}

fn deadline_ticks(limits: Limits) -> u64 {
    (limits.deadline.as_micros() / TICK.as_micros()).max(1) as u64
}

/// Turns a failed guest call into the error that says why.
fn classify(source: wasmtime::Error, denied: bool, limits: Limits) -> Error {
    if denied {
        return Error::OutOfMemory { limit: limits.memory_bytes, source };
    }
    let what = match source.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => return Error::Timeout { deadline: limits.deadline, source },
        Some(Trap::UnreachableCodeReached) => "unreachable executed (the guest panicked)".to_string(),
        Some(t) => t.to_string(),
        None => "the call failed".to_string(),
    };
    Error::Trap { what, source }
}

/// One guest instance: a Store and the policy's exports. Not shareable between threads at once;
/// drop it after any error from a call.
pub struct GuestInstance {
    /// Keeps the engine (and its epoch ticker) alive as long as the store.
    runtime: Arc<Runtime>,
    store: Store<StoreState>,
    policy: Policy,
    limits: Limits,
    /// When set, calls must also end by then (the budget of the decision being made).
    until: Option<Instant>,
}

impl std::fmt::Debug for GuestInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestInstance").field("limits", &self.limits).finish_non_exhaustive()
    }
}

impl GuestInstance {
    /// The limits its calls run under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The instance's linear memory now (it never shrinks), in bytes.
    pub fn linear_memory_bytes(&self) -> usize {
        self.store.data().peak
    }

    /// Every later call must end by `until` as well as within the limits' deadline.
    pub fn set_deadline(&mut self, until: Instant) {
        self.until = Some(until);
    }

    /// Sets the deadline of the call about to run and keeps the epoch advancing until the
    /// returned guard is dropped (after the call).
    #[must_use = "the epoch only advances while the guard lives"]
    fn arm(&mut self) -> Ticking {
        let mut ticks = deadline_ticks(self.limits);
        if let Some(until) = self.until {
            let left = until.saturating_duration_since(Instant::now());
            ticks = ticks.min((left.as_micros() / TICK.as_micros()) as u64).max(1);
        }
        self.store.set_epoch_deadline(ticks);
        self.runtime.ticker.ticking()
    }

    fn fail(&self, e: wasmtime::Error) -> Error {
        classify(e, self.store.data().denied, self.limits)
    }

    /// Validates and sets the plugin arguments (JSON).
    pub fn configure(&mut self, args_json: &str) -> Result<Settings> {
        let _ticking = self.arm();
        match self.policy.call_configure(&mut self.store, args_json) {
            Ok(Ok(s)) => Ok(s.into()),
            Ok(Err(e)) => Err(convert::policy_error(e)),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Applies deltas (in the WIT shape, as the journal holds them).
    pub fn apply(&mut self, deltas: &[wit::Delta]) -> Result<()> {
        if deltas.is_empty() {
            return Ok(());
        }
        let _ticking = self.arm();
        match self.policy.call_apply(&mut self.store, deltas) {
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
        let _ticking = self.arm();
        match self.policy.call_pre_filter(&mut self.store, pod, &overlay, now_ms) {
            Ok(r) => Ok(convert::result(r)),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Plain-pod steering: where a pod without a ComputeDomain should go.
    pub fn steer(&mut self, gpus: bool, now_ms: i64) -> Result<cdplace_policy::PreFilterResult> {
        let _ticking = self.arm();
        match self.policy.call_steer(&mut self.store, gpus, now_ms) {
            Ok(r) => Ok(convert::result(r)),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The fleet status at the host's time `now_ms` (Unix milliseconds).
    pub fn status(&mut self, now_ms: i64) -> Result<cdplace_policy::FleetStatus> {
        let _ticking = self.arm();
        match self.policy.call_status(&mut self.store, now_ms) {
            Ok(s) => Ok(convert::fleet(s)),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Runs gang preemption for a pod at the host's time `now_ms` (Unix milliseconds).
    pub fn preempt(&mut self, pod: cdplace_policy::StrId, now_ms: i64) -> Result<cdplace_policy::Preemption> {
        let _ticking = self.arm();
        match self.policy.call_preempt(&mut self.store, pod, now_ms) {
            Ok(r) => Ok(convert::preemption(r)),
            Err(e) => Err(self.fail(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_world_named_in_errors_is_the_wit_files() {
        let wit = include_str!("../../../wit/cdplace.wit");
        let (package, version) = WORLD.split_once('/').and_then(|(p, w)| Some((p, w.split_once('@')?))).unwrap();
        assert!(
            wit.contains(&format!("package {package}@{};", version.1)),
            "wit/cdplace.wit is not package {package}@{}",
            version.1
        );
        assert!(wit.contains(&format!("world {} {{", version.0)), "wit/cdplace.wit has no world {}", version.0);
    }

    fn ticks(t: &Ticker) -> u64 {
        t.shared.ticks.load(Ordering::Relaxed)
    }

    /// The epoch advances only while a call holds the ticker: an idle host wakes no thread.
    #[test]
    fn the_ticker_sleeps_between_calls() {
        let mut config = Config::new();
        config.epoch_interruption(true);
        let t = Ticker::start(Engine::new(&config).unwrap());
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(ticks(&t), 0, "no call yet");
        let a = t.ticking();
        let b = t.ticking();
        std::thread::sleep(Duration::from_millis(30));
        drop(a);
        let during = ticks(&t);
        assert!(during >= 5, "{during} ticks in 30 ms of a call");
        std::thread::sleep(Duration::from_millis(20));
        assert!(ticks(&t) > during, "still ticking while the second call runs");
        drop(b);
        std::thread::sleep(Duration::from_millis(5));
        let after = ticks(&t);
        std::thread::sleep(Duration::from_millis(30));
        assert!(ticks(&t) <= after + 1, "parked after the last call: {} then {}", after, ticks(&t));
        drop(t); // joins the thread
    }
}
