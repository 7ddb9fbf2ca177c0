"""The REST client: one ``httpx.Client`` per command, the API token, pages followed, and every
4xx/5xx turned into an ``ApiError`` carrying Meridian's one error body
(``{"code", "detail", "errors": {field: [messages]}}``) and the exit code it means."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from . import __version__
from .exitcodes import ExitCode, for_status

API = "/api/v1/"


class ApiError(Exception):
    """The server refused or failed a request; ``body`` is its one error body."""

    def __init__(self, status: int, body: Mapping[str, Any]) -> None:
        self.status = status
        self.code = str(body.get("code") or "error")
        self.detail = str(body.get("detail") or f"HTTP {status}")
        errors = body.get("errors") if isinstance(body.get("errors"), Mapping) else {}
        self.errors: dict[str, list[str]] = {str(k): [str(m) for m in (v if isinstance(v, list) else [v])]
                                             for k, v in errors.items()}
        super().__init__(self.detail)

    @property
    def exit_code(self) -> ExitCode:
        return for_status(self.status)


class Unreachable(Exception):
    """The server could not be reached (or answered something that is not Meridian)."""

    exit_code = ExitCode.ERROR


class Client:
    """Meridian's REST API at ``server``, as the holder of ``token``."""

    def __init__(self, server: str, token: str = "", *, timeout: float = 30.0, verify: bool | str = True) -> None:
        self.server = server.rstrip("/")
        self.token = token
        headers = {"Accept": "application/json", "User-Agent": f"meridian-cli/{__version__}"}
        if token:
            headers["Authorization"] = f"Token {token}"
        self.http = httpx.Client(base_url=self.server, headers=headers, timeout=timeout, verify=verify)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ requests

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None,
                headers: Mapping[str, str] | None = None) -> httpx.Response:
        """One request; a 4xx/5xx raises ``ApiError``, a transport failure ``Unreachable``."""
        url = path if path.startswith(("http://", "https://")) else _api_path(path)
        try:
            response = self.http.request(method, url, params=_params(params), json=json, headers=headers)
        except httpx.HTTPError as exc:
            raise Unreachable(f"cannot reach {self.server}: {exc}") from exc
        if response.status_code >= 400:
            raise ApiError(response.status_code, _error_body(response))
        return response

    def get(self, path: str, **params: Any) -> Any:
        return _json(self.request("GET", path, params=params))

    def post(self, path: str, body: Any = None, *, dry_run: bool = False, **params: Any) -> Any:
        if dry_run:
            params["dry_run"] = "true"
        return _json(self.request("POST", path, params=params, json=body if body is not None else {}))

    def patch(self, path: str, body: Any, *, if_match: str | None = None, dry_run: bool = False) -> Any:
        headers = {"If-Match": if_match} if if_match else None
        return _json(self.request("PATCH", path, json=body, headers=headers, params={"dry_run": "true"} if dry_run else None))

    def delete(self, path: str, *, dry_run: bool = False, **params: Any) -> Any:
        if dry_run:
            params["dry_run"] = "true"
        return _json(self.request("DELETE", path, params=params))

    def items(self, path: str, params: Mapping[str, Any] | None = None, *, limit: int | None = None) -> Iterator[dict]:
        """Every item of a list, following ``next`` (page numbers or a cursor alike)."""
        url: str | None = path
        query: Mapping[str, Any] | None = {"page_size": min(limit or 500, 500), **(params or {})}
        seen = 0
        while url:
            body = _json(self.request("GET", url, params=query))
            rows = body.get("results", []) if isinstance(body, Mapping) else body
            for row in rows:
                yield row
                seen += 1
                if limit is not None and seen >= limit:
                    return
            url = body.get("next") if isinstance(body, Mapping) else None
            query = None  # the next link carries the query

    # ------------------------------------------------------------------ websocket

    def websocket_url(self) -> str:
        parts = urlsplit(self.server)  # a Meridian served under a path prefix keeps it
        return urlunsplit(("wss" if parts.scheme == "https" else "ws", parts.netloc, parts.path.rstrip("/") + "/ws/", "", ""))

    def origin(self) -> str:
        """What a browser on the server's own pages would send (the websocket checks it)."""
        parts = urlsplit(self.server)
        return f"{parts.scheme}://{parts.netloc}"


def _api_path(path: str) -> str:
    return path if path.startswith("/") else API + path


def _params(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not params:
        return None
    return {key: value for key, value in params.items() if value is not None and value != ""}


def _json(response: httpx.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except ValueError as exc:
        raise Unreachable(f"the server answered {response.request.url} with something that is not JSON "
                          f"(is --server a Meridian?)") from exc


def _error_body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, Mapping) and "detail" in body:
        return dict(body)
    text = response.text.strip().splitlines()[0][:200] if response.text.strip() else response.reason_phrase
    return {"code": "error", "detail": f"HTTP {response.status_code}: {text}", "errors": {}}
