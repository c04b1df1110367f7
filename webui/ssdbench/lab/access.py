"""Who may use the lab: appliances upload with a token each, people read the pages after logging in.

Tokens and passwords are random, shown once when made, and stored hashed: a token as its sha256 (it is 256
random bits, so a fast hash is enough), a password with scrypt. A user's epoch changes when they log out or
are removed, which ends their sessions; the key that signs session cookies is kept in the database, so that
every lab server behind a load balancer accepts the same cookies.
"""

import functools
import hashlib
import hmac
import ipaddress
import re
import secrets

from ..errors import SsdbenchError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
TOKEN_BYTES = 32
# A fixed start: a token never begins with "-", which a command line would take for an option
# (ssdbench upload --token -x... fails), and a leaked one is easy to recognise.
TOKEN_PREFIX = "ssdb_"
# scrypt's cost: about 50 ms and 16 MiB a login, so that a stolen table is slow to guess from.
SCRYPT = {"n": 2**14, "r": 8, "p": 1}
# How many more tries than one prefix a network may fail in the window (a site's /48, where one person is one /64),
# and a user from everywhere, before each waits.
NETWORK_SHARE = 4
USER_SHARE = 6
# The advisory locks (a pair of 32-bit keys: this, and the network's hash) under which a try is checked and counted.
TRIES_LOCK = 0x55D8E4C3


def check_name(name, what):
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise SsdbenchError(f"{what} {name!r}: 1 to 64 letters, digits, dots, dashes or underscores")
    return name


def _token_hash(token):
    return hashlib.sha256(token.encode()).hexdigest()


def new_token():
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def add_token(conn, name):
    """A new token for the appliance `name`, returned once. A revoked appliance gets a new one under its name, and
    keeps its trust; a new one is not trusted (lab/index.trust)."""
    check_name(name, "appliance")
    token = new_token()
    with conn.transaction():
        row = conn.execute("SELECT revoked_at FROM appliances WHERE name=%s FOR UPDATE", (name,)).fetchone()
        if row is not None and row["revoked_at"] is None:
            raise SsdbenchError(f"appliance {name} has a token already: revoke it first (ssdbench lab token revoke)")
        conn.execute(
            """INSERT INTO appliances (name, token_sha256) VALUES (%s, %s)
               ON CONFLICT (name) DO UPDATE SET token_sha256=excluded.token_sha256, revoked_at=NULL,
               created_at=now()""",
            (name, _token_hash(token)),
        )
    return token


def list_tokens(conn):
    """Every appliance: name, created_at, revoked_at, trusted, and how many bundles it has sent."""
    rows = conn.execute(
        """SELECT a.name, a.trusted, extract(epoch FROM a.created_at)::float AS created_at,
                  extract(epoch FROM a.revoked_at)::float AS revoked_at, count(b.sha256) AS bundles
           FROM appliances a LEFT JOIN bundles b ON b.appliance_id = a.id GROUP BY a.id ORDER BY a.name"""
    )
    return list(rows)


def appliance_named(conn, name):
    """The appliance of that name ({id, name}), made without a valid token when the lab has none: what `lab
    reindex` says sent the bundles it indexes."""
    check_name(name, "appliance")
    conn.execute(
        """INSERT INTO appliances (name, token_sha256, revoked_at) VALUES (%s, %s, now())
           ON CONFLICT (name) DO NOTHING""",
        (name, _token_hash(new_token())),
    )
    return conn.execute("SELECT id, name FROM appliances WHERE name=%s", (name,)).fetchone()


def revoke_token(conn, name):
    found = conn.execute(
        "UPDATE appliances SET revoked_at=now() WHERE name=%s AND revoked_at IS NULL RETURNING id", (name,)
    ).fetchone()
    if found is None:
        raise SsdbenchError(f"no appliance {name} with a valid token")


def appliance(conn, token):
    """The appliance whose valid token this is ({id, name}), or None."""
    if not isinstance(token, str) or not token:
        return None
    return conn.execute(
        "SELECT id, name FROM appliances WHERE token_sha256=%s AND revoked_at IS NULL", (_token_hash(token),)
    ).fetchone()


def _password_hash(password, salt=None):
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, maxmem=64 * 2**20, **SCRYPT)
    return f"scrypt${salt.hex()}${digest.hex()}"


def add_user(conn, name):
    """A new user with a random password, returned once; an existing user gets a new password, and every one of
    their sessions ends."""
    check_name(name, "user")
    password = secrets.token_urlsafe(12)
    conn.execute(
        """INSERT INTO users (name, password_hash, epoch) VALUES (%s, %s, %s)
           ON CONFLICT (name) DO UPDATE SET password_hash=excluded.password_hash, epoch=excluded.epoch""",
        (name, _password_hash(password), secrets.token_hex(16)),
    )
    return password


