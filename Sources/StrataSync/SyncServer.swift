import Foundation

/// A sync server as its operator manages it: installing or upgrading its
/// layout, and sharing zones between roles. `strata sync-server` runs the
/// same calls.
///
/// Devices never create or change the server's tables: an operator
/// installs the layout once per database, as a role that may create a
/// schema there (the database's owner, or a superuser to upgrade a layout
/// that devices created before version 2), and devices log in as roles
/// with no rights of their own. What a role may do is checked inside
/// PostgreSQL, on every call:
///
/// | who | may |
/// |---|---|
/// | the zone's owner (the role that created it, and that role's members) | read, write, trim, share and unshare it |
/// | a role it is shared with (or a member of one) | read it; write and trim it when shared read-write |
/// | any other role | nothing: not its changes, not its name |
///
/// ```swift
/// let server = try SyncServer(url: "postgres://admin@db.example.com/sync", password: secret)
/// let installed = try await server.install()
/// try await server.grant(zone: "family-tasks", to: "bob", readOnly: false)
/// ```
public struct SyncServer: Sendable {
    let configuration: SyncConfiguration

    /// A server at `url` (as ``SyncConfiguration/init(server:password:zone:pollInterval:)``
    /// reads it), logged in to as the URL's user.
    public init(url: String, password: String? = nil) throws(SyncError) {
        configuration = try SyncConfiguration(server: url, password: password, zone: "strata-sync-server")
    }

    /// The server of `configuration` (its zone is not used).
    public init(configuration: SyncConfiguration) {
        self.configuration = configuration
    }

    /// What ``install()`` found and did.
    public struct Installation: Sendable, Equatable {
        /// The layout's version before (1 for the tables devices created
        /// before version 2; nil for none).
        public let previousVersion: Int?
        /// The layout's version now.
        public let version: Int
        /// What it ran, in order (each step does nothing when already done).
        public let steps: [String]
    }

    /// Creates the server's layout, or upgrades an older one, in one
    /// transaction; run again, it changes nothing but the functions' text.
    ///
    /// - Throws: ``SyncError`` with code ``SyncError/Code/serverLayout``
    ///   when the server's layout is newer than this StrataSync's (it is
    ///   never downgraded), ``SyncError/Code/forbidden`` when the role may
    ///   not create or alter it.
    public func install() async throws(SyncError) -> Installation {
        #if Sync
            return try await withServer { (server) async throws(SyncError) in try await server.install() }
        #else
            throw Self.withoutTransport
        #endif
    }

    /// Shares `zone` with `role` (and its members), read-only or
    /// read-write; run by the zone's owner (or a superuser). A zone no one
    /// created yet is created, owned by the role that runs this.
    ///
    /// - Throws: ``SyncError`` with code ``SyncError/Code/forbidden`` when
    ///   the login role does not own the zone, ``SyncError/Code/server``
    ///   when `role` does not exist.
    public func grant(zone: String, to role: String, readOnly: Bool = false) async throws(SyncError) {
        #if Sync
            try await withServer { (server) async throws(SyncError) in
                try await server.grant(zone: zone, role: role, writable: !readOnly)
            }
        #else
            throw Self.withoutTransport
        #endif
    }

    /// Stops sharing `zone` with `role`; its devices' next round fails with
    /// ``SyncError/Code/forbidden`` and their stores keep what they hold.
    /// Returns false when the zone was not shared with `role`.
    ///
    /// - Throws: ``SyncError`` with code ``SyncError/Code/forbidden`` when
    ///   the login role does not own the zone.
    @discardableResult
    public func revoke(zone: String, from role: String) async throws(SyncError) -> Bool {
        #if Sync
            return try await withServer { (server) async throws(SyncError) in try await server.revoke(zone: zone, role: role) }
        #else
            throw Self.withoutTransport
        #endif
    }

    /// A change a device could not read and set aside: every device moves
    /// past it unapplied (see ``SyncStatus/setAside``).
    public struct SetAsideChange: Sendable, Equatable {
        /// The zone it is in.
        public let zone: String
        /// Its sequence number in the zone.
        public let serverSequence: Int64
        /// The device that pushed it.
        public let device: UUID
        /// Why (a ``SyncStatus/SetAsideChange/Reason`` raw value).
        public let code: String
        /// What the device that set it aside found wrong.
        public let reason: String
        /// The login role of that device.
        public let setAsideBy: String
        /// When it was set aside.
        public let date: Date?
    }

    /// The changes set aside in `zone`, or (nil) in every zone the login
    /// role may read, by zone and sequence number. Their payloads stay on
    /// the server for the operator to examine.
    ///
    /// - Throws: ``SyncError`` with code ``SyncError/Code/forbidden`` when
    ///   the login role may not read `zone`.
    public func setAsideChanges(zone: String? = nil) async throws(SyncError) -> [SetAsideChange] {
        #if Sync
            return try await withServer { (server) async throws(SyncError) in try await server.setAsideChanges(zone: zone) }
        #else
            throw Self.withoutTransport
        #endif
    }

    #if Sync
        /// Runs `body` with a connection of its own, closed afterwards.
        private func withServer<T: Sendable>(
            _ body: (PostgresZoneServer) async throws(SyncError) -> T
        ) async throws(SyncError) -> T {
            let server = PostgresZoneServer(configuration: configuration)
            do {
                let result = try await body(server)
                await server.close()
                return result
            } catch {
                await server.close()
                throw error
            }
        }
    #else
        private static let withoutTransport = SyncError(
            .configuration, "StrataSync was built without its Sync trait: no PostgreSQL transport")
    #endif
}
