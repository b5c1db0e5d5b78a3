"""first-fit-py: a cdplace placement policy in Python, to show the contract (wit/cdplace.wit,
world `policy`) is language-neutral. Built with componentize-py (`make example-python`).

The rules, kept by this file alone (it shares no code with the Rust policy):
  1. a ComputeDomain pod goes only to a tray with a clique label, not cordoned;
  2. never to a tray that holds another ComputeDomain: a pod of it bound, assumed or nominated
     there, or the driver's `resource.nvidia.com/computeDomain` label naming it;
  3. never to a tray that already holds a workload pod of its own domain;
  4. a domain that has started stays in its clique;
  5. a domain that has not started goes to the first clique (by label) with a free tray for
     every pod of it the policy knows: first fit, not the shipped policy's best fit.
Pods without a ComputeDomain are left to the scheduler (`skip`); it never preempts. Arguments
are read for the host's settings with the shipped defaults; other fields are ignored.
"""

import json

import wit_world
from componentize_py_types import Err
from wit_world import Settings
from wit_world.imports import facts as f
from wit_world.imports import fleet as fl
from wit_world.imports import verdicts as v
from wit_world.imports.errors import PolicyError_InvalidArgs, PolicyError_InvalidInput

DOMAIN_LABEL_KEY = "resource.nvidia.com/computeDomain"


def duration_ms(s):
    """A Go duration of the forms the plugin takes (`2s`, `500ms`, `1m`, `1m30s`), in ms."""
    total, num = 0, ""
    i = 0
    while i < len(s):
        c = s[i]
        if c.isdigit():
            num += c
            i += 1
            continue
        if not num:
            raise ValueError(s)
        if s.startswith("ms", i):
            total, i = total + int(num), i + 2
        elif c == "s":
            total, i = total + int(num) * 1000, i + 1
        elif c == "m":
            total, i = total + int(num) * 60000, i + 1
        elif c == "h":
            total, i = total + int(num) * 3600000, i + 1
        else:
            raise ValueError(s)
        num = ""
    if num or not s:
        raise ValueError(s)
    return total


class View:
    def __init__(self):
        self.strings = {}
        self.nodes = {}  # name id -> NodeFact
        self.pods = {}  # key id -> PodFact
        self.claims = {}  # (ns, name) -> ClaimFact
        self.templates = {}  # (ns, name) -> TemplateFact

    def s(self, i):
        return self.strings.get(i, "")

    def apply(self, d):
        if isinstance(d, f.Delta_Strings):
            for i, text in d.value:
                self.strings[i] = text
        elif isinstance(d, f.Delta_UpsertNode):
            self.nodes[d.value.name] = d.value
        elif isinstance(d, f.Delta_RemoveNode):
            self.nodes.pop(d.value, None)
        elif isinstance(d, f.Delta_UpsertPod):
            self.pods[d.value.key] = d.value
        elif isinstance(d, f.Delta_RemovePod):
            self.pods.pop(d.value, None)
        elif isinstance(d, f.Delta_UpsertClaim):
            self.claims[(d.value.namespace, d.value.name)] = d.value
        elif isinstance(d, f.Delta_RemoveClaim):
            self.claims.pop(tuple(d.value), None)
        elif isinstance(d, f.Delta_UpsertTemplate):
            self.templates[(d.value.namespace, d.value.name)] = d.value
        elif isinstance(d, f.Delta_RemoveTemplate):
            self.templates.pop(tuple(d.value), None)
        elif isinstance(d, f.Delta_Reset):
            self.__init__()
        # Domains and owners: this policy sizes a domain by the pods it sees.

    def membership(self, pod):
        """(domain id, daemon) of a pod's ComputeDomain claim, or None."""
        for c in pod.claims:
            fact = None
            if c.claim is not None:
                fact = self.claims.get((pod.namespace, c.claim))
            elif c.generated is not None:
                fact = self.claims.get((pod.namespace, c.generated))
            if fact is None and c.template is not None:
                fact = self.templates.get((pod.namespace, c.template))
            if fact is not None and fact.domain is not None:
                return (fact.domain, fact.daemon)
        return None

    def clique(self, node):
        fact = self.nodes.get(node)
        if fact is None or fact.clique_label is None:
            return None
        label = self.s(fact.clique_label)
        cluster, _, cid = label.rpartition(".")
        return fact.clique_label if cluster and cid else None


class Answer:
    """A PreFilterResult under construction, reasons interned."""

    def __init__(self, domain):
        self.reasons = [""]
        self.domain = domain

    def verdict(self, code, reason=""):
        if reason not in self.reasons:
            self.reasons.append(reason)
        return v.Verdict(code, self.reasons.index(reason))

    def result(self, status, exclusive=False, cliques=(), other=None, nodes=()):
        other = other or self.verdict(v.Code.UNSCHEDULABLE, "no clique of this policy's choosing")
        return v.PreFilterResult(status, self.domain, self.reasons, exclusive, list(cliques), other, 0, list(nodes))


VIEW = View()
ARGS = {}


def settings_of(args):
    def text(key, default):
        val = args.get(key, default)
        if not isinstance(val, str) or not val:
            raise ValueError(f"{key}: must be a non-empty string")
        return val

    try:
        timeout = duration_ms(args.get("guestCallTimeout", "2000ms"))
    except ValueError:
        raise ValueError(f"guestCallTimeout: Invalid value: \"{args.get('guestCallTimeout')}\": must be a duration such as 2s")
    return Settings(
        clique_label=text("cliqueLabel", "nvidia.com/gpu.clique"),
        gpu_resource_name=text("gpuResourceName", "nvidia.com/gpu"),
        gpu_driver=text("gpuDriver", "gpu.nvidia.com"),
        compute_domain_driver=text("computeDomainDriver", "compute-domain.nvidia.com"),
        size_annotation=text("sizeAnnotation", "cdplace.nvidia.com/size"),
        guest_path=args.get("guestPath"),
        call_timeout_ms=timeout,
        memory_limit_mib=int(args.get("guestMemoryLimitMiB", 512)),
        plain_pod_steering=bool(args.get("plainPodSteering", True)),
        max_policy_instances=int(args.get("maxPolicyInstances", 16)),
    )


