"""The lab's audit log: who logged in, which appliance sent which bundle, and what the operator's commands changed.

It is a table of the lab's database, not a file: every server of a lab and every `ssdbench lab` command, on
whatever host, writes to the one log, in the order the database gives; it is backed up with the runs it speaks
of; and reading it (`ssdbench lab audit`) needs only the database. Entries older than KEEP_DAYS go as new ones
come, so it stays bounded. It never holds a secret: a login is recorded under its user's name only when that
user exists (a password typed into the name field is not kept), and an upload under its appliance's name, never
its token or the token's hash. What is refused before any credential is checked (a throttled login, an upload
without a valid token) is in the access log alone, so that nobody without a credential can grow this table.
"""

import getpass
import socket

# A year and a month: a year's audits look back on a whole year.
KEEP_DAYS = 400
# Each field's bound, as stored: names and addresses are short, a subject names a bundle and its runs.
FIELD_CHARS = 300


def _bounded(value):
    return None if value is None else str(value)[:FIELD_CHARS]


def record(conn, actor, action, outcome, subject=None, address=None):
    """Add one entry, and let go of those past KEEP_DAYS: one statement, one round trip, as an upload makes one."""
    conn.execute(
        """WITH old AS (DELETE FROM audit WHERE at < now() - make_interval(days => %s))
           INSERT INTO audit (actor, address, action, subject, outcome) VALUES (%s, %s, %s, %s, %s)""",
        (KEEP_DAYS, *map(_bounded, (actor, address, action, subject, outcome))),
    )


def record_refusal(conn, actor, action, outcome, subject=None, address=None):
    """record() a refusal that a sender may repeat at will (a token over its quota, 429): once a minute at most per
    actor, action and outcome, so that nobody grows this table by asking again and again."""
    conn.execute(
        """INSERT INTO audit (actor, address, action, subject, outcome)
           SELECT %(actor)s, %(address)s, %(action)s, %(subject)s, %(outcome)s
           WHERE NOT EXISTS (SELECT FROM audit WHERE at > now() - interval '1 minute' AND actor = %(actor)s
                             AND action = %(action)s AND outcome = %(outcome)s)""",
        dict(
            zip(
                ("actor", "address", "action", "subject", "outcome"),
                map(_bounded, (actor, address, action, subject, outcome)),
            )
        ),
    )


def operator():
    """Who runs an `ssdbench lab` command: its system user, on its host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def entries(conn, limit):
    """The newest `limit` entries, oldest first, each {id, at (epoch seconds), actor, address, action, subject,
    outcome}."""
    rows = conn.execute(
        """SELECT id, extract(epoch FROM at)::float AS at, actor, address, action, subject, outcome
           FROM audit ORDER BY id DESC LIMIT %s""",
        (limit,),
    )
    return list(reversed(list(rows)))
