//! `cdplace policy apply FILE [--shadow]` (`kubectl cdplace policy apply`): puts a policy
//! component where the scheduler's `configMap` policy source watches, and waits for its verdict.
//!
//! The component goes into `binaryData[KEY]` of the ConfigMap by server-side apply (field manager
//! [`FIELD_MANAGER`], conflicts forced), never by client-side apply: that copies the whole object
//! into the `kubectl.kubernetes.io/last-applied-configuration` annotation, which holds at most
//! 256 KiB, and any real component is larger (issue 45). Then it waits for the scheduler's Event on
//! that ConfigMap that names the component's digest: a Normal `PolicyApplied` (printed, exit 0) or
//! a Warning `PolicyRefused` with the check that refused it and why (printed, exit 1); none within
//! `--timeout` exits 1 and says what to look at.
//!
//! The scheduler does nothing for content equal to its live policy, or to the one it refused
//! last (host-shim/go/pkg/computedomain/policy.go, `swapper.apply`): for those the verdict is the
//! newest Event that already names the digest, and the report says it was decided before.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams};
use sha2::{Digest, Sha256};

use crate::explain::ExplainError;
use crate::live::{LiveOptions, api_error, config, live};
use crate::status::shadow::parse_time;

/// The field manager of the server-side apply.
pub const FIELD_MANAGER: &str = "kubectl-cdplace";
/// Where the chart's install docs put the scheduler and its policy ConfigMaps.
pub const DEFAULT_NAMESPACE: &str = "cdplace-system";
/// The ConfigMap of the live policy, as docs/operations.md names it.
pub const DEFAULT_CONFIGMAP: &str = "cdplace-policy";
/// The shadow policy's ConfigMap (a component is ~600 KiB and a ConfigMap holds 1 MiB: its own).
pub const DEFAULT_SHADOW_CONFIGMAP: &str = "cdplace-shadow-policy";
/// The key of `binaryData` both sources read by default (the chart's `policy.key`).
pub const DEFAULT_KEY: &str = "policy.wasm";
/// The most a ConfigMap holds (the API server's limit on its data and binaryData together).
pub const CONFIGMAP_LIMIT: usize = 1 << 20;

/// How long a fresh verdict is waited for when the Events hold one for the content already.
const STANDING_GRACE: Duration = Duration::from_secs(10);

/// The scheduler's Event reasons on the policy ConfigMap (policy.go).
pub const APPLIED: &str = "PolicyApplied";
pub const REFUSED: &str = "PolicyRefused";
/// The live policy was replaced by the generation before it (its answers kept being refused).
pub const REVERTED: &str = "PolicyReverted";

/// The command line of `cdplace policy apply`.
#[derive(Debug, Clone, clap::Args)]
pub struct ApplyOptions {
    /// The policy component (`.wasm`).
    pub component: PathBuf,
    /// Put it in the shadow policy's ConfigMap (the chart's `shadowPolicy.configMap`): it is
    /// checked the same way and never acts.
    #[arg(long)]
    pub shadow: bool,
    /// The ConfigMap's namespace (the scheduler's).
    #[arg(short = 'n', long, default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// The ConfigMap the scheduler's policy source names (default: cdplace-policy, with --shadow
    /// cdplace-shadow-policy).
    #[arg(long, value_name = "NAME")]
    pub configmap: Option<String>,
    /// The binaryData key the source names.
    #[arg(long, default_value = DEFAULT_KEY)]
    pub key: String,
    /// How long to wait for the scheduler's verdict (`90s`, `2m`, or seconds).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// The kubeconfig (default: `$KUBECONFIG`, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// `30s`, `2m`, `1m30s`, `500ms` or a number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(n) = s.parse::<u64>() {
        return Ok(Duration::from_secs(n));
    }
    let bad = || format!("{s:?}: a duration such as 60s, 2m or 1m30s");
    let (mut total, mut rest) = (Duration::ZERO, s);
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let n = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let v: u64 = rest[..n].parse().map_err(|_| bad())?;
        rest = &rest[n..];
        let unit = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        total += match &rest[..unit] {
            "ms" => Duration::from_millis(v),
            "s" => Duration::from_secs(v),
            "m" => Duration::from_secs(v * 60),
            "h" => Duration::from_secs(v * 3600),
            _ => return Err(bad()),
        };
        rest = &rest[unit..];
    }
    Ok(total)
}

