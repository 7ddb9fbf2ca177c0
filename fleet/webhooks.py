"""Connecting a member cluster's API server to Meridian's admission webhooks: the webhook
configuration objects, and the files that make the API server send the cluster's webhook token.

Meridian has two admission webhooks, each described by its app as a ``WebhookConfig`` (name,
kind, path, its webhooks' rules and failure policy): ``quotas.webhook`` (the
``ValidatingWebhookConfiguration`` ``meridian-quotas``, ``/api/admission/v1/quotas/validate``)
and ``scheduling.webhook`` (the ``MutatingWebhookConfiguration`` ``meridian-scheduling``,
``/api/admission/v1/scheduling/mutate``). Everything else is here, so both follow one set of
rules (``GET /api/v1/{quotas,scheduling}/webhook-configuration/{cluster}/`` shows it all before
anything is applied; ``POST`` applies the configuration through the cluster's connector):

1. The URL is Meridian's public URL (``MERIDIAN_PUBLIC_URL``, or ``base_url``) plus the
   webhook's path. A URL that could never work is refused (400, field ``base_url``): none at
   all, not ``https``, user info, a query or fragment (upstream ``ValidateWebhookURL``), a
   placeholder host (``example.com``, ``.test``, ``localhost``, …) or a loopback address,
   which would point every API server at nothing, or at itself.
2. ``caBundle`` is the CA that signed Meridian's serving certificate, as PEM or its base64;
   applying without one is refused (400, ``ca_bundle``; nothing is written): with
   ``failurePolicy: Fail`` a certificate the API server does not trust refuses every request
   the webhook is sent.
3. Every webhook skips ``kube-system`` and Meridian's own namespace (``MERIDIAN_NAMESPACE``)
   through a ``namespaceSelector`` on ``kubernetes.io/metadata.name``: a Meridian that is
   down must not block the control plane, nor its own recovery. That is what makes
   ``failurePolicy: Fail`` safe.
4. The Bearer token. An API server sends credentials to a webhook only from a kubeconfig named
   in its admission configuration, and picks the user entry by the webhook URL's
   ``host:port`` (443 when the URL names no port). Both of Meridian's webhooks are on the same
   host and take the same webhook token of the cluster, so ONE file pair serves both plugins.
   On every control-plane node of the member cluster (``admission_files`` renders both)::

       # /etc/kubernetes/meridian/admission-configuration.yaml
       # kube-apiserver --admission-control-config-file=/etc/kubernetes/meridian/admission-configuration.yaml
       apiVersion: apiserver.config.k8s.io/v1
       kind: AdmissionConfiguration
       plugins:
       - name: MutatingAdmissionWebhook
         configuration:
           apiVersion: apiserver.config.k8s.io/v1
           kind: WebhookAdmissionConfiguration
           kubeConfigFile: /etc/kubernetes/meridian/webhook-kubeconfig.yaml
       - name: ValidatingAdmissionWebhook
         configuration:
           apiVersion: apiserver.config.k8s.io/v1
           kind: WebhookAdmissionConfiguration
           kubeConfigFile: /etc/kubernetes/meridian/webhook-kubeconfig.yaml

       # /etc/kubernetes/meridian/webhook-kubeconfig.yaml
       apiVersion: v1
       kind: Config
       users:
       - name: meridian.your-company.net:443   # the webhook URL's host:port
         user:
           token: <the cluster's webhook token: POST /api/v1/fleet/clusters/{cluster}/webhook-tokens/>

   The token is shown once when issued, so the rendered kubeconfig carries a placeholder for it.
"""

from __future__ import annotations

import base64
import binascii
import copy
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from cryptography import x509
from django.conf import settings
from django.utils.translation import gettext as _

from core.audit import record_change
from core.errors import Refused

from .models import Cluster
from .services import connector_for

#: Namespaces no webhook of Meridian may ever guard: a Meridian that is down must not be able
#: to stop the control plane, nor Meridian's own pods from coming back (``MERIDIAN_NAMESPACE``).
ALWAYS_EXCLUDED_NAMESPACES = ("kube-system",)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set on every namespace by the API server (1.21+)
#: Where the API server's two files go (any path works; the rendered files name these).
ADMISSION_CONFIG_PATH = "/etc/kubernetes/meridian/admission-configuration.yaml"
KUBECONFIG_PATH = "/etc/kubernetes/meridian/webhook-kubeconfig.yaml"
#: Both webhook plugins read the same kubeconfig (mutating ones run first in the API server).
ADMISSION_PLUGINS = ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook")
TOKEN_PLACEHOLDER = "<webhook token of cluster {cluster}: POST /api/v1/fleet/clusters/{cluster}/webhook-tokens/ (shown once)>"
#: RFC 2606 / 6761 names that can never be Meridian's address.
_PLACEHOLDER_DOMAINS = ("example.com", "example.net", "example.org", "example", "invalid", "test", "localhost")
_KINDS = {"validating": "ValidatingWebhookConfiguration", "mutating": "MutatingWebhookConfiguration"}


