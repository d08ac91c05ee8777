#if Sync
    import Foundation
    import Logging
    import NIOCore
    import NIOPosix
    import NIOSSL
    import PostgresNIO

    /// A zone server on PostgreSQL, in schema `strata_sync`:
    ///
    /// - `zones(zone, head)`: a zone's last sequence number. A push locks
    ///   its zone's row, so a zone's changes are numbered without gaps in the
    ///   order they commit.
    /// - `changes(zone, seq, device, local_token, schema_hash, payload)`:
    ///   one row per pushed save, unique per (zone, device, local_token), so
    ///   that a retried push is recognized.
    /// - `push(...)`: the push as one function call (one round trip), which
    ///   also notifies channel `strata_sync` with the zone's name.
    ///
    /// Every statement takes the zone, device and payload as parameters:
    /// none of them reaches SQL text.
    final class PostgresZoneServer: ZoneServer {
        let configuration: SyncConfiguration
        private let logger: Logger
        private let connection = ConnectionSlot()

        init(configuration: SyncConfiguration) {
            self.configuration = configuration
            var logger = Logger(label: "strata.sync")
            logger.logLevel = .critical
            self.logger = logger
        }

        /// The connection requests use, opened on first use and again after
        /// it broke.
        private final class ConnectionSlot: @unchecked Sendable {
            // Guarded by `lock`.
            private var open: PostgresConnection?
            private let lock = NSLock()

            deinit {
                // A connection must be closed before it goes: keep it until
                // it is.
                if let open { open.close().whenComplete { _ in withExtendedLifetime(open) {} } }
            }

            func get() -> PostgresConnection? { lock.withLock { open.flatMap { $0.isClosed ? nil : $0 } } }
            func set(_ connection: PostgresConnection?) -> PostgresConnection? {
                lock.withLock {
                    let old = open
                    open = connection
                    return old
                }
            }
        }

        private func connect() async throws(SyncError) -> PostgresConnection {
            let tls: PostgresConnection.Configuration.TLS
            do {
                var settings = TLSConfiguration.makeClientConfiguration()
                switch configuration.tls {
                case .disable, .prefer, .require: settings.certificateVerification = .none
                case .verifyCA: settings.certificateVerification = .noHostnameVerification
                case .verifyFull: settings.certificateVerification = .fullVerification
                }
                if let root = configuration.rootCertificate { settings.trustRoots = .file(root) }
                switch configuration.tls {
                case .disable: tls = .disable
                case .prefer: tls = .prefer(try NIOSSLContext(configuration: settings))
                case .require, .verifyCA, .verifyFull: tls = .require(try NIOSSLContext(configuration: settings))
                }
            } catch {
                throw SyncError(.configuration, "TLS cannot be set up: \(error)")
            }
            var postgres: PostgresConnection.Configuration
            if let directory = configuration.socketDirectory {
                postgres = .init(
                    unixSocketPath: directory + "/.s.PGSQL.\(configuration.port)", username: configuration.user,
                    password: configuration.password, database: configuration.database)
            } else {
                postgres = .init(
                    host: configuration.host ?? "localhost", port: configuration.port, username: configuration.user,
                    password: configuration.password, database: configuration.database, tls: tls)
            }
            postgres.options.connectTimeout = .seconds(10)
            do {
                return try await PostgresConnection.connect(configuration: postgres, id: 1, logger: logger)
            } catch {
                throw translate(error, while: "connecting")
            }
        }

        private func requests() async throws(SyncError) -> PostgresConnection {
            if let open = connection.get() { return open }
            let made = try await connect()
            if let old = connection.set(made) { try? await old.close() }
            return made
        }

        /// Runs `body` on the request connection; a connection that broke is
        /// dropped, so the next call opens a new one.
        private func run<T: Sendable>(
            _ what: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
        ) async throws(SyncError) -> T {
            let open = try await requests()
            // A request that gets no answer within the limit fails, and its
            // connection is closed: a connection the server dropped in a way
            // postgres-nio misses must not hang sync.
            let limit = configuration.requestTimeout
            let outcome = Outcome<T>()
            let result: Result<T, any Error> = await withCheckedContinuation { continuation in
                outcome.continuation = continuation
                let work = Task {
                    do { outcome.finish(.success(try await body(open))) } catch { outcome.finish(.failure(error)) }
                }
                let timer = Task {
                    try? await Task.sleep(for: limit)
                    outcome.finish(
                        .failure(SyncError(.unreachable, "\(what) at \(configuration.serverDescription): no answer in \(limit)")))
                }
                outcome.tasks = (work, timer)
            }
            outcome.tasks?.1.cancel()
            switch result {
            case .success(let value):
                return value
            case .failure(let error):
                let translated = translate(error, while: what)
                if translated.code == .unreachable, let old = connection.set(nil) { try? await old.close() }
                throw translated
            }
        }

        /// The first of a request's answer and its time limit.
        private final class Outcome<T: Sendable>: @unchecked Sendable {
            // Guarded by `lock`.
            private var done = false
            private var pending: Result<T, any Error>?
            private var waiting: CheckedContinuation<Result<T, any Error>, Never>?
            var tasks: (Task<Void, Never>, Task<Void, Never>)? {
                get { lock.withLock { storedTasks } }
                set { lock.withLock { storedTasks = newValue } }
            }
            private var storedTasks: (Task<Void, Never>, Task<Void, Never>)?
            private let lock = NSLock()

            var continuation: CheckedContinuation<Result<T, any Error>, Never>? {
                get { lock.withLock { waiting } }
                set {
                    let ready: Result<T, any Error>? = lock.withLock {
                        waiting = newValue
                        return pending
                    }
                    if let ready, let newValue {
                        lock.withLock { waiting = nil }
                        newValue.resume(returning: ready)
                    }
                }
            }

            func finish(_ result: Result<T, any Error>) {
                let resume: CheckedContinuation<Result<T, any Error>, Never>? = lock.withLock {
                    guard !done else { return nil }
                    done = true
                    if let waiting {
                        self.waiting = nil
                        return waiting
                    }
                    pending = result
                    return nil
                }
                resume?.resume(returning: result)
            }
        }

        /// A sync error for `error`, with the server's message but never
        /// the password or the statement's parameters.
        func translate(_ error: any Error, while what: String) -> SyncError {
            if let error = error as? SyncError { return error }
            if let transaction = error as? PostgresTransactionError,
                let inner = transaction.closureError ?? transaction.beginError ?? transaction.commitError
            {
                return translate(inner, while: what)
            }
            let server = configuration.serverDescription
            guard let psql = error as? PSQLError else {
                return SyncError(.unreachable, "\(what) at \(server): \(type(of: error))")
            }
            if let info = psql.serverInfo {
                let state = info[.sqlState] ?? ""
                let message = info[.message] ?? "no message"
                if state.hasPrefix("28") {
                    return SyncError(.authentication, "the server at \(server) refused the login: \(message)")
                }
                if state == "57P01" || state == "57P02" || state == "57P03" {
                    return SyncError(.unreachable, "the server at \(server) is shutting down or starting: \(message)")
                }
                return SyncError(.server, "\(what) at \(server): \(message) (SQLSTATE \(state))")
            }
            switch psql.code {
            case .authMechanismRequiresPassword, .unsupportedAuthMechanism, .saslError:
                return SyncError(.authentication, "the server at \(server) refused the login (\(psql.code))")
            default:
                // A TLS refusal (an untrusted certificate) is under it.
                if let tls = psql.underlying as? NIOSSLError {
                    return SyncError(.unreachable, "\(what) at \(server): TLS failed: \(tls)")
                }
                return SyncError(.unreachable, "\(what) at \(server): \(psql.code)")
            }
        }

        func prepare() async throws(SyncError) {
            try await run("creating the strata_sync schema") { [logger] connection in
                _ = try await connection.withTransaction(logger: logger) { connection in
                    // Devices starting at once create the tables one at a
                    // time.
                    try await connection.query("SELECT pg_advisory_xact_lock(7471203853)", logger: logger)
                    for statement in Self.schema {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                }
            }
        }

        static let schema = [
            "CREATE SCHEMA IF NOT EXISTS strata_sync",
            """
            CREATE TABLE IF NOT EXISTS strata_sync.zones (
                zone text PRIMARY KEY,
                head bigint NOT NULL DEFAULT 0,
                created_at timestamptz NOT NULL DEFAULT now())
            """,
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
            """,
            "ALTER TABLE strata_sync.zones ADD COLUMN IF NOT EXISTS trimmed bigint NOT NULL DEFAULT 0",
            """
            CREATE TABLE IF NOT EXISTS strata_sync.snapshots (
                zone text NOT NULL REFERENCES strata_sync.zones (zone),
                through bigint NOT NULL,
                part integer NOT NULL,
                payload bytea NOT NULL,
                PRIMARY KEY (zone, through, part))
            """,
            """
            CREATE TABLE IF NOT EXISTS strata_sync.schemas (
                zone text NOT NULL REFERENCES strata_sync.zones (zone),
                hash text NOT NULL,
                description text NOT NULL,
                registered_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (zone, hash))
            """,
            """
            CREATE OR REPLACE FUNCTION strata_sync.push(
                p_zone text, p_device uuid, p_token bigint, p_expected bigint, p_schema text, p_payload bytea,
                OUT r_outcome text, OUT r_seq bigint)
            LANGUAGE plpgsql AS $$
            DECLARE
                v_head bigint;
                v_seq bigint;
            BEGIN
                INSERT INTO strata_sync.zones AS z (zone) VALUES (p_zone) ON CONFLICT DO NOTHING;
                SELECT z.head INTO v_head FROM strata_sync.zones AS z WHERE z.zone = p_zone FOR UPDATE;
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
                PERFORM pg_notify('strata_sync', p_zone);
                r_outcome := 'appended';
                r_seq := v_seq;
            END
            $$
            """,
        ]

        func push(zone: String, device: [UInt8], token: Int64, expected: Int64, schema: String, payload: [UInt8])
            async throws(SyncError) -> PushOutcome
        {
            let uuid = Self.uuid(device)
            let data = Data(payload)
            let rows = try await run("pushing a save") { [logger] connection in
                var result: [(String, Int64)] = []
                let stream = try await connection.query(
                    "SELECT r_outcome, r_seq FROM strata_sync.push(\(zone), \(uuid), \(token), \(expected), \(schema), \(data))",
                    logger: logger)
                for try await (outcome, seq) in stream.decode((String, Int64).self) { result.append((outcome, seq)) }
                return result
            }
            guard let (outcome, seq) = rows.first else { throw SyncError(.server, "the push returned no row") }
            switch outcome {
            case "appended": return .appended(seq: seq)
            case "behind": return .behind(head: seq)
            case "duplicate": return .duplicate(seq: seq)
            default: throw SyncError(.server, "the push returned outcome \(outcome)")
            }
        }

        func register(zone: String, hash: String, description: String, accept: @escaping @Sendable ([String]) throws -> Void)
            async throws(SyncError) -> [String]
        {
            try await run("recording the schema") { [logger] connection in
                try await connection.withTransaction(logger: logger) { connection in
                    // One device at a time: two incompatible schemas
                    // registering at once cannot both get in.
                    try await connection.query(
                        "INSERT INTO strata_sync.zones (zone) VALUES (\(zone)) ON CONFLICT DO NOTHING", logger: logger)
                    try await connection.query(
                        "SELECT head FROM strata_sync.zones WHERE zone = \(zone) FOR UPDATE", logger: logger)
                    var descriptions: [String] = []
                    var known = false
                    let stream = try await connection.query(
                        "SELECT hash, description FROM strata_sync.schemas WHERE zone = \(zone) ORDER BY registered_at",
                        logger: logger)
                    for try await (stored, description) in stream.decode((String, String).self) {
                        if stored == hash { known = true } else { descriptions.append(description) }
                    }
                    try accept(descriptions)
                    if !known {
                        try await connection.query(
                            """
                            INSERT INTO strata_sync.schemas (zone, hash, description)
                            VALUES (\(zone), \(hash), \(description))
                            """, logger: logger)
                    }
                    return descriptions
                }
            }
        }

        func head(zone: String) async throws(SyncError) -> ZoneHead {
            try await run("reading the zone's head") { [logger] connection in
                let stream = try await connection.query(
                    "SELECT head, trimmed FROM strata_sync.zones WHERE zone = \(zone)", logger: logger)
                var head = ZoneHead(head: 0, trimmed: 0)
                for try await (last, trimmed) in stream.decode((Int64, Int64).self) {
                    head = ZoneHead(head: last, trimmed: trimmed)
                }
                return head
            }
        }

        func snapshotPart(zone: String, through: Int64, part: Int) async throws(SyncError) -> [UInt8]? {
            try await run("reading the zone's snapshot") { [logger] connection in
                let stream = try await connection.query(
                    """
                    SELECT payload FROM strata_sync.snapshots
                    WHERE zone = \(zone) AND through = \(through) AND part = \(Int32(clamping: part))
                    """, logger: logger)
                var payload: [UInt8]?
                for try await value in stream.decode(Data.self) { payload = Array(value) }
                return payload
            }
        }

        func trim(zone: String, through: Int64, parts: [[UInt8]]) async throws(SyncError) -> Bool {
            try await run("trimming the zone's changes") { [logger] connection in
                try await connection.withTransaction(logger: logger) { connection in
                    let stream = try await connection.query(
                        "SELECT head, trimmed FROM strata_sync.zones WHERE zone = \(zone) FOR UPDATE", logger: logger)
                    var current: (Int64, Int64)?
                    for try await row in stream.decode((Int64, Int64).self) { current = row }
                    guard let (head, trimmed) = current, through <= head, through > trimmed else { return false }
                    try await connection.query("DELETE FROM strata_sync.snapshots WHERE zone = \(zone)", logger: logger)
                    for (index, part) in parts.enumerated() {
                        let data = Data(part)
                        try await connection.query(
                            """
                            INSERT INTO strata_sync.snapshots (zone, through, part, payload)
                            VALUES (\(zone), \(through), \(Int32(index)), \(data))
                            """, logger: logger)
                    }
                    try await connection.query(
                        """
                        UPDATE strata_sync.changes SET payload = '\\x'::bytea
                        WHERE zone = \(zone) AND seq <= \(through) AND seq > \(trimmed)
                        """, logger: logger)
                    try await connection.query(
                        "UPDATE strata_sync.zones SET trimmed = \(through) WHERE zone = \(zone)", logger: logger)
                    return true
                }
            }
        }

        func pull(zone: String, after: Int64, limit: Int) async throws(SyncError) -> [ServerChange] {
            try await run("pulling changes") { [logger] connection in
                var changes: [ServerChange] = []
                let stream = try await connection.query(
                    """
                    SELECT seq, device, local_token, payload, schema_hash FROM strata_sync.changes
                    WHERE zone = \(zone) AND seq > \(after) ORDER BY seq LIMIT \(Int64(limit))
                    """, logger: logger)
                for try await (seq, device, token, payload, schema) in stream.decode(
                    (Int64, UUID, Int64, Data, String).self)
                {
                    changes.append(
                        ServerChange(
                            seq: seq, device: withUnsafeBytes(of: device.uuid) { Array($0) }, token: token,
                            payload: Array(payload), schema: schema))
                }
                return changes
            }
        }

        func listen(zone: String, wake: @escaping @Sendable () -> Void) async throws(SyncError) {
            let listener = try await connect()
            do {
                try await listener.listen(on: "strata_sync") { notifications in
                    wake()  // listening: whatever came before is pulled now
                    for try await notification in notifications where notification.payload == zone { wake() }
                }
                try? await listener.close()
            } catch {
                try? await listener.close()
                if Task.isCancelled { return }
                throw translate(error, while: "listening for changes")
            }
        }

        func close() async {
            if let open = connection.set(nil) { try? await open.close() }
        }

        static func uuid(_ bytes: [UInt8]) -> UUID {
            UUID(
                uuid: (
                    bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                    bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
                ))
        }
    }
#endif
