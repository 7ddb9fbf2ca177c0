"""The deployment artifacts in ``deploy/`` say what running Meridian on Kubernetes takes.

``kubectl kustomize`` renders the base and the production overlay; every rendered object is
checked against the Kubernetes API's own schemas (kubernetes-validate, strict: a misspelt
field is an error, as ``kubectl apply --validate=strict`` would make it), and the CRD kinds
it has no schema for (ServiceMonitor) by the rules below. Then the rules a platform team
would check in review, each its own test: replicas, probes, shutdown timing, resources, the
restricted security context, pinned images, shard coverage, the production commands, PDBs,
network policy, scraping, websockets through the ingress, the migration Job. Each rule is a
function returning what is wrong, and ``test_each_rule_catches_what_it_is_about`` shows that
every one of them fails on a manifest missing its property.

The Dockerfile is read as text (no Docker engine is needed): multi-stage, pinned bases, a
numeric non-root user, no compiler in the runtime stage.
"""

from __future__ import annotations

import copy
import fnmatch
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError, ValidationError

from core.sharding import parse_shard_spec
from tests.faults.processes import BEAT_COMMAND, MIGRATE_COMMAND, WEB_COMMAND, WORKER_COMMAND

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
KUSTOMIZATIONS = {"base": DEPLOY / "kubernetes" / "base", "production": DEPLOY / "kubernetes" / "overlays" / "production"}
SECRET_EXAMPLE = DEPLOY / "kubernetes" / "secret.env.example"

#: The oldest Kubernetes minor the manifests must apply to; the schemas are kubernetes-validate's.
KUBERNETES_VERSION = "1.32"
#: Kinds the Kubernetes schemas do not know (CRDs): the ServiceMonitor rule checks them instead.
CRD_KINDS = {"ServiceMonitor"}
NAMESPACE = "meridian"

# The production commands (README, "Production"), in one place with the fault and HA suites'.
DEPLOYMENT_COMMANDS = {"meridian-web": WEB_COMMAND, "meridian-worker": WORKER_COMMAND, "meridian-beat": BEAT_COMMAND}
WEB = "meridian-web"

#: AdmissionReviews up to this size reach the webhooks (quotas/webhook.py, scheduling/webhook.py).
WEBHOOK_MAX_BODY = 3 * 1024 * 1024
#: A live page keeps its websocket open; the ingress must not cut an idle one sooner.
WEBSOCKET_TIMEOUT_SECONDS = 3600

Docs = list[dict]


# --- rendering --------------------------------------------------------------------------

