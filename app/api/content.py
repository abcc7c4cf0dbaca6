"""What a succeeded job fetched: the exact bytes, and the extracted main text."""

from fastapi import APIRouter, Response

from app.api.auth import CallerDep
from app.api.deps import ContentsDep
from app.api.problems import problem, responses
from app.model import JobStatus
from app.store.jobs import JobNotFound
from app.store.reads import Content

router = APIRouter(prefix="/jobs", tags=["content"], responses=responses(401, 404))

# Fetched pages are someone else's HTML: served from our origin they must not run scripts.
SAFE_HEADERS = {"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff"}


def _stored(job_id: str, content: Content) -> Response | None:
    """The 404 for a job without content, or None if there is content."""
    if content.status is None:
        raise JobNotFound(job_id)
    if content.data is not None:
        return None
    if content.status == JobStatus.SUCCEEDED:
        return problem(404, f"job {job_id} succeeded but has no stored content")
    return problem(404, f"job {job_id} is {content.status}; content exists once it succeeded")


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
    content = await contents.get(job_id, caller.tenant, text=False)
    missing = _stored(job_id, content)
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
    """The main text extracted from what the job fetched, as UTF-8 plain text."""
    content = await contents.get(job_id, caller.tenant, text=True)
    missing = _stored(job_id, content)
    if missing is not None:
        return missing
    assert isinstance(content.data, str)
    return Response(content.data, media_type="text/plain; charset=utf-8", headers=SAFE_HEADERS)