/// The verdict the scheduler gave the component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `PolicyApplied` or `PolicyRefused`.
    pub reason: String,
    /// The Event's note: the generation and self-test figures, or the check and its error.
    pub note: String,
    /// The verdict was given before this apply (the content was live or refused already).
    pub earlier: bool,
}

/// What `policy apply` did.
#[derive(Debug, Clone)]
pub struct Applied {
    pub digest: String,
    /// `namespace/name key K`.
    pub target: String,
    pub bytes: usize,
    /// The ConfigMap already held this content (nothing was changed).
    pub unchanged: bool,
    /// None: no verdict within the timeout.
    pub verdict: Option<Verdict>,
    pub waited: Duration,
}

impl Applied {
    /// The report and the exit status: 0 applied, 1 refused or no verdict.
    pub fn render(&self) -> (String, u8) {
        let what = format!(
            "{} ({} KiB) {} ConfigMap {}",
            self.digest,
            self.bytes.div_ceil(1024),
            if self.unchanged { "already in" } else { "written to" },
            self.target
        );
        match &self.verdict {
            Some(v) if v.reason == APPLIED => {
                let when = if v.earlier { " (before this apply: the content is live already)" } else { "" };
                (format!("{what}\napplied{when}: {}\n", v.note), 0)
            }
            Some(v) if v.reason == REVERTED => (
                format!(
                    "{what}\nreverted (before this apply; not tried again until other content is applied): {}\n",
                    v.note
                ),
                1,
            ),
            Some(v) => {
                let when = if v.earlier {
                    " (before this apply: the scheduler does not try refused content again until other content is applied)"
                } else {
                    ""
                };
                (format!("{what}\nrefused{when}: {}\n", v.note), 1)
            }
            None if self.unchanged => (
                format!(
                    "{what}\nno verdict: the ConfigMap held this content already, so the scheduler was not asked \
                     again, and no {APPLIED} or {REFUSED} Event names it (Events expire after the API server's \
                     --event-ttl); the scheduler's cdplace_policy_info metric names its live policy\n"
                ),
                1,
            ),
            None => (
                format!(
                    "{what}\nno verdict: no {APPLIED} or {REFUSED} Event names {} after {:.0?}; is this ConfigMap the \
                     scheduler's policy source (plugin argument policy or shadowPolicy: {{source: configMap, namespace, \
                     name, key}}; chart: policy.configMap), may the scheduler read it (the chart's Role), and is a \
                     scheduler leading?\n",
                    self.digest, self.waited
                ),
                1,
            ),
        }
    }
}

