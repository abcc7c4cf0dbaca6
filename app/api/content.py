"""What a succeeded job fetched: the exact bytes, the extracted main text and its Markdown.

The text and the Markdown of a type that has none (an image, an archive: the body is all
there is) answer 404, never the raw bytes under a text type.
"""

from fastapi import APIRouter, Response

from app.api.auth import CallerDep
from app.api.deps import ContentsDep
from app.api.problems import problem, responses
from app.store.jobs import JobNotFound
from app.store.reads import Content, ContentStore, Part
from app.wire import missing_content

router = APIRouter(prefix="/jobs", tags=["content"], responses=responses(401, 404))

# Fetched pages are someone else's HTML: served from our origin they must not run scripts.
SAFE_HEADERS = {"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff"}


def _stored(job_id: str, content: Content, part: Part) -> Response | None:
    """The 404 for a job without that part of its content, or None if there is one."""
    if content.status is None:
        raise JobNotFound(job_id)
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


async def _text(
    job_id: str, contents: ContentStore, tenant: str | None, part: Part, served_as: str
) -> Response:
    content = await contents.get(job_id, tenant, part=part)
    missing = _stored(job_id, content, part)
    if missing is not None:
        return missing
    assert isinstance(content.data, str)
    return Response(content.data, media_type=served_as, headers=SAFE_HEADERS)
