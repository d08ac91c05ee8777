import Foundation

/// The server's layout: schema `strata_sync`, installed and upgraded by an
/// operator (``SyncServer/install()``, `strata sync-server install`), never
/// by devices.
///
/// Devices hold no right on its tables. Everything they do goes through
/// the `SECURITY DEFINER` functions below, which run as the role that
/// installed them and check, on every call, that the *login* role
/// (`session_user`, which `SET ROLE` cannot change) may do it:
///
/// - `zones(zone, owner, head, trimmed, channel)`: a zone belongs to the
///   role that created it (its first push, or its first device's
///   registration); members of that role are its owners.
/// - `access(zone, role, writable)`: the roles a zone is shared with, by
///   its owner (`grant_access`, `revoke_access`). Membership counts: a
///   zone shared with a group role is shared with its members.
/// - `changes`, `snapshots`, `schemas`: a zone's changes, its snapshot and
///   its devices' schemas, reached only through the functions.
/// - `parts(zone, digest, part)`: the zone's `.externalStorage` values, in
///   parts, each value once per zone by its SHA-256 (`put_parts` by a role
///   that may write the zone, `parts` by one that may read it). Each zone
///   has its own: a role learns nothing of another zone's values, not even
///   whether one holds a value it knows.
/// - `devices(device, role, zone)`: each device belongs to the role that
///   pushed from it first, and to that push's zone (a store that leaves
///   its zone, or joins it again, takes a new device identifier), so no
///   role can push in another role's device's name, nor replay a device's
///   saves of one zone into another.
/// - `changes.set_aside_*`: a change that a device could not read, set
///   aside by a device whose role may write the zone (`set_aside`): every
///   device then moves past it unread, and the operator lists it
///   (`set_aside_changes`). A role that may only read the zone cannot set
///   a change aside (it could hide other roles' changes from everyone);
///   its devices move past it on their own.
///
/// A role reading a zone it has no right to gets SQLSTATE 42501
/// (``SyncError/Code/forbidden``); a zone no one created reads as empty.
/// Notifications go to a channel named after a random key of the zone,
/// which only roles that may read it can learn (`channel(zone)`), and
/// carry no payload: a role listening on any other channel hears nothing.
enum ServerLayout {
    /// The layout this StrataSync installs and talks to. Version 1 was the
    /// layout devices created themselves (no owners, no functions but
    /// `push`); version 2 had no set-aside changes, version 3 no external
    /// values' parts. An install upgrades each.
    static let version = 4

    /// What is there: whether the layout's version table and version 1's
    /// tables exist.
    static let probe = """
        SELECT to_regclass('strata_sync.layout') IS NOT NULL, to_regclass('strata_sync.zones') IS NOT NULL
        """

    /// The installed version, once ``probe`` found the table.
    static let installedVersion = "SELECT max(version) FROM strata_sync.layout"