/// sha256 of the component, as the scheduler's Events and metrics name it.
pub fn digest(wasm: &[u8]) -> String {
    let sum = Sha256::digest(wasm);
    let mut s = String::with_capacity(71);
    s.push_str("sha256:");
    for b in sum {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// One Event on the ConfigMap, as far as the verdict goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyEvent {
    /// Name and resourceVersion: a series of one Event is updated in place, so a repeat of a
    /// verdict changes the resourceVersion.
    pub key: (String, String),
    pub reason: String,
    pub note: String,
    /// Microseconds since the epoch of its newest occurrence.
    pub at: i64,
}

impl PolicyEvent {
    fn of(e: &Event) -> Option<PolicyEvent> {
        let reason = e.reason.clone()?;
        if reason != APPLIED && reason != REFUSED && reason != REVERTED {
            return None;
        }
        let v = serde_json::to_value(e).ok()?;
        let at = [
            &v["series"]["lastObservedTime"],
            &v["lastTimestamp"],
            &v["eventTime"],
            &v["metadata"]["creationTimestamp"],
        ]
        .into_iter()
        .filter_map(|t| t.as_str().and_then(parse_time))
        .max()
        .unwrap_or(0);
        Some(PolicyEvent {
            key: (e.metadata.name.clone().unwrap_or_default(), e.metadata.resource_version.clone().unwrap_or_default()),
            reason,
            note: e.message.clone().unwrap_or_default(),
            at,
        })
    }
}

/// The verdict the scheduler already holds for `digest`, by the Events before the apply: the
/// newest `PolicyApplied` names the live policy, and a `PolicyRefused` newer than it names the one
/// refused last. The scheduler skips content equal to either (policy.go), so no new Event comes.
pub fn standing_verdict(events: &[PolicyEvent], digest: &str) -> Option<Verdict> {
    let newest = |reasons: &[&str]| {
        events
            .iter()
            .filter(|e| reasons.contains(&e.reason.as_str()) && e.note.contains("sha256:"))
            .max_by_key(|e| e.at)
    };
    // The live policy: the newest swap, or revert (whose note names the reverted policy, then
    // the one restored).
    let applied = newest(&[APPLIED, REVERTED]);
    if let Some(a) = applied.filter(|a| a.note.contains(digest)) {
        let reverted = a.reason == REVERTED && a.note.contains(&format!("{digest} reverted"));
        let reason = if reverted { REVERTED } else { APPLIED };
        return Some(Verdict { reason: reason.into(), note: a.note.clone(), earlier: true });
    }
    let refused = newest(&[REFUSED]).filter(|r| applied.is_none_or(|a| r.at > a.at))?;
    refused.note.contains(digest).then(|| Verdict { reason: REFUSED.into(), note: refused.note.clone(), earlier: true })
}

/// The first verdict on `digest` among Events not seen before the apply.
pub fn fresh_verdict(events: &[PolicyEvent], before: &BTreeSet<(String, String)>, digest: &str) -> Option<Verdict> {
    events
        .iter()
        .filter(|e| !before.contains(&e.key) && e.note.contains(digest))
        .min_by_key(|e| e.at)
        .map(|e| Verdict { reason: e.reason.clone(), note: e.note.clone(), earlier: false })
}

/// Runs `policy apply`, blocking until the verdict or the timeout.
pub fn run(o: &ApplyOptions) -> Result<Applied, ExplainError> {
    let file = o.component.display().to_string();
    let wasm = std::fs::read(&o.component)
        .map_err(|e| ExplainError::Input { file: file.clone(), message: format!("cannot read the component: {e}") })?;
    if !wasm.starts_with(b"\0asm") {
        return Err(ExplainError::Input { file, message: "not a WebAssembly component (no \\0asm header)".into() });
    }
    if wasm.len() + o.key.len() >= CONFIGMAP_LIMIT {
        return Err(ExplainError::Input {
            file,
            message: format!(
                "{} KiB: a ConfigMap holds at most 1 MiB; load a larger component with the file source (policy: {{source: file, path: ...}})",
                wasm.len().div_ceil(1024)
            ),
        });
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| live("starting the client's runtime", e))?;
    rt.block_on(apply(o, wasm))
}

async fn apply(o: &ApplyOptions, wasm: Vec<u8>) -> Result<Applied, ExplainError> {
    let name = o
        .configmap
        .clone()
        .unwrap_or_else(|| if o.shadow { DEFAULT_SHADOW_CONFIGMAP } else { DEFAULT_CONFIGMAP }.to_string());
    let ns = &o.namespace;
    let config = config(&LiveOptions { kubeconfig: o.kubeconfig.clone(), context: o.context.clone() }).await?;
    let server = config.cluster_url.to_string().trim_end_matches('/').to_string();
    let client = Client::try_from(config).map_err(|e| live(format!("connecting to {server}"), e))?;
    let digest = digest(&wasm);
    let target = format!("{ns}/{name} key {}", o.key);
    let events = |what: &'static str| list_events(&client, &server, ns, &name, what);

    let before = events("before the apply").await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let unchanged = match cms.get_opt(&name).await {
        Ok(cm) => cm.and_then(|cm| cm.binary_data).and_then(|mut d| d.remove(&o.key)).is_some_and(|b| b.0 == wasm),
        Err(e) => return Err(write_error(format!("{server}: reading ConfigMap {ns}/{name}"), e)),
    };
    let bytes = wasm.len();
    let cm = ConfigMap {
        metadata: ObjectMeta { name: Some(name.clone()), namespace: Some(ns.clone()), ..Default::default() },
        binary_data: Some(BTreeMap::from([(o.key.clone(), ByteString(wasm))])),
        ..Default::default()
    };
    let mut value = serde_json::to_value(&cm).map_err(|e| live("encoding the ConfigMap", e))?;
    value["apiVersion"] = "v1".into();
    value["kind"] = "ConfigMap".into();
    cms.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&value))
        .await
        .map_err(|e| write_error(format!("{server}: server-side apply of ConfigMap {ns}/{name}"), e))?;

    let start = Instant::now();
    let standing = standing_verdict(&before, &digest);
    let seen: BTreeSet<_> = before.iter().map(|e| e.key.clone()).collect();
    // Content the scheduler holds a verdict on already gets no new Event (see the module doc);
    // a scheduler restarted since those Events does decide it again, so a fresh verdict is
    // waited for a little before the standing one is taken.
    let wait = match (&standing, unchanged) {
        (_, true) => Duration::ZERO,
        (Some(_), false) => o.timeout.min(STANDING_GRACE),
        (None, false) => o.timeout,
    };
    let mut verdict = None;
    while verdict.is_none() && start.elapsed() < wait {
        tokio::time::sleep(Duration::from_millis(500)).await;
        verdict = fresh_verdict(&events("waiting for the verdict").await?, &seen, &digest);
    }
    let verdict = verdict.or(standing);
    Ok(Applied { digest, target, bytes, unchanged, verdict, waited: start.elapsed() })
}

