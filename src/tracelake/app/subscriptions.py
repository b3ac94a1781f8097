"""Change subscriptions: "tell me when the upstream or downstream closure of X changes".

A subscription names a node, a direction and an optional depth, and keeps the closure it last
saw (its nodes and edges). `Watcher.check` recomputes every closure when the graph's version has
moved and records each difference as an event (`store.subscriptions`), delivered two ways: a
`Dispatcher` POSTs it to the subscription's webhook — signed with its secret
(`X-Tracelake-Signature: sha256=<HMAC of the body>`), retried with exponential backoff until a
2xx or the last attempt, every attempt logged — and the API streams it as server-sent events,
from where a client's `Last-Event-ID` left off. Both run in the server's background threads.
A webhook may only reach public addresses (`WebhookPolicy`): its host's every address is checked
when it is subscribed and again before each delivery, which then connects to the addresses just
checked, so a name that resolves elsewhere in between cannot turn the server against its own
network; loopback, link-local, private, reserved and the server's own addresses need the
operator's allow-list.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import re
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

import urllib3

from tracelake.app.service import Tracelake
from tracelake.graph import traverse
from tracelake.graph.traverse import TraversalFilters
from tracelake.model import InputError
from tracelake.store.subscriptions import Event, Subscription, SubscriptionStore, Webhook

log = logging.getLogger(__name__)
Direction = Literal["upstream", "downstream"]


def closure(service: Tracelake, node: str, direction: Direction, depth: int | None) -> dict[str, Any]:
    """The nodes and edges `direction` of `node` (fields included when `node` is a field)."""
    index = service.index()
    result = traverse.lineage(index, [node], direction, filters=TraversalFilters(depth=depth))
    nodes = sorted(index.urns[p] for p in result.distances())
    edges = sorted({(e.source, e.target) for e in index.edges(result.edge_positions())})
    return {"nodes": nodes, "edges": [list(edge) for edge in edges]}


def difference(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any] | None:
    old_nodes, new_nodes = set(before["nodes"]), set(after["nodes"])
    old_edges = {tuple(e) for e in before["edges"]}
    new_edges = {tuple(e) for e in after["edges"]}
    if old_nodes == new_nodes and old_edges == new_edges:
        return None
    return {
        "added_nodes": sorted(new_nodes - old_nodes),
        "removed_nodes": sorted(old_nodes - new_nodes),
        "added_edges": [list(e) for e in sorted(new_edges - old_edges)],
        "removed_edges": [list(e) for e in sorted(old_edges - new_edges)],
    }


IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")
# Why an address is no webhook's to reach, in the order asked (::1 is reserved too, but loopback).
_KINDS: tuple[tuple[str, str], ...] = (
    ("is_loopback", "a loopback"),
    ("is_link_local", "a link-local"),
    ("is_unspecified", "an unspecified"),
    ("is_multicast", "a multicast"),
    ("is_private", "a private"),
    ("is_reserved", "a reserved"),
)


class WebhookRefused(ValueError):
    """A webhook URL the server will not post to."""


class UnknownSubscription(InputError):
    """No subscription has the id asked for."""

    status = 404


class WebhookAllowError(InputError):
    """An allow-list entry that is neither a host name nor an address or CIDR block."""


@dataclass(frozen=True, slots=True)
class WebhookTarget:
    """Where a webhook goes: its URL's parts and the addresses of its host, each one allowed."""

    scheme: str
    host: str
    port: int
    target: str  # the path and query asked for
    host_header: str
    addresses: tuple[str, ...]
    basic_auth: str | None  # user:password from the URL, as an HTTP client sends it


