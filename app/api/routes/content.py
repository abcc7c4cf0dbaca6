"""What a succeeded job fetched: the exact bytes, the extracted main text and its Markdown,
of the last content version or of an earlier one kept, and a diff of two versions' text or
Markdown (computed under app/api/routes/diffs.py's bounds).

The text and the Markdown of a type that has none (an image, an archive: the body is all
there is) answer 404, never the raw bytes under a text type. A pair of versions too large or
too slow to diff answers 422 in the shape of every 422 here (`{"detail": [{type, loc, msg}]}`,
at `["query", "diff"]`): like a refused URL, a well-formed request this service will not serve.
"""

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError

from app.api.auth import Caller, CallerDep
from app.api.deps import ContentsDep
from app.api.problems import problem, responses, service_unavailable, too_many_diffs
from app.api.routes.diffs import DiffFailed, DiffRefused, Diffs, DiffsBusy, client_gone
from app.api.schemas import LinkOut, LinksOut, VersionList
from app.store.jobs.errors import JobNotFound
from app.store.reads import Content, ContentStore, Part
from app.wire import VersionOut, missing_content

router = APIRouter(prefix="/jobs", tags=["content"], responses=responses(401, 404))

# Fetched pages are someone else's HTML: served from our origin they must not run scripts.
SAFE_HEADERS = {"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff"}


VersionNumber = Annotated[int, Path(ge=1, le=2**31 - 1, description="1 for the first success.")]
DiffFrom = Annotated[
    int | None,
    Query(
        ge=1,
        le=2**31 - 1,
        description="Another version: answer the unified diff from it to this one.",
    ),
]

CLIENT_GONE = 499
"""nginx's "client closed request": what the access log and the metrics show of a diff whose
client left (nobody reads the answer)."""


def _stored(
    job_id: str, content: Content, part: Part, version: int | None = None
) -> Response | None:
    """The 404 for a job without that part of its content, or None if there is one."""
    if content.status is None:
        raise JobNotFound(job_id)
    if version is not None and not content.stored:
        return problem(404, f"job {job_id} keeps no content version {version}")
    missing = missing_content(job_id, content, part)
    return None if missing is None else problem(404, missing)