@dataclass(frozen=True)
class Hook:
    """One webhook of a configuration: what the API server sends it and how it treats a dry run.

    ``rules`` name API groups, versions and resources; each gets ``operations`` and
    ``scope: Namespaced`` (only namespaced objects are ever sent: the namespace selector must
    be able to exclude them). ``failure_policy`` ``Fail`` is safe only because every webhook
    excludes ``kube-system`` and Meridian's namespace.
    """

    name: str
    rules: tuple[Mapping[str, Any], ...]
    operations: tuple[str, ...]
    side_effects: Literal["None", "NoneOnDryRun"]
    timeout_seconds: int
    failure_policy: Literal["Fail", "Ignore"]
    object_selector: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class WebhookConfig:
    """One app's webhook configuration object: its name, kind, path on Meridian, webhooks, and
    the audit verb recorded when it is applied to a cluster."""

    name: str
    kind: Literal["validating", "mutating"]
    path: str
    hooks: tuple[Hook, ...]
    audit_verb: str


@dataclass(frozen=True)
class Preview:
    """What applying would write (``configuration``), the API server's token files
    (``files``: see ``admission_files``) and what applying still lacks (field → why)."""

    configuration: dict[str, Any]
    files: dict[str, Any]
    missing: dict[str, list[str]]


def public_base_url(base_url: str | None = None) -> str:
    """Meridian's URL as member API servers reach it: ``base_url`` if given, else
    ``settings.MERIDIAN_PUBLIC_URL``. Refused (400, field ``base_url``) when neither is set or
    when the URL could never work for a webhook (rule 1 of the module docstring)."""
    raw = (base_url or "").strip() or str(getattr(settings, "MERIDIAN_PUBLIC_URL", "") or "").strip()
    if not raw:
        raise Refused("base_url_required", _("Say where member clusters reach Meridian: set MERIDIAN_PUBLIC_URL or pass "
                                             "base_url, e.g. https://meridian.your-company.net."), field="base_url")
    try:
        parts = urlsplit(raw)
        host = (parts.hostname or "").rstrip(".").lower()
        parts.port  # noqa: B018 — a malformed port raises here
    except ValueError as exc:
        raise Refused("invalid_base_url", _("%(url)s is not a URL: %(error)s.") % {"url": repr(raw), "error": exc},
                      field="base_url") from exc
    problem = None
    if parts.scheme != "https":
        problem = _("API servers call admission webhooks over https only; use an https:// URL")
    elif not host:
        problem = _("it names no host")
    elif parts.username is not None or parts.password is not None:
        problem = _("it must not carry a user name or password")
    elif parts.netloc.endswith(":"):
        problem = _("its port is empty")
    elif parts.query or parts.fragment:
        problem = _("it must not have a query (?) or a fragment (#)")
    elif any(host == d or host.endswith("." + d) for d in _PLACEHOLDER_DOMAINS):
        problem = _("%(host)s is a placeholder, not Meridian's address; give the URL member clusters really reach") % {
            "host": host}
    elif _loopback(host):
        problem = _("%(host)s is the API server's own machine, not Meridian; give the URL member clusters really "
                    "reach") % {"host": host}
    if problem:
        raise Refused("invalid_base_url", _("%(url)s: %(problem)s.") % {"url": raw, "problem": problem}, field="base_url")
    return raw.rstrip("/")


def _loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified or address.is_link_local