@dataclass(frozen=True)
class WebhookPolicy:
    """Which addresses webhooks may reach: public ones, and those an operator allows by host name
    or network (`tracelake serve --webhook-allow`). Refused otherwise: loopback, link-local,
    private, unspecified, multicast, reserved and other non-public addresses, IPv4 ones inside
    IPv6 (mapped, 6to4) included, and the addresses the server itself listens on."""

    allow_hosts: frozenset[str] = frozenset()
    allow_networks: tuple[IpNetwork, ...] = ()
    own: frozenset[IpAddress] = frozenset()

    @classmethod
    def of(cls, allow: Iterable[str] = (), listen_host: str | None = None) -> WebhookPolicy:
        hosts, networks = set(), []
        for entry in allow:
            text = entry.strip().lower().rstrip(".")
            try:
                networks.append(ipaddress.ip_network(text.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            if not _HOST_NAME.fullmatch(text):
                raise WebhookAllowError(
                    f"--webhook-allow {entry!r}: expected a host name, an address or a network "
                    "such as 10.0.0.0/8"
                )
            hosts.add(text)
        return cls(frozenset(hosts), tuple(networks), _own_addresses(listen_host))

    def check(self, url: str) -> WebhookTarget:
        """Where `url` goes, every address of its host allowed; `WebhookRefused` names the first
        that is not. Resolving is done here, each time: a name may point elsewhere tomorrow. A
        host that does not resolve raises `socket.gaierror` (an `OSError`): it may again later."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            raise WebhookRefused("a webhook's port is a number from 0 to 65535") from None
        if scheme not in ("http", "https") or not parts.hostname:
            raise WebhookRefused("a webhook is an http:// or https:// URL with a host")
        host = parts.hostname.rstrip(".")
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
        literal = _is_address(host)
        if host not in self.allow_hosts:
            for address in addresses:
                why = self._refusal(ipaddress.ip_address(address))
                if why is not None:
                    where = f"address {address} is" if literal else f"host {host} resolves to {address},"
                    raise WebhookRefused(
                        f"webhook {where} {why} address: webhooks reach public addresses only, "
                        "or those the server allows (tracelake serve --webhook-allow)"
                    )
        auth = None
        if parts.username is not None:
            auth = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        target = parts.path or "/"
        return WebhookTarget(
            scheme,
            host,
            port,
            f"{target}?{parts.query}" if parts.query else target,
            parts.netloc.rpartition("@")[2],
            addresses,
            auth,
        )

    def _refusal(self, address: IpAddress) -> str | None:
        """Why the address may not be reached ("a loopback"), or None."""
        inner = _embedded(address)
        if any(ip in network for ip in (address, inner) for network in self.allow_networks):
            return None
        for test, kind in _KINDS:
            if getattr(inner, test):
                return kind
        if inner in self.own or address in self.own:
            return "this server's own"
        return None if inner.is_global else "a non-public"

    def post(self, target: WebhookTarget, body: bytes, headers: dict[str, str], timeout: float) -> Any:
        """POST to the addresses `check` allowed — never to what the name resolves to by now —
        in their order until one takes the connection; TLS still checks the certificate against
        the host name. Redirects are not followed: they could lead anywhere."""
        headers = {**headers, "Host": target.host_header}
        if target.basic_auth is not None:
            headers.update(urllib3.util.make_headers(basic_auth=target.basic_auth))
        refused: Exception | None = None
        for address in target.addresses:
            pool: urllib3.HTTPConnectionPool
            if target.scheme == "https":
                pool = urllib3.HTTPSConnectionPool(
                    address,
                    target.port,
                    timeout=timeout,
                    retries=False,
                    cert_reqs="CERT_REQUIRED",
                    server_hostname=target.host,
                    assert_hostname=target.host,
                )
            else:
                pool = urllib3.HTTPConnectionPool(address, target.port, timeout=timeout, retries=False)
            with pool:
                try:
                    return pool.urlopen(
                        "POST", target.target, body=body, headers=headers, redirect=False, retries=False
                    )
                except urllib3.exceptions.NewConnectionError as error:  # the next address may answer
                    refused = error
        assert refused is not None  # getaddrinfo never answers with no address
        raise refused


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _embedded(address: IpAddress) -> IpAddress:
    """The IPv4 address an IPv6 one carries (mapped, 6to4), which is where it leads."""
    if isinstance(address, ipaddress.IPv6Address):
        return address.ipv4_mapped or address.sixtofour or address
    return address


def _own_addresses(listen_host: str | None) -> frozenset[IpAddress]:
    """The addresses the server listens on; for 0.0.0.0 or ::, the machine's own."""
    if not listen_host:
        return frozenset()
    names = [listen_host.strip("[]")]
    try:
        if ipaddress.ip_address(names[0]).is_unspecified:
            names = [socket.gethostname(), socket.getfqdn()]
    except ValueError:
        pass  # a name: its addresses
    found: set[IpAddress] = set()
    for name in names:
        try:
            infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except OSError:
            continue
        found.update(_embedded(ipaddress.ip_address(str(info[4][0]))) for info in infos)
    return frozenset(found)


class Subscriptions:
    """Create, read and end subscriptions, and read their events and deliveries; what the API
    routes call. A subscription that is not there is an `UnknownSubscription`."""

    def __init__(self, service: Tracelake, policy: WebhookPolicy | None = None) -> None:
        self.service = service
        self.store = SubscriptionStore(service.store)
        self.policy = policy or WebhookPolicy()

    def subscribe(
        self, node: str, direction: Direction, *, depth: int | None, webhook_url: str | None, actor: str
    ) -> Subscription:
        """Watch `node`; `WebhookRefused` when the webhook may not be reached."""
        if webhook_url is not None:
            try:
                self.policy.check(webhook_url)
            except OSError as error:
                host = urlsplit(webhook_url).hostname
                raise WebhookRefused(f"webhook host {host} does not resolve ({error.strerror})") from None
        [urn] = self.service.resolve([node])
        current = closure(self.service, urn, direction, depth)
        return self.store.create(urn, direction, depth, current, webhook_url=webhook_url, actor=actor)

    def all(self) -> list[Subscription]:
        return self.store.all()

    def get(self, subscription_id: str) -> Subscription:
        found = self.store.get(subscription_id)
        if found is None:
            raise UnknownSubscription(f"no subscription {subscription_id!r}")
        return found

    def delete(self, subscription_id: str) -> None:
        if not self.store.delete(subscription_id):
            raise UnknownSubscription(f"no subscription {subscription_id!r}")

    def events(self, subscription_id: str, *, after: int = 0) -> list[Event]:
        """The changes after event `after`, oldest first."""
        return self.store.events(subscription_id, after=after)

    def deliveries(self, subscription_id: str) -> list[dict[str, Any]]:
        """Every webhook attempt: when, the answer's status or the error, and the event's state."""
        self.get(subscription_id)
        return self.store.deliveries(subscription_id)


@dataclass
class Watcher:
    """Finds closure changes after the graph moved; one check per new graph version."""

    service: Tracelake
    seen_version: int = -1

    def check(self) -> list[int]:
        """Record the changes since the last check; returns the new events' seqs."""
        version = self.service.store.graph_version()
        if version == self.seen_version:
            return []
        store = SubscriptionStore(self.service.store)
        found = []
        for subscription in store.all():
            try:
                now = closure(self.service, subscription.node, subscription.direction, subscription.depth)  # type: ignore[arg-type]  # stored directions were checked when made
            except KeyError:  # the node is gone from the graph: everything it reached is removed
                now = {"nodes": [], "edges": []}
            change = difference(subscription.closure, now)
            if change is not None:
                found.append(store.record(subscription, now, change, version))
        self.seen_version = version
        return found


@dataclass
class Dispatcher:
    """Delivers due webhook events; an event is retried after 1, 2, 4 … seconds until
    `max_attempts`, then marked failed (still in the log, still readable over SSE). One whose
    address the policy refuses is marked refused at once: asking again would be refused again."""

    service: Tracelake
    max_attempts: int = 8
    timeout: float = 5.0
    first_backoff: float = 1.0
    policy: WebhookPolicy = field(default_factory=WebhookPolicy)

    def deliver_due(self) -> int:
        store = SubscriptionStore(self.service.store)
        delivered = 0
        for webhook in store.due():
            event = webhook.event
            try:
                status, error = self._post(webhook)
            except WebhookRefused as refusal:
                log.warning("webhook of %s refused: %s", event.subscription_id, refusal)
                store.attempted(
                    event, status_code=None, error=f"refused: {refusal}", retry_in=None, refused=True
                )
                continue
            ok = status is not None and 200 <= status < 300
            last = event.attempts + 1 >= self.max_attempts
            retry_in = None if ok or last else self.first_backoff * 2**event.attempts
            store.attempted(event, status_code=status, error=error, retry_in=retry_in)
            delivered += ok
        return delivered

    def _post(self, webhook: Webhook) -> tuple[int | None, str | None]:
        event = webhook.event
        body = json.dumps(event.to_json(), sort_keys=True).encode()
        signature = hmac.new(webhook.secret.encode(), body, hashlib.sha256).hexdigest()
        headers = {
            "Content-Type": "application/json",
            "X-Tracelake-Event": "closure.changed",
            "X-Tracelake-Delivery": str(event.seq),
            "X-Tracelake-Signature": f"sha256={signature}",
        }
        try:
            target = self.policy.check(webhook.url)
            response = self.policy.post(target, body, headers, self.timeout)
        except (OSError, urllib3.exceptions.HTTPError) as error:  # unresolvable or unreachable, for now
            return None, type(error).__name__
        return response.status, None if 200 <= response.status < 300 else response.reason


class Background:
    """The watcher and dispatcher on one daemon thread, every `interval` seconds."""

    def __init__(
        self,
        service: Tracelake,
        interval: float = 0.5,
        backoff: float = 1.0,
        policy: WebhookPolicy | None = None,
    ) -> None:
        self.watcher = Watcher(service)
        self.dispatcher = Dispatcher(service, first_backoff=backoff, policy=policy or WebhookPolicy())
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracelake-subscriptions", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.watcher.check()
                self.dispatcher.deliver_due()
            except Exception:  # a bad round must not end the thread; the next one retries
                log.exception("subscription round failed")
