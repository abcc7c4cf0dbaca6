"""Pure: a database URL as a message shows it, its password hidden. No I/O.

INGEST_DATABASE_URL carries the database's password (`postgresql://user:pass@host/db`, or
`?password=` in its query). Every message that names the database, a settings error, a
command's error line or a log line, shows `shown(url)`: SQLAlchemy's rendering with the
password as `***` when the URL parses; when it does not (or a password's unencoded `@` cut
it short), everything between the scheme and the last `@` (user and password) as `***`.
Either way a `password=` of the query is `***`.
"""

import re

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

HIDDEN = "***"
_CREDENTIALS = re.compile(r"^(?P<scheme>[^/@]*//)?.*@", re.DOTALL)
_PASSWORD_PARAMETER = re.compile(r"(?i)([?&]password=)[^&]*")


def parsed(database_url: str) -> URL:
    """`database_url` parsed; ValueError, saying it as `shown` does, if it does not parse."""
    try:
        return make_url(database_url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise ValueError(f"not a database URL: {shown(database_url)}") from None


def shown(database_url: str) -> str:
    """`database_url` with its password (and, unless it parses, its user) as `***`."""
    try:
        url = make_url(database_url)
    except (ArgumentError, ValueError):
        url = None
    # A host with an `@`: the password held one, unencoded, and SQLAlchemy cut it there.
    if url is None or "@" in (url.host or ""):
        text = _CREDENTIALS.sub(lambda found: f"{found['scheme'] or ''}{HIDDEN}@", database_url)
    else:
        text = url.render_as_string(hide_password=True)
    return _PASSWORD_PARAMETER.sub(rf"\g<1>{HIDDEN}", text)