    /// The schema, its tables and their rights.
    private static let tables: [(what: String, sql: String)] = [
        ("schema strata_sync", "CREATE SCHEMA IF NOT EXISTS strata_sync"),
        (
            "table layout",
            """
            CREATE TABLE IF NOT EXISTS strata_sync.layout (
                version integer NOT NULL,
                installed_at timestamptz NOT NULL DEFAULT now(),
                installed_by name NOT NULL DEFAULT session_user)
            """
        ),
        (
            "table zones",
            """
            CREATE TABLE IF NOT EXISTS strata_sync.zones (
                zone text PRIMARY KEY,
                head bigint NOT NULL DEFAULT 0,
                created_at timestamptz NOT NULL DEFAULT now())
            """
        ),
        ("zones.trimmed", "ALTER TABLE strata_sync.zones ADD COLUMN IF NOT EXISTS trimmed bigint NOT NULL DEFAULT 0"),
        ("zones.owner", "ALTER TABLE strata_sync.zones ADD COLUMN IF NOT EXISTS owner name"),
        (
            "zones.channel",
            """
            ALTER TABLE strata_sync.zones ADD COLUMN IF NOT EXISTS channel text NOT NULL
                DEFAULT replace(gen_random_uuid()::text, '-', '')
            """
        ),
        (
            "owners of version 1's zones: the role that created its tables",
            """
            UPDATE strata_sync.zones SET owner = (
                SELECT tableowner FROM pg_catalog.pg_tables WHERE schemaname = 'strata_sync' AND tablename = 'zones')
            WHERE owner IS NULL
            """
        ),
        ("zones.owner not null", "ALTER TABLE strata_sync.zones ALTER COLUMN owner SET NOT NULL"),
        (
            "table changes",
            """
            CREATE TABLE IF NOT EXISTS strata_sync.changes (
                zone text NOT NULL REFERENCES strata_sync.zones (zone),
                seq bigint NOT NULL,
                device uuid NOT NULL,
                local_token bigint NOT NULL,
                schema_hash text NOT NULL,
                payload bytea NOT NULL,
                pushed_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (zone, seq),
                UNIQUE (zone, device, local_token))
            """
        ),
        ("changes.set_aside_code", "ALTER TABLE strata_sync.changes ADD COLUMN IF NOT EXISTS set_aside_code text"),
        ("changes.set_aside_reason", "ALTER TABLE strata_sync.changes ADD COLUMN IF NOT EXISTS set_aside_reason text"),
        ("changes.set_aside_by", "ALTER TABLE strata_sync.changes ADD COLUMN IF NOT EXISTS set_aside_by name"),
        ("changes.set_aside_at", "ALTER TABLE strata_sync.changes ADD COLUMN IF NOT EXISTS set_aside_at timestamptz"),
        (
            "table snapshots",
            """
            CREATE TABLE IF NOT EXISTS strata_sync.snapshots (
                zone text NOT NULL REFERENCES strata_sync.zones (zone),
                through bigint NOT NULL,
                part integer NOT NULL,
                payload bytea NOT NULL,
                PRIMARY KEY (zone, through, part))
            """
        ),
        (
            "table schemas",
            """
            CREATE TABLE IF NOT EXISTS strata_sync.schemas (
                zone text NOT NULL REFERENCES strata_sync.zones (zone),
                hash text NOT NULL,
                description text NOT NULL,
                registered_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (zone, hash))
            """
        ),
        (
            "table parts",
            """
            CREATE TABLE IF NOT EXISTS strata_sync.parts (
                zone text NOT NULL REFERENCES strata_sync.zones (zone),
                digest bytea NOT NULL,
                part integer NOT NULL,
                payload bytea NOT NULL,
                PRIMARY KEY (zone, digest, part))
            """
        ),
        (
            "table access",
            """
            CREATE TABLE IF NOT EXISTS strata_sync.access (
                zone text NOT NULL REFERENCES strata_sync.zones (zone),
                role name NOT NULL,
                writable boolean NOT NULL,
                PRIMARY KEY (zone, role))
            """
        ),
        (
            "table devices",
            """
            CREATE TABLE IF NOT EXISTS strata_sync.devices (
                device uuid PRIMARY KEY,
                role name NOT NULL)
            """
        ),
        ("devices.zone", "ALTER TABLE strata_sync.devices ADD COLUMN IF NOT EXISTS zone text"),
        (
            "zones of version 3's devices: where each pushed",
            """
            UPDATE strata_sync.devices AS d SET zone = (
                SELECT c.zone FROM strata_sync.changes AS c WHERE c.device = d.device ORDER BY c.pushed_at LIMIT 1)
            WHERE d.zone IS NULL
            """
        ),
        // Version 1's tables and schema belonged to a device role; its
        // `push` notified every listener of every zone's name.
        ("owner of the schema", "ALTER SCHEMA strata_sync OWNER TO CURRENT_USER"),
        ("owner of the tables", ownTables),
        ("version 1's push", "DROP FUNCTION IF EXISTS strata_sync.push(text, uuid, bigint, bigint, text, bytea)"),
        // Version 2's `pull` returned no set-aside columns (a function's
        // result type cannot be replaced, only dropped and created).
        ("pull's columns", "DROP FUNCTION IF EXISTS strata_sync.pull(text, bigint, bigint)"),
        ("no rights on the tables", "REVOKE ALL ON ALL TABLES IN SCHEMA strata_sync FROM PUBLIC"),
        ("no rights on the schema but its use", "REVOKE ALL ON SCHEMA strata_sync FROM PUBLIC"),
        ("use of the schema", "GRANT USAGE ON SCHEMA strata_sync TO PUBLIC"),
    ]

