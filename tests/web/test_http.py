"""The HTTP port: its routes, its refusals, the public role's rules, and its start and stop."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gnau_service.audit.note import Verifier
from gnau_service.audit.receipts import Receipt, verify_receipt
from gnau_service.server.process.app import running, start
from gnau_service.server.process.config import SETTINGS, ConfigError, load_settings
from tests.web.conftest import WebService, web_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")

CSP = "default-src 'self'"
#: The tables these tests play at besides the starter table-1, catalogued for the default
#: operator (issue 38: a round is dealt only at a catalogued table).
TABLES = ("secret-table", "list-off", "list-table", "list-secret")


#: Catalogued by the service fixtures (tests/catalogued.py, catalogue_module_tables).
CATALOGUED = TABLES


async def get(
    service: WebService, path: str, method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, service.base_url + path.lstrip("/")) as response,
    ):
        return response.status, dict(response.headers), await response.read()


async def refusal(service: WebService, path: str, method: str = "GET") -> tuple[int, Any]:
    status, headers, body = await get(service, path, method)
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    assert len(body) < 600, body  # bounded, whatever the request held
    document = json.loads(body)
    assert set(document) == {"error", "reason"}
    assert "Traceback" not in document["reason"]
    return status, document


async def test_a_receipt_is_the_services_json_and_verifies(web_service: WebService) -> None:
    round_id = await web_service.play()
    status, headers, body = await get(web_service, f"/rounds/{round_id}/receipt")
    assert status == 200
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    assert headers["Cache-Control"] == "no-store"
    assert CSP in headers["Content-Security-Policy"]
    receipt = Receipt.from_text(body)
    assert receipt.round_id == round_id
    assert [json.loads(entry.data)["kind"] for entry in receipt.entries] == [
        "ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED", "ROUND_SETTLED",
    ]  # fmt: skip
    report = verify_receipt(receipt, [Verifier.from_vkey(web_service.vkey)])
    assert report.ok, report.summary()


async def test_a_pinned_size_brings_the_consistency_proof(web_service: WebService) -> None:
    round_id = await web_service.play()
    status, _, body = await get(web_service, f"/rounds/{round_id}/receipt?pinned_size=1")
    assert status == 200
    consistency = json.loads(body)["consistency"]
    assert consistency["first_size"] == 1 and consistency["proof"]
    for bad in ("-1", "x", "1.0", "9" * 30):
        status, document = await refusal(
            web_service, f"/rounds/{round_id}/receipt?pinned_size={bad}"
        )
        assert (status, document["error"]) == (400, "INVALID_ARGUMENT"), bad
    status, document = await refusal(web_service, f"/rounds/{round_id}/receipt?pinned_size=999999")
    assert (status, document["error"]) == (400, "OUT_OF_RANGE")


async def test_a_round_whose_seed_is_secret_does_not_exist(web_service: WebService) -> None:
    dealt = await web_service.play("secret-table", until="Deal")
    for round_id in (dealt, "r-no-such-round"):
        status, document = await refusal(web_service, f"/rounds/{round_id}/receipt")
        assert status == 404
        # The same answer for both, and neither repeats the id.
        assert document == {"error": "NOT_FOUND", "reason": "there is no round with this id"}


async def test_a_round_id_with_a_slash_or_a_bad_character(web_service: WebService) -> None:
    status, document = await refusal(web_service, "/rounds/table-1%2Fround-1/receipt")
    assert (status, document["error"]) == (404, "NOT_FOUND")
    assert "round-1" not in document["reason"]  # a refusal never echoes the id
    status, document = await refusal(web_service, "/rounds/a%00b/receipt")
    assert (status, document["error"]) == (400, "INVALID_ARGUMENT")
    status, document = await refusal(web_service, f"/rounds/{'x' * 5000}/receipt")
    assert (status, document["error"]) == (400, "INVALID_ARGUMENT")


async def test_rounds_is_refused_to_the_public_by_default(web_service: WebService) -> None:
    round_id = await web_service.play("list-off")
    for query in ("", "?table_id=list-off", "?page_size=-1", "?page_token=nonsense"):
        status, document = await refusal(web_service, "/rounds" + query)
        assert (status, document["error"]) == (403, "PERMISSION_DENIED"), query
        assert "public_round_listing" in document["reason"]
    # The round id is the capability: its receipt is still served.
    status, _, body = await get(web_service, f"/rounds/{round_id}/receipt")
    assert status == 200 and Receipt.from_text(body).round_id == round_id


async def test_rounds_lists_only_public_rounds_newest_first(
    listing_web_service: WebService,
) -> None:
    web_service = listing_web_service
    first = await web_service.play("list-table")
    second = await web_service.play("list-table")
    third = await web_service.play("list-table", until="Reveal")
    await web_service.play("list-secret", until="Deal")
    status, headers, body = await get(web_service, "/rounds?table_id=list-table&page_size=2")
    assert status == 200 and headers["Content-Type"] == "application/json; charset=utf-8"
    page = json.loads(body)
    assert [r["round_id"] for r in page["rounds"]] == [third, second]
    assert [r["state"] for r in page["rounds"]] == ["REVEALED", "SETTLED"]
    assert set(page["rounds"][0]) == {
        "round_id",
        "table_id",
        "state",
        "created_at",
        "updated_at",
        "seats",
    }
    token = page["next_page_token"]
    status, _, body = await get(
        web_service, f"/rounds?table_id=list-table&page_size=2&page_token={token}"
    )
    assert [r["round_id"] for r in json.loads(body)["rounds"]] == [first]
    status, _, body = await get(web_service, "/rounds?table_id=list-secret")
    assert json.loads(body) == {"rounds": [], "next_page_token": ""}
    status, _, body = await get(web_service, "/rounds")  # every table
    assert third in [r["round_id"] for r in json.loads(body)["rounds"]]


async def test_bad_listing_parameters_are_refused(listing_web_service: WebService) -> None:
    web_service = listing_web_service
    for query in ("page_size=-1", "page_size=ten", "page_token=nonsense", f"table_id={'t' * 200}"):
        status, document = await refusal(web_service, f"/rounds?{query}")
        assert (status, document["error"]) == (400, "INVALID_ARGUMENT"), query


async def test_keys_names_the_origin_and_the_key(web_service: WebService) -> None:
    status, _, body = await get(web_service, "/keys")
    assert status == 200
    keys = json.loads(body)
    assert keys["origin"] == "gnau-dealer/local"
    assert keys["verifier_keys"] == [web_service.vkey]
    assert keys["key_rotations"] == []
    assert "proves nothing" in keys["warning"]


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/", "text/html; charset=utf-8"),
        ("/index.html", "text/html; charset=utf-8"),
        ("/style.css", "text/css; charset=utf-8"),
        ("/js/app.js", "text/javascript; charset=utf-8"),
        ("/js/receipt.js", "text/javascript; charset=utf-8"),
        ("/favicon.ico", "image/x-icon"),  # a browser asks for it: no 404 in its console
    ],
)
async def test_the_page_files_have_their_types_and_a_strict_policy(
    web_service: WebService, path: str, content_type: str
) -> None:
    status, headers, body = await get(web_service, path)
    assert status == 200 and body
    assert headers["Content-Type"] == content_type
    assert headers["Content-Security-Policy"].startswith(CSP)
    assert headers["X-Content-Type-Options"] == "nosniff"


async def test_the_page_has_no_inline_script_or_style() -> None:
    html = (Path(__file__).parents[2] / "gnau_service" / "web" / "index.html").read_text()
    assert "<script" in html
    assert all('src="' in tag for tag in html.split("<script")[1:])
    assert " style=" not in html and "<style" not in html and "onclick" not in html


@pytest.mark.parametrize(
    "path",
    ["/nothing.js", "/../pyproject.toml", "/js/../../server/http/routes.py", "/%2e%2e/README.md"],
)
async def test_other_paths_are_not_found(web_service: WebService, path: str) -> None:
    status, document = await refusal(web_service, path)
    assert (status, document["error"]) == (404, "NOT_FOUND")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
async def test_the_port_is_read_only(web_service: WebService, method: str) -> None:
    round_id = await web_service.play() if method == "POST" else "r-x"
    for path in ("/", f"/rounds/{round_id}/receipt", "/rounds", "/keys"):
        status, document = await refusal(web_service, path, method)
        assert (status, document["error"]) == (405, "METHOD_NOT_ALLOWED"), (method, path)
    _, headers, _ = await get(web_service, "/keys", method)
    assert headers["Allow"] == "GET, HEAD"


async def test_the_setting_is_checked() -> None:
    assert SETTINGS["http_listen"].flag == "--http-listen"
    assert load_settings(None, {}, {}).http_listen == ""  # off unless set
    assert load_settings(None, {"GNAU_HTTP_LISTEN": "[::1]:8080"}, {}).http_listen == "[::1]:8080"
    for bad in ("8080", "localhost", "host:port", "127.0.0.1:70000"):
        with pytest.raises(ConfigError, match="http_listen"):
            load_settings(None, {}, {"http_listen": bad})


async def test_the_port_is_off_unless_set(tmp_path: Path) -> None:
    settings = web_settings(tmp_path, http_listen="")
    async with running(settings) as app:
        assert app.web is None and app.http_port is None


async def test_a_busy_port_starts_nothing(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = web_settings(tmp_path, http_listen=f"127.0.0.1:{port}")
        with pytest.raises(OSError, match=f"--http-listen 127.0.0.1:{port}"):
            await start(settings)
    assert not settings.data_dir.exists()  # no key, no database: bound before anything


async def test_the_graceful_stop_closes_the_port(tmp_path: Path) -> None:
    app = await start(web_settings(tmp_path))
    port = app.http_port
    assert port is not None
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/keys") as response,
    ):
        assert response.status == 200
    await app.stop()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
