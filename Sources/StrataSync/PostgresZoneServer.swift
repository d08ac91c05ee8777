#if Sync
    import Foundation
    import Logging
    import NIOCore
    import NIOPosix
    import NIOSSL
    import PostgresNIO

    /// A zone server on PostgreSQL, in schema `strata_sync`, whose layout
    /// (``ServerLayout``) an operator installs: every request calls one of
    /// its functions, which check the login role's access to the zone.
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
            /// Keeps `connection` unless an open one is there already
            /// (two requests that found none both connected): returns the
            /// one to use.
            func adopt(_ connection: PostgresConnection) -> (use: PostgresConnection, spare: PostgresConnection?) {
                lock.withLock {
                    if let open, !open.isClosed { return (open, connection) }
                    let old = open
                    open = connection
                    return (connection, old)
                }
            }

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
            // Another request may have connected meanwhile: the first
            // connection stays, and the other is closed (closing the one in
            // use would leave its request waiting for its time limit).
            let (use, spare) = connection.adopt(try await connect())
            if let spare { try? await spare.close() }
            return use
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
                if state == "42501" {
                    return SyncError(.forbidden, "\(what) at \(server): \(message)")
                }
                if state == "3F000" || state == "42883" || state == "42P01" {
                    return SyncError(
                        .serverLayout,
                        "\(what) at \(server): the server has no strata_sync layout of version \(ServerLayout.version) "
                            + "(\(message)); an operator installs it with `strata sync-server install --url URL`")
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
            let version = try await run("checking the server's layout") { [logger] connection in
                var version: Int32?
                let stream = try await connection.query("SELECT strata_sync.layout_version()", logger: logger)
                for try await value in stream.decode(Int32?.self) { version = value }
                return version
            }
            guard let version, version >= ServerLayout.version else {
                throw SyncError(
                    .serverLayout,
                    "the server at \(configuration.serverDescription) has strata_sync layout version \(version.map(String.init) ?? "none"), "
                        + "this StrataSync needs \(ServerLayout.version): an operator upgrades it with "
                        + "`strata sync-server install --url URL`")
            }
            guard version == ServerLayout.version else {
                throw SyncError(
                    .serverLayout,
                    "the server at \(configuration.serverDescription) has strata_sync layout version \(version), newer than "
                        + "this StrataSync's \(ServerLayout.version): update the app")
            }
        }

        /// Runs `query` and reads its rows to the end: an error a function
        /// raises comes after the rows' description, so a query whose rows
        /// are not read would not report it.
        static func execute(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws {
            for try await _ in try await connection.query(query, logger: logger) {}
        }

        /// Creates or upgrades the layout (see ``SyncServer/install()``).
        func install() async throws(SyncError) -> SyncServer.Installation {
            try await run("installing the strata_sync layout") { [logger] connection in
                try await connection.withTransaction(logger: logger) { connection in
                    // Two installs at once run one after the other.
                    try await Self.execute("SELECT pg_advisory_xact_lock(7471203853)", on: connection, logger: logger)
                    var found = (layout: false, zones: false)
                    let probe = try await connection.query(PostgresQuery(unsafeSQL: ServerLayout.probe), logger: logger)
                    for try await row in probe.decode((Bool, Bool).self) { found = row }
                    var previous: Int? = found.zones ? 1 : nil
                    if found.layout {
                        let installed = try await connection.query(
                            PostgresQuery(unsafeSQL: ServerLayout.installedVersion), logger: logger)
                        for try await version in installed.decode(Int32?.self) { previous = version.map(Int.init) ?? previous }
                    }
                    // Checked before anything is altered.
                    if let previous, previous > ServerLayout.version {
                        throw SyncError(
                            .serverLayout,
                            "the server's strata_sync layout is version \(previous), newer than this StrataSync's "
                                + "\(ServerLayout.version): it is not downgraded")
                    }
                    var steps: [String] = []
                    for (what, sql) in ServerLayout.install {
                        try await Self.execute(PostgresQuery(unsafeSQL: sql), on: connection, logger: logger)
                        if !what.isEmpty { steps.append(what) }
                    }
                    return SyncServer.Installation(previousVersion: previous, version: ServerLayout.version, steps: steps)
                }
            }
        }

        /// Shares `zone` with `role` (see ``SyncServer/grant(zone:to:readOnly:)``).
        func grant(zone: String, role: String, writable: Bool) async throws(SyncError) {
            try await run("sharing zone \(zone) with \(role)") { [logger] connection in
                try await Self.execute(
                    "SELECT strata_sync.grant_access(\(zone), \(role), \(writable))", on: connection, logger: logger)
            }
        }

        /// Stops sharing `zone` with `role`; false when it was not.
        func revoke(zone: String, role: String) async throws(SyncError) -> Bool {
            try await run("unsharing zone \(zone) with \(role)") { [logger] connection in
                var removed = false
                let stream = try await connection.query(
                    "SELECT strata_sync.revoke_access(\(zone), \(role))", logger: logger)
                for try await value in stream.decode(Bool.self) { removed = value }
                return removed
            }
        }

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
                    // One device at a time (the zone's row stays locked to
                    // the commit): two incompatible schemas registering at
                    // once cannot both get in.
                    var descriptions: [String] = []
                    var known = false
                    var writable = false
                    let stream = try await connection.query(
                        "SELECT r_hash, r_description, r_writable FROM strata_sync.lock_schemas(\(zone))", logger: logger)
                    for try await (stored, description, mayWrite) in stream.decode((String?, String?, Bool).self) {
                        writable = mayWrite
                        guard let stored, let description else { continue }
                        if stored == hash { known = true } else { descriptions.append(description) }
                    }
                    try accept(descriptions)
                    // A device of a role the zone is shared with read-only
                    // records nothing.
                    if !known && writable {
                        try await Self.execute(
                            "SELECT strata_sync.add_schema(\(zone), \(hash), \(description))", on: connection,
                            logger: logger)
                    }
                    return descriptions
                }
            }
        }

        func head(zone: String) async throws(SyncError) -> ZoneHead {
            try await run("reading the zone's head") { [logger] connection in
                let stream = try await connection.query(
                    "SELECT r_head, r_trimmed FROM strata_sync.head(\(zone))", logger: logger)
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
                    "SELECT strata_sync.snapshot_part(\(zone), \(through), \(Int32(clamping: part)))", logger: logger)
                var payload: [UInt8]?
                for try await value in stream.decode(Data?.self) { payload = value.map(Array.init) }
                return payload
            }
        }

        func trim(zone: String, through: Int64, parts: [[UInt8]]) async throws(SyncError) -> Bool {
            try await run("trimming the zone's changes") { [logger] connection in
                let buffers = parts.map { ByteBuffer(bytes: $0) }
                let stream = try await connection.query(
                    "SELECT strata_sync.trim(\(zone), \(through), \(buffers))", logger: logger)
                var trimmed = false
                for try await value in stream.decode(Bool.self) { trimmed = value }
                return trimmed
            }
        }

        func pull(zone: String, after: Int64, limit: Int) async throws(SyncError) -> [ServerChange] {
            try await run("pulling changes") { [logger] connection in
                var changes: [ServerChange] = []
                let stream = try await connection.query(
                    """
                    SELECT r_seq, r_device, r_token, r_payload, r_schema, r_set_aside_code, r_set_aside_reason
                    FROM strata_sync.pull(\(zone), \(after), \(Int64(limit)))
                    """, logger: logger)
                for try await (seq, device, token, payload, schema, code, reason) in stream.decode(
                    (Int64, UUID, Int64, Data, String, String?, String?).self)
                {
                    changes.append(
                        ServerChange(
                            seq: seq, device: withUnsafeBytes(of: device.uuid) { Array($0) }, token: token,
                            payload: Array(payload), schema: schema, setAside: code.map { ($0, reason ?? "") }))
                }
                return changes
            }
        }

        func setAside(zone: String, seq: Int64, code: String, reason: String) async throws(SyncError) -> Bool {
            try await run("setting a change aside") { [logger] connection in
                var recorded = false
                let stream = try await connection.query(
                    "SELECT strata_sync.set_aside(\(zone), \(seq), \(code), \(reason))", logger: logger)
                for try await value in stream.decode(Bool.self) { recorded = value }
                return recorded
            }
        }

        func missingParts(zone: String, values: [(digest: [UInt8], parts: Int)]) async throws(SyncError)
            -> [(digest: [UInt8], part: Int)]
        {
            try await run("asking which external values the zone lacks") { [logger] connection in
                let digests = values.map { ByteBuffer(bytes: $0.digest) }
                let counts = values.map { Int32(clamping: $0.parts) }
                var missing: [(digest: [UInt8], part: Int)] = []
                let stream = try await connection.query(
                    "SELECT r_digest, r_part FROM strata_sync.missing_parts(\(zone), \(digests), \(counts))",
                    logger: logger)
                for try await (digest, part) in stream.decode((Data, Int32).self) {
                    missing.append((Array(digest), Int(part)))
                }
                return missing
            }
        }

        func putParts(zone: String, parts: [(digest: [UInt8], part: Int, bytes: [UInt8])]) async throws(SyncError) {
            try await run("uploading external values") { [logger] connection in
                let digests = parts.map { ByteBuffer(bytes: $0.digest) }
                let numbers = parts.map { Int32(clamping: $0.part) }
                let payloads = parts.map { ByteBuffer(bytes: $0.bytes) }
                let stream = try await connection.query(
                    "SELECT strata_sync.put_parts(\(zone), \(digests), \(numbers), \(payloads))", logger: logger)
                for try await _ in stream {}
            }
        }

        func parts(zone: String, _ wanted: [(digest: [UInt8], part: Int)]) async throws(SyncError)
            -> [(digest: [UInt8], part: Int, bytes: [UInt8])]
        {
            try await run("downloading external values") { [logger] connection in
                let digests = wanted.map { ByteBuffer(bytes: $0.digest) }
                let numbers = wanted.map { Int32(clamping: $0.part) }
                var found: [(digest: [UInt8], part: Int, bytes: [UInt8])] = []
                let stream = try await connection.query(
                    "SELECT r_digest, r_part, r_payload FROM strata_sync.parts(\(zone), \(digests), \(numbers))",
                    logger: logger)
                for try await (digest, part, payload) in stream.decode((Data, Int32, Data).self) {
                    found.append((Array(digest), Int(part), Array(payload)))
                }
                return found
            }
        }

        /// The changes set aside in `zone`, or in every zone the login role
        /// may read (see ``SyncServer/setAsideChanges(zone:)``).
        func setAsideChanges(zone: String?) async throws(SyncError) -> [SyncServer.SetAsideChange] {
            try await run("listing the set-aside changes") { [logger] connection in
                var changes: [SyncServer.SetAsideChange] = []
                let stream = try await connection.query(
                    "SELECT r_zone, r_seq, r_device, r_code, r_reason, r_by::text, r_at FROM strata_sync.set_aside_changes(\(zone))",
                    logger: logger)
                for try await (zone, seq, device, code, reason, role, at) in stream.decode(
                    (String, Int64, UUID, String, String?, String?, Date?).self)
                {
                    changes.append(
                        SyncServer.SetAsideChange(
                            zone: zone, serverSequence: seq, device: device, code: code, reason: reason ?? "",
                            setAsideBy: role ?? "", date: at))
                }
                return changes
            }
        }

        func listen(zone: String, listening: @escaping @Sendable () -> Void, wake: @escaping @Sendable () -> Void)
            async throws(SyncError)
        {
            // The zone's channel is named after a key only roles that may
            // read the zone learn; its notifications carry nothing. A zone
            // not created yet (the engine listens before its first round
            // registers it) has none: asked again shortly.
            var channel: String?
            var delay = Duration.milliseconds(100)
            while true {
                channel = try await run("reading the zone's channel") { [logger] connection in
                    var channel: String?
                    let stream = try await connection.query("SELECT strata_sync.channel(\(zone))", logger: logger)
                    for try await value in stream.decode(String?.self) { channel = value }
                    return channel
                }
                if channel != nil { break }
                try? await Task.sleep(for: delay)
                if Task.isCancelled { return }
                delay = min(delay * 2, .seconds(5))
            }
            guard let channel else { return }
            let listener = try await connect()
            do {
                try await listener.listen(on: channel) { notifications in
                    listening()
                    wake()  // listening: whatever came before is pulled now
                    for try await _ in notifications { wake() }
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
