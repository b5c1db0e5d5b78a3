//! cdplace-testkit: what tests and benchmarks share, never linked into production. It owns the
//! object builders (Kubernetes objects shaped as the API server and the NVIDIA DRA driver write
//! them) and the runner that evaluates one cluster with the policy compiled natively and as the
//! wasm component and insists they agree. The benchmark (`benches/policy.rs`) compares the two.

pub mod builders;
