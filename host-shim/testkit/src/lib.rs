//! cdplace-testkit: what tests and benchmarks share, never linked into production. It owns the
//! native evaluator (the policy compiled natively as a second [`cdplace_host::Backend`]), the
//! object builders (Kubernetes objects shaped as the API server and the NVIDIA DRA driver write
//! them), the runner that evaluates one cluster with the policy compiled natively and as the
//! wasm component and insists they agree, and the packed formats seen from the Go side (facts
//! batches built from objects, a decoder of packed decisions). The benchmark
//! (`benches/policy.rs`) compares the two evaluators.

pub mod builders;
pub mod native;
pub mod packed;