def render(path: Path) -> Docs:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: the manifests are rendered with `kubectl kustomize` (CI machines have it)")
    result = subprocess.run(["kubectl", "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"kubectl kustomize {path.relative_to(ROOT)} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module", params=sorted(KUSTOMIZATIONS))
def rendered(request) -> Docs:
    return render(KUSTOMIZATIONS[request.param])


@pytest.fixture(scope="module")
def production() -> Docs:
    return render(KUSTOMIZATIONS["production"])


# --- reading the rendered objects -------------------------------------------------------

def of_kind(docs: Docs, kind: str) -> Docs:
    return [doc for doc in docs if doc.get("kind") == kind]


def named(docs: Docs, kind: str, name: str) -> dict | None:
    return next((doc for doc in of_kind(docs, kind) if doc["metadata"]["name"] == name), None)


def workloads(docs: Docs) -> Docs:
    return [doc for doc in docs if doc.get("kind") in {"Deployment", "Job"}]


def pod_spec(workload: dict) -> dict:
    return workload["spec"]["template"]["spec"]


def containers(workload: dict, *, init: bool = True) -> Iterator[dict]:
    spec = pod_spec(workload)
    yield from spec.get("initContainers", []) if init else []
    yield from spec.get("containers", [])


def main_container(workload: dict) -> dict:
    return pod_spec(workload)["containers"][0]


def config(docs: Docs) -> dict[str, str]:
    """The ConfigMap every workload reads its settings from (its name carries a content hash)."""
    maps = [doc for doc in of_kind(docs, "ConfigMap") if doc["metadata"]["name"].startswith("meridian-config")]
    assert len(maps) == 1, [doc["metadata"]["name"] for doc in maps]
    return maps[0].get("data", {})


def selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def label(doc: dict) -> str:
    return f"{doc['kind']}/{doc['metadata']['name']}"


def option(args: list[str], flag: str) -> str | None:
    """The value after ``flag`` in an argument list (``--flag value`` or ``--flag=value``)."""
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def quantity_bytes(text: str) -> int:
    """An nginx size ("8m", "512k") or a Kubernetes one ("8Mi") in bytes."""
    match = re.fullmatch(r"(\d+)([kKmMgG]i?)?", str(text).strip())
    assert match, f"not a size: {text!r}"
    scale = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[(match.group(2) or "")[:1].lower()]
    return int(match.group(1)) * scale


# --- the rules --------------------------------------------------------------------------

def schema_problems(docs: Docs) -> list[str]:
    problems = []
    for doc in docs:
        if doc.get("kind") in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except ValidationError as exc:
            problems.append(f"{label(doc)}: {'.'.join(map(str, exc.path))}: {exc.message}")
        except SchemaNotFoundError as exc:
            problems.append(f"{label(doc)}: {exc.message} (a CRD kind needs its own rule)")
    return problems


def namespace_problems(docs: Docs) -> list[str]:
    cluster_scoped = {"Namespace"}
    return [f"{label(doc)} is in namespace {doc['metadata'].get('namespace')!r}" for doc in docs
            if doc["kind"] not in cluster_scoped and doc["metadata"].get("namespace") != NAMESPACE]


def replica_problems(docs: Docs) -> list[str]:
    """Two pods at least, so one can be drained, evicted or crash while the other serves."""
    autoscaled = {hpa["spec"]["scaleTargetRef"]["name"]: hpa["spec"].get("minReplicas", 1)
                  for hpa in of_kind(docs, "HorizontalPodAutoscaler") if hpa["spec"]["scaleTargetRef"]["kind"] == "Deployment"}
    problems = []
    for deployment in of_kind(docs, "Deployment"):
        name = deployment["metadata"]["name"]
        replicas = autoscaled.get(name, deployment["spec"].get("replicas", 1))
        if replicas < 2:
            problems.append(f"{name} runs {replicas} replica(s)")
        if name in autoscaled and "replicas" in deployment["spec"]:
            problems.append(f"{name} names replicas although an autoscaler owns them (every apply would reset it)")
    return problems


def web_probe_problems(docs: Docs) -> list[str]:
    web = named(docs, "Deployment", WEB)
    if web is None:
        return [f"no Deployment {WEB}"]
    container = main_container(web)
    ports = {port.get("name"): port["containerPort"] for port in container.get("ports", [])}
    problems = []
    for probe, path in (("startupProbe", None), ("readinessProbe", "/readyz?checks=database"), ("livenessProbe", "/healthz")):
        get = container.get(probe, {}).get("httpGet")
        if not get:
            problems.append(f"{WEB} has no HTTP {probe}")
            continue
        if get.get("port") not in ports and get.get("port") not in ports.values():
            problems.append(f"{WEB}'s {probe} probes port {get.get('port')!r}, which the container does not open")
        if path and get.get("path") != path:
            problems.append(f"{WEB}'s {probe} asks {get.get('path')!r}, not {path}")
    return problems


def web_probe_paths(docs: Docs) -> dict[str, str]:
    container = main_container(named(docs, "Deployment", WEB))
    return {probe: container[probe]["httpGet"]["path"] for probe in ("startupProbe", "readinessProbe", "livenessProbe")}


def shutdown_problems(docs: Docs) -> list[str]:
    """SIGTERM comes after the preStop sleep, and uvicorn then drains for up to its graceful
    timeout: the grace period (which counts the hook) must cover both, or the kubelet kills
    requests in flight."""
    web = named(docs, "Deployment", WEB)
    if web is None:
        return [f"no Deployment {WEB}"]
    container = main_container(web)
    graceful = option(container.get("args", []) + container.get("command", []), "--timeout-graceful-shutdown")
    if graceful is None:
        return [f"{WEB} runs uvicorn without --timeout-graceful-shutdown"]
    pre_stop = container.get("lifecycle", {}).get("preStop", {})
    if "sleep" in pre_stop:
        sleep = int(pre_stop["sleep"]["seconds"])
    else:
        command = pre_stop.get("exec", {}).get("command", [])
        if not command or Path(command[0]).name != "sleep":
            return [f"{WEB} has no preStop sleep: SIGTERM would come before the endpoints stop sending requests"]
        sleep = int(command[1])
    grace = pod_spec(web).get("terminationGracePeriodSeconds", 30)
    if grace <= sleep + int(graceful):
        return [f"{WEB}: terminationGracePeriodSeconds {grace} <= preStop {sleep} s + graceful shutdown {graceful} s"]
    return []


def resource_problems(docs: Docs) -> list[str]:
    problems = []
    for workload in workloads(docs):
        for container in containers(workload):
            resources = container.get("resources", {})
            for kind in ("requests", "limits"):
                for resource in ("cpu", "memory"):
                    if resource not in resources.get(kind, {}):
                        problems.append(f"{label(workload)} container {container['name']} has no {kind}.{resource}")
    return problems


def security_problems(docs: Docs) -> list[str]:
    """Pod Security's restricted profile, plus a read-only root filesystem: the image is
    never written to; /tmp is an emptyDir."""
    problems = []
    for workload in workloads(docs):
        spec = pod_spec(workload)
        pod = spec.get("securityContext", {})
        if spec.get("automountServiceAccountToken") is not False:
            problems.append(f"{label(workload)} mounts a service account token it does not use")
        for container in containers(workload):
            where = f"{label(workload)} container {container['name']}"
            own = container.get("securityContext", {})

            def effective(key, own=own):
                return own.get(key, pod.get(key))

            if effective("runAsNonRoot") is not True:
                problems.append(f"{where} may run as root (runAsNonRoot)")
            if effective("runAsUser") in (None, 0):
                problems.append(f"{where} names no non-root runAsUser")
            if own.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{where} has a writable root filesystem")
            if own.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{where} allows privilege escalation")
            if "ALL" not in own.get("capabilities", {}).get("drop", []):
                problems.append(f"{where} keeps Linux capabilities (drop ALL)")
            if (effective("seccompProfile") or {}).get("type") not in {"RuntimeDefault", "Localhost"}:
                problems.append(f"{where} runs without a seccomp profile")
            tmp = {mount["mountPath"]: mount["name"] for mount in container.get("volumeMounts", [])}.get("/tmp")
            volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
            if tmp is None or "emptyDir" not in volumes.get(tmp, {}):
                problems.append(f"{where} has no emptyDir at /tmp (its root filesystem is read-only)")
    return problems


def image_problems(docs: Docs) -> list[str]:
    problems = []
    for workload in workloads(docs):
        for container in containers(workload):
            image = container.get("image", "")
            name, _, digest = image.partition("@")
            last = name.rsplit("/", 1)[-1]
            tag = last.partition(":")[2]
            if not digest and tag in ("", "latest"):
                problems.append(f"{label(workload)} container {container['name']} runs {image!r}: no pinned tag")
    return problems


def shard_problems(docs: Docs) -> list[str]:
    """Every ``reconcile.<n>`` queue and the default queue have a consumer: a shard nobody
    consumes silently stops reconciling whatever hashes to it."""
    count = int(config(docs).get("MERIDIAN_SHARDS", "4"))
    covered: set[int] = set()
    default_queue = False
    problems = []
    for deployment in of_kind(docs, "Deployment"):
        args = main_container(deployment).get("args", [])
        if "meridian_worker" not in args or deployment["spec"].get("replicas", 1) < 1:
            continue
        try:
            covered.update(parse_shard_spec(option(args, "--shards") or "all", count))
        except ValueError as exc:
            problems.append(f"{label(deployment)}: {exc}")
        default_queue = default_queue or "--no-default-queue" not in args
    missing = sorted(set(range(count)) - covered)
    if missing:
        problems.append(f"no worker consumes {', '.join(f'reconcile.{n}' for n in missing)} (MERIDIAN_SHARDS={count})")
    if not default_queue:
        problems.append("no worker consumes the default queue")
    return problems


def command_problems(docs: Docs) -> list[str]:
    """The README's production commands, as ``args``: a ``command`` would replace the image's
    ENTRYPOINT, and tini would no longer be PID 1."""
    problems = []
    deployments = {deployment["metadata"]["name"]: deployment for deployment in of_kind(docs, "Deployment")}
    if set(deployments) != set(DEPLOYMENT_COMMANDS):
        problems.append(f"Deployments {sorted(deployments)}, expected {sorted(DEPLOYMENT_COMMANDS)}")
    expected = [(deployments.get(name), command) for name, command in DEPLOYMENT_COMMANDS.items()]
    expected += [(job, MIGRATE_COMMAND) for job in of_kind(docs, "Job")]
    for workload, command in expected:
        if workload is None:
            continue
        for container in containers(workload):
            if "command" in container:
                problems.append(f"{label(workload)} container {container['name']} sets `command` (tini would not be PID 1)")
        args = tuple(main_container(workload).get("args", []))
        if args != command:
            problems.append(f"{label(workload)} runs {shlex.join(args)!r}, not {shlex.join(command)!r}")
    return problems


def migration_problems(docs: Docs) -> list[str]:
    """One Job migrates; every Deployment's pods wait for it, so a release's code never meets
    the previous release's schema, whatever order the objects were applied in."""
    jobs = [job for job in of_kind(docs, "Job") if tuple(main_container(job).get("args", [])) == MIGRATE_COMMAND]
    problems = [] if len(jobs) == 1 else [f"{len(jobs)} Jobs run {shlex.join(MIGRATE_COMMAND)!r}, expected one"]
    for job in jobs:
        if pod_spec(job).get("restartPolicy") != "Never" or job["spec"].get("parallelism", 1) != 1:
            problems.append(f"{label(job)}: migrations must run once at a time (restartPolicy Never, parallelism 1)")
    for deployment in of_kind(docs, "Deployment"):
        waits = [init for init in pod_spec(deployment).get("initContainers", [])
                 if "migrate --check" in " ".join(init.get("command", []) + init.get("args", []))]
        if not waits:
            problems.append(f"{label(deployment)} starts without waiting for its migrations (migrate --check)")
    return problems


def disruption_problems(docs: Docs) -> list[str]:
    """A budget per Deployment, and one that a drain can satisfy."""
    problems = []
    budgets = of_kind(docs, "PodDisruptionBudget")
    for deployment in of_kind(docs, "Deployment"):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        mine = [budget for budget in budgets if selects(budget["spec"]["selector"], labels)]
        if not mine:
            problems.append(f"no PodDisruptionBudget covers {label(deployment)}")
        for budget in mine:
            spec = budget["spec"]
            blocked = str(spec.get("maxUnavailable", "1")) in {"0", "0%"} or str(spec.get("minAvailable")) == "100%"
            if isinstance(spec.get("minAvailable"), int) and spec["minAvailable"] >= deployment["spec"].get("replicas", 2):
                blocked = True  # an autoscaled Deployment names no replicas: its floor is at least 2 (replica_problems)
            if blocked:
                problems.append(f"{label(budget)} never lets a drain evict a pod")
    return problems


def network_problems(docs: Docs) -> list[str]:
    """Deny by default; the web takes connections from the ingress controller and Prometheus;
    Meridian's pods reach DNS, PostgreSQL, Redis (and Sentinel) and the member clusters' API
    servers (their addresses are site-specific: docs/deploy.md)."""
    policies = of_kind(docs, "NetworkPolicy")
    problems = []
    if not any(policy["spec"].get("podSelector") == {} and set(policy["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}
               and not policy["spec"].get("ingress") and not policy["spec"].get("egress") for policy in policies):
        problems.append("no default-deny NetworkPolicy (ingress and egress) for the namespace")
    web = named(docs, "Deployment", WEB)
    if web is None:
        return problems + [f"no Deployment {WEB}"]
    labels = web["spec"]["template"]["metadata"]["labels"]
    mine = [policy["spec"] for policy in policies if selects(policy["spec"]["podSelector"], labels)]
    sources = {peer.get("namespaceSelector", {}).get("matchLabels", {}).get("kubernetes.io/metadata.name")
               for spec in mine for rule in spec.get("ingress", []) for peer in rule.get("from", [])}
    for namespace in ("ingress-nginx", "monitoring"):
        if namespace not in sources:
            problems.append(f"the web pods take no connections from namespace {namespace}")
    egress = {(port.get("port"), port.get("protocol", "TCP"))
              for spec in mine for rule in spec.get("egress", []) for port in rule.get("ports", [])}
    for port, protocol in ((53, "UDP"), (53, "TCP"), (5432, "TCP"), (6379, "TCP"), (26379, "TCP"), (443, "TCP"), (6443, "TCP")):
        if (port, protocol) not in egress:
            problems.append(f"the web pods cannot reach port {port}/{protocol}")
    return problems


def web_service(docs: Docs) -> dict | None:
    return named(docs, "Service", WEB)


def service_problems(docs: Docs) -> list[str]:
    service, web = web_service(docs), named(docs, "Deployment", WEB)
    if service is None or web is None:
        return [f"no Service or Deployment {WEB}"]
    problems = []
    if not selects({"matchLabels": service["spec"]["selector"]}, web["spec"]["template"]["metadata"]["labels"]):
        problems.append(f"Service {WEB} does not select the web pods")
    container_ports = {port.get("name") for port in main_container(web).get("ports", [])}
    for port in service["spec"]["ports"]:
        if port.get("targetPort") not in container_ports and port.get("targetPort") != 8000:
            problems.append(f"Service {WEB} port {port.get('name')} targets {port.get('targetPort')!r}, "
                            "which the pods do not open")
    if not any(port["port"] == 80 for port in service["spec"]["ports"]):
        problems.append(f"Service {WEB} does not listen on port 80")
    return problems


def web_host_problems(docs: Docs) -> list[str]:
    """The kubelet's probes and Prometheus's scrapes carry the pod IP as their Host header;
    Django refuses a Host outside ALLOWED_HOSTS (400), so the web adds its own IP."""
    web = named(docs, "Deployment", WEB)
    if web is None:
        return [f"no Deployment {WEB}"]
    env = {item["name"]: item for item in main_container(web).get("env", [])}
    pod_ip = [name for name, item in env.items()
              if item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP"]
    allowed = env.get("ALLOWED_HOSTS", {}).get("value", "")
    if not pod_ip or f"$({pod_ip[0]})" not in allowed.split(","):
        return [f"{WEB}'s ALLOWED_HOSTS ({allowed or 'from the ConfigMap'}) leaves out the pod's IP"]
    if "$(ALLOWED_HOSTS)" not in allowed.split(","):
        return [f"{WEB}'s ALLOWED_HOSTS drops the public host names"]
    return []


def scrape_problems(docs: Docs) -> list[str]:
    """The ServiceMonitor (a CRD: no schema above) scrapes the web Service's port at /metrics
    with the API token /metrics asks for."""
    monitors = of_kind(docs, "ServiceMonitor")
    service = web_service(docs)
    if len(monitors) != 1 or service is None:
        return [f"{len(monitors)} ServiceMonitors, expected one for Service {WEB}"]
    monitor = monitors[0]
    problems = []
    if monitor.get("apiVersion") != "monitoring.coreos.com/v1":
        problems.append(f"{label(monitor)} has apiVersion {monitor.get('apiVersion')}")
    spec = monitor.get("spec", {})
    unknown = set(spec) - {"selector", "endpoints", "namespaceSelector", "jobLabel", "targetLabels", "podTargetLabels",
                           "sampleLimit"}
    if unknown:
        problems.append(f"{label(monitor)} has unknown fields {sorted(unknown)}")
    if not selects(spec.get("selector", {}), service["metadata"].get("labels", {})):
        problems.append(f"{label(monitor)} does not select Service {WEB}")
    port_names = {port.get("name") for port in service["spec"]["ports"]}
    endpoint_fields = {"port", "path", "scheme", "interval", "scrapeTimeout", "authorization", "honorLabels",
                       "relabelings", "metricRelabelings", "tlsConfig", "followRedirects"}
    for endpoint in spec.get("endpoints", [{}]) or [{}]:
        if set(endpoint) - endpoint_fields:
            problems.append(f"{label(monitor)} endpoint has unknown fields {sorted(set(endpoint) - endpoint_fields)}")
        if endpoint.get("port") not in port_names:
            problems.append(f"{label(monitor)} scrapes port {endpoint.get('port')!r}, "
                            f"not one of Service {WEB}'s {sorted(port_names)}")
        if endpoint.get("path") != "/metrics":
            problems.append(f"{label(monitor)} scrapes {endpoint.get('path')!r}, not /metrics")
        auth = endpoint.get("authorization", {})
        credentials = auth.get("credentials", {})
        if auth.get("type") != "Token" or not credentials.get("name") or not credentials.get("key"):
            problems.append(f"{label(monitor)} sends no 'Authorization: Token <key>' from a Secret")
        secret = named(docs, "Secret", credentials.get("name", ""))
        if secret is not None and credentials.get("key") not in {**secret.get("data", {}), **secret.get("stringData", {})}:
            problems.append(f"{label(monitor)} reads key {credentials.get('key')!r}, "
                            f"which Secret {credentials.get('name')} lacks")
    return problems


def ingress_problems(docs: Docs) -> list[str]:
    """Websockets (/ws/) get an hour of idle time; the rest takes AdmissionReviews up to the
    webhooks' limit; every host is TLS and known to Django (ALLOWED_HOSTS, CSRF origins)."""
    ingresses = of_kind(docs, "Ingress")
    settings = config(docs)
    allowed = settings.get("ALLOWED_HOSTS", "").split(",")
    origins = settings.get("CSRF_TRUSTED_ORIGINS", "").split(",")
    public = urlsplit(settings.get("MERIDIAN_PUBLIC_URL", "")).hostname
    problems, hosts, websocket, root = [], set(), False, False
    for ingress in ingresses:
        notes = ingress["metadata"].get("annotations", {})
        tls_hosts = {host for tls in ingress["spec"].get("tls", []) for host in tls.get("hosts", [])}
        for rule in ingress["spec"].get("rules", []):
            host = rule.get("host")
            hosts.add(host)
            if host not in tls_hosts:
                problems.append(f"{label(ingress)} serves {host} without TLS")
            if host not in allowed or f"https://{host}" not in origins:
                problems.append(f"{label(ingress)} host {host} is not in ALLOWED_HOSTS and CSRF_TRUSTED_ORIGINS")
            for path in rule.get("http", {}).get("paths", []):
                backend = path["backend"]["service"]
                if backend["name"] != WEB:
                    problems.append(f"{label(ingress)} {path['path']} goes to {backend['name']}, not {WEB}")
                if path["path"] == "/ws/":
                    timeouts = [int(notes.get(f"nginx.ingress.kubernetes.io/proxy-{way}-timeout", 60))
                                for way in ("read", "send")]
                    if min(timeouts) < WEBSOCKET_TIMEOUT_SECONDS:
                        problems.append(f"{label(ingress)} cuts idle websockets after {min(timeouts)} s")
                    websocket = True
                if path["path"] == "/":
                    body = notes.get("nginx.ingress.kubernetes.io/proxy-body-size", "1m")
                    if quantity_bytes(body) < WEBHOOK_MAX_BODY:
                        problems.append(f"{label(ingress)} refuses bodies over {body}: AdmissionReviews reach 3 MiB")
                    root = True
    if not websocket:
        problems.append("no Ingress routes /ws/")
    if not root:
        problems.append("no Ingress routes /")
    if public not in hosts:
        problems.append(f"MERIDIAN_PUBLIC_URL's host {public!r} is not an Ingress host {sorted(hosts)}")
    return problems


def config_problems(docs: Docs) -> list[str]:
    """What production settings refuse to start without, and what the image was built with."""
    settings = config(docs)
    problems = [f"the ConfigMap lacks {key}" for key in ("ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "MERIDIAN_PUBLIC_URL",
                                                         "MERIDIAN_SHARDS", "STATIC_ROOT", "MERIDIAN_PROXY_COUNT")
                if not settings.get(key)]
    if settings.get("MERIDIAN_ENV") != "production":
        problems.append("MERIDIAN_ENV is not production")
    if settings.get("LOG_FORMAT") != "json":
        problems.append("LOG_FORMAT is not json")
    image_root = dockerfile_env(final_stage(parse_dockerfile(DOCKERFILE.read_text()))).get("STATIC_ROOT")
    if settings.get("STATIC_ROOT") != image_root:
        problems.append(f"STATIC_ROOT {settings.get('STATIC_ROOT')!r} is not where the image collected static files "
                        f"({image_root!r})")
    names = {doc["metadata"]["name"] for doc in of_kind(docs, "ConfigMap")}
    for workload in workloads(docs):
        for container in containers(workload):
            for source in container.get("envFrom", []):
                ref = source.get("configMapRef")
                if ref and ref["name"] not in names:
                    problems.append(f"{label(workload)} reads ConfigMap {ref['name']}, which is not rendered")
    return problems


def secret_keys_example() -> set[str]:
    return {line.split("=", 1)[0] for line in SECRET_EXAMPLE.read_text().splitlines() if line and not line.startswith("#")}


# Each rule, and what to break in a rendered production overlay so that it must complain.
def _set(path: str, value) -> Callable[[Docs], None]:
    """A mutation: ``Kind/name:key.key.0.key`` set to ``value`` (None deletes it)."""
    target, _, keys = path.partition(":")
    kind, name = target.split("/")

    def mutate(docs: Docs) -> None:
        node = named(docs, kind, name)
        *parents, last = [int(key) if key.isdigit() else key for key in keys.split(".")]
        for key in parents:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return mutate


def _all(mutate_one: Callable[[dict], None], kinds=("Deployment",)) -> Callable[[Docs], None]:
    def mutate(docs: Docs) -> None:
        for doc in docs:
            if doc["kind"] in kinds:
                mutate_one(doc)
    return mutate


def _drop_kind(kind: str) -> Callable[[Docs], None]:
    def mutate(docs: Docs) -> None:
        docs[:] = [doc for doc in docs if doc["kind"] != kind]
    return mutate


def _whole_worker_budget(docs: Docs) -> None:
    spec = named(docs, "PodDisruptionBudget", "meridian-worker")["spec"]
    del spec["maxUnavailable"]
    spec["minAvailable"] = named(docs, "Deployment", "meridian-worker")["spec"]["replicas"]


POD = "spec.template.spec"
WEB_C, WORKER_C, BEAT_C = (f"Deployment/meridian-{name}:{POD}.containers.0" for name in ("web", "worker", "beat"))
JOB_C = f"Job/meridian-migrate:{POD}.containers.0"
BREAKAGES = [
    (schema_problems, "a misspelt field", _set("Deployment/meridian-worker:spec.replica", 2)),
    (schema_problems, "a kind without a schema",
     lambda docs: docs.append({"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w"}})),
    (namespace_problems, "an object outside the namespace", _set("Service/meridian-web:metadata.namespace", "default")),
    (replica_problems, "one worker", _set("Deployment/meridian-worker:spec.replicas", 1)),
    (replica_problems, "an autoscaler down to one web pod", _set("HorizontalPodAutoscaler/meridian-web:spec.minReplicas", 1)),
    (web_probe_problems, "no readiness probe", _set(f"{WEB_C}.readinessProbe", None)),
    (web_probe_problems, "liveness on a dependency", _set(f"{WEB_C}.livenessProbe.httpGet.path", "/readyz")),
    (web_probe_problems, "readiness waiting for workers", _set(f"{WEB_C}.readinessProbe.httpGet.path", "/readyz")),
    (web_probe_problems, "a probe on a closed port", _set(f"{WEB_C}.startupProbe.httpGet.port", 9000)),
    (shutdown_problems, "a short grace period", _set(f"Deployment/meridian-web:{POD}.terminationGracePeriodSeconds", 30)),
    (shutdown_problems, "no preStop sleep", _set(f"{WEB_C}.lifecycle", None)),
    (resource_problems, "no memory limit", _set(f"{BEAT_C}.resources.limits.memory", None)),
    (resource_problems, "an init container without requests",
     _set(f"Deployment/meridian-web:{POD}.initContainers.0.resources", None)),
    (security_problems, "a writable root filesystem", _set(f"{JOB_C}.securityContext.readOnlyRootFilesystem", False)),
    (security_problems, "privilege escalation", _set(f"{WORKER_C}.securityContext.allowPrivilegeEscalation", None)),
    (security_problems, "root", _set(f"{WEB_C}.securityContext.runAsUser", 0)),
    (security_problems, "capabilities kept", _set(f"{BEAT_C}.securityContext.capabilities", None)),
    (security_problems, "no /tmp", _set(f"{WEB_C}.volumeMounts", [])),
    (image_problems, "latest", _set(f"{WEB_C}.image", "registry.example.com/platform/meridian:latest")),
    (image_problems, "no tag",
     _set(f"Deployment/meridian-worker:{POD}.initContainers.0.image", "registry.example.com:5000/meridian")),
    (shard_problems, "a worker on some shards only", _set(f"{WORKER_C}.args", [*WORKER_COMMAND[:-1], "0-2"])),
    (shard_problems, "nobody on the default queue", _set(f"{WORKER_C}.args", [*WORKER_COMMAND, "--no-default-queue"])),
    (command_problems, "another web command", _set(f"{WEB_C}.args", ["uvicorn", "config.asgi:application"])),
    (command_problems, "a command replacing tini", _set(f"{BEAT_C}.command", ["python"])),
    (command_problems, "another migration command", _set(f"{JOB_C}.args", ["python", "manage.py", "migrate"])),
    (migration_problems, "no wait for migrations", _set(f"Deployment/meridian-beat:{POD}.initContainers", [])),
    (migration_problems, "no migration Job", _drop_kind("Job")),
    (disruption_problems, "no budget", _drop_kind("PodDisruptionBudget")),
    (disruption_problems, "a budget a drain cannot meet", _set("PodDisruptionBudget/meridian-web:spec.maxUnavailable", 0)),
    (disruption_problems, "a budget as large as the Deployment", _whole_worker_budget),
    (network_problems, "no policies", _drop_kind("NetworkPolicy")),
    (network_problems, "no Redis", _set("NetworkPolicy/meridian-egress:spec.egress.1.ports.1.port", 6380)),
    (service_problems, "a Service selecting nothing",
     _set("Service/meridian-web:spec.selector", {"app.kubernetes.io/component": "api"})),
    (web_host_problems, "ALLOWED_HOSTS without the pod IP", _set(f"{WEB_C}.env.1.value", "$(ALLOWED_HOSTS)")),
    (scrape_problems, "a scrape of another port", _set("ServiceMonitor/meridian-web:spec.endpoints.0.port", "metrics")),
    (scrape_problems, "a bearer token", _set("ServiceMonitor/meridian-web:spec.endpoints.0.authorization.type", "Bearer")),
    (scrape_problems, "no ServiceMonitor", _drop_kind("ServiceMonitor")),
    (ingress_problems, "websockets cut after a minute",
     _set("Ingress/meridian-websocket:metadata.annotations", {"nginx.ingress.kubernetes.io/proxy-send-timeout": "3600"})),
    (ingress_problems, "small bodies",
     _set("Ingress/meridian:metadata.annotations", {"nginx.ingress.kubernetes.io/proxy-body-size": "1m"})),
    (config_problems, "no STATIC_ROOT", _all(lambda doc: doc["data"].pop("STATIC_ROOT"), kinds=("ConfigMap",))),
]


@pytest.mark.parametrize("rule,what,breakage", BREAKAGES, ids=[f"{rule.__name__}-{what}" for rule, what, _ in BREAKAGES])
def test_each_rule_catches_what_it_is_about(production, rule, what, breakage):
    docs = copy.deepcopy(production)
    assert rule(docs) == [], "the rule holds on the real manifests"
    breakage(docs)
    assert rule(docs), f"{rule.__name__} let {what} through"


# --- the tests --------------------------------------------------------------------------

def test_every_object_is_valid_for_the_kubernetes_api(rendered):
    assert schema_problems(rendered) == []


def test_everything_lives_in_the_meridian_namespace(rendered):
    assert namespace_problems(rendered) == []


def test_every_deployment_runs_two_pods_at_least(rendered):
    assert replica_problems(rendered) == []


def test_web_pods_are_probed_over_http(rendered):
    assert web_probe_problems(rendered) == []


def test_web_pods_drain_before_they_are_killed(rendered):
    assert shutdown_problems(rendered) == []


def test_every_container_has_requests_and_limits(rendered):
    assert resource_problems(rendered) == []


def test_every_container_runs_restricted(rendered):
    assert security_problems(rendered) == []


def test_images_are_pinned(rendered):
    assert image_problems(rendered) == []


def test_workers_consume_every_shard_and_the_default_queue(rendered):
    assert shard_problems(rendered) == []


def test_processes_run_the_production_commands(rendered):
    assert command_problems(rendered) == []


def test_migrations_run_once_before_a_release_starts(rendered):
    assert migration_problems(rendered) == []


def test_every_deployment_has_a_disruption_budget(rendered):
    assert disruption_problems(rendered) == []


def test_network_policy_denies_by_default_and_allows_what_meridian_needs(rendered):
    assert network_problems(rendered) == []


def test_the_web_service_reaches_the_web_pods(rendered):
    assert service_problems(rendered) == []


def test_web_pods_accept_their_own_ip_as_host(rendered):
    assert web_host_problems(rendered) == []


def test_prometheus_scrapes_the_web_service_with_a_token(rendered):
    assert scrape_problems(rendered) == []


def test_ingress_keeps_websockets_open_and_takes_admission_reviews(rendered):
    assert ingress_problems(rendered) == []


def test_configuration_has_what_production_settings_need(rendered):
    assert config_problems(rendered) == []


def test_production_overlay_never_applies_placeholder_secrets(production):
    """The real Secrets are created beforehand; an apply must not overwrite them."""
    assert of_kind(production, "Secret") == []


def test_the_base_placeholder_secret_has_the_keys_the_example_documents():
    """secret.env.example is what an operator fills in: it names every key the placeholder has."""
    docs = render(KUSTOMIZATIONS["base"])
    placeholder = named(docs, "Secret", "meridian-secrets")
    assert set(placeholder["stringData"]) == secret_keys_example() >= {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"}
    for secret in of_kind(docs, "Secret"):
        assert secret["metadata"]["annotations"].get("meridian.io/placeholder") == "true"


def test_the_first_apply_step_is_what_the_migration_job_needs(production):
    """docs/deploy.md applies ``-l 'app.kubernetes.io/component notin (web,worker,beat)'``
    first, waits for the Job, then applies the rest: that first step must hold the Job and
    everything it reads, and no Deployment (nothing of the release starts before its schema)."""
    first = [doc for doc in production
             if doc["metadata"].get("labels", {}).get("app.kubernetes.io/component") not in {"web", "worker", "beat"}]
    assert of_kind(first, "Deployment") == []
    job = named(first, "Job", "meridian-migrate")
    assert job is not None
    spec = pod_spec(job)
    assert named(first, "ServiceAccount", spec["serviceAccountName"]) is not None
    for source in main_container(job)["envFrom"]:
        if "configMapRef" in source:
            assert named(first, "ConfigMap", source["configMapRef"]["name"]) is not None
    labels = job["spec"]["template"]["metadata"]["labels"]
    egress = [policy for policy in of_kind(first, "NetworkPolicy")
              if selects(policy["spec"]["podSelector"], labels) and policy["spec"].get("egress")]
    ports = {port["port"] for policy in egress for rule in policy["spec"]["egress"] for port in rule.get("ports", [])}
    assert {53, 5432} <= ports, "the Job reaches DNS and PostgreSQL"


@pytest.mark.django_db
def test_web_probes_answer_before_any_worker_runs(production, client, monkeypatch):
    """A web pod must become ready with no worker up (a first install starts them together)
    and stay in the Service while the workers are down: the whole /readyz waits for a worker
    heartbeat, so the web's readiness asks for the database alone. Shown against the real
    views, with no heartbeat."""
    monkeypatch.setattr("core.health.live_workers", lambda: [])
    for probe, path in web_probe_paths(production).items():
        assert client.get(path).status_code == 200, f"{probe} {path} fails while no worker runs"
    assert client.get("/readyz").status_code == 503, "the check above would catch /readyz"


# --- the Dockerfile ---------------------------------------------------------------------

COMPILERS = {"gcc", "g++", "cc", "clang", "make", "build-essential", "libc6-dev", "cpp"}


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        current += " " + line
        if current.endswith("\\"):
            current = current[:-1]
            continue
        instruction, _, arguments = current.strip().partition(" ")
        lines.append((instruction.upper(), arguments.strip()))
        current = ""
    return lines


def stages(instructions: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The instructions of each build stage, each list starting with its FROM."""
    found: list[list[tuple[str, str]]] = []
    for instruction in instructions:
        if instruction[0] == "FROM":
            found.append([])
        if found:
            found[-1].append(instruction)
    return found


def final_stage(instructions):
    return stages(instructions)[-1]


def dockerfile_env(stage) -> dict[str, str]:
    env = {}
    for instruction, arguments in stage:
        if instruction == "ENV":
            for pair in shlex.split(arguments):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def base_images(instructions) -> list[str]:
    """Every FROM's image, ARG defaults (before the first FROM) substituted; stage names kept."""
    args = {}
    for instruction, arguments in instructions:
        if instruction == "FROM":
            break
        if instruction == "ARG":
            key, _, value = arguments.partition("=")
            args[key] = value
    images = []
    for instruction, arguments in instructions:
        if instruction == "FROM":
            image = [word for word in arguments.split() if not word.startswith("--")][0]
            images.append(re.sub(r"\$\{?(\w+)\}?", lambda match: args.get(match.group(1), match.group(0)), image))
    return images


def dockerfile_problems(text: str) -> list[str]:
    instructions = parse_dockerfile(text)
    built = stages(instructions)
    problems = []
    if len(built) < 2:
        problems.append("a single stage: build tools would ship in the image")
    names = {arguments.split()[-1] for instruction, arguments in instructions
             if instruction == "FROM" and " as " in arguments.lower()}
    for image in base_images(instructions):
        if image in names:
            continue
        name, _, digest = image.partition("@")
        tag = name.rsplit("/", 1)[-1].partition(":")[2]
        if not digest and not re.match(r"^\d+\.\d+\.\d+", tag):
            problems.append(f"base image {image!r} is not pinned to a patch version or digest")
        if "$" in image:
            problems.append(f"base image {image!r} names an ARG without a default")
    runtime = built[-1] if built else []
    users = [arguments for instruction, arguments in runtime if instruction == "USER"]
    user = users[-1].split(":")[0] if users else "root"
    if not user.isdigit() or int(user) == 0:
        problems.append(f"the runtime stage runs as {user!r}: a numeric non-root user lets Kubernetes check runAsNonRoot")
    for instruction, arguments in runtime:
        if instruction == "RUN":
            words = set(re.findall(r"[\w+.-]+", arguments))
            if words & COMPILERS or any(word.endswith("-dev") for word in words):
                problems.append(f"the runtime stage installs build tools: {sorted(words & COMPILERS) or arguments}")
            if "pip" in words and "install" in words:
                problems.append("the runtime stage pip-installs (the venv comes from the builder)")
    if not any(instruction == "COPY" and "--from=" in arguments and "/opt/venv" in arguments
               for instruction, arguments in runtime):
        problems.append("the runtime stage does not copy the builder's venv")
    entrypoints = [arguments for instruction, arguments in runtime if instruction == "ENTRYPOINT"]
    if not entrypoints or "tini" not in entrypoints[-1]:
        problems.append("tini is not the ENTRYPOINT (no zombie reaping, signals not forwarded)")
    commands = [arguments for instruction, arguments in runtime if instruction == "CMD"]
    if not commands or tuple(yaml.safe_load(commands[-1])) != WEB_COMMAND:
        problems.append(f"CMD is not the web command {shlex.join(WEB_COMMAND)!r}")
    collect = [arguments for instruction, arguments in instructions if instruction == "RUN" and "collectstatic" in arguments]
    if not collect:
        problems.append("static files are not collected at build time")
    if any("SECRET_KEY" in dockerfile_env(stage) for stage in built):
        problems.append("SECRET_KEY is set with ENV: it would stay in the image's environment")
    return problems


def test_dockerfile_builds_a_small_non_root_image():
    assert dockerfile_problems(DOCKERFILE.read_text()) == []


@pytest.mark.parametrize("change,replacement", [
    (r"ARG PYTHON_IMAGE=\S+", "ARG PYTHON_IMAGE=python:3.11-slim-bookworm"),
    (r"ARG PYTHON_IMAGE=\S+", "ARG PYTHON_IMAGE=python:latest"),
    (r"USER 10001:10001", "USER meridian"),
    (r"USER 10001:10001", ""),
    (r"install -y --no-install-recommends tini", "install -y --no-install-recommends tini gcc"),
    (r"ENTRYPOINT .*", ""),
    (r"(?s)FROM \$\{PYTHON_IMAGE\} AS runtime.*?COPY --from=builder /app /app", "COPY --from=builder /app /app"),
    (r"ENV PIP_NO_CACHE_DIR=1", "ENV SECRET_KEY=x PIP_NO_CACHE_DIR=1"),
])
def test_dockerfile_rules_catch_a_bad_image(change, replacement):
    text = DOCKERFILE.read_text()
    broken = re.sub(change, replacement, text, count=1)
    assert broken != text, f"{change!r} no longer matches the Dockerfile"
    assert dockerfile_problems(broken)


def test_the_build_context_leaves_out_local_state_and_keeps_the_app():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for local in (".git", ".venv", "var"):
        assert local in patterns
    needed = ["manage.py", "requirements.txt", "config/settings.py", "core/health.py", "templates/base.html",
              "static/meridian/css/meridian.css", "locale/zh_Hans/LC_MESSAGES/django.mo", "nodeconfig/examples/seed-targets.yaml"]
    for path in needed:
        assert (ROOT / path).exists(), path
        excluded = [pattern for pattern in patterns
                    if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, pattern + "/*") or path.split("/")[0] == pattern]
        assert not excluded, f"{path} is left out of the image by {excluded}"
