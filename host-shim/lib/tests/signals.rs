//! The threads a runtime starts (wasmtime's compilation pool, the epoch ticker) block SIGPROF, so
//! Go's CPU profiler never records its process-wide signal on them as phantom `_ExternalCode`
//! samples; the thread that built the runtime keeps its own mask.

#![cfg(target_os = "linux")]

use cdplace_host::Runtime;
use cdplace_testkit::builders::wasm_path;

/// SigBlk of a thread of this process, from /proc.
fn blocked(task: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/self/task/{task}/status")).expect("thread status");
    let hex = status.lines().find_map(|l| l.strip_prefix("SigBlk:")).expect("SigBlk line").trim();
    u64::from_str_radix(hex, 16).expect("SigBlk is hex")
}

fn this_thread() -> String {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }.to_string()
}

const SIGPROF_BIT: u64 = 1 << (libc::SIGPROF - 1);

fn threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("tasks")
        .map(|t| t.expect("task").file_name().into_string().expect("tid"))
        .collect()
}

#[test]
fn the_runtimes_threads_block_sigprof_and_the_caller_keeps_its_mask() {
    let before = blocked(&this_thread());
    assert_eq!(before & SIGPROF_BIT, 0, "the test thread starts with SIGPROF blocked");
    let existing = threads();
    let rt = Runtime::from_file(&wasm_path("cdplace_faulty_guest.wasm")).expect("load");
    assert_eq!(blocked(&this_thread()), before, "the caller's mask changed");
    // A new thread names itself once it runs, so its name may still be the creator's for a
    // moment: the threads are read again until the ticker has its name (or 10 s have passed).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let started = loop {
        let mut started = Vec::new();
        for task in threads().into_iter().filter(|t| !existing.contains(t)) {
            let comm = std::fs::read_to_string(format!("/proc/self/task/{task}/comm")).unwrap_or_default();
            assert_ne!(blocked(&task) & SIGPROF_BIT, 0, "thread {task} ({}) takes SIGPROF", comm.trim());
            started.push(comm.trim().to_string());
        }
        if started.iter().any(|c| c == "cdplace-epoch") || std::time::Instant::now() > deadline {
            break started;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(started.iter().any(|c| c == "cdplace-epoch"), "no epoch ticker among the threads started: {started:?}");
    drop(rt);
}