class WitWorld(wit_world.WitWorld):
    def configure(self, args):
        global ARGS
        try:
            parsed = json.loads(args) if args.strip() else {}
            if not isinstance(parsed, dict):
                raise ValueError("the arguments must be an object")
            s = settings_of(parsed)
        except ValueError as e:
            raise Err(PolicyError_InvalidArgs(str(e)))
        ARGS = parsed
        return s

    def apply(self, deltas):
        for d in deltas:
            try:
                VIEW.apply(d)
            except (TypeError, AttributeError) as e:
                raise Err(PolicyError_InvalidInput(f"a delta does not fit the view: {e}"))

    def pre_filter(self, pod, overlay, now_ms):
        me = VIEW.pods.get(pod)
        member = VIEW.membership(me) if me is not None else None
        if member is None or member[1]:
            # Not a ComputeDomain workload pod: nothing to say.
            a = Answer(None)
            return a.result(a.verdict(v.Code.SKIP), other=a.verdict(v.Code.SKIP))
        domain = member[0]
        a = Answer(domain)
        ok = a.verdict(v.Code.SUCCESS)

        # Where every pod is, with preemption's hypothetical changes applied.
        removed = {op.value for op in overlay if isinstance(op, v.OverlayOp_RemovePod)}
        where = {}
        for key, p in VIEW.pods.items():
            if key != pod and key not in removed and p.node is not None and p.placement != f.Placement.PENDING:
                where[key] = (p.node, p.placement)
        for op in overlay:
            if isinstance(op, v.OverlayOp_AddPod) and op.value[0] != pod:
                where[op.value[0]] = (op.value[1], f.Placement.NOMINATED)

        # Trays: who holds them; the domain's own pods and clique.
        held = {}  # node -> reason it is taken
        home = set()
        pending = 1
        for key, (node, placement) in where.items():
            m = VIEW.membership(VIEW.pods[key]) if key in VIEW.pods else None
            if m is None:
                continue
            if m[0] != domain:
                held[node] = f"holds a pod of another ComputeDomain ({VIEW.s(m[0])})"
            elif not m[1]:
                held.setdefault(node, "already runs a pod of this ComputeDomain")
                if placement in (f.Placement.BOUND, f.Placement.ASSUMED) and VIEW.clique(node) is not None:
                    home.add(VIEW.clique(node))
        for key, p in VIEW.pods.items():
            if key != pod and p.placement == f.Placement.PENDING and key not in where:
                m = VIEW.membership(p)
                if m is not None and m[0] == domain and not m[1]:
                    pending += 1
        free = {}  # clique -> free trays
        nodes = []
        for name, fact in VIEW.nodes.items():
            c = VIEW.clique(name)
            label = fact.domain_label
            reason = None
            if c is None:
                continue
            if fact.unschedulable:
                reason = "the tray is cordoned"
            elif name in held:
                reason = held[name]
            elif label is not None and VIEW.s(label) and label != domain:
                reason = f"the driver's label names another ComputeDomain ({VIEW.s(label)})"
            if reason is None:
                free[c] = free.get(c, 0) + 1
            else:
                nodes.append(v.NodeVerdict(name, a.verdict(v.Code.UNSCHEDULABLE, reason)))
        cliques = sorted({VIEW.clique(n) for n in VIEW.nodes if VIEW.clique(n) is not None}, key=VIEW.s)

        if home:
            # Started: its clique only (every one it runs in, should it span more).
            listed = [v.CliqueVerdict(c, ok, 100, False) for c in cliques if c in home]
            return a.result(ok, exclusive=True, cliques=listed, other=a.verdict(v.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "the ComputeDomain runs in another clique"), nodes=nodes)
        fits = [c for c in cliques if free.get(c, 0) >= pending]
        if not fits:
            return a.result(ok, other=a.verdict(v.Code.UNSCHEDULABLE, f"no clique has {pending} free trays"), nodes=nodes)
        first = fits[0]
        listed = [v.CliqueVerdict(first, ok, 100, False)]
        listed += [v.CliqueVerdict(c, a.verdict(v.Code.UNSCHEDULABLE, "first fit: an earlier clique fits"), 0, False) for c in cliques if c != first]
        return a.result(ok, cliques=listed, nodes=[n for n in nodes if VIEW.clique(n.node) == first])

    def steer(self, gpus, now_ms):
        a = Answer(None)
        return a.result(a.verdict(v.Code.SKIP), other=a.verdict(v.Code.SKIP))

    def preempt(self, pod, now_ms):
        return v.Preemption(None, None, "first-fit-py never preempts")

    def status(self, now_ms):
        taken = {p.node for p in VIEW.pods.values() if p.node is not None and p.placement != f.Placement.PENDING}
        cliques = {}
        for name, fact in VIEW.nodes.items():
            c = VIEW.clique(name)
            if c is None:
                continue
            usable, free = cliques.get(c, (0, 0))
            ok = not fact.unschedulable
            idle = ok and name not in taken and not (fact.domain_label is not None and VIEW.s(fact.domain_label))
            cliques[c] = (usable + ok, free + idle)
        out = [fl.CliqueStatus(c, u, fr, 0, None) for c, (u, fr) in sorted(cliques.items())]
        return fl.FleetStatus(out, [], 0, 0)
