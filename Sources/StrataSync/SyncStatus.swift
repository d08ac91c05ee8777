import Foundation

/// What sync is doing, for an app to show.
public struct SyncStatus: Sendable, Equatable {
    /// What sync is doing now.
    public enum Activity: String, Sendable {
        /// Not started, or stopped.
        case stopped
        /// Up to date as far as it knows; waiting for a change.
        case idle
        /// Sending local saves to the server.
        case pushing
        /// Applying other devices' changes.
        case pulling
        /// The server cannot be reached (``SyncStatus/lastError`` says why);
        /// local saves go on and are pushed once it can.
        case offline
    }

    /// What sync is doing now.
    public var activity: Activity = .stopped
    /// Local saves the server has not acknowledged yet.
    public var pendingChanges = 0
    /// The zone's sequence number of the last server change this store
    /// holds.
    public var serverPosition: Int64 = 0
    /// The zone's last sequence number when this store last looked. While
    /// a device catches up (an initial sync), ``serverPosition`` out of
    /// `serverHead` is how far it has come; an interrupted pull resumes
    /// from ``serverPosition``.
    public var serverHead: Int64 = 0
    /// The error of the last round that failed; nil after a round that
    /// succeeded.
    public var lastError: SyncError?
    /// When the last round that reached the server ended.
    public var lastSync: Date?

    /// A status.
    public init() {}
}

/// An error of sync. Its message names the server by host, port, user and
/// database, never by password.
public struct SyncError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of error it is.
    public enum Code: String, Sendable {
        /// A configuration sync cannot use, or a container it cannot sync.
        case configuration
        /// The server cannot be reached, or the connection broke.
        case unreachable
        /// The server refused the login.
        case authentication
        /// The login role may not read the zone, or may not write it (a
        /// push or a trim in a zone shared read-only). Nothing local is
        /// changed or dropped: saves go on, and sync resumes once the
        /// zone's owner grants access (`strata sync-server grant`).
        case forbidden
        /// The server has no `strata_sync` layout, or one of another
        /// version than this StrataSync's: an operator installs or upgrades
        /// it with `strata sync-server install` (or
        /// ``SyncServer/install()``). Devices never create it.
        case serverLayout
        /// The server answered with an error.
        case server
        /// A change on the server cannot be applied here: it does not
        /// decode, or names what this store's schema does not hold. The
        /// store is unchanged; sync stops at that change.
        case damagedServerChange
        /// The zone holds changes of a schema this store's schema cannot
        /// share a zone with (an attribute of another type, a required
        /// attribute the other lacks). Found when sync starts, before
        /// anything is sent or applied.
        case incompatibleSchema
        /// The local store failed (an I/O error, a constraint of the
        /// schema).
        case store
        /// Sync was stopped before the round ended.
        case stopped
    }

    /// What kind of error it is.
    public let code: Code
    /// What happened and where.
    public let message: String

    /// An error of kind `code`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The code, then the message.
    public var description: String { "\(code.rawValue): \(message)" }
}