@router.get(
    "/{job_id}/content",
    name="get_job_content",
    response_class=Response,
    responses={
        200: {
            "description": "The body as fetched, with its original Content-Type",
            "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
async def get_job_content(job_id: str, contents: ContentsDep, caller: CallerDep) -> Response:
    """The exact bytes the job fetched (decoded from any Content-Encoding)."""
    content = await contents.get(job_id, caller.tenant, part="content")
    missing = _stored(job_id, content, "content")
    if missing is not None:
        return missing
    assert isinstance(content.data, bytes)
    # Set as a header, not as media_type: Starlette would add a charset to text/* types.
    content_type = content.content_type or "application/octet-stream"
    return Response(content.data, headers={"Content-Type": content_type, **SAFE_HEADERS})


@router.get(
    "/{job_id}/text",
    name="get_job_text",
    response_class=Response,
    responses={
        200: {
            "description": "The main text",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
async def get_job_text(job_id: str, contents: ContentsDep, caller: CallerDep) -> Response:
    """The main text extracted from what the job fetched, as UTF-8 plain text. 404 for a
    type with no text (an image, an archive)."""
    return await _text(job_id, contents, caller.tenant, "text", "text/plain; charset=utf-8")


@router.get(
    "/{job_id}/markdown",
    name="get_job_markdown",
    response_class=Response,
    responses={
        200: {
            "description": "The main content as Markdown",
            "content": {"text/markdown": {"schema": {"type": "string"}}},
        }
    },
)
async def get_job_markdown(job_id: str, contents: ContentsDep, caller: CallerDep) -> Response:
    """The main content of what the job fetched as Markdown (UTF-8). 404 for a type with no
    text, and for a job fetched before Markdown was kept."""
    return await _text(job_id, contents, caller.tenant, "markdown", "text/markdown; charset=utf-8")


@router.get("/{job_id}/links", name="get_job_links", responses=responses(404))
async def get_job_links(job_id: str, contents: ContentsDep, caller: CallerDep) -> LinksOut:
    """The links of the page the job fetched last (its whole page, navigation included),
    absolute and normalized as URL keys are, each with its anchor text, split internal (the
    page's own host, `www.` aside) and external; at most INGEST_LINKS_MAX_PER_PAGE, in the
    page's order. None for a body that is not HTML."""
    content = await contents.get(job_id, caller.tenant, part="links")
    if content.status is None:
        raise JobNotFound(job_id)
    missing = missing_content(job_id, content, "links")
    if missing is not None:
        raise HTTPException(404, missing)
    assert isinstance(content.data, dict)
    kept = content.data["items"]
    internal = [LinkOut(url=link["url"], text=link["text"]) for link in kept if link["internal"]]
    external = [
        LinkOut(url=link["url"], text=link["text"]) for link in kept if not link["internal"]
    ]
    return LinksOut(internal=internal, external=external, cut=content.data["cut"])


@router.get("/{job_id}/versions", name="list_versions", responses=responses(404))
async def list_versions(job_id: str, contents: ContentsDep, caller: CallerDep) -> VersionList:
    """The content versions the job keeps, newest first: one per success that found the
    text new (the first, and each refresh that found it changed)."""
    versions = await contents.versions(job_id, caller.tenant)
    if versions is None:
        raise JobNotFound(job_id)
    return VersionList(items=[VersionOut.model_validate(v, from_attributes=True) for v in versions])


@router.get(
    "/{job_id}/versions/{version}/text",
    name="get_version_text",
    response_class=Response,
    responses={
        200: {
            "description": "The version's main text, or with `diff` a unified diff",
            "content": {
                "text/plain": {"schema": {"type": "string"}},
                "text/x-diff": {"schema": {"type": "string"}},
            },
        },
        **responses(404),
        **too_many_diffs(),
    },
)
async def get_version_text(
    job_id: str,
    version: VersionNumber,
    contents: ContentsDep,
    caller: CallerDep,
    request: Request,
    diff: DiffFrom = None,
) -> Response:
    """One kept version's main text (UTF-8); with `?diff=N`, what changed from version N to
    it, as a unified diff (`text/x-diff`). A diff answers 422 when either side is past
    INGEST_DIFF_MAX_BYTES or INGEST_DIFF_MAX_LINES or it takes longer than
    INGEST_DIFF_TIMEOUT_SECONDS (the same pair would again: diff the two versions yourself),
    and 429 past INGEST_DIFF_PER_KEY diffs in flight for the API key."""
    if diff is None:
        return await _text(
            job_id, contents, caller.tenant, "text", "text/plain; charset=utf-8", version
        )
    return await _diff(request, contents, caller, job_id, "text", diff, version)


@router.get(
    "/{job_id}/versions/{version}/markdown",
    name="get_version_markdown",
    response_class=Response,
    responses={
        200: {
            "description": "The version's main content as Markdown, or with `diff` a unified diff",
            "content": {
                "text/markdown": {"schema": {"type": "string"}},
                "text/x-diff": {"schema": {"type": "string"}},
            },
        },
        **responses(404),
        **too_many_diffs(),
    },
)
async def get_version_markdown(
    job_id: str,
    version: VersionNumber,
    contents: ContentsDep,
    caller: CallerDep,
    request: Request,
    diff: DiffFrom = None,
) -> Response:
    """One kept version's main content as Markdown (UTF-8); with `?diff=N`, what changed in
    the Markdown from version N to it, as a unified diff (`text/x-diff`). A diff answers 422
    when either side is past INGEST_DIFF_MAX_BYTES or INGEST_DIFF_MAX_LINES or it takes
    longer than INGEST_DIFF_TIMEOUT_SECONDS (the same pair would again: diff the two
    versions yourself), and 429 past INGEST_DIFF_PER_KEY diffs in flight for the API key."""
    if diff is None:
        return await _text(
            job_id, contents, caller.tenant, "markdown", "text/markdown; charset=utf-8", version
        )
    return await _diff(request, contents, caller, job_id, "markdown", diff, version)


async def _diff(
    request: Request,
    contents: ContentStore,
    caller: Caller,
    job_id: str,
    part: Part,
    old: int,
    new: int,
) -> Response:
    """The unified diff of `part` from version `old` to `new` (app/api/routes/diffs.py)."""
    sides = []
    for number in (old, new):
        content = await contents.get(job_id, caller.tenant, part=part, version=number)
        missing = _stored(job_id, content, part, number)
        if missing is not None:
            return missing
        assert isinstance(content.data, str)
        sides.append((number, content.data))
    diffs: Diffs = request.app.state.diffs
    try:
        text = await diffs.unified(
            caller.key, sides[0], sides[1], lambda: client_gone(request.receive)
        )
    except DiffRefused as refused:
        error = {"type": refused.kind, "loc": ("query", "diff"), "input": old, "msg": str(refused)}
        raise RequestValidationError([error]) from None
    except DiffsBusy as busy:
        response = problem(429, str(busy))
        response.headers["Retry-After"] = str(busy.retry_after)
        return response
    except DiffFailed as failed:
        return service_unavailable(str(failed))
    if text is None:
        return Response(status_code=CLIENT_GONE)
    return Response(text, media_type="text/x-diff; charset=utf-8", headers=SAFE_HEADERS)


async def _text(
    job_id: str,
    contents: ContentStore,
    tenant: str | None,
    part: Part,
    served_as: str,
    version: int | None = None,
) -> Response:
    content = await contents.get(job_id, tenant, part=part, version=version)
    missing = _stored(job_id, content, part, version)
    if missing is not None:
        return missing
    assert isinstance(content.data, str)
    return Response(content.data, media_type=served_as, headers=SAFE_HEADERS)
