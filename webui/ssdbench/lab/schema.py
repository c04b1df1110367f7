"""The lab's PostgreSQL: a connection, and the schema's versioned migrations.

Only the lab's modules write SQL for PostgreSQL (the appliance's SQLite is results/store's). psycopg is the
`lab` extra: a missing one is a one-line error naming it.
"""

import os

from ..errors import SsdbenchError

DB_VAR = "SSDBENCH_LAB_DB"
# Taken for the length of a migration, so that two servers starting at once migrate one after the other.
MIGRATE_LOCK = 0x55D8E4C1
# Each: (version, what it does, its statements). A version, once released, never changes: a change of
# schema is a new version at the end.
MIGRATIONS = [
    (
        1,
        "appliances and tokens, users, bundles, testbeds, drives, runs and their headline figures",
        """
        CREATE TABLE appliances (
            id serial PRIMARY KEY,
            name text NOT NULL UNIQUE,
            token_sha256 text NOT NULL UNIQUE,
            created_at timestamptz NOT NULL DEFAULT now(),
            revoked_at timestamptz
        );
        CREATE TABLE users (
            name text PRIMARY KEY,
            password_hash text NOT NULL,
            epoch text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE settings (name text PRIMARY KEY, value text NOT NULL);
        CREATE TABLE bundles (
            sha256 text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
            bytes bigint NOT NULL,
            kind text NOT NULL CHECK (kind IN ('run', 'repeat')),
            appliance_id integer NOT NULL REFERENCES appliances,
            host text,
            received_at timestamptz NOT NULL DEFAULT now(),
            manifest jsonb NOT NULL
        );
        CREATE TABLE testbeds (
            id serial PRIMARY KEY,
            appliance_id integer NOT NULL REFERENCES appliances,
            host text NOT NULL,
            cpu text NOT NULL,
            kernel text NOT NULL,
            UNIQUE (appliance_id, host, cpu, kernel)
        );
        CREATE TABLE drives (
            id serial PRIMARY KEY,
            model text NOT NULL,
            serial text NOT NULL,
            firmware text NOT NULL,
            capacity_bytes bigint,
            transport text,
            UNIQUE (model, serial, firmware)
        );
        CREATE TABLE runs (
            id serial PRIMARY KEY,
            bundle_sha256 text NOT NULL REFERENCES bundles ON DELETE CASCADE,
            member text NOT NULL,
            source_id integer NOT NULL,
            testbed_id integer NOT NULL REFERENCES testbeds,
            drive_id integer NOT NULL REFERENCES drives,
            path text,
            suite text NOT NULL,
            suite_hash text NOT NULL,
            standard boolean NOT NULL,
            state text NOT NULL,
            error text,
            created_at double precision NOT NULL,
            finished_at double precision,
            UNIQUE (bundle_sha256, member)
        );
        CREATE INDEX runs_drive ON runs (drive_id);
        CREATE INDEX runs_suite ON runs (suite_hash);
        CREATE TABLE figures (
            run_id integer NOT NULL REFERENCES runs ON DELETE CASCADE,
            step text NOT NULL,
            name text NOT NULL,
            value double precision NOT NULL,
            unit text NOT NULL,
            kind text NOT NULL,
            PRIMARY KEY (run_id, step, name)
        );
        """,
    ),
    (
        2,
        "each run's card and model, the bench's pick of each model's run (pages built from SQL), and the wrong "
        "passwords every server of a lab counts",
        """
        ALTER TABLE runs ADD COLUMN model text;
        ALTER TABLE runs ADD COLUMN card jsonb;
        CREATE INDEX runs_model ON runs (model);
        CREATE TABLE bench (
            model text PRIMARY KEY,
            run_id integer NOT NULL REFERENCES runs,
            comparable boolean NOT NULL,
            received_at timestamptz NOT NULL,
            runs integer NOT NULL
        );
        CREATE TABLE login_failures (client text NOT NULL, at timestamptz NOT NULL DEFAULT now());
        CREATE INDEX login_failures_client ON login_failures (client, at);
        CREATE INDEX login_failures_at ON login_failures (at);
        """,
    ),
    (
        3,
        "each run's card carries its testbed (CPU, host controller, link and its class in each part of the rule "
        "that sets runs apart): every card is made again from its bundle when a server next starts",
        """
        UPDATE runs SET card = NULL;
        """,
    ),
    (
        4,
        "each run's card carries its testbed in the rule's eleven parts (the PCIe path above the drive, each "
        "control's outcome, the host's cost; unknown matches nothing): every card is made again from its bundle",
        """
        UPDATE runs SET card = NULL;
        """,
    ),
    (
        5,
        "each try at a password, counted before it is checked, per address prefix and user name",
        """
        DROP TABLE login_failures;
        CREATE TABLE login_tries (
            id bigserial PRIMARY KEY,
            prefix text NOT NULL,
            username text NOT NULL,
            at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX login_tries_prefix ON login_tries (prefix, at);
        CREATE INDEX login_tries_username ON login_tries (username, at);
        CREATE INDEX login_tries_at ON login_tries (at);
        """,
    ),
    (
        6,
        "each upload a token sends, with the length it announces, for its hourly quotas",
        """
        CREATE TABLE uploads (
            appliance_id integer NOT NULL REFERENCES appliances,
            bytes bigint NOT NULL,
            at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX uploads_appliance ON uploads (appliance_id, at);
        """,
    ),
    (
        7,
        "the appliances whose runs the bench shows (trusted: every token given before, as the bench showed their "
        "runs), and the audit log of logins, uploads and the operator's commands",
        """
        ALTER TABLE appliances ADD COLUMN trusted boolean NOT NULL DEFAULT false;
        UPDATE appliances SET trusted = true;
        CREATE TABLE audit (
            id bigserial PRIMARY KEY,
            at timestamptz NOT NULL DEFAULT now(),
            actor text NOT NULL,
            address text,
            action text NOT NULL,
            subject text,
            outcome text NOT NULL
        );
        CREATE INDEX audit_at ON audit (at);
        """,
    ),
    (
        8,
        "each run's start, which names its bundle's download without opening it (a run indexed before has none: "
        "its creation names it); the bench's models by name, for its pages and its search by the start of a name",
        """
        ALTER TABLE runs ADD COLUMN started_at double precision;
        CREATE INDEX bench_name ON bench ((lower(model) COLLATE "C"), model) INCLUDE (run_id, runs);
        """,
    ),
    (
        9,
        "each run's card carries its testbed's class as results/testbed.py now judges it (a link's speed where its "
        "maximum is unknown, the L-states read after the controls are set, the purge against what the drive "
        "offers, a class per flag's cause): every card is made again from its bundle",
        """
        UPDATE runs SET card = NULL;
        """,
    ),
    (
        10,
        "each try at a password counted per network as well (an IPv6 /48, which holds 65,536 /64s); the bytes of "
        "each appliance's bundles, for its storage quota, kept by a trigger as bundles come and go",
        """
        DELETE FROM login_tries;
        ALTER TABLE login_tries ADD COLUMN network text NOT NULL;
        CREATE INDEX login_tries_network ON login_tries (network, at);
        ALTER TABLE appliances ADD COLUMN stored_bytes bigint NOT NULL DEFAULT 0;
        UPDATE appliances a
            SET stored_bytes = coalesce((SELECT sum(bytes) FROM bundles b WHERE b.appliance_id = a.id), 0);
        CREATE FUNCTION bundles_stored() RETURNS trigger AS $$ BEGIN
            IF TG_OP = 'INSERT' THEN
                UPDATE appliances SET stored_bytes = stored_bytes + NEW.bytes WHERE id = NEW.appliance_id;
            ELSE
                UPDATE appliances SET stored_bytes = stored_bytes - OLD.bytes WHERE id = OLD.appliance_id;
            END IF;
            RETURN NULL;
        END $$ LANGUAGE plpgsql;
        CREATE TRIGGER bundles_stored AFTER INSERT OR DELETE ON bundles
            FOR EACH ROW EXECUTE FUNCTION bundles_stored();
        """,
    ),
]


