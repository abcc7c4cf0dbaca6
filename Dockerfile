# ingest: the API with its embedded worker (`ingest serve`); run `ingest worker` from the
# same image for more workers. Build: docker build -t ingest .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    UV_PYTHON=/usr/local/bin/python3 \
    UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1 \
    UV_PROJECT_ENVIRONMENT=/app/.venv

# The same uv as the Makefile uses.
RUN pip install --no-cache-dir uv==0.13.8

WORKDIR /app

# Dependencies first, from the lock only: this layer is rebuilt when the lock changes,
# not when the code does.
COPY pyproject.toml uv.lock ./
RUN uv sync --frozen --no-dev --no-install-project

# Then the project itself (README.md is part of its metadata).
COPY README.md ./
COPY app ./app
RUN uv sync --frozen --no-dev

# Run as a user that owns nothing but the data directory.
RUN groupadd --system --gid 10001 ingest \
 && useradd --system --uid 10001 --gid ingest --home-dir /app --no-create-home \
      --shell /usr/sbin/nologin ingest \
 && mkdir -p /app/data \
 && chown ingest:ingest /app/data

ENV PATH="/app/.venv/bin:$PATH" \
    INGEST_DATABASE_URL=sqlite:////app/data/ingest.db

USER ingest
VOLUME ["/app/data"]
EXPOSE 8000
CMD ["ingest", "serve", "--host", "0.0.0.0"]
