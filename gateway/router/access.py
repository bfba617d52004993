"""The access policy where the router meets it: effective views, profile checks, audit lines.

The decision is :mod:`gateway.identity.policy` (sans-IO); the narrowing is
:mod:`gateway.catalog.effective`. This module only joins them to a
request: which principal, which profile, which view; and it writes the
audit log (issue 16 item 3):

- ``policy.denied``: one line per denying decision, with the principal's
  key, the method, the item and the profile; never a token (a principal
  holds none). A list that hides items is one line with a count, however
  many it hides.
- ``policy.call``: with ``policy_audit: calls``, one line per call, read
  and get (principal, method, item, outcome).

The items a ``user_consent`` backend lists to one principal alone
(``router.lists`` rule 6) are in no view; :class:`PersonalView` holds them
to the same rules, sans-IO: the profile's selection (backend, public name
per kind; in search mode only its pinned tools are listed) and the
policy's admitter on that profile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import structlog

from gateway.catalog.effective import EffectiveViews, changed_kinds, hidden, narrow
from gateway.catalog.profiles import SEARCH, restrict
from gateway.catalog.snapshot import Kind
from gateway.identity.policy import EVERYTHING_ON, ProfileAccess, decide
from gateway.router.call_metrics import NO_METRICS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from gateway.catalog.profiles import Profile, ProfileViews
    from gateway.catalog.snapshot import Snapshot
    from gateway.identity.policy import Policy
    from gateway.identity.principal import Principal
    from gateway.router.call_metrics import RouterMetrics
    from gateway.router.neighbours import ClientPeer

logger = structlog.get_logger("gateway.policy")

#: The methods that name one item, and how to find its name in the params.
ITEM_METHODS: Final = {
    "tools/call": (Kind.TOOLS, "name"),
    "prompts/get": (Kind.PROMPTS, "name"),
    "resources/read": (Kind.RESOURCES, "uri"),
    "resources/subscribe": (Kind.RESOURCES, "uri"),
    "resources/unsubscribe": (Kind.RESOURCES, "uri"),
}
#: The methods ``policy_audit: calls`` logs.
AUDITED: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
_LISTS: Final = {kind.list_method: kind for kind in Kind}


def principal_key(principal: Principal | None) -> str:
    """The principal as the audit log names it (``anonymous`` when auth is off)."""
    return "anonymous" if principal is None else principal.key


def item_of(method: str, params: dict[str, Any]) -> tuple[Kind, str] | None:
    """The kind and public name (or URI) a request names; None for one naming no item."""
    if method == "completion/complete":
        ref = params.get("ref")
        if isinstance(ref, dict):
            if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
                return Kind.PROMPTS, ref["name"]
            if ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
                return Kind.RESOURCES, ref["uri"]
        return None
    found = ITEM_METHODS.get(method)
    if found is None:
        return None
    value = params.get(found[1])
    return (found[0], value) if isinstance(value, str) else None


def _exists(view: Snapshot, kind: Kind, public: str) -> bool:
    if kind is Kind.RESOURCES:
        return view.resolve_uri(public) is not None
    return view.resolve(kind, public) is not None


class PersonalView:
    """What a caller may see and use of the items a backend lists to its principal alone.

    Those items never pass through a view (``router.lists`` rule 6), so
    they meet the view's rules here, by public name, per kind: the
    profile must select the backend and the name, and the access policy
    on that profile must admit the name; a hidden item does not exist for
    the caller, exactly like a catalog item its view leaves out.

    Args:
        profile: the caller's profile (None: no such profile, nothing).
        access: what the caller's principal may see on that profile, asked
            for at the first item (most requests name none).
    """

    def __init__(self, profile: Profile | None, access: Callable[[], ProfileAccess]) -> None:
        self._profile = profile
        self._access = access
        self._admits: Callable[[Kind, str], bool] | None = None

    def admits(self, kind: Kind, public: str, backend: str) -> bool:
        """Whether the caller may call (get) the item: its profile and policy admit it."""
        profile = self._profile
        if profile is None or not profile.admits(kind, public, backend):
            return False
        if self._admits is None:  # the globs are built once, at the first item
            self._admits = self._access().admitter()
        return self._admits(kind, public)

    def lists(self, kind: Kind, public: str, backend: str) -> bool:
        """Whether the item is listed to the caller: admitted, and a search-mode
        profile lists only its pinned tools (``catalog.profiles`` rule 6)."""
        profile = self._profile
        if (
            profile is not None
            and kind is Kind.TOOLS
            and profile.mode == SEARCH
            and public not in profile.pinned
        ):
            return False
        return self.admits(kind, public, backend)


class AccessControl:
    """The policy in force and the effective views it yields.

    Args:
        policy: the compiled ``policy:`` (None: everyone sees everything).
        audit_calls: log ``policy.call`` for each call, read and get.
        separator: the naming separator (public skill names are formed with it).
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        audit_calls: bool = False,
        metrics: RouterMetrics = NO_METRICS,
        separator: str = "__",
    ) -> None:
        self.policy = policy
        self.audit_calls = audit_calls
        self.separator = separator
        self.views = EffectiveViews(separator)
        # Refusals by reason.
        self.metrics = metrics

    def apply(
        self,
        policy: Policy | None,
        *,
        audit_calls: bool,
        peers: Iterable[ClientPeer] = (),
        base_of: Callable[[str], Snapshot] | None = None,
    ) -> list[tuple[str, str, frozenset[Kind]]]:
        """Put another policy in force (reload); every effective view is rebuilt on demand.

        Args:
            policy: the new policy (None: no policy).
            audit_calls: the new ``policy_audit: calls``.
            peers: the open sessions and listen streams.
            base_of: a profile's view of the current snapshot.

        Returns:
            (profile, session id, kinds) for each peer whose effective view
            changed, so that exactly those peers hear a list_changed (a tag
            would not do: a peer may move into a view others already had).
        """
        before = {id(peer): (peer, self.on(peer)) for peer in peers}
        self.policy = policy
        self.audit_calls = audit_calls
        self.views.clear()
        if base_of is None:
            return []
        # Per (profile, old access, new access): the kinds, computed once.
        diffs: dict[tuple[str, ProfileAccess, ProfileAccess], frozenset[Kind]] = {}
        told: list[tuple[str, str, frozenset[Kind]]] = []
        for peer, old in before.values():
            new = self.on(peer)
            if old == new:
                continue
            key = (peer.profile, old, new)
            if key not in diffs:
                base = base_of(peer.profile)
                diffs[key] = changed_kinds(
                    base if old.everything else narrow(base, old.admitter(), self.separator),
                    base if new.everything else narrow(base, new.admitter(), self.separator),
                )
            if diffs[key]:
                told.append((peer.profile, peer.session_id, diffs[key]))
        return told

    def changes(
        self, peers: Iterable[ClientPeer], profile: str, before: Snapshot, after: Snapshot
    ) -> dict[str, frozenset[Kind]]:
        """After a snapshot swap: per view tag of ``profile``'s peers, the kinds that changed.

        ``before`` and ``after`` are the profile's own views; each distinct
        access among the peers is narrowed once (memory and time grow with
        the accesses, not the peers).
        """
        out: dict[str, frozenset[Kind]] = {}
        seen: set[str] = set()
        for peer in peers:
            if peer.profile != profile:
                continue
            access = self.on(peer)
            if access.tag in seen:
                continue
            seen.add(access.tag)
            if access.everything:
                kinds = changed_kinds(before, after)
            else:
                kinds = changed_kinds(
                    narrow(before, access.admitter(), self.separator),
                    self.views.view(profile, after, access, access.admitter()),
                )
            if kinds:
                out[access.tag] = kinds
        return out

    def on(self, client: ClientPeer) -> ProfileAccess:
        """What the client's principal may see on the client's profile, under the policy now."""
        return self.on_profile(client.caller, client.profile)

    def on_profile(self, principal: Principal | None, profile: str) -> ProfileAccess:
        """What ``principal`` may see on ``profile``, under the policy now."""
        if self.policy is None:
            return EVERYTHING_ON
        return decide(self.policy, principal).on(profile)

    def personal(self, client: ClientPeer, profile: Profile | None) -> PersonalView:
        """What the client may see of items listed to its principal alone, under ``profile``."""
        return PersonalView(profile, lambda: self.on(client))

    def effective(self, client: ClientPeer, base: Snapshot) -> tuple[Snapshot, str]:
        """(the client's effective view of ``base``, the view's tag)."""
        return self.view_of(client.caller, client.profile, base)

    def view_of(
        self, principal: Principal | None, profile: str, base: Snapshot
    ) -> tuple[Snapshot, str]:
        """(``principal``'s effective view of ``base``, ``profile``'s view; the view's tag)."""
        access = self.on_profile(principal, profile)
        if access.everything:
            return base, ""
        return self.views.view(profile, base, access, access.admitter()), access.tag

    def opens(self, principal: Principal | None, profile: str, method: str) -> bool:
        """Whether ``principal`` may open ``profile``; a refusal is logged (``policy.denied``)."""
        if self.policy is None or decide(self.policy, principal).opens(profile):
            return True
        logger.warning(
            "policy.denied",
            principal=principal_key(principal),
            method=method[:64],
            profile=profile,
            item=None,
            reason="profile",
        )
        self.metrics.count_policy_denial("profile")
        return False

    def audit(
        self,
        client: ClientPeer,
        method: str,
        params: dict[str, Any] | None,
        item: tuple[Kind, str] | None,
        views: tuple[Snapshot, Snapshot],
        error: int | None,
    ) -> None:
        """Write the audit lines one finished request calls for (see the module doc).

        Args:
            client: who asked.
            method: what.
            params: the request's params (None: they did not decode).
            item: what the request named (:func:`item_of`, read before the
                handler rewrote the name to the backend's own).
            views: (the profile's view, the client's effective view).
            error: the JSON-RPC error code of the answer; None for a result.
        """
        if self.policy is None:
            return
        base, effective = views
        who = principal_key(client.caller)
        kind = _LISTS.get(method)
        if kind is not None:
            if params is not None and params.get("cursor") is None:
                count = hidden(base, effective, kind)
                if count:
                    logger.info(
                        "policy.denied",
                        principal=who,
                        method=method,
                        profile=client.profile,
                        item=None,
                        hidden=count,
                    )
            return
        if item is None:
            return
        if error is not None and _exists(base, *item) and not _exists(effective, *item):
            logger.warning(
                "policy.denied",
                principal=who,
                method=method,
                profile=client.profile,
                item=item[1][:256],
            )
            self.metrics.count_policy_denial("item")
        if self.audit_calls and method in AUDITED:
            logger.info(
                "policy.call",
                principal=who,
                method=method,
                profile=client.profile,
                item=item[1][:256],
                outcome="ok" if error is None else f"error {error}",
            )

    def denied_search_target(self, client: ClientPeer, base: Snapshot, name: str) -> None:
        """``gateway__call_tool`` named a tool the profile has but the principal may not see."""
        if self.policy is not None and base.resolve(Kind.TOOLS, name) is not None:
            logger.warning(
                "policy.denied",
                principal=principal_key(client.caller),
                method="tools/call",
                profile=client.profile,
                item=name[:256],
                via="gateway__call_tool",
            )
            self.metrics.count_policy_denial("search_target")


