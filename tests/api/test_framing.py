"""Every answer of the service, pages, JSON, problems and refusals alike, forbids framing."""

import pytest

NO_FRAMING = {"x-frame-options": "DENY", "content-security-policy": "frame-ancestors 'none'"}


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "status"),
    [
        ("GET", "/dashboard", {}, None, 200),
        ("GET", "/docs", {}, None, 200),
        ("GET", "/jobs", {}, None, 200),
        ("GET", "/jobs/0172ff91-2bc7-4277-8c54-cfd050bbf331", {}, None, 404),
        ("POST", "/jobs", {}, b"{}", 422),
        ("POST", "/jobs", {"content-length": str(64 * 1024 * 1024)}, b"{}", 413),
        ("POST", "/jobs", {"origin": "https://evil.example"}, b"{}", 403),
        ("GET", "/no/such/route", {}, None, 404),
    ],
)
async def test_every_answer_forbids_framing(client, method, path, headers, body, status):
    """X-Frame-Options: DENY and frame-ancestors 'none' on pages, JSON, problems, refusals."""
    headers = {"content-type": "application/json", **headers}
    response = await client.request(method, path, headers=headers, content=body)
    assert status == response.status_code
    assert NO_FRAMING == {name: response.headers.get(name) for name in NO_FRAMING}
