import Foundation

/// Where and how a container syncs: a PostgreSQL server and a zone on it.
///
/// A zone is one person's data set, the analog of a CloudKit container
/// identifier: every store that syncs with a zone ends up holding the same
/// models. One server holds many zones.
///
/// ```swift
/// let sync = try SyncEngine(
///     container: container,
///     configuration: SyncConfiguration(
///         server: "postgres://app@db.example.com:5432/sync", password: secret, zone: "alice"))
/// sync.start()
/// ```
public struct SyncConfiguration: Sendable {
    /// How the connection to the server is protected: libpq's `sslmode`
    /// values, with their meaning.
    public enum TLSMode: String, Sendable {
        /// No TLS (a Unix socket or a trusted network).
        case disable
        /// TLS when the server offers it, without checking its certificate.
        case prefer
        /// TLS or no connection, without checking the server's certificate
        /// (encryption only, as libpq's `require`).
        case require
        /// TLS, with a certificate signed by a trusted authority
        /// (``SyncConfiguration/rootCertificate``, or the system's).
        case verifyCA = "verify-ca"
        /// As ``verifyCA``, and the certificate names the host.
        case verifyFull = "verify-full"
    }

    /// The server's host name or address; nil with ``socketDirectory``.
    public var host: String?
    /// The server's port (5432 by default).
    public var port: Int
    /// The directory of the server's Unix socket (`.s.PGSQL.<port>` in it),
    /// used instead of ``host`` when set.
    public var socketDirectory: String?
    /// The role sync logs in as.
    public var user: String
    /// The role's password; never written to logs or errors.
    public var password: String?
    /// The database that holds the `strata_sync` schema.
    public var database: String
    /// How the connection is protected.
    public var tls: TLSMode
    /// A PEM file of the authorities trusted to sign the server's
    /// certificate (libpq's `sslrootcert`); nil for the system's.
    public var rootCertificate: String?
    /// The zone: one person's data set.
    public var zone: String
    /// For a container with several stores (configurations): the name of
    /// the configuration this engine syncs with ``zone``. Each store syncs
    /// with a zone of its own, through an engine of its own (as each
    /// SwiftData configuration names its own CloudKit container); a store
    /// no engine names stays local. Nil (the default) for a container of
    /// one store.
    public var store: String?
    /// How often sync asks the server for changes when no notification
    /// arrives (notifications wake it at once; this is the fallback).
    public var pollInterval: Duration
    /// How long one server request may go without an answer before the
    /// round fails as ``SyncError/Code/unreachable`` and the connection is
    /// closed (a server that vanished without closing the connection).
    public var requestTimeout: Duration = .seconds(60)
    /// When this device trims the zone's history by itself, as
    /// ``SyncEngine/trimServerHistory()`` does; nil (the default): never.
    public var automaticTrimming: AutomaticTrimming?

    /// A rule for trimming a zone's history automatically, so that the
    /// server's history stops growing without anyone calling
    /// ``SyncEngine/trimServerHistory()``.
    public struct AutomaticTrimming: Sendable, Equatable {
        /// How many changes the zone may hold since its last trim.
        public let changes: Int

        /// After a round, when the zone holds more than `changes` changes
        /// since its last trim (a snapshot stands for those trimmed), the
        /// device trims through its position. Devices behind download the
        /// snapshot on their next round.
        ///
        /// - Throws: ``SyncError`` with code
        ///   ``SyncError/Code/configuration`` when `changes` is below 1.
        public init(afterChanges changes: Int) throws(SyncError) {
            guard changes >= 1 else {
                throw SyncError(.configuration, "automatic trimming needs at least 1 change between trims, not \(changes)")
            }
            self.changes = changes
        }
    }

    /// A configuration from a PostgreSQL URL
    /// (`postgres://user@host:port/database?sslmode=verify-full&sslrootcert=/etc/ca.pem`, or
    /// `postgres://user@/database?host=/run/postgresql` for a Unix socket).
    /// The password is passed apart, so that the URL can be logged.
    ///
    /// - Throws: ``SyncError`` with code ``SyncError/Code/configuration``
    ///   for a URL that is not a PostgreSQL URL, or an empty zone.
    public init(
        server url: String, password: String? = nil, zone: String, pollInterval: Duration = .seconds(30)
    ) throws(SyncError) {
        guard let components = URLComponents(string: url),
            components.scheme == "postgres" || components.scheme == "postgresql"
        else {
            throw SyncError(.configuration, "the server must be a postgres:// URL")
        }
        let query = Dictionary(
            (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last })
        var tls = TLSMode.prefer
        if let mode = query["sslmode"] {
            switch mode {
            case "allow": tls = .prefer
            default:
                guard let known = TLSMode(rawValue: mode) else {
                    throw SyncError(
                        .configuration, "sslmode \(mode) is not one of disable, prefer, require, verify-ca, verify-full")
                }
                tls = known
            }
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        try self.init(
            host: components.host.flatMap { $0.isEmpty ? nil : $0 }, port: components.port ?? 5432,
            socketDirectory: query["host"].flatMap { $0.hasPrefix("/") ? $0 : nil },
            user: components.user ?? "postgres", password: password ?? components.password,
            database: database.isEmpty ? (components.user ?? "postgres") : database, tls: tls,
            rootCertificate: query["sslrootcert"], zone: zone, pollInterval: pollInterval)
    }

    /// A configuration from its parts.
    ///
    /// - Throws: ``SyncError`` with code ``SyncError/Code/configuration``
    ///   when neither a host nor a socket directory is given, or the zone is
    ///   empty or longer than 200 bytes.
    public init(
        host: String?, port: Int = 5432, socketDirectory: String? = nil, user: String, password: String? = nil,
        database: String, tls: TLSMode = .prefer, rootCertificate: String? = nil, zone: String,
        pollInterval: Duration = .seconds(30)
    ) throws(SyncError) {
        guard host != nil || socketDirectory != nil else {
            throw SyncError(.configuration, "a server needs a host or a socket directory")
        }
        guard !zone.isEmpty, zone.utf8.count <= 200 else {
            throw SyncError(.configuration, "a zone's name must have 1 to 200 bytes")
        }
        guard (1...65535).contains(port) else { throw SyncError(.configuration, "port \(port) is out of range") }
        self.host = host
        self.port = port
        self.socketDirectory = socketDirectory
        self.user = user
        self.password = password
        self.database = database
        self.tls = tls
        self.rootCertificate = rootCertificate
        self.zone = zone
        self.pollInterval = pollInterval
    }

    /// Where the server is, without credentials: for messages.
    var serverDescription: String {
        if let socketDirectory { return "\(user)@\(socketDirectory)/.s.PGSQL.\(port) database \(database)" }
        return "\(user)@\(host ?? "?"):\(port) database \(database)"
    }
}