def list_changes(
    access: AccessControl,
    profiles: ProfileViews,
    peers: Iterable[ClientPeer],
    old: Snapshot,
    new: Snapshot,
    changed: Mapping[str, frozenset[Kind]],
) -> list[tuple[str, str | None, frozenset[Kind]]]:
    """After a snapshot swap: (profile, view tag, kinds) for each list_changed to send.

    With no policy, every client of a changed profile hears it (tag None).
    Under a policy, a profile's change reaches a client only when it
    changed the client's effective view: the tags come from
    :meth:`AccessControl.changes`.

    Args:
        access: the policy in force.
        profiles: the profiles' views.
        peers: the open sessions and listen streams.
        old: the snapshot swapped out.
        new: the snapshot swapped in.
        changed: ``ProfileViews.refresh(old, new)``.
    """
    if access.policy is None:
        return [(profile, None, kinds) for profile, kinds in changed.items()]
    peers = list(peers)
    out: list[tuple[str, str | None, frozenset[Kind]]] = []
    for profile in changed:
        selected = profiles.profile(profile)
        if selected is None:
            continue
        before = restrict(old, selected, profiles.separator)
        after = profiles.view(profile, new)
        for tag, kinds in access.changes(peers, profile, before, after).items():
            out.append((profile, tag, kinds))
    return out