    /// What an install runs, in order, in one transaction; each statement
    /// is idempotent, so an install over an installed layout changes
    /// nothing but the functions' text.
    static var install: [(what: String, sql: String)] {
        var steps = tables
        for function in functions { steps.append(("function \(function.name)", function.sql)) }
        steps.append(("no function for everyone", "REVOKE ALL ON ALL FUNCTIONS IN SCHEMA strata_sync FROM PUBLIC"))
        for function in functions where function.forDevices {
            steps.append(("devices call \(function.name)", "GRANT EXECUTE ON FUNCTION \(function.signature) TO PUBLIC"))
        }
        steps.append(("layout version \(version)", "DELETE FROM strata_sync.layout"))
        steps.append(("", "INSERT INTO strata_sync.layout (version) VALUES (\(version))"))
        return steps
    }

    /// Gives every table of the schema to the installing role.
    private static let ownTables = """
        DO $$
        DECLARE t record;
        BEGIN
            FOR t IN SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = 'strata_sync' LOOP
                EXECUTE format('ALTER TABLE strata_sync.%I OWNER TO CURRENT_USER', t.tablename);
            END LOOP;
        END
        $$
        """

    struct Function {
        let name: String
        /// The name with its argument types, for `GRANT`.
        let signature: String
        /// Whether every role may call it (it checks access itself).
        let forDevices: Bool
        let sql: String
    }

    /// The head of every function: it runs as the installing role, with a
    /// search path no caller can put objects in.
    private static func definer(_ head: String, returns: String, body: String) -> String {
        """
        CREATE OR REPLACE FUNCTION \(head) RETURNS \(returns)
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
        \(body)
        $fn$
        """
    }