def url(given=None):
    """The database's URL: --db, else $SSDBENCH_LAB_DB."""
    found = given or os.environ.get(DB_VAR)
    if not found:
        raise SsdbenchError(f"name the lab's database: --db postgresql://USER@HOST/DB, or ${DB_VAR}")
    return found


def connect(db_url):
    """A connection whose rows are dicts; its transactions are explicit (`with conn.transaction()`)."""
    try:
        import psycopg
        from psycopg.rows import dict_row
    except ImportError as exc:
        raise SsdbenchError(f"the lab needs psycopg 3 ({exc}); install it with pip install 'ssdbench[lab]'") from exc
    try:
        return psycopg.connect(db_url, row_factory=dict_row, autocommit=True)
    except psycopg.Error as exc:
        raise SsdbenchError(f"cannot reach the lab's database: {str(exc).strip().splitlines()[0]}") from exc


def reusable(conn):
    """Whether a connection can serve another request: open, not broken, and in no transaction."""
    from psycopg.pq import TransactionStatus

    return not conn.closed and not conn.broken and conn.info.transaction_status == TransactionStatus.IDLE


def database_error():
    """What psycopg raises when the database fails, to catch beside SsdbenchError."""
    try:
        import psycopg
    except ImportError:
        return SsdbenchError
    return psycopg.Error


def version(conn):
    """The schema's version: the last migration applied, 0 for an empty database."""
    exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL AS there").fetchone()["there"]
    if not exists:
        return 0
    return conn.execute("SELECT coalesce(max(version), 0) AS v FROM schema_migrations").fetchone()["v"]


def migrate(conn):
    """Apply every migration not applied yet, in one transaction, one server at a time: a migration that fails
    leaves the schema as it was. Returns the versions applied now (none when the schema is current): running it
    again changes nothing."""
    applied = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version integer PRIMARY KEY, about text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        done = {r["version"] for r in conn.execute("SELECT version FROM schema_migrations")}
        for number, about, statements in MIGRATIONS:
            if number in done:
                continue
            conn.execute(statements)
            conn.execute("INSERT INTO schema_migrations (version, about) VALUES (%s, %s)", (number, about))
            applied.append(number)
    return applied


def check_current(conn):
    """Refuse a database whose schema is behind this ssdbench (or ahead of it): `ssdbench lab migrate` first."""
    have, want = version(conn), MIGRATIONS[-1][0]
    if have != want:
        raise SsdbenchError(
            f"the lab's database is at schema version {have}, this ssdbench needs {want}: run `ssdbench lab migrate`"
            if have < want
            else f"the lab's database is at schema version {have}, newer than this ssdbench ({want}): upgrade it"
        )