def ca_bundle_value(ca_bundle: str | None) -> str:
    """``clientConfig.caBundle`` as the object carries it (base64 of PEM), from PEM text or its
    base64; "" when none is given. Anything that is not PEM certificates is refused, so a
    bundle the API server could not use is never written."""
    text = (ca_bundle or "").strip()
    if not text:
        return ""
    if text.startswith("-----BEGIN"):
        pem = text.encode()
    else:
        try:
            pem = base64.b64decode("".join(text.split()), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise Refused("invalid_ca_bundle", _("ca_bundle must be PEM certificates, or their base64 (as caBundle holds "
                                                 "them)."), field="ca_bundle") from exc
    try:
        certificates = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise Refused("invalid_ca_bundle", _("ca_bundle holds no readable PEM certificate: %(error)s.") % {"error": exc},
                      field="ca_bundle") from exc
    if not certificates:
        raise Refused("invalid_ca_bundle", _("ca_bundle holds no certificate."), field="ca_bundle")
    return base64.b64encode(pem).decode()


def namespace_selector() -> dict[str, Any]:
    """Every namespace but kube-system and Meridian's own (``settings.MERIDIAN_NAMESPACE``)."""
    own = str(getattr(settings, "MERIDIAN_NAMESPACE", "") or "meridian")
    excluded = sorted({*ALWAYS_EXCLUDED_NAMESPACES, own})
    return {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": excluded}]}


def _entry(config: WebhookConfig, hook: Hook, client: Mapping[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": hook.name, "admissionReviewVersions": ["v1"], "clientConfig": dict(client),
        "rules": [dict(copy.deepcopy(rule), operations=list(hook.operations), scope="Namespaced") for rule in hook.rules],
        "namespaceSelector": namespace_selector(), "failurePolicy": hook.failure_policy,
        "sideEffects": hook.side_effects, "matchPolicy": "Equivalent", "timeoutSeconds": hook.timeout_seconds,
    }
    if hook.object_selector is not None:
        entry["objectSelector"] = copy.deepcopy(dict(hook.object_selector))
    if config.kind == "mutating":
        entry["reinvocationPolicy"] = "Never"  # Meridian's patch does not depend on other webhooks' changes
    return entry


def webhook_configuration(cluster: Cluster, config: WebhookConfig, *, base_url: str | None = None,
                          ca_bundle: str = "") -> dict[str, Any]:
    """The ``admissionregistration.k8s.io/v1`` object that points ``cluster``'s API server at
    ``config``'s webhooks. Without a ``ca_bundle`` it is a preview only: ``apply`` refuses it."""
    client: dict[str, Any] = {"url": f"{public_base_url(base_url)}{config.path}"}
    bundle = ca_bundle_value(ca_bundle)
    if bundle:
        client["caBundle"] = bundle
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": _KINDS[config.kind],
        "metadata": {"name": config.name, "labels": {"app.kubernetes.io/managed-by": "meridian"},
                     "annotations": {"meridian.io/cluster": cluster.name}},
        "webhooks": [_entry(config, hook, client) for hook in config.hooks],
    }


def webhook_user(base_url: str) -> str:
    """The kubeconfig user name the API server looks a webhook's credentials up by: the URL's
    host and port as written, ``:443`` added when it names no port. This is upstream's
    ``net.JoinHostPort(u.Host, "443")`` to the letter (which brackets an IPv6 literal once
    more), so the exact match, the one every API server version makes, finds it."""
    parts = urlsplit(base_url)
    if parts.port is not None:
        return parts.netloc
    return f"[{parts.netloc}]:443" if ":" in parts.netloc else f"{parts.netloc}:443"


def admission_files(cluster: Cluster, *, base_url: str | None = None) -> dict[str, Any]:
    """The API server's two files that make it send ``cluster``'s webhook token to both of
    Meridian's webhooks (rule 4 of the module docstring), their paths and the flag naming them."""
    webhook = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
               "kubeConfigFile": KUBECONFIG_PATH}
    return {
        "admission_configuration": {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "AdmissionConfiguration",
            "plugins": [{"name": plugin, "configuration": dict(webhook)} for plugin in ADMISSION_PLUGINS],
        },
        "kubeconfig": {"apiVersion": "v1", "kind": "Config",
                       "users": [{"name": webhook_user(public_base_url(base_url)),
                                  "user": {"token": TOKEN_PLACEHOLDER.format(cluster=cluster.name)}}]},
        "files": {"admission_configuration": ADMISSION_CONFIG_PATH, "kubeconfig": KUBECONFIG_PATH},
        "api_server_flags": [f"--admission-control-config-file={ADMISSION_CONFIG_PATH}"],
    }


def missing_for_apply(*, ca_bundle: str = "") -> dict[str, list[str]]:
    """What a preview lacks before it may be applied (field → why), empty when nothing."""
    if ca_bundle_value(ca_bundle):
        return {}
    return {"ca_bundle": [_("Give the CA bundle (PEM) that signed Meridian's serving certificate: without a caBundle "
                            "the API server trusts only its system roots, and with failurePolicy Fail a certificate it "
                            "does not trust refuses every request the webhook is sent.")]}


def preview(cluster: Cluster, config: WebhookConfig, *, base_url: str | None = None, ca_bundle: str = "") -> Preview:
    """Everything a person checks before applying; refused like ``apply`` for a bad URL or CA bundle."""
    return Preview(webhook_configuration(cluster, config, base_url=base_url, ca_bundle=ca_bundle),
                   admission_files(cluster, base_url=base_url), missing_for_apply(ca_bundle=ca_bundle))


def apply(cluster: Cluster, config: WebhookConfig, *, base_url: str | None = None, ca_bundle: str = "") -> dict[str, Any]:
    """Write ``config`` to the cluster through its connector and record it in the audit log.

    Refused (nothing is written) without a real public URL or without a CA bundle: a webhook
    with ``failurePolicy: Fail`` that the API server cannot reach or cannot trust would refuse
    every request it is sent. A ``ConnectorError`` (the cluster refused or is unreachable)
    propagates; nothing is recorded then.
    """
    configuration = webhook_configuration(cluster, config, base_url=base_url, ca_bundle=ca_bundle)
    missing = missing_for_apply(ca_bundle=ca_bundle)
    if missing:
        raise Refused("ca_bundle_required", " ".join(missing["ca_bundle"]), errors=missing)
    with connector_for(cluster) as connector:
        applied = connector.apply(configuration)
    record_change(cluster, "update", verb=config.audit_verb,
                  after={"name": config.name, "url": configuration["webhooks"][0]["clientConfig"]["url"]})
    return applied