    static let functions: [Function] = [
        Function(
            name: "layout_version", signature: "strata_sync.layout_version()", forDevices: true,
            sql: definer(
                "strata_sync.layout_version()", returns: "integer",
                body: "BEGIN RETURN (SELECT max(version) FROM strata_sync.layout); END")),
        Function(
            name: "member_of", signature: "strata_sync.member_of(name)", forDevices: false,
            sql: definer(
                "strata_sync.member_of(p_role name)", returns: "boolean",
                body: """
                    BEGIN
                        -- A role dropped since: nobody is its member.
                        IF p_role IS NULL OR NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role) THEN
                            RETURN false;
                        END IF;
                        RETURN pg_has_role(session_user, p_role, 'MEMBER');
                    END
                    """)),
        Function(
            name: "access_level", signature: "strata_sync.access_level(text)", forDevices: false,
            sql: definer(
                "strata_sync.access_level(p_zone text)", returns: "text",
                body: """
                    DECLARE
                        v_owner name;
                        v_writable boolean;
                        r record;
                    BEGIN
                        SELECT z.owner INTO v_owner FROM strata_sync.zones AS z WHERE z.zone = p_zone;
                        IF NOT FOUND THEN RETURN 'absent'; END IF;
                        IF strata_sync.member_of(v_owner) THEN RETURN 'owner'; END IF;
                        FOR r IN SELECT a.role, a.writable FROM strata_sync.access AS a WHERE a.zone = p_zone LOOP
                            IF strata_sync.member_of(r.role) THEN
                                v_writable := coalesce(v_writable, false) OR r.writable;
                            END IF;
                        END LOOP;
                        IF v_writable IS NULL THEN RETURN 'none'; END IF;
                        RETURN CASE WHEN v_writable THEN 'write' ELSE 'read' END;
                    END
                    """)),
        Function(
            name: "require", signature: "strata_sync.require(text, boolean, boolean)", forDevices: false,
            sql: definer(
                "strata_sync.require(p_zone text, p_write boolean, p_create boolean)", returns: "text",
                body: """
                    DECLARE
                        v_level text := strata_sync.access_level(p_zone);
                    BEGIN
                        IF v_level = 'absent' AND p_create THEN
                            INSERT INTO strata_sync.zones (zone, owner) VALUES (p_zone, session_user)
                                ON CONFLICT DO NOTHING;
                            v_level := strata_sync.access_level(p_zone);
                        END IF;
                        IF v_level = 'absent' AND NOT p_write THEN RETURN v_level; END IF;
                        IF v_level IN ('absent', 'none') OR (p_write AND v_level = 'read') THEN
                            RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format(
                                'role %s may not %s zone %s', session_user,
                                CASE WHEN p_write THEN 'write' ELSE 'read' END, p_zone);
                        END IF;
                        RETURN v_level;
                    END
                    """)),
        Function(
            name: "push", signature: "strata_sync.push(text, uuid, bigint, bigint, text, bytea)", forDevices: true,
            sql: definer(
                """
                strata_sync.push(
                    p_zone text, p_device uuid, p_token bigint, p_expected bigint, p_schema text, p_payload bytea,
                    OUT r_outcome text, OUT r_seq bigint)
                """, returns: "record",
                body: """
                    DECLARE
                        v_head bigint;
                        v_seq bigint;
                        v_channel text;
                        v_role name;
                        v_device_zone text;
                    BEGIN
                        PERFORM strata_sync.require(p_zone, true, true);
                        INSERT INTO strata_sync.devices AS d (device, role, zone) VALUES (p_device, session_user, p_zone)
                            ON CONFLICT DO NOTHING;
                        SELECT d.role, d.zone INTO v_role, v_device_zone FROM strata_sync.devices AS d
                            WHERE d.device = p_device;
                        IF v_role <> session_user THEN
                            RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format(
                                'role %s may not push as device %s: it belongs to role %s', session_user, p_device, v_role);
                        END IF;
                        IF v_device_zone IS NULL THEN
                            UPDATE strata_sync.devices AS d SET zone = p_zone WHERE d.device = p_device;
                        ELSIF v_device_zone <> p_zone THEN
                            RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format(
                                'device %s may not push to zone %s: it pushes to another zone', p_device, p_zone);
                        END IF;
                        SELECT z.head, z.channel INTO v_head, v_channel FROM strata_sync.zones AS z
                            WHERE z.zone = p_zone FOR UPDATE;
                        SELECT c.seq INTO v_seq FROM strata_sync.changes AS c
                            WHERE c.zone = p_zone AND c.device = p_device AND c.local_token = p_token;
                        IF FOUND THEN
                            r_outcome := 'duplicate';
                            r_seq := v_seq;
                            RETURN;
                        END IF;
                        IF v_head <> p_expected THEN
                            r_outcome := 'behind';
                            r_seq := v_head;
                            RETURN;
                        END IF;
                        v_seq := v_head + 1;
                        INSERT INTO strata_sync.changes AS c (zone, seq, device, local_token, schema_hash, payload)
                            VALUES (p_zone, v_seq, p_device, p_token, p_schema, p_payload);
                        UPDATE strata_sync.zones AS z SET head = v_seq WHERE z.zone = p_zone;
                        PERFORM pg_notify('strata_sync_' || v_channel, '');
                        r_outcome := 'appended';
                        r_seq := v_seq;
                    END
                    """)),
        Function(
            name: "lock_schemas", signature: "strata_sync.lock_schemas(text)", forDevices: true,
            sql: definer(
                "strata_sync.lock_schemas(p_zone text)",
                returns: "TABLE (r_hash text, r_description text, r_writable boolean)",
                body: """
                    DECLARE
                        v_level text := strata_sync.require(p_zone, false, true);
                    BEGIN
                        -- Held to the caller's commit: one device registers at a time.
                        PERFORM 1 FROM strata_sync.zones AS z WHERE z.zone = p_zone FOR UPDATE;
                        RETURN QUERY SELECT s.hash, s.description, v_level IN ('owner', 'write')
                            FROM strata_sync.schemas AS s WHERE s.zone = p_zone ORDER BY s.registered_at;
                        IF NOT FOUND THEN
                            RETURN QUERY SELECT NULL::text, NULL::text, v_level IN ('owner', 'write');
                        END IF;
                    END
                    """)),
        Function(
            name: "add_schema", signature: "strata_sync.add_schema(text, text, text)", forDevices: true,
            sql: definer(
                "strata_sync.add_schema(p_zone text, p_hash text, p_description text)", returns: "void",
                body: """
                    BEGIN
                        PERFORM strata_sync.require(p_zone, true, false);
                        INSERT INTO strata_sync.schemas AS s (zone, hash, description)
                            VALUES (p_zone, p_hash, p_description) ON CONFLICT DO NOTHING;
                    END
                    """)),
        Function(
            name: "head", signature: "strata_sync.head(text)", forDevices: true,
            sql: definer(
                "strata_sync.head(p_zone text)", returns: "TABLE (r_head bigint, r_trimmed bigint)",
                body: """
                    BEGIN
                        PERFORM strata_sync.require(p_zone, false, false);
                        RETURN QUERY SELECT z.head, z.trimmed FROM strata_sync.zones AS z WHERE z.zone = p_zone;
                    END
                    """)),
        Function(
            name: "pull", signature: "strata_sync.pull(text, bigint, bigint)", forDevices: true,
            sql: definer(
                "strata_sync.pull(p_zone text, p_after bigint, p_limit bigint)",
                returns: """
                    TABLE (r_seq bigint, r_device uuid, r_token bigint, r_payload bytea, r_schema text,
                        r_set_aside_code text, r_set_aside_reason text)
                    """,
                body: """
                    BEGIN
                        PERFORM strata_sync.require(p_zone, false, false);
                        -- A set-aside change is sent without its payload (a
                        -- trimmed one, whose payload is gone, as trimmed).
                        RETURN QUERY SELECT c.seq, c.device, c.local_token,
                                CASE WHEN c.set_aside_code IS NULL THEN c.payload ELSE '\\x'::bytea END,
                                c.schema_hash,
                                CASE WHEN c.payload = '\\x'::bytea THEN NULL ELSE c.set_aside_code END,
                                CASE WHEN c.payload = '\\x'::bytea THEN NULL ELSE c.set_aside_reason END
                            FROM strata_sync.changes AS c WHERE c.zone = p_zone AND c.seq > p_after
                            ORDER BY c.seq LIMIT p_limit;
                    END
                    """)),
        Function(
            name: "set_aside", signature: "strata_sync.set_aside(text, bigint, text, text)", forDevices: true,
            sql: definer(
                "strata_sync.set_aside(p_zone text, p_seq bigint, p_code text, p_reason text)", returns: "boolean",
                body: """
                    BEGIN
                        PERFORM strata_sync.require(p_zone, true, false);
                        -- The first device's reason stays.
                        UPDATE strata_sync.changes AS c SET set_aside_code = p_code, set_aside_reason = p_reason,
                                set_aside_by = session_user, set_aside_at = now()
                            WHERE c.zone = p_zone AND c.seq = p_seq AND c.set_aside_code IS NULL;
                        RETURN FOUND;
                    END
                    """)),
        Function(
            name: "set_aside_changes", signature: "strata_sync.set_aside_changes(text)", forDevices: true,
            sql: definer(
                "strata_sync.set_aside_changes(p_zone text)",
                returns: """
                    TABLE (r_zone text, r_seq bigint, r_device uuid, r_code text, r_reason text, r_by name,
                        r_at timestamptz)
                    """,
                body: """
                    BEGIN
                        -- One zone the caller may read, or every zone it may.
                        IF p_zone IS NOT NULL THEN PERFORM strata_sync.require(p_zone, false, false); END IF;
                        RETURN QUERY SELECT c.zone, c.seq, c.device, c.set_aside_code, c.set_aside_reason,
                                c.set_aside_by, c.set_aside_at
                            FROM strata_sync.changes AS c
                            WHERE c.set_aside_code IS NOT NULL AND (c.zone = p_zone OR p_zone IS NULL)
                                AND strata_sync.access_level(c.zone) IN ('owner', 'write', 'read')
                            ORDER BY c.zone, c.seq;
                    END
                    """)),
        Function(
            name: "snapshot_part", signature: "strata_sync.snapshot_part(text, bigint, integer)", forDevices: true,
            sql: definer(
                "strata_sync.snapshot_part(p_zone text, p_through bigint, p_part integer)", returns: "bytea",
                body: """
                    BEGIN
                        PERFORM strata_sync.require(p_zone, false, false);
                        RETURN (SELECT s.payload FROM strata_sync.snapshots AS s
                            WHERE s.zone = p_zone AND s.through = p_through AND s.part = p_part);
                    END
                    """)),
        Function(
            name: "trim", signature: "strata_sync.trim(text, bigint, bytea[])", forDevices: true,
            sql: definer(
                "strata_sync.trim(p_zone text, p_through bigint, p_parts bytea[])", returns: "boolean",
                body: """
                    DECLARE
                        v_head bigint;
                        v_trimmed bigint;
                    BEGIN
                        PERFORM strata_sync.require(p_zone, true, false);
                        SELECT z.head, z.trimmed INTO v_head, v_trimmed FROM strata_sync.zones AS z
                            WHERE z.zone = p_zone FOR UPDATE;
                        IF NOT FOUND OR p_through > v_head OR p_through <= v_trimmed THEN RETURN false; END IF;
                        DELETE FROM strata_sync.snapshots AS s WHERE s.zone = p_zone;
                        INSERT INTO strata_sync.snapshots (zone, through, part, payload)
                            SELECT p_zone, p_through, (part.n - 1)::integer, part.payload
                            FROM unnest(p_parts) WITH ORDINALITY AS part (payload, n);
                        UPDATE strata_sync.changes AS c SET payload = '\\x'::bytea
                            WHERE c.zone = p_zone AND c.seq <= p_through AND c.seq > v_trimmed;
                        UPDATE strata_sync.zones AS z SET trimmed = p_through WHERE z.zone = p_zone;
                        RETURN true;
                    END
                    """)),
        Function(
            name: "missing_parts", signature: "strata_sync.missing_parts(text, bytea[], integer[])", forDevices: true,
            sql: definer(
                "strata_sync.missing_parts(p_zone text, p_digests bytea[], p_counts integer[])",
                returns: "TABLE (r_digest bytea, r_part integer)",
                body: """
                    BEGIN
                        PERFORM strata_sync.require(p_zone, true, true);
                        RETURN QUERY SELECT v.digest, n.part::integer
                            FROM unnest(p_digests, p_counts) AS v (digest, count)
                            CROSS JOIN LATERAL generate_series(0, v.count - 1) AS n (part)
                            WHERE NOT EXISTS (SELECT 1 FROM strata_sync.parts AS p
                                WHERE p.zone = p_zone AND p.digest = v.digest AND p.part = n.part)
                            ORDER BY 1, 2;
                    END
                    """)),
        Function(
            name: "put_parts", signature: "strata_sync.put_parts(text, bytea[], integer[], bytea[])", forDevices: true,
            sql: definer(
                "strata_sync.put_parts(p_zone text, p_digests bytea[], p_parts integer[], p_payloads bytea[])",
                returns: "void",
                body: """
                    BEGIN
                        PERFORM strata_sync.require(p_zone, true, true);
                        -- The first upload of a part stays: readers check the
                        -- value against its digest, and a damaged part is
                        -- for the operator to delete.
                        INSERT INTO strata_sync.parts AS p (zone, digest, part, payload)
                            SELECT p_zone, v.digest, v.part, v.payload
                            FROM unnest(p_digests, p_parts, p_payloads) AS v (digest, part, payload)
                            ON CONFLICT DO NOTHING;
                    END
                    """)),
        Function(
            name: "parts", signature: "strata_sync.parts(text, bytea[], integer[])", forDevices: true,
            sql: definer(
                "strata_sync.parts(p_zone text, p_digests bytea[], p_parts integer[])",
                returns: "TABLE (r_digest bytea, r_part integer, r_payload bytea)",
                body: """
                    BEGIN
                        PERFORM strata_sync.require(p_zone, false, false);
                        RETURN QUERY SELECT p.digest, p.part, p.payload
                            FROM unnest(p_digests, p_parts) AS v (digest, part)
                            JOIN strata_sync.parts AS p ON p.zone = p_zone AND p.digest = v.digest AND p.part = v.part;
                    END
                    """)),
        Function(
            name: "channel", signature: "strata_sync.channel(text)", forDevices: true,
            sql: definer(
                "strata_sync.channel(p_zone text)", returns: "text",
                body: """
                    BEGIN
                        PERFORM strata_sync.require(p_zone, false, false);
                        RETURN (SELECT 'strata_sync_' || z.channel FROM strata_sync.zones AS z WHERE z.zone = p_zone);
                    END
                    """)),
        Function(
            name: "grant_access", signature: "strata_sync.grant_access(text, name, boolean)", forDevices: true,
            sql: definer(
                "strata_sync.grant_access(p_zone text, p_role name, p_writable boolean)", returns: "text",
                body: """
                    DECLARE
                        v_level text := strata_sync.access_level(p_zone);
                    BEGIN
                        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role) THEN
                            RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('role %s does not exist', p_role);
                        END IF;
                        IF v_level = 'absent' THEN
                            INSERT INTO strata_sync.zones (zone, owner) VALUES (p_zone, session_user)
                                ON CONFLICT DO NOTHING;
                            v_level := strata_sync.access_level(p_zone);
                        END IF;
                        IF v_level <> 'owner' THEN
                            RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format(
                                'role %s may not share zone %s: only its owner does', session_user, p_zone);
                        END IF;
                        INSERT INTO strata_sync.access AS a (zone, role, writable) VALUES (p_zone, p_role, p_writable)
                            ON CONFLICT (zone, role) DO UPDATE SET writable = excluded.writable;
                        RETURN (SELECT z.owner FROM strata_sync.zones AS z WHERE z.zone = p_zone);
                    END
                    """)),
        Function(
            name: "revoke_access", signature: "strata_sync.revoke_access(text, name)", forDevices: true,
            sql: definer(
                "strata_sync.revoke_access(p_zone text, p_role name)", returns: "boolean",
                body: """
                    BEGIN
                        IF strata_sync.access_level(p_zone) <> 'owner' THEN
                            RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format(
                                'role %s may not share zone %s: only its owner does', session_user, p_zone);
                        END IF;
                        DELETE FROM strata_sync.access AS a WHERE a.zone = p_zone AND a.role = p_role;
                        RETURN FOUND;
                    END
                    """)),
    ]
}
