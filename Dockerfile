# ingest: the API with its embedded worker (`ingest serve`); run `ingest worker` from the
# same image for more workers. Build: docker build -t ingest .
#
# The base is pinned by digest (the multi-arch index of python:3.11-slim), so a rebuild
# gets the same Python and Debian packages until the digest is changed on purpose. To take
# a newer one (e.g. for security fixes), look it up and replace the sha256 below:
#   docker buildx imagetools inspect python:3.11-slim     (its "Digest:" line)
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

# Build stage: uv and the locked dependencies; only the virtual environment leaves it.
FROM ${PYTHON_IMAGE} AS build

ENV UV_PYTHON=/usr/local/bin/python3 \
    UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1 \
    UV_PROJECT_ENVIRONMENT=/app/.venv

# The same uv as the Makefile uses.
RUN pip install --no-cache-dir uv==0.13.8

WORKDIR /app

# Dependencies first, from the lock only (no dev tools): this layer is rebuilt when the
# lock changes, not when the code does.
COPY pyproject.toml uv.lock ./
RUN uv sync --frozen --no-dev --no-install-project

# Then the project itself (README.md is part of its metadata), installed into the
# environment rather than linked to this stage's source tree.
COPY README.md ./
COPY app ./app
RUN uv sync --frozen --no-dev --no-editable

# Runtime stage: the same Python, the environment, and nothing to build with.
FROM ${PYTHON_IMAGE}

# Run as a user that owns nothing but the data directory.
RUN groupadd --system --gid 10001 ingest \
 && useradd --system --uid 10001 --gid ingest --home-dir /app --no-create-home \
      --shell /usr/sbin/nologin ingest \
 && mkdir -p /app/data \
 && chown ingest:ingest /app/data

COPY --from=build /app/.venv /app/.venv

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH="/app/.venv/bin:$PATH" \
    INGEST_DATABASE_URL=sqlite:////app/data/ingest.db

WORKDIR /app
USER ingest
VOLUME ["/app/data"]
EXPOSE 8000

# python:slim has no curl: urllib fails (exit 1) on a refused connection or a non-2xx.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('INGEST_PORT', '8000') + '/healthz', timeout=4)"]

# Every address: serve refuses to start so without INGEST_API_KEYS (none are set here), unless
# INGEST_ALLOW_OPEN_API=true is passed on purpose.
CMD ["ingest", "serve", "--host", "0.0.0.0"]