/// A failed read or write of the ConfigMap; a refusal names the permission it needs.
fn write_error(what: String, e: kube::Error) -> ExplainError {
    match e {
        kube::Error::Api(s) if s.code == 403 => live(
            what,
            format!(
                "{} ({}, HTTP 403): applying a policy needs get and patch on the ConfigMap, and list on Events, in its namespace",
                s.message, s.reason
            ),
        ),
        e => api_error(what, e),
    }
}

/// The `PolicyApplied` and `PolicyRefused` Events on ConfigMap `ns/name` (core/v1, selected by the
/// object they regard).
async fn list_events(
    client: &Client,
    server: &str,
    ns: &str,
    name: &str,
    when: &str,
) -> Result<Vec<PolicyEvent>, ExplainError> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let params = ListParams::default().fields(&format!("involvedObject.kind=ConfigMap,involvedObject.name={name}"));
    let list = api
        .list(&params)
        .await
        .map_err(|e| write_error(format!("{server}: listing the Events of ConfigMap {ns}/{name} {when}"), e))?;
    Ok(list.items.iter().filter_map(PolicyEvent::of).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(name: &str, rv: &str, reason: &str, note: &str, at: i64) -> PolicyEvent {
        PolicyEvent { key: (name.into(), rv.into()), reason: reason.into(), note: note.into(), at }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        for bad in ["", "s", "10x", "1.5m", "m10"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_digest_is_the_schedulers() {
        // sha256 of the empty input, as policy.go's digestOf writes it.
        assert_eq!(digest(b""), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn the_standing_verdict_is_the_live_policy_or_the_last_refused() {
        let a = "sha256:aaaa";
        let b = "sha256:bbbb";
        let events = vec![
            ev("e1", "1", APPLIED, &format!("policy {a} from ConfigMap x is generation 2"), 10),
            ev(
                "e2",
                "2",
                REFUSED,
                &format!("policy {b} from ConfigMap x refused; generation 2 keeps deciding: boom"),
                20,
            ),
        ];
        let v = standing_verdict(&events, a).unwrap();
        assert_eq!((v.reason.as_str(), v.earlier), (APPLIED, true));
        assert_eq!(standing_verdict(&events, b).unwrap().reason, REFUSED);
        assert_eq!(standing_verdict(&events, "sha256:cccc"), None);
        // A refusal older than the newest swap is forgotten by the scheduler: b is tried again.
        let later =
            [events.clone(), vec![ev("e3", "3", APPLIED, "policy sha256:cccc ... is generation 3", 30)]].concat();
        assert_eq!(standing_verdict(&later, b), None);
        assert_eq!(standing_verdict(&later, a), None);
        // A revert: the reverted policy is not live, the one restored is.
        let good = "sha256:9999";
        let reverted = [
            events.clone(),
            vec![ev(
                "e5",
                "5",
                REVERTED,
                &format!("policy {a} reverted to generation 3 ({good}, the one before it): 5 refused"),
                50,
            )],
        ]
        .concat();
        assert_eq!(standing_verdict(&reverted, a).unwrap().reason, REVERTED);
        assert_eq!(standing_verdict(&reverted, good).unwrap().reason, APPLIED);
        // A note without a digest (a missing key) decides nothing.
        let missing = vec![ev("e4", "1", REFUSED, "ConfigMap x/y has no binaryData key \"k\"", 40)];
        assert_eq!(standing_verdict(&missing, a), None);
    }

    #[test]
    fn a_fresh_verdict_is_a_new_event_or_a_repeat_of_one() {
        let d = "sha256:dddd";
        let before: BTreeSet<_> = [("e1".to_string(), "1".to_string())].into();
        let old = ev("e1", "1", REFUSED, &format!("policy {d} refused"), 10);
        assert_eq!(fresh_verdict(std::slice::from_ref(&old), &before, d), None);
        // The same Event's series counted again: another resourceVersion.
        let again = ev("e1", "7", REFUSED, &format!("policy {d} refused"), 50);
        assert_eq!(fresh_verdict(&[again], &before, d).unwrap().reason, REFUSED);
        let other = ev("e9", "9", APPLIED, "policy sha256:eeee is generation 4", 60);
        assert_eq!(fresh_verdict(&[old, other], &before, d), None);
        let mine = ev("e8", "8", APPLIED, &format!("policy {d} from ConfigMap x is generation 5"), 70);
        let v = fresh_verdict(&[mine], &before, d).unwrap();
        assert_eq!((v.reason.as_str(), v.earlier), (APPLIED, false));
    }

    #[test]
    fn reports_and_exit_status() {
        let mut a = Applied {
            digest: "sha256:dddd".into(),
            target: "cdplace-system/cdplace-policy key policy.wasm".into(),
            bytes: 620 * 1024,
            unchanged: false,
            verdict: Some(Verdict {
                reason: APPLIED.into(),
                note: "policy sha256:dddd is generation 2".into(),
                earlier: false,
            }),
            waited: Duration::from_secs(2),
        };
        let (text, code) = a.render();
        assert_eq!(code, 0);
        assert_eq!(
            text,
            "sha256:dddd (620 KiB) written to ConfigMap cdplace-system/cdplace-policy key policy.wasm\napplied: policy sha256:dddd is generation 2\n"
        );
        a.verdict =
            Some(Verdict { reason: REFUSED.into(), note: "policy refused (self-test): trap".into(), earlier: false });
        let (text, code) = a.render();
        assert_eq!(code, 1);
        assert!(text.ends_with("\nrefused: policy refused (self-test): trap\n"), "{text}");
        a.verdict = None;
        let (text, code) = a.render();
        assert_eq!(code, 1);
        assert!(text.contains("no verdict: no PolicyApplied or PolicyRefused Event names sha256:dddd"), "{text}");
    }

    #[test]
    fn a_file_that_is_not_a_component_or_too_large_is_refused_before_the_cluster_is_read() {
        let dir = std::env::temp_dir().join(format!("cdplace-apply-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let opts = |p: PathBuf| ApplyOptions {
            component: p,
            shadow: false,
            namespace: DEFAULT_NAMESPACE.into(),
            configmap: None,
            key: DEFAULT_KEY.into(),
            timeout: Duration::from_secs(1),
            kubeconfig: Some("/nonexistent".into()),
            context: None,
        };
        let text = dir.join("text.wasm");
        std::fs::write(&text, "hello").unwrap();
        let e = run(&opts(text)).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("not a WebAssembly component"), "{e}");
        let big = dir.join("big.wasm");
        std::fs::write(&big, [b"\0asm".as_slice(), &vec![0u8; CONFIGMAP_LIMIT]].concat()).unwrap();
        let e = run(&opts(big)).unwrap_err();
        assert!(e.to_string().contains("a ConfigMap holds at most 1 MiB"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