def list_users(conn):
    return list(
        conn.execute("SELECT name, extract(epoch FROM created_at)::float AS created_at FROM users ORDER BY name")
    )


def remove_user(conn, name):
    if conn.execute("DELETE FROM users WHERE name=%s RETURNING name", (name,)).fetchone() is None:
        raise SsdbenchError(f"no user {name}")


@functools.cache
def _nobodys_hash():
    """A stored hash for a user who does not exist: made once, so that a missing user costs the one scrypt a
    wrong password costs."""
    return _password_hash(secrets.token_urlsafe(12))


def login(conn, name, password):
    """The user's session epoch if the password is theirs, else None. Every try costs one scrypt, so that the
    time does not tell a missing user from a wrong password."""
    row = conn.execute("SELECT password_hash, epoch FROM users WHERE name=%s", (str(name),)).fetchone()
    stored = row["password_hash"] if row else _nobodys_hash()
    _, salt, _ = stored.split("$")
    ok = hmac.compare_digest(_password_hash(str(password), bytes.fromhex(salt)), stored)
    return row["epoch"] if row and ok else None


def epoch(conn, name):
    """The user's session epoch now, None once removed."""
    row = conn.execute("SELECT epoch FROM users WHERE name=%s", (str(name),)).fetchone()
    return row["epoch"] if row else None


def end_sessions(conn, name):
    conn.execute("UPDATE users SET epoch=%s WHERE name=%s", (secrets.token_hex(16), str(name)))


def secret_key(conn):
    """The key that signs the lab's session cookies, made by the first server that needs one."""
    conn.execute(
        "INSERT INTO settings (name, value) VALUES ('secret_key', %s) ON CONFLICT (name) DO NOTHING",
        (secrets.token_hex(32),),
    )
    return conn.execute("SELECT value FROM settings WHERE name='secret_key'").fetchone()["value"]


def prefix(address):
    """(the part of a client's address that one client holds, the network it is in): an IPv4 address, twice; an
    IPv6 /64, and the /48 a site is given (65,536 /64s, each a client to the count of the first)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return (str(address)[:64],) * 2
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if ip.version == 4:
        return (str(ip),) * 2
    return tuple(str(ipaddress.ip_network(f"{ip}/{bits}", strict=False)) for bits in (64, 48))


def take_try(conn, client, user, limit, window_s):
    """Count one try at a password before it is checked: its id, or why it must wait ("address", "user").

    `client` is prefix()'s (prefix, network). A prefix that has failed `limit` times in the window waits, whichever
    user it names, and so does a network that has failed NETWORK_SHARE times as often. A user whose password has
    failed `limit` times is not locked: only the prefixes that have failed at it wait, so the guesses of others
    never keep its owner out; but past USER_SHARE times as often, from however many networks, every try at it
    waits, its owner's too: the one bound on a guesser who holds many. The check and the count are one step under
    a lock on the network: tries sent at once from one address get no more than the limit between them."""
    prefix_, network = client
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (TRIES_LOCK, network))
        conn.execute("DELETE FROM login_tries WHERE at <= now() - make_interval(secs => %s)", (window_s,))
        seen = conn.execute(
            """SELECT count(*) FILTER (WHERE prefix = %(p)s) AS from_prefix,
                      count(*) FILTER (WHERE network = %(n)s) AS from_network,
                      count(*) FILTER (WHERE username = %(u)s) AS at_user,
                      count(*) FILTER (WHERE prefix = %(p)s AND username = %(u)s) AS at_user_from_prefix
               FROM login_tries WHERE prefix = %(p)s OR network = %(n)s OR username = %(u)s""",
            {"p": prefix_, "n": network, "u": user},
        ).fetchone()
        if seen["from_prefix"] >= limit or seen["from_network"] >= limit * NETWORK_SHARE:
            return None, "address"
        if seen["at_user"] >= limit * USER_SHARE or (seen["at_user"] >= limit and seen["at_user_from_prefix"]):
            return None, "user"
        made = conn.execute(
            "INSERT INTO login_tries (prefix, network, username) VALUES (%s, %s, %s) RETURNING id",
            (prefix_, network, user),
        ).fetchone()
    return made["id"], None


def forgive_try(conn, try_id):
    """A try whose password was right counts for nothing."""
    conn.execute("DELETE FROM login_tries WHERE id = %s", (try_id,))
