"""What `POST /crawls` takes (`app.api.routes.crawls`); what the crawl endpoints answer is
`app.wire.crawls`."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.api.bodies import METADATA_MAX_BYTES, METADATA_MAX_DEPTH, bounded_metadata, few_keys
from app.api.schemas import REFRESH_EVERY_MAX, TENANT_PATTERN, SubmittedUrl
from app.model import CallbackContent, CrawlMode, SitemapUse
from app.rules.crawl_scope import MAX_PATTERN_CHARS, MAX_PATTERNS

MAX_START_URLS = 100


class CrawlIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"url": "https://example.com/docs/", "limit": 100}]},
    )

    url: SubmittedUrl | None = Field(None, description="The start URL (or give `urls`).")
    urls: list[SubmittedUrl] | None = Field(
        None,
        min_length=1,
        max_length=MAX_START_URLS,
        description="Start URLs; their hosts are the crawl's site.",
    )
    mode: CrawlMode = Field(
        CrawlMode.CRAWL,
        description="`crawl`: fetch and keep every page found, each an ordinary job. `map`: "
        "list the URLs the site's listings name (robots.txt's sitemaps, /sitemap.xml, "
        "llms.txt), fetching no page.",
    )
    limit: int | None = Field(
        None, ge=1, description="Pages made jobs of, at most; INGEST_CRAWL_MAX_PAGES if omitted."
    )
    max_depth: int = Field(
        10,
        ge=0,
        le=1000,
        description="Links followed from a start URL, at most (a start URL and the pages a "
        "listing names are at depth 0).",
    )
    include: list[str] = Field(
        [],
        max_length=MAX_PATTERNS,
        description="Path patterns a page must match (one of them) to be followed: matched "
        "against the URL's path and query, anchored at both ends; `*` is any run of "
        "characters but `/`, `**` any run; a pattern without a leading `/` matches anywhere "
        "(see the Crawls guide). Start URLs are fetched whatever the patterns.",
    )
    exclude: list[str] = Field(
        [], max_length=MAX_PATTERNS, description="Path patterns never followed; win over include."
    )
    subdomains: bool = Field(False, description="Follow links to the start hosts' subdomains.")
    sitemap: SitemapUse = Field(
        SitemapUse.INCLUDE,
        description="`include`: pages from sitemaps and links; `only`: from sitemaps (and the "
        "start URLs) alone; `skip`: read no sitemap.",
    )
    feeds: bool = Field(True, description="Read the RSS and Atom feeds pages link to.")
    llms_txt: bool = Field(True, description="Read the site's /llms.txt.")
    robots_txt: bool = Field(
        True,
        description="Obey robots.txt for the crawl's pages. false only where "
        "INGEST_CRAWL_MAY_IGNORE_ROBOTS_TXT allows it.",
    )
    refresh_every: int | None = Field(
        None,
        ge=1,
        le=REFRESH_EVERY_MAX,
        description="Crawl the site again this many seconds after each round ends (at least "
        "INGEST_REFRESH_MIN_SECONDS): listings read again, known pages fetched again as "
        "conditional refreshes, and each round's new, changed and removed pages reported "
        "(`GET /crawls/{id}/rounds/{n}`). Omitted: one round.",
    )
    priority: int = Field(0, ge=-1000, le=1000, description="Every page's priority.")
    max_attempts: int | None = Field(
        None,
        ge=1,
        le=100,
        description="Every page's attempt budget; INGEST_MAX_ATTEMPTS if omitted.",
    )
    metadata: dict[str, Any] | None = Field(
        None,
        description=f"Opaque JSON kept with every page's job: at most {METADATA_MAX_BYTES} "
        f"bytes, {METADATA_MAX_DEPTH} levels deep.",
    )
    callback_url: SubmittedUrl | None = Field(
        None,
        description="Told as each round of the crawl ends: `crawl.completed`, or "
        "`crawl.changed` for a re-crawl's round that found pages new, changed or removed "
        "(the crawl and the round's report). With `callback_pages`, each page's job too.",
    )
    callback_content: CallbackContent = Field(
        CallbackContent.NONE, description="With `callback_pages`: what a page's callback carries."
    )
    callback_pages: bool = Field(
        False, description="Each page's job calls `callback_url` as it finishes (`job.*`)."
    )
    tenant: str | None = Field(None, pattern=TENANT_PATTERN, description="Defaults to `default`.")

    @model_validator(mode="before")
    @classmethod
    def _few_keys(cls, body: Any) -> Any:
        return few_keys(body)

    @model_validator(mode="after")
    def _one_start(self) -> "CrawlIn":
        if (self.url is None) == (self.urls is None):
            raise ValueError("give the start URL as `url`, or several as `urls`")
        if self.callback_content is not CallbackContent.NONE and self.callback_url is None:
            raise ValueError("callback_content goes with callback_url")
        return self

    @field_validator("include", "exclude")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            if not pattern or len(pattern) > MAX_PATTERN_CHARS:
                raise ValueError(f"a pattern has 1 to {MAX_PATTERN_CHARS} characters")
        return patterns

    @field_validator("metadata", mode="before")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        return bounded_metadata(value)

    @property
    def start_urls(self) -> list[SubmittedUrl]:
        return [self.url] if self.url is not None else list(self.urls or ())
